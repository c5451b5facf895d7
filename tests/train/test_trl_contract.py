"""Contract with TRL's private hooks that VPOTrainer overrides. If a TRL upgrade moves them, these
tests fail with a message naming the method, instead of training silently with TRL's advantages."""

from __future__ import annotations

import inspect
import re
import tomllib
from pathlib import Path

import pytest

trl = pytest.importorskip("trl")
from trl import GRPOTrainer  # noqa: E402


def _src(name):
    fn = getattr(GRPOTrainer, name, None)
    assert fn is not None, f"trl {trl.__version__}: GRPOTrainer.{name} is gone; VPOTrainer overrides it"
    return inspect.getsource(fn), inspect.signature(fn)


def test_trl_version_is_in_the_pinned_range():
    spec = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    pins = [d for d in spec["project"]["optional-dependencies"]["trl"] if d.startswith("trl")]
    lo, hi = re.findall(r">=([\d.]+)", pins[0])[0], re.findall(r"<([\d.]+)", pins[0])[0]
    v = tuple(int(x) for x in trl.__version__.split(".")[:2])
    assert tuple(int(x) for x in lo.split(".")[:2]) <= v < tuple(int(x) for x in hi.split(".")[:2]), (
        f"trl {trl.__version__} is outside the range pinned in pyproject.toml ({pins[0]})"
    )


def test_calculate_rewards_hook():
    src, sig = _src("_calculate_rewards")
    assert list(sig.parameters) == ["self", "inputs", "prompts", "completions", "completion_ids_list"], (
        f"GRPOTrainer._calculate_rewards signature changed to {sig}"
    )
    # its result is what _generate_and_score_completions normalises per group
    gen_src, _ = _src("_generate_and_score_completions")
    assert "self._calculate_rewards(" in gen_src, "GRPOTrainer._generate_and_score_completions no longer calls _calculate_rewards"


def test_generate_and_score_returns_advantages_per_rollout():
    src, sig = _src("_generate_and_score_completions")
    assert list(sig.parameters) == ["self", "inputs"], f"GRPOTrainer._generate_and_score_completions signature changed to {sig}"
    assert '"advantages": advantages' in src, (
        "GRPOTrainer._generate_and_score_completions no longer returns output['advantages']; VPOTrainer replaces it"
    )
    assert 'self._logs["advantages"]' in src, "GRPOTrainer no longer logs advantages in self._logs['advantages']"
    assert "process_slice" in src, "GRPOTrainer no longer slices gathered advantages per process"


def test_loss_reads_inputs_advantages():
    src, _ = _src("_compute_loss")
    assert 'inputs["advantages"]' in src, "GRPOTrainer._compute_loss no longer reads inputs['advantages']"


def test_checkpoint_hooks():
    for name in ("_save_checkpoint", "_load_optimizer_and_scheduler"):
        assert hasattr(GRPOTrainer, name), f"GRPOTrainer.{name} is gone; VPOTrainer saves its sampler state there"


def test_trainer_refuses_a_trl_without_the_hooks(monkeypatch):
    """A TRL that moved a hook makes VPOTrainer fail at construction, naming the method (the hook
    is removed from the class for this test only)."""
    from vpo.train import trainer as tr

    monkeypatch.delattr(GRPOTrainer, "_calculate_rewards")
    with pytest.raises(RuntimeError, match="GRPOTrainer._calculate_rewards is missing"):
        tr.check_trl_hooks()
