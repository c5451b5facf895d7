"""One rule for a group without learning signal, and one watch over the steps that have none.

A group is **flat** when its rollouts' scores (an estimator's per-rollout score before
normalisation, :attr:`vpo.core.AdvantageResult.scores`: the set score for VPO, ``w*ᵀr`` for GRPO)
are all finite and lie within :data:`FLAT_EPS` of each other: every rollout of the prompt scored
alike, so the group-normalised estimators give it advantage 0 (or a z-score of differences below
``eps``); GDPO's batch whitening is the exception (docs/estimators.md). A step in which every group
is flat changes nothing. :class:`NoSignalWatch` counts such steps and warns about them, the first
and then at most once every :data:`WARN_EVERY` steps; :class:`vpo.train.VPOTrainer` and the veRL
metrics (:mod:`vpo.integrations.verl_metrics`) both use it, with this rule.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["FLAT_EPS", "WARN_EVERY", "NoSignalWatch", "flat_group_fraction", "flat_groups"]

FLAT_EPS = 1e-6
"""Scores of a group within this of each other count as flat (vpo.core's default ``eps``)."""

WARN_EVERY = 10
"""At most one every-group-flat warning per this many steps (the counter is logged every step)."""


def _numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().double().numpy()
    return np.asarray(x)


def flat_groups(scores: Any, groups: Sequence[Any], eps: float = FLAT_EPS) -> list[bool]:
    """Per group (in order of first appearance in ``groups``, one id per rollout): whether its
    rollouts' ``scores`` are all finite and within ``eps`` of each other."""
    s = _numpy(scores).astype(np.float64).reshape(-1)
    ids = _numpy(groups).reshape(-1).tolist() if hasattr(groups, "detach") else list(groups)
    members: dict[Any, list[int]] = {}
    for i, g in enumerate(ids):
        members.setdefault(g, []).append(i)
    out = []
    for idx in members.values():
        x = s[idx]
        out.append(bool(np.isfinite(x).all() and np.ptp(x) <= eps))
    return out


def flat_group_fraction(scores: Any, groups: Sequence[Any], eps: float = FLAT_EPS) -> float:
    """The share of groups that are flat (:func:`flat_groups`); 0.0 for no rollouts."""
    flat = flat_groups(scores, groups, eps)
    return float(np.mean(flat)) if flat else 0.0


class NoSignalWatch:
    """Counts the steps in which every group was flat and warns about them: the first, then at most
    once every ``every`` steps. ``flat_steps`` is the running count a caller logs."""

    def __init__(self, every: int = WARN_EVERY) -> None:
        self.every = int(every)
        self.flat_steps = 0
        self.warned_at: int | None = None

    def observe(self, step: int, flat: bool, message: Callable[[int], str], stacklevel: int = 2) -> int:
        """Count ``step`` when ``flat`` (every group flat) and warn with ``message(flat_steps)`` when
        it is due (``stacklevel`` as :func:`warnings.warn`'s, counted from this method); the running
        count."""
        self.flat_steps += bool(flat)
        if flat and (self.warned_at is None or step - self.warned_at >= self.every):
            self.warned_at = step
            warnings.warn(message(self.flat_steps), RuntimeWarning, stacklevel=stacklevel)
        return self.flat_steps
