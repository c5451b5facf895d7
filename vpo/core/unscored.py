"""Advantages that leave unscored rollouts out: no false zeros in training.

A rollout is *unscored* when one of its answers could not be scored (``ScoredBatch.unscored``: the
scorer raised or returned :class:`~vpo.errors.ScoringUnavailable` or another exception, returned
NaN/inf, ...). Its empty slots are not a wrong answer, so reading them as reward 0 (or scoring the
set without the missing answer) would teach the policy from a false low reward. The trainers
(``VPOTrainer`` and the veRL plugin) therefore compute advantages with :func:`advantages_without`:

* unscored rollouts are removed before the estimator runs, so every group statistic (GRPO's mean
  and std, VPO's set-score z-score, Max@k's ranks, ...) is computed over the scored rollouts only;
* a group left with fewer than 2 scored rollouts has no baseline: all its rollouts are dropped too;
* every dropped rollout gets advantage 0, and a trainer that can leaves it out of the loss
  (``VPOTrainer`` masks its tokens).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vpo.core.estimator_base import AdvantageResult
from vpo.core.estimators import compute_advantages

__all__ = ["ScoredAdvantages", "advantages_without", "dropped_rollouts"]


@dataclass
class ScoredAdvantages:
    """``advantages [N]`` float64 (0 for dropped rollouts), ``dropped [N]`` bool (unscored, or in a
    group with fewer than 2 scored rollouts) and ``result``: the estimator's
    :class:`~vpo.core.estimator_base.AdvantageResult` on the kept rollouts (their scores, group index
    and diagnostics), None when no rollout was kept."""

    advantages: torch.Tensor
    dropped: torch.Tensor
    result: AdvantageResult | None

    @property
    def num_dropped(self) -> int:
        return int(self.dropped.sum())


def _group_ids(n: int, group_size: int | None, group_ids) -> np.ndarray:
    if (group_size is None) == (group_ids is None):
        raise ValueError("give exactly one of group_size (contiguous groups) or group_ids (one id per rollout)")
    if group_size is not None:
        if not isinstance(group_size, (int, np.integer)) or group_size < 1 or n % int(group_size):
            raise ValueError(f"N={n} rollouts is not a multiple of group_size={group_size!r}")
        return np.arange(n) // int(group_size)
    ids = group_ids.detach().cpu().numpy() if isinstance(group_ids, torch.Tensor) else np.asarray(list(group_ids))
    if ids.shape[0] != n:
        raise ValueError(f"group_ids has {ids.shape[0]} entries but there are N={n} rollouts")
    # first-appearance numbering (as group_index_from), whatever the id type
    lookup: dict = {}
    return np.fromiter((lookup.setdefault(g, len(lookup)) for g in ids.tolist()), dtype=np.int64, count=n)


def dropped_rollouts(unscored, group: np.ndarray) -> np.ndarray:
    """``[N]`` bool: the unscored rollouts and every rollout of a group with fewer than 2 scored ones."""
    u = np.asarray(unscored, dtype=bool).reshape(-1)
    kept_per_group = np.bincount(group[~u], minlength=int(group.max()) + 1 if group.size else 0)
    return u | (kept_per_group[group] < 2)


def advantages_without(
    estimator: str,
    rewards,
    valid,
    unscored=None,
    *,
    group_size: int | None = None,
    group_ids=None,
    rollout_weights=None,
    response_lengths=None,
    row_index=None,
    **kwargs,
) -> ScoredAdvantages:
    """:func:`~vpo.core.estimators.compute_advantages` over the scored rollouts only.

    ``unscored [N]`` bool marks the rollouts to leave out (None: none). The kept rollouts keep their
    group ids (so groups of unequal size are fine); per-rollout inputs (``rollout_weights``,
    ``response_lengths``, ``row_index``) are subset alike; ``kwargs`` go to ``compute_advantages``
    unchanged. With nothing to drop this is exactly ``compute_advantages`` on the whole batch.
    """
    r = rewards if isinstance(rewards, torch.Tensor) else torch.as_tensor(np.asarray(rewards, dtype=np.float64))
    n = int(r.shape[0])
    u = np.zeros(n, dtype=bool) if unscored is None else _as_bool(unscored, n)
    if not u.any():
        res = compute_advantages(
            estimator, rewards, valid, group_size=group_size, group_ids=group_ids, rollout_weights=rollout_weights,
            response_lengths=response_lengths, row_index=row_index, **kwargs,
        )  # fmt: skip
        return ScoredAdvantages(res.advantages, torch.zeros(n, dtype=torch.bool, device=res.advantages.device), res)
    group = _group_ids(n, group_size, group_ids)
    drop = dropped_rollouts(u, group)
    keep = ~drop
    adv = torch.zeros(n, dtype=torch.float64, device=r.device)
    drop_t = torch.as_tensor(drop, device=r.device)
    if not keep.any():
        return ScoredAdvantages(adv, drop_t, None)
    k = torch.as_tensor(np.flatnonzero(keep), device=r.device)

    def sub(x):
        if x is None:
            return None
        if isinstance(x, torch.Tensor):
            return x[k.to(x.device)]
        return np.asarray(x)[keep]

    res = compute_advantages(
        estimator,
        sub(rewards),
        None if valid is None else sub(valid),
        group_ids=group[keep],
        rollout_weights=sub(rollout_weights),
        response_lengths=sub(response_lengths),
        row_index=sub(row_index),
        **kwargs,
    )
    adv[k] = res.advantages.to(device=adv.device, dtype=adv.dtype)
    return ScoredAdvantages(adv, drop_t, res)


def _as_bool(mask, n: int) -> np.ndarray:
    m = mask.detach().cpu().numpy() if isinstance(mask, torch.Tensor) else np.asarray(mask)
    m = m.astype(bool).reshape(-1)
    if m.shape[0] != n:
        raise ValueError(f"unscored has {m.shape[0]} entries but there are N={n} rollouts")
    return m
