"""Pool statistics: ones that failing answers cannot win, and the reference implementation's.

The paper's reward-space diversity averages distances over *all* answers, so where a failed answer
is the all-zero vector, failing raises it. :func:`completed_mask`, :func:`completed_diversity`,
:func:`pool_union_coverage`, :func:`pareto_coverage`, :func:`distinct_count` and :func:`matched_prefix`
look only at completed answers or at what the pool covers.

:func:`pool_statistics` computes the statistics the authors' code reports per pool (best
individual, witness count/fraction/NDCG, random-subset winner share, Pareto fraction, pass@k per
answer and per rollout), vectorised over prompts, on the valid answers or, with ``convention=
"reference"``, on every slot with invalid ones as zero vectors (the reference's padding);
:func:`evaluate_pool_stats` makes a report entry of them, :func:`training_pool_stats` the trainer's
``vpo/pool/...`` logs. Every definition, ties included, is in docs/eval.md. Inputs use the grouped
layout of :func:`vpo.search.metrics.group_by_prompt`.
"""

from __future__ import annotations

import inspect
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

from vpo.search.metrics import reward_space_diversity

__all__ = [
    "POOL_STAT_CONVENTIONS",
    "best_individual",
    "evaluate_pool_stats",
    "pareto_fraction",
    "pass_at_k_by_rollout",
    "pool_candidates",
    "pool_statistics",
    "subset_draws",
    "subset_winner_share",
    "training_pool_stats",
    "witness_gains",
    "witness_ndcg",
    "completed_mask",
    "completed_diversity",
    "distinct_count",
    "matched_prefix",
    "pareto_coverage",
    "pool_union_coverage",
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


def pool_union_coverage(points: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``[P]`` Σ_j max_i r_ij over each prompt's masked answers (0 with none): how much of every
    objective the pool reaches somewhere. In [0, d]. The set objective
    :func:`vpo.core.set_objectives.union_coverage` applied to each prompt's whole pool as one set
    (NaN rewards count as 0)."""
    import torch

    from vpo.core.set_objectives import union_coverage as set_union_coverage

    pts = torch.as_tensor(np.nan_to_num(np.asarray(points, dtype=np.float64), nan=0.0))
    mk = torch.as_tensor(np.asarray(mask, dtype=bool))
    return set_union_coverage(pts, mk, None, None, None).numpy()


def pareto_coverage(
    points: np.ndarray, mask: np.ndarray, fronts: Sequence[np.ndarray], tol: float = 1e-9
) -> np.ndarray:
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


# ---------------------------------------------------------------------------------------------
# the reference implementation's pool statistics (docs/eval.md, "The reference's pool statistics")
# ---------------------------------------------------------------------------------------------

POOL_STAT_CONVENTIONS = ("valid", "reference")
"""Which answers a pool statistic looks at: ``valid`` (the valid answers only) or ``reference`` (every
answer slot of every rollout, an invalid slot as the all-zero vector, as the authors' code pads a
rollout's score matrix to m rows of zeros)."""
MAX_WITNESS_OBJECTIVES = 12
"""Witness statistics enumerate all 2^d - 1 objective subsets; beyond d = 12 they are NaN (as in the
reference)."""
_CHUNK_ELEMENTS = 1 << 22  # prompts are processed in chunks of about this many array elements


def pool_candidates(
    rewards, valid, present=None, convention: str = "valid"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The candidate answers of each prompt's pool under a convention (see ``POOL_STAT_CONVENTIONS``).

    ``rewards [P, R, m, d]``, ``valid [P, R, m]``, ``present [P, R]`` (rollouts that exist; default all)
    -> ``points [P, R*m, d]`` (invalid or non-finite slots set to 0), ``mask [P, R*m]`` (the
    candidates) and ``rollout [P, R*m]`` (each slot's rollout, 0..R-1; slots keep their order).
    """
    if convention not in POOL_STAT_CONVENTIONS:
        raise ValueError(f"pool statistics convention must be one of {POOL_STAT_CONVENTIONS}, got {convention!r}")
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 4:
        raise ValueError(f"rewards must have shape [P, R, m, d]; got {r.shape}")
    P, R, m, d = r.shape
    v = np.asarray(valid, dtype=bool).reshape(P, R, m) & np.isfinite(r).all(-1)
    pres = np.ones((P, R), dtype=bool) if present is None else np.asarray(present, dtype=bool).reshape(P, R)
    v &= pres[..., None]
    pts = np.where(v[..., None], r, 0.0).reshape(P, R * m, d)
    mask = (v if convention == "valid" else np.broadcast_to(pres[..., None], (P, R, m))).reshape(P, R * m)
    rollout = np.broadcast_to(np.arange(R).repeat(m)[None, :], (P, R * m)).copy()
    return pts, mask.copy(), rollout


def _chunks(P: int, per_prompt: int):
    step = max(1, _CHUNK_ELEMENTS // max(int(per_prompt), 1))
    for a in range(0, P, step):
        yield slice(a, min(P, a + step))


def _subset_matrix(d: int) -> np.ndarray:
    """``[2^d - 1, d]`` bool: row s-1 holds the objectives in the bit mask s (bit j = objective j)."""
    s = np.arange(1, 1 << d)
    return ((s[:, None] >> np.arange(d)[None, :]) & 1).astype(bool)


def _subset_sums(points: np.ndarray, subsets: np.ndarray) -> np.ndarray:
    """``points [c, n, d]``, ``subsets [S, d]`` -> ``[c, n, S]`` sums over each subset, added objective by
    objective in increasing order (the order a plain loop adds them, so equal sums are equal bit for bit)."""
    acc = np.zeros(points.shape[:2] + (subsets.shape[0],))
    for j in range(points.shape[-1]):
        acc = acc + points[..., j, None] * subsets[None, None, :, j]
    return acc


def _positions(mask: np.ndarray, rollout: np.ndarray, R: int) -> tuple[np.ndarray, np.ndarray]:
    """``onehot [P, n, R]`` (candidate i belongs to rollout r) and ``pos [P, n]`` (0-based rank of a
    candidate among its rollout's candidates, in slot order; -1 for non-candidates)."""
    onehot = (rollout[..., None] == np.arange(R)) & mask[..., None]
    pos = (np.cumsum(onehot, axis=1) * onehot).sum(-1) - 1
    return onehot, pos


def best_individual(points, mask, weights=None, empty: float = 0.0) -> np.ndarray:
    """``[P]`` max over each prompt's candidates of ``wᵀr`` (``weights=None``: the plain sum Σ_j r_j, the
    reference's definition); ``empty`` for a prompt without candidates (an empty slot's score)."""
    pts = np.asarray(points, dtype=np.float64)
    mk = np.asarray(mask, dtype=bool)
    s = pts.sum(-1) if weights is None else pts @ np.asarray(weights, dtype=np.float64).reshape(-1)
    best = np.where(mk, s, -np.inf).max(-1)
    return np.where(mk.any(-1), best, empty)


def witness_gains(points, mask, max_objectives: int = MAX_WITNESS_OBJECTIVES) -> np.ndarray:
    """``[P, n]`` each candidate's witness gain: ``1/|class|`` if its reward vector is the unique winner of
    some non-empty subset of objectives, else 0 (NaN everywhere when d > ``max_objectives``).

    Candidates with the same vector (exact equality) form one class. The winner of a subset T is the
    class with the largest Σ_{j∈T} r_j; it is unique when every other class scores strictly less (an
    exact tie between two different vectors has no winner). A class that wins some subset is a
    witness, and its credit 1 is split among its members.
    """
    pts = np.asarray(points, dtype=np.float64)
    mk = np.asarray(mask, dtype=bool)
    P, n, d = pts.shape
    if d > max_objectives:
        return np.full((P, n), np.nan)
    subsets = _subset_matrix(d)
    S = subsets.shape[0]
    gains = np.zeros((P, n))
    for sl in _chunks(P, n * max(S, n)):
        x, k = pts[sl], mk[sl]
        sums = np.where(k[..., None], _subset_sums(x, subsets), -np.inf)  # [c, n, S]
        best = sums.max(1)  # [c, S]
        at_max = k[..., None] & (sums == best[:, None, :])
        i0 = sums.argmax(1)  # [c, S]: one candidate at the max
        eq = (x[:, :, None, :] == x[:, None, :, :]).all(-1)  # [c, n, n]
        same = np.take_along_axis(eq, np.broadcast_to(i0[:, None, :], (x.shape[0], n, S)), axis=2)  # eq[c, i, i0]
        unique = (~at_max | same).all(1) & k.any(1)[:, None]  # [c, S]
        witness = (at_max & unique[:, None, :]).any(-1) & k
        size = (eq & k[:, None, :]).sum(-1)
        gains[sl] = np.where(witness, 1.0 / np.maximum(size, 1), 0.0)
    return gains


def witness_ndcg(gains, mask, rollout) -> np.ndarray:
    """``[P]`` mean over rollouts (those with a candidate) of the rollout's NDCG of witness gains by
    position: ``Σ_t gain_t / log2(t + 2)`` over its candidates in slot order t = 0, 1, ..., divided by the
    ideal ``Σ_{t<c} 1 / log2(t + 2)`` of its c candidates all with gain 1. NaN without candidates."""
    g = np.asarray(gains, dtype=np.float64)
    mk = np.asarray(mask, dtype=bool)
    ro = np.asarray(rollout)
    R = int(ro.max()) + 1 if ro.size else 1
    onehot, pos = _positions(mk, ro, R)
    disc = np.where(mk, 1.0 / np.log2(np.maximum(pos, 0) + 2.0), 0.0)
    dcg = (onehot * (np.where(mk, g, 0.0) * disc)[..., None]).sum(1)  # [P, R]
    count = onehot.sum(1)
    ideal = np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(g.shape[1]) + 2.0))])[count]
    has = count > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        per = np.where(has, dcg / np.where(has, ideal, 1.0), 0.0).sum(-1) / has.sum(-1)
    return np.where(has.any(-1), per, np.nan)


def subset_draws(d: int, num_draws: int = 100, seed: int = 42) -> np.ndarray:
    """``[num_draws, d]`` bool: random non-empty objective subsets, each a bit mask drawn uniformly from
    1..2^d - 1 with Python's ``random.Random(seed).randint`` (the reference's draws: same seed, same
    subsets). The same draws are used for every prompt."""
    return _subset_draws(int(d), int(num_draws), int(seed)).copy()


@lru_cache(maxsize=64)
def _subset_draws(d: int, num_draws: int, seed: int) -> np.ndarray:
    import random

    rng = random.Random(seed)
    masks = [rng.randint(1, (1 << d) - 1) for _ in range(num_draws)]
    bits = np.array([[(s >> j) & 1 for j in range(d)] for s in masks], dtype=bool)
    return bits.reshape(num_draws, d)


def subset_winner_share(
    points, mask, rollout, num_draws: int = 100, seed: int = 42, tol: float = 1e-12
) -> tuple[np.ndarray, np.ndarray]:
    """Who wins random objective subsets: ``(share_max [P], score_pos [P])``.

    For each draw T (:func:`subset_draws`), the candidates within ``tol`` of the best Σ_{j∈T} r_j win;
    the rollouts holding a winner split one unit of credit equally. ``share_max``: the largest credit
    any one rollout collects, divided by the number of draws (1 = one rollout wins every draw; about
    1/R = wins spread evenly). ``score_pos``: the same credit discounted by ``1/log2(t + 2)``, t the
    position of the rollout's earliest winner, summed over rollouts and divided by (rollouts with a
    candidate × draws). NaN for a prompt without candidates.
    """
    pts = np.asarray(points, dtype=np.float64)
    mk = np.asarray(mask, dtype=bool)
    ro = np.asarray(rollout)
    P, n, d = pts.shape
    R = int(ro.max()) + 1 if ro.size else 1
    draws = subset_draws(d, num_draws, seed)
    D = draws.shape[0]
    share = np.full(P, np.nan)
    score_pos = np.full(P, np.nan)
    if D == 0:
        return share, score_pos
    for sl in _chunks(P, n * R * D):
        x, k = pts[sl], mk[sl]
        onehot, pos = _positions(k, ro[sl], R)
        sums = np.where(k[..., None], _subset_sums(x, draws), -np.inf)  # [c, n, D]
        win = k[..., None] & (sums >= sums.max(1, keepdims=True) - tol)
        both = onehot[..., None] & win[:, :, None, :]  # [c, n, R, D]
        win_roll = both.any(1)  # [c, R, D]
        tied = np.maximum(win_roll.sum(1, keepdims=True), 1)
        credit = (win_roll / tied).sum(-1)  # [c, R]
        first = np.where(both, pos[:, :, None, None], n).min(1)  # [c, R, D]
        disc = np.where(win_roll, 1.0 / np.log2(first + 2.0), 0.0)
        credit_pos = (disc / tied).sum(-1)
        rolls = onehot.any(1).sum(-1)  # [c]
        ok = k.any(-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            share[sl] = np.where(ok, credit.max(-1) / D, np.nan)
            score_pos[sl] = np.where(ok, credit_pos.sum(-1) / (np.maximum(rolls, 1) * D), np.nan)
    return share, score_pos


def pareto_fraction(points, mask, eps: float = 1e-12) -> np.ndarray:
    """``[P]`` non-dominated candidates / candidates (duplicates each count; NaN without candidates).

    b dominates a when ``b_j >= a_j - eps`` for every objective and ``b_j > a_j + eps`` for one.
    """
    from vpo.search.metrics import non_dominated

    mk = np.asarray(mask, dtype=bool)
    front = non_dominated(points, mk, eps=eps).sum(-1)
    c = mk.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(c > 0, front / np.maximum(c, 1), np.nan)


def pass_at_k_by_rollout(passes, present, ks: Sequence[int]) -> np.ndarray:
    """``[P, len(ks)]`` pass@k over rollouts: a rollout passes when one of its answers passes
    (``passes [P, R, m]``); the Codex estimator with n = the prompt's rollouts, c = passing rollouts and
    k counting rollouts. A k above a prompt's n gives NaN there."""
    return _pass_at_k_counts(
        np.asarray(present, dtype=bool).sum(-1), (np.asarray(passes, dtype=bool).any(-1) & present).sum(-1), ks
    )


def _pass_at_k_counts(n, c, ks: Sequence[int]) -> np.ndarray:
    """:func:`vpo.search.at_k.pass_at_k` with the reference's convention: NaN where k > n."""
    from vpo.search.at_k import pass_at_k

    return pass_at_k(n, c, ks, k_above_n="nan")


REFERENCE_PASS_KS = (1, 2, 3)
"""The ks at which the reference reports pass@k per answer and per rollout."""


def pool_statistics(
    rewards,
    valid,
    present=None,
    *,
    weights=None,
    convention: str = "valid",
    pass_threshold: float = 1.0,
    ks: Sequence[int] = REFERENCE_PASS_KS,
    num_draws: int = 100,
    draw_seed: int = 42,
    invalid_score: float = 0.0,
    max_objectives: int = MAX_WITNESS_OBJECTIVES,
) -> dict[str, np.ndarray]:
    """Every statistic of the reference's pool report, per prompt (docs/eval.md defines each).

    ``rewards [P, R, m, d]``, ``valid [P, R, m]``, ``present [P, R]``; ``weights`` w* for
    ``best_individual`` (``best_individual_sum`` is the reference's unweighted sum). Returns ``{name:
    [P]}`` plus ``pass_at_k_answer`` and ``pass_at_k_rollout`` as ``[P, len(ks)]`` (NaN where k exceeds
    the prompt's answers / rollouts).
    """
    r = np.asarray(rewards, dtype=np.float64)
    P, R, m, d = r.shape
    pres = np.ones((P, R), dtype=bool) if present is None else np.asarray(present, dtype=bool)
    pts, mk, ro = pool_candidates(r, valid, pres, convention)
    gains = witness_gains(pts, mk, max_objectives)
    n_cand = mk.sum(-1)
    wcount = (gains > 0).sum(-1).astype(np.float64)
    wcount = np.where(np.isnan(gains).any(-1), np.nan, wcount)
    with np.errstate(invalid="ignore", divide="ignore"):
        wfrac = np.where(n_cand > 0, wcount / np.maximum(n_cand, 1), np.nan)
    share, score_pos = subset_winner_share(pts, mk, ro, num_draws, draw_seed)
    w = np.full(d, 1.0 / d) if weights is None else np.asarray(weights, dtype=np.float64).reshape(-1)
    v = np.asarray(valid, dtype=bool).reshape(P, R, m) & pres[..., None] & np.isfinite(r).all(-1)
    passes = v & (np.nan_to_num(r, nan=-np.inf) >= pass_threshold).all(-1)
    return {
        "union_coverage": pool_union_coverage(pts, mk),
        "best_individual": best_individual(pts, mk, w, empty=invalid_score),
        "best_individual_sum": best_individual(pts, mk, None, empty=invalid_score),
        "witness_count": wcount,
        "witness_fraction": wfrac,
        "witness_ndcg": np.where(np.isnan(gains).any(-1), np.nan, witness_ndcg(np.nan_to_num(gains), mk, ro)),
        "subset_winner_share": share,
        "subset_score_pos": score_pos,
        "pareto_fraction": pareto_fraction(pts, mk),
        "pass_at_k_answer": _pass_at_k_counts(pres.sum(-1) * m, passes.sum((1, 2)), ks),
        "pass_at_k_rollout": pass_at_k_by_rollout(passes, pres, ks),
    }


POOL_STAT_NAMES = (
    "union_coverage",
    "best_individual",
    "best_individual_sum",
    "witness_count",
    "witness_fraction",
    "witness_ndcg",
    "subset_winner_share",
    "subset_score_pos",
    "pareto_fraction",
)
"""The scalar statistics of :func:`pool_statistics`, in report order (pass@k curves follow)."""


_REPORT_STAT_OPTIONS = ("convention", "pass_threshold", "ks", "num_draws", "draw_seed", "invalid_score")
"""The :func:`pool_statistics` keywords that :func:`evaluate_pool_stats` passes on (and reports)."""


def _report_stat_options(given: dict) -> dict:
    """``given`` (evaluate_pool_stats' extra keywords) completed with :func:`pool_statistics`' own
    defaults, in report order, so the defaults are written once; any other keyword is a TypeError."""
    unknown = sorted(set(given) - set(_REPORT_STAT_OPTIONS))
    if unknown:
        raise TypeError(f"evaluate_pool_stats() got unexpected keyword arguments: {', '.join(unknown)}")
    params = inspect.signature(pool_statistics).parameters
    return {name: given.get(name, params[name].default) for name in _REPORT_STAT_OPTIONS}


def evaluate_pool_stats(
    rewards,
    valid,
    prompt_index=None,
    *,
    target_weights=None,
    bootstrap: int = 1000,
    ci_level: float = 0.95,
    bootstrap_seed: int = 0,
    per_prompt: bool = True,
    **stat_options,
) -> dict:
    """:func:`pool_statistics` of a pool (``rewards [N, m, d]``, ``valid [N, m]``, ``prompt_index [N]``)
    as a JSON-ready report entry: ``{"config", "metrics", "per_prompt"}``, scalar statistics as
    ``{"mean", "ci_low", "ci_high", "num_prompts"}`` (mean over the prompts where defined, percentile
    bootstrap over prompts), the pass@k curves as ``{"k", "mean", "ci_low", "ci_high"}`` at the ks
    every prompt has enough rollouts for. ``stat_options`` are :func:`pool_statistics`' keywords
    ``convention``, ``pass_threshold``, ``ks``, ``num_draws``, ``draw_seed``, ``invalid_score``, with
    its defaults."""
    from vpo.search.metrics import jsonable, ci_summary, bootstrap_ci, group_by_prompt

    opts = _report_stat_options(stat_options)
    g = group_by_prompt(rewards, valid, prompt_index)
    ks_used = [int(k) for k in opts["ks"] if 1 <= int(k) <= int(g.num_rollouts.min())]
    opts["ks"] = ks_used
    stats = pool_statistics(g.rewards, g.valid, g.present, weights=target_weights, **opts)
    curves = ("pass_at_k_answer", "pass_at_k_rollout")
    rows = [stats[n] for n in POOL_STAT_NAMES] + [stats[c][:, i] for c in curves for i in range(len(ks_used))]
    low, high = bootstrap_ci(np.stack(rows), bootstrap, ci_level, bootstrap_seed)
    metrics: dict = {n: ci_summary(stats[n], low[i], high[i]) for i, n in enumerate(POOL_STAT_NAMES)}
    at = len(POOL_STAT_NAMES)
    for c in curves:
        K = len(ks_used)
        metrics[c] = {
            "k": ks_used,
            "mean": np.nanmean(stats[c], 0).tolist() if K else [],
            "ci_low": low[at : at + K].tolist(),
            "ci_high": high[at : at + K].tolist(),
        }
        at += K
    out = {
        "config": {
            **opts,
            "num_draws": int(opts["num_draws"]),
            "draw_seed": int(opts["draw_seed"]),
            "max_witness_objectives": MAX_WITNESS_OBJECTIVES,
        },
        "metrics": jsonable(metrics),
    }
    if per_prompt:
        out["per_prompt"] = {n: jsonable(stats[n]) for n in (*POOL_STAT_NAMES, *curves)}
    return out


def training_pool_stats(
    rewards, valid, group_size: int, target_weights=None, *, convention: str = "valid", pass_threshold: float = 1.0
) -> dict[str, float]:
    """The pool statistics of a training batch (``rewards [N, m, d]``, ``valid [N, m]``, groups of
    ``group_size`` consecutive rollouts = one prompt's pool), averaged over groups where defined, as
    ``{name: float}`` (``pass_at_{k}_answer`` / ``pass_at_{k}_rollout`` for k = 1, 2, 3 up to the group
    size). Statistics undefined for every group (e.g. witnesses when d > 12) are left out."""
    r = np.asarray(rewards, dtype=np.float64)
    N, m, d = r.shape
    G = int(group_size)
    ks = [k for k in REFERENCE_PASS_KS if k <= G]
    stats = pool_statistics(
        r.reshape(N // G, G, m, d),
        np.asarray(valid, dtype=bool).reshape(N // G, G, m),
        weights=target_weights,
        convention=convention,
        pass_threshold=pass_threshold,
        ks=ks,
    )
    flat = {n: stats[n] for n in POOL_STAT_NAMES}
    for c, tag in (("pass_at_k_answer", "answer"), ("pass_at_k_rollout", "rollout")):
        for i, k in enumerate(ks):
            flat[f"pass_at_{k}_{tag}"] = stats[c][:, i]
    out = {}
    for name, vals in flat.items():
        ok = np.isfinite(vals)
        if ok.any():
            out[name] = float(vals[ok].mean())
    return out
