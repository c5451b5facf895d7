"""Pool statistics that failing answers cannot win, and search under other preferences.

The paper's reward-space diversity (:func:`vpo.search.metrics.reward_space_diversity`) averages
distances over *all* answers. Where a failed answer is the all-zero vector (the maze: a route that
does not reach E), a pool of one route that finishes 9 times in 30 is "more diverse" than 30
complementary finished routes. These statistics look only at *completed* answers, or at what the
pool covers, so failure cannot raise them (docs/eval.md, "Pool statistics"):

* :func:`completed_mask`: which answers completed (a task's completion component, or any reward > 0);
* :func:`completed_diversity`: reward-space diversity among completed answers (0 with fewer than two);
* :func:`union_coverage`: Σ_j max_i r_ij over the pool's valid answers;
* :func:`pareto_coverage`: fraction of a prompt's exact Pareto-front vectors that the pool hits;
* :func:`distinct_count`: distinct keys (e.g. executed routes) among completed answers;
* :func:`matched_prefix`: any of these as a function of the answer budget k, at a matched budget
  (multi-answer pools: ceil(k/m) rollouts, their first k answers), averaged over rollout orders.

All functions are vectorised over prompts where the data allow and take the grouped layout of
:func:`vpo.search.metrics.group_by_prompt`: ``points [P, n, d]`` with ``mask [P, n]``.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from vpo.search.metrics import reward_space_diversity

__all__ = [
    "completed_mask",
    "completed_diversity",
    "distinct_count",
    "matched_prefix",
    "pareto_coverage",
    "union_coverage",
]


def completed_mask(rewards: np.ndarray, valid: np.ndarray, completion_index: int | None = None) -> np.ndarray:
    """``[..., m]`` bool: the answer is valid and completed.

    ``completion_index`` names a 0/1 completion component (the maze's ``completion``: 1 when the route
    reaches E); without one, an answer completes when any component is > 0 (the all-zero vector is
    what most scorers give a failed answer).
    """
    r = np.asarray(rewards, dtype=np.float64)
    v = np.asarray(valid, dtype=bool)
    if completion_index is None:
        done = (np.nan_to_num(r, nan=0.0) > 0).any(-1)
    else:
        done = np.nan_to_num(r[..., completion_index], nan=0.0) >= 1.0
    return v & done


def completed_diversity(points: np.ndarray, completed: np.ndarray) -> np.ndarray:
    """``[P]`` reward-space diversity (mean pairwise L1) among each prompt's completed answers; 0 for a
    prompt with fewer than two (a pool with at most one completed answer offers search no choice)."""
    pts = np.asarray(points, dtype=np.float64)
    mk = np.asarray(completed, dtype=bool)
    div = reward_space_diversity(pts, mk)
    return np.where(mk.sum(-1) >= 2, np.nan_to_num(div, nan=0.0), 0.0)


def union_coverage(points: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``[P]`` Σ_j max_i r_ij over each prompt's masked answers (0 with none): how much of every
    objective the pool reaches somewhere. In [0, d]."""
    pts = np.nan_to_num(np.asarray(points, dtype=np.float64), nan=0.0)
    mk = np.asarray(mask, dtype=bool)
    best = np.where(mk[..., None], pts, -np.inf).max(-2)  # [P, d]
    return np.where(np.isfinite(best), best, 0.0).sum(-1)


def pareto_coverage(points: np.ndarray, mask: np.ndarray, fronts: Sequence[np.ndarray], tol: float = 1e-9) -> np.ndarray:
    """``[P]`` fraction of each prompt's Pareto-front vectors (``fronts[p]``: ``[F_p, d]``, e.g. from an
    exact solver) matched (within ``tol`` in every component) by at least one masked answer.

    NaN for a prompt whose front is empty.
    """
    pts = np.asarray(points, dtype=np.float64)
    mk = np.asarray(mask, dtype=bool)
    if len(fronts) != pts.shape[0]:
        raise ValueError(f"{len(fronts)} fronts for {pts.shape[0]} prompts")
    out = np.full(pts.shape[0], np.nan)
    for p, front in enumerate(fronts):
        f = np.asarray(front, dtype=np.float64).reshape(-1, pts.shape[-1])
        if not len(f):
            continue
        cand = pts[p][mk[p]]  # [c, d]
        if not len(cand):
            out[p] = 0.0
            continue
        hit = (np.abs(cand[:, None, :] - f[None, :, :]) <= tol).all(-1).any(0)  # [F]
        out[p] = hit.mean()
    return out


def distinct_count(keys: Sequence[Sequence], mask: np.ndarray) -> np.ndarray:
    """``[P]`` number of distinct ``keys[p][i]`` among the masked answers of each prompt (e.g. the
    executed moves of each finishing route: two texts that walk the same route count once)."""
    mk = np.asarray(mask, dtype=bool)
    return np.array([len({k for k, ok in zip(row, mrow) if ok}) for row, mrow in zip(keys, mk)], dtype=np.float64)


def matched_prefix(
    stat: Callable[[np.ndarray], np.ndarray],
    present: np.ndarray,
    m: int,
    ks: Sequence[int],
    seeds: Sequence[int] = (0,),
) -> np.ndarray:
    """``[P, len(ks)]``: ``stat`` of the first k answers at a matched answer budget, averaged over
    rollout orders.

    ``present [P, R]`` marks each prompt's rollouts; answers are the ``m`` slots of a rollout, in
    order. For each seed the present rollouts of every prompt are put in a random order (absent ones
    last); the budget-k sub-pool is the first ceil(k/m) rollouts' first k answers. ``stat(keep)``
    receives ``keep [P, R, m]`` (bool: the answer is in the sub-pool) and returns ``[P]``.
    """
    present = np.asarray(present, dtype=bool)
    P, R = present.shape
    out = np.zeros((len(seeds), P, len(ks)))
    for si, seed in enumerate(seeds):
        rng = np.random.default_rng(seed)
        key = np.where(present, rng.random((P, R)), np.inf)
        order = np.argsort(key, axis=1, kind="stable")  # [P, R]: position -> rollout
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(R)[None, :].repeat(P, 0), axis=1)  # rollout -> position
        slot_pos = rank[:, :, None] * m + np.arange(m)[None, None, :]  # [P, R, m] answer position
        for ki, k in enumerate(ks):
            keep = (slot_pos < k) & present[:, :, None]
            out[si, :, ki] = stat(keep)
    return out.mean(0)
