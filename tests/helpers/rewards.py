"""Shared helpers of the adversarial reward tests (tests/rewards): score answers through the trainer's path."""

from __future__ import annotations

import numpy as np


def scored(task, ex, *answers) -> np.ndarray:
    """Each answer as its own one-answer completion, through ``Task.score_completions``: ``[n, d]``
    (every answer must parse and score without a scorer error)."""
    batch = task.score_completions([ex] * len(answers), [f"<answer_1>{a}</answer_1>" for a in answers], m=1)
    assert batch.valid.all() and batch.score_errors == 0
    return batch.rewards[:, 0, :]


def at_most(hacked, *deserved) -> None:
    """``hacked`` is component-wise no higher than every vector in ``deserved``."""
    for d in deserved:
        assert np.all(hacked <= d + 1e-12), (hacked.tolist(), d.tolist())
