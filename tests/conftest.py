"""Shared fixtures: an offline tiny model (built once per session) and a character-statistics task
that a random tiny model already gets graded, varied rewards on."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

# One intra-op thread: the tests' tensors are tiny, and on a shared 2-core machine a second thread
# makes them many times slower (measured: a test module went from 78 s to 8 s).
torch.set_num_threads(1)


def pytest_configure(config):
    # no silent skips: with CI=true a skip fails unless it is expected or its missing capability is
    # opted out (tests/expected_skips.py); every run lists what was not tested
    from expected_skips import SkipPolicy

    if not config.pluginmanager.has_plugin("vpo-skip-policy"):
        config.pluginmanager.register(SkipPolicy(), "vpo-skip-policy")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from vpo.train.tiny import build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", hidden_size=64, num_layers=2, num_heads=4))


class CharStatsTask:
    """Test-only task (named as such): answers are the m equal slices of the completion text, so a
    random model gets non-trivial, varied reward vectors. Objectives: share of vowels, share of
    digits, share of upper-case letters (each in [0, 1])."""

    @staticmethod
    def make(n_examples: int = 32):
        from vpo.tasks import FunctionTask

        class _Slices(FunctionTask):
            def parse(self, completion, m):
                text = completion or ""
                if not text:
                    return []
                k = max(1, len(text) // m)
                return [text[i * k : (i + 1) * k] for i in range(m) if text[i * k : (i + 1) * k]]

        def share(pred):
            return lambda ex, a: float(np.mean([pred(c) for c in a])) if a else 0.0

        return _Slices(
            "char_stats",
            objectives={
                "vowels": share(lambda c: c in "aeiouAEIOU"),
                "digits": share(str.isdigit),
                "upper": share(str.isupper),
            },
            examples=[{"id": i, "question": f"Write characters #{i}."} for i in range(n_examples)],
        )


@pytest.fixture()
def char_task():
    return CharStatsTask.make()
