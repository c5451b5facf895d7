"""The budgeted search estimators: best@k and pass@k on prompts' pools of scored answers, vectorised.

Input: ``rewards [N, m, d]``, ``valid [N, m]`` and ``prompt_index [N]``; :func:`group_by_prompt`
lays them out as ``[P, R, m, d]`` (P prompts, up to R rollouts each, a ``present [P, R]`` mask) and
every estimator here works on all prompts at once, with no Python loop over prompts. k counts
**answer slots**: a rollout asked for m answers pays for m slots, and a missing, unparsable,
duplicate or unscorable answer is a slot scored ``invalid_score`` (docs/eval.md, "What is measured").
Matched-budget best@k draws ceil(k/m) rollouts and keeps their first k slots (the paper's rule;
:func:`matched_best_at_k`, exact expectation :func:`matched_best_at_k_exact`); the answer-level
estimators (:func:`best_at_k_unbiased`, :func:`pass_at_k`) take the pool's n = R*m slots as
candidates. :func:`vpo.search.metrics.evaluate` runs them all and re-exports every name here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from vpo.errors import UserError
from vpo.core.estimators import log_comb as _core_log_comb


class MetricsError(UserError, ValueError):
    """Bad input to a metric (shape, empty pool, k too large): the message says what to change."""


# ---------------------------------------------------------------------------------------------
# layout
# ---------------------------------------------------------------------------------------------


@dataclass
class Grouped:
    """Rollouts grouped by prompt.

    ``rewards [P, R, m, d]`` float64 (invalid slots and absent rollouts are 0), ``valid [P, R, m]``
    bool (False for absent rollouts), ``present [P, R]`` bool, ``num_rollouts [P]`` int64,
    ``num_tokens [P, R]`` float64 (NaN where unknown or absent).
    """

    rewards: np.ndarray
    valid: np.ndarray
    present: np.ndarray
    num_rollouts: np.ndarray
    num_tokens: np.ndarray
    nonfinite: int = 0

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return tuple(self.rewards.shape)  # type: ignore[return-value]

    @property
    def num_slots(self) -> np.ndarray:
        """``[P]`` answer slots per prompt (rollouts x m): the candidates of the answer-level metrics."""
        return self.num_rollouts * self.rewards.shape[2]


def group_by_prompt(rewards, valid=None, prompt_index=None, num_tokens=None, num_prompts: int | None = None) -> Grouped:
    """Group ``rewards [N, m, d]``, ``valid [N, m]``, ``prompt_index [N]`` (ints 0..P-1) into
    :class:`Grouped`. Rollouts keep their order within a prompt. Non-finite rewards make that slot
    invalid. ``prompt_index=None`` puts every rollout in one prompt."""
    r = _checked_rewards(rewards)
    N, m, d = r.shape
    v = _checked_valid(valid, N, m)
    finite = np.isfinite(r).all(-1)
    nonfinite = int((v & ~finite).sum())
    v = v & finite
    r = np.where(v[..., None], r, 0.0)
    idx = _checked_prompt_index(prompt_index, N)
    counts = _rollouts_per_prompt(idx, num_prompts)
    P, R = counts.size, int(counts.max())
    order = np.argsort(idx, kind="stable")
    starts = np.cumsum(counts) - counts
    pos = np.empty(N, dtype=np.int64)
    pos[order] = np.arange(N) - starts[idx[order]]
    G_r = np.zeros((P, R, m, d), dtype=np.float64)
    G_v = np.zeros((P, R, m), dtype=bool)
    G_p = np.zeros((P, R), dtype=bool)
    G_t = np.full((P, R), np.nan)
    G_r[idx, pos] = r
    G_v[idx, pos] = v
    G_p[idx, pos] = True
    if num_tokens is not None:
        t = np.asarray(num_tokens, dtype=np.float64).reshape(-1)
        if t.shape != (N,):
            raise MetricsError(f"num_tokens must have shape [N] = ({N},); got {t.shape}")
        G_t[idx, pos] = t
    return Grouped(G_r, G_v, G_p, counts.astype(np.int64), G_t, nonfinite)


def _checked_rewards(rewards) -> np.ndarray:
    """``rewards`` as a float64 ``[N, m, d]`` array with N, m, d >= 1."""
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 3:
        hint = " (one answer per rollout: pass rewards[:, None, :])" if r.ndim == 2 else ""
        raise MetricsError(f"rewards must have shape [N, m, d]; got {r.shape}{hint}")
    N, m, d = r.shape
    if N == 0:
        raise MetricsError("the pool is empty: no rollouts to evaluate (did generation run? is the pool file empty?)")
    if m == 0 or d == 0:
        raise MetricsError(f"rewards must have m >= 1 answer slots and d >= 1 objectives; got shape {r.shape}")
    return r


def _checked_valid(valid, N: int, m: int) -> np.ndarray:
    """``valid`` as a bool ``[N, m]`` array (all True when not given)."""
    if valid is None:
        return np.ones((N, m), dtype=bool)
    v = np.asarray(valid)
    if v.shape != (N, m):
        raise MetricsError(f"valid must have shape [N, m] = {(N, m)}; got {v.shape}")
    return v.astype(bool)


def _checked_prompt_index(prompt_index, N: int) -> np.ndarray:
    """``prompt_index`` as non-negative int64 ``[N]`` (all 0, one prompt, when not given)."""
    if prompt_index is None:
        return np.zeros(N, dtype=np.int64)
    idx = np.asarray(prompt_index)
    if idx.shape != (N,):
        raise MetricsError(f"prompt_index must have shape [N] = ({N},); got {idx.shape}")
    if idx.dtype.kind not in "iu":
        raise MetricsError(f"prompt_index must hold integers 0..P-1; got dtype {idx.dtype}")
    idx = idx.astype(np.int64)
    if idx.min() < 0:
        raise MetricsError("prompt_index must be >= 0")
    return idx


def _rollouts_per_prompt(idx: np.ndarray, num_prompts: int | None) -> np.ndarray:
    """``[P]`` rollouts of each prompt (P = ``num_prompts``, or the largest index + 1); every
    prompt must have at least one."""
    P = int(idx.max()) + 1 if num_prompts is None else int(num_prompts)
    if idx.max() >= P:
        raise MetricsError(f"prompt_index has values up to {idx.max()} but there are only {P} prompts")
    counts = np.bincount(idx, minlength=P)
    if (counts == 0).any():
        empty = np.flatnonzero(counts == 0)
        raise MetricsError(
            f"{len(empty)} prompt(s) have no rollouts (first: prompt #{int(empty[0])}); every prompt's pool "
            "needs at least one rollout"
        )
    return counts


def scalarize(rewards: np.ndarray, valid: np.ndarray, weights: np.ndarray, invalid_score: float = 0.0) -> np.ndarray:
    """``w^T r`` per slot: ``rewards [..., d]``, ``valid [...]``, ``weights [d]`` -> ``[...]``;
    ``weights [K, d]`` -> ``[..., K]``. Invalid slots get ``invalid_score``."""
    w = np.asarray(weights, dtype=np.float64)
    d = rewards.shape[-1]
    if w.shape[-1] != d:
        raise MetricsError(f"weights have {w.shape[-1]} entries but the rewards have d={d} objectives")
    if w.ndim == 1:
        s = rewards @ w
        return np.where(valid, s, invalid_score)
    s = rewards @ w.T
    return np.where(valid[..., None], s, invalid_score)


def log_comb(n, k) -> np.ndarray:
    """``log C(n, k)`` elementwise as a numpy array (:func:`vpo.core.estimators.log_comb`)."""
    return _core_log_comb(n, k).numpy()


def check_ks(ks: Sequence[int], limit: np.ndarray, what: str, ids: Sequence[str] | None = None) -> np.ndarray:
    ks_arr = np.asarray(list(ks), dtype=np.int64)
    if ks_arr.size == 0 or (ks_arr < 1).any():
        raise MetricsError(f"ks must be integers >= 1, got {list(ks)}")
    small = int(np.argmin(limit))
    if ks_arr.max() > limit[small]:
        who = f"prompt {ids[small]!r}" if ids is not None else f"prompt #{small}"
        raise MetricsError(
            f"k={int(ks_arr.max())} is larger than the pool: {who} has only {int(limit[small])} {what}. "
            f"Use k <= {int(limit[small])} or generate more rollouts per prompt"
        )
    return ks_arr


# ---------------------------------------------------------------------------------------------
# answer-level estimators over a pool
# ---------------------------------------------------------------------------------------------


def best_at_k_unbiased(scores, ks: Sequence[int], count=None) -> np.ndarray:
    """Unbiased E[max of k candidates drawn without replacement] per pool.

    ``scores [P, n]`` (candidate scalars; row p uses its first ``count[p]`` entries, default all n)
    -> ``[P, len(ks)]``: ``sum_{i=k..n_p} C(i-1, k-1) / C(n_p, k) * s_(i)`` over ascending order.

    Three candidates scoring 0, 0.5 and 1: best@1 is their mean, best@3 their max.

    >>> best_at_k_unbiased([[0.0, 0.5, 1.0]], ks=[1, 2, 3]).round(4).tolist()
    [[0.5, 0.8333, 1.0]]
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2:
        raise MetricsError(f"scores must have shape [P, n]; got {s.shape}")
    P, n = s.shape
    cnt = np.full(P, n, dtype=np.int64) if count is None else np.asarray(count, dtype=np.int64)
    ks_arr = check_ks(ks, cnt, "candidates")
    pos = np.arange(n)
    vals = np.where(pos[None, :] < cnt[:, None], s, -np.inf)
    vals = np.sort(vals, axis=1)  # padding (-inf) first
    rank = pos[None, :] - (n - cnt[:, None]) + 1  # 1-based ascending rank among real entries
    real = rank >= 1
    v0 = np.where(real, vals, 0.0)
    out = np.empty((P, ks_arr.size))
    for j, k in enumerate(ks_arr):  # a handful of ks; each step is vectorised over [P, n]
        coef = np.exp(log_comb(rank - 1, k - 1) - log_comb(cnt, k)[:, None])
        out[:, j] = (np.where(real, coef, 0.0) * v0).sum(1)
    return out


def pass_at_k(num_samples, num_correct, ks: Sequence[int], *, k_above_n: str = "raise") -> np.ndarray:
    """Unbiased pass@k (Chen et al. 2021): ``1 - C(n-c, k) / C(n, k)``.

    ``num_samples [P]`` (n), ``num_correct [P]`` (c) -> ``[P, len(ks)]``. A k larger than a pool's n
    raises :class:`MetricsError` (``k_above_n="raise"``, ``vpo eval``'s rule: checked before any
    work) or gives NaN for that pool (``"nan"``, the reference's pool statistics over pools of
    uneven size).

    >>> pass_at_k([4, 4], [1, 0], ks=[1, 2, 4]).round(4).tolist()  # 1 of 4 correct; none correct
    [[0.25, 0.5, 1.0], [0.0, 0.0, 0.0]]
    """
    n = np.asarray(num_samples, dtype=np.int64).reshape(-1)
    c = np.asarray(num_correct, dtype=np.int64).reshape(-1)
    if n.shape != c.shape:
        raise MetricsError(f"num_samples and num_correct differ in length: {n.shape} vs {c.shape}")
    if ((c < 0) | (c > n)).any():
        raise MetricsError("num_correct must be between 0 and num_samples")
    if k_above_n not in ("raise", "nan"):
        raise ValueError(f"k_above_n must be 'raise' or 'nan', got {k_above_n!r}")
    ks_arr = check_ks(ks, n if k_above_n == "raise" else np.full(1, np.iinfo(np.int64).max), "samples")
    k = ks_arr[None, :]
    with np.errstate(invalid="ignore", over="ignore"):
        fail = np.exp(log_comb((n - c)[:, None], k) - log_comb(n[:, None], k))
    val = np.where((n - c)[:, None] < k, 1.0, 1.0 - fail)
    return val if k_above_n == "raise" else np.where(k <= n[:, None], val, np.nan)


# ---------------------------------------------------------------------------------------------
# matched answer budget: ceil(k/m) rollouts, first k slots
# ---------------------------------------------------------------------------------------------


def rollout_order(present: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    keys = rng.random(present.shape)
    keys[~present] = np.inf  # absent rollouts are never drawn
    return np.argsort(keys, axis=1)


def matched_best_at_k(scores, present, ks: Sequence[int], rng: np.random.Generator | int = 0, order=None) -> np.ndarray:
    """One random draw of the matched-budget best@k.

    ``scores [P, R, m, *T]`` slot scalars (``T`` e.g. K weightings), ``present [P, R]`` ->
    ``[P, len(ks), *T]``: for each prompt, ceil(k/m) rollouts drawn without replacement, their slots
    laid out in order, max over the first k. ``order [P, R]`` fixes the rollout order instead.
    """
    s = np.asarray(scores, dtype=np.float64)
    P, R, m = s.shape[:3]
    present = np.asarray(present, dtype=bool)
    ks_arr = check_ks(ks, present.sum(1) * m, "answer slots")
    if order is None:
        rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
        order = rollout_order(present, rng)
    perm = s[np.arange(P)[:, None], order]  # rollouts in draw order (fancy indexing beats take_along_axis here)
    flat = perm.reshape(P, R * m, *s.shape[3:])
    # max over each segment between consecutive ks, then a running max over the few segments
    uniq, inv = np.unique(ks_arr, return_inverse=True)
    seg = np.maximum.reduceat(flat[:, : uniq[-1]], np.concatenate([[0], uniq[:-1]]), axis=1)
    run = np.maximum.accumulate(seg, axis=1)
    return run[:, inv]


def matched_best_at_k_exact(scores, present, ks: Sequence[int]) -> np.ndarray:
    """Exact expectation over all rollout draws of :func:`matched_best_at_k` (what seeds average to).

    ``scores [P, R, m]``, ``present [P, R]`` -> ``[P, len(ks)]``. With q = ceil(k/m) rollouts and
    t = k - (q-1)m slots used of the last one: E = mean over the last rollout j of
    E_{S: q-1 others}[max(max_{i in S} full_i, part_j)], where full_i is rollout i's max over its m
    slots and part_j the max over j's first t slots; the subset maximum is an order statistic with
    weights C(i-1, q-2) / C(n-1, q-1). O(P R^2) memory.
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 3:
        raise MetricsError(f"scores must have shape [P, R, m]; got {s.shape}")
    P, R, m = s.shape
    present = np.asarray(present, dtype=bool)
    n = present.sum(1).astype(np.int64)  # rollouts per prompt
    ks_arr = check_ks(ks, n * m, "answer slots")
    full = np.where(present, s.max(2), -np.inf)  # [P, R]
    prefix = np.maximum.accumulate(s, axis=2)  # [P, R, m] max over the first t slots
    # others[p, j, :] = full of every rollout but j, ascending; -inf (self, absent) first
    others = np.broadcast_to(full[:, None, :], (P, R, R)).copy()
    others[:, np.arange(R), np.arange(R)] = -np.inf
    others = np.sort(others, axis=2)
    n_others = (n - 1)[:, None, None]
    rank = np.arange(R)[None, None, :] - (R - n_others) + 1  # 1-based among real others
    real = rank >= 1
    out = np.empty((P, ks_arr.size))
    for jk, k in enumerate(ks_arr):
        q = -(-int(k) // m)
        t = int(k) - (q - 1) * m
        part = prefix[:, :, t - 1]  # [P, R]
        if q == 1:
            e_j = part
        else:
            coef = np.exp(log_comb(rank - 1, q - 2) - log_comb(n_others, q - 1))
            coef = np.where(real, coef, 0.0)
            vals = np.maximum(np.where(real, others, 0.0), part[:, :, None])
            e_j = (coef * vals).sum(2)
        out[:, jk] = np.where(present, e_j, 0.0).sum(1) / n
    return out
