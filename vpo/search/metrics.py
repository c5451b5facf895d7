"""Test-time search metrics on the shared reward shape (docs/method.md §6) and :func:`evaluate`.

Input: ``rewards [N, m, d]`` (N rollouts, up to m answer slots each, d objectives), ``valid [N, m]``
and ``prompt_index [N]``; the rollouts of one prompt form its *pool*. :func:`evaluate` computes
every metric of docs/eval.md ("What is measured") for a batch at once: the budgeted estimators of
:mod:`vpo.search.at_k` (matched-budget best@k, unbiased best@k, pass@k; k counts answer slots),
E_w[best@k] over the fixed weightings :func:`vpo.core.fixed_weights`, and the pool geometry defined
here (reward-space diversity, collinearity, Pareto front size), with compute (tokens) figures.
Every public name of :mod:`vpo.search.at_k` is importable from here.

Confidence intervals: percentile bootstrap over prompts (per-prompt values resampled with
replacement; seeds averaged inside each prompt first). Simplification: prompts are the only
resampled unit; the variance from the finite pool itself is not added.

Shapes in the docstrings: P prompts, R rollouts per prompt (max), m slots, d objectives, n = R*m.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from vpo._util import positive_int
from vpo.core.weights import FIXED_NUM_WEIGHTINGS, FIXED_WEIGHT_SEED
from vpo.search.at_k import (
    Grouped,
    MetricsError,
    check_ks,
    rollout_order,
    best_at_k_unbiased,
    group_by_prompt,
    log_comb,
    matched_best_at_k,
    matched_best_at_k_exact,
    pass_at_k,
    scalarize,
)

__all__ = [
    "EvalConfig",
    "Grouped",
    "group_by_prompt",
    "scalarize",
    "log_comb",
    "best_at_k_unbiased",
    "pass_at_k",
    "matched_best_at_k",
    "matched_best_at_k_exact",
    "reward_space_diversity",
    "collinearity",
    "collinearity_pooled",
    "non_dominated",
    "pareto_front_size",
    "bootstrap_ci",
    "fixed_weights",
    "evaluate",
    "MetricsError",
]


@dataclass
class EvalConfig:
    """What :func:`evaluate` computes and how."""

    ks: tuple[int, ...] | None = None
    """Answer budgets k; None = (1, 3, 5, 10, 30) cut to what the smallest pool allows, plus its full size."""
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    """Eval seeds: one random draw of ceil(k/m) rollouts per prompt per seed for matched best@k."""
    invalid_score: float = 0.0
    """Score of an empty/invalid answer slot (paper: 0, an all-zero reward row)."""
    pass_threshold: float = 1.0
    """A valid answer passes when every reward component is >= this (1.0 = all tests pass)."""
    num_weightings: int = FIXED_NUM_WEIGHTINGS
    """K, the fixed Dir(alpha) weightings of E_w[best@k] (vpo.core.fixed_weights; the set the trainer's
    pool_set_score log uses)."""
    weight_alpha: float = 1.0
    """Dirichlet concentration of those weightings (paper: 1)."""
    weight_seed: int = FIXED_WEIGHT_SEED
    """Seed of the fixed weightings; keep it equal across methods so they see the same w."""
    bootstrap: int = 1000
    """Bootstrap resamples of the prompts for confidence intervals (0 = no intervals)."""
    ci_level: float = 0.95
    """Two-sided level of the bootstrap percentile intervals."""
    bootstrap_seed: int = 0
    """Seed of the bootstrap resampling."""
    per_prompt: bool = True
    """Include every per-prompt value in the result (the JSON report keeps them)."""

    def __post_init__(self) -> None:
        if self.ks is not None:
            ks = tuple(int(k) for k in self.ks)
            if not ks or any(k < 1 for k in ks):
                raise MetricsError(f"ks must be integers >= 1, got {self.ks!r}")
            self.ks = tuple(sorted(set(ks)))
        self.seeds = tuple(int(s) for s in self.seeds)
        if not self.seeds:
            raise MetricsError("give at least one eval seed")
        if not (0.0 < self.ci_level < 1.0):
            raise MetricsError(f"ci_level must be in (0, 1), got {self.ci_level}")
        positive_int(self.bootstrap, "bootstrap", minimum=0, error=MetricsError)
        positive_int(self.num_weightings, "num_weightings", error=MetricsError)
        if not math.isfinite(self.invalid_score):
            raise MetricsError(f"invalid_score must be finite, got {self.invalid_score}")


DEFAULT_KS = (1, 3, 5, 10, 30)


# ---------------------------------------------------------------------------------------------
# pool geometry: diversity, collinearity, Pareto front
# ---------------------------------------------------------------------------------------------


def _points(points, mask) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(points, dtype=np.float64)
    if x.ndim != 3:
        raise MetricsError(f"points must have shape [P, n, d]; got {x.shape}")
    mk = np.ones(x.shape[:2], dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if mk.shape != x.shape[:2]:
        raise MetricsError(f"mask must have shape [P, n] = {x.shape[:2]}; got {mk.shape}")
    return x, mk & np.isfinite(x).all(-1)


def reward_space_diversity(points, mask=None) -> np.ndarray:
    """Mean pairwise L1 distance between each pool's valid vectors.

    ``points [P, n, d]``, ``mask [P, n]`` -> ``[P]`` in [0, d] for rewards in [0, 1]; NaN for a pool
    with fewer than 2 valid vectors. O(P n d log n): per component, the sum of pairwise absolute
    differences of sorted values v_(1..c) is ``sum_j (2j - c - 1) v_(j)``.
    """
    x, mk = _points(points, mask)
    xs = np.sort(np.where(mk[..., None], x, np.nan), axis=1)  # NaN (masked) last
    # the weights of each pool sum to zero, so shifting each component by its smallest value changes
    # nothing mathematically, but makes a collapsed pool (all values equal) give exactly 0 instead
    # of a rounding residue like -7e-18 (and the clip keeps the documented range [0, d])
    xs = xs - xs[:, :1, :]
    c = mk.sum(1)  # [P]
    j = np.arange(1, x.shape[1] + 1)[None, :]
    wgt = np.where(j <= c[:, None], 2 * j - c[:, None] - 1, 0).astype(np.float64)  # [P, n]
    total = np.maximum((np.nan_to_num(xs) * wgt[..., None]).sum((1, 2)), 0.0)
    pairs = c * (c - 1) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(c >= 2, total / np.maximum(pairs, 1), np.nan)


def collinearity(points, mask=None, tol: float = 1e-12) -> np.ndarray:
    """Mean off-diagonal Pearson correlation of the components over each pool's valid vectors.

    ``points [P, n, d]``, ``mask [P, n]`` -> ``[P]`` in [-1, 1]; components that are constant over
    the pool are ignored; NaN when fewer than 2 components vary (or fewer than 2 valid vectors).
    """
    x, mk = _points(points, mask)
    c = mk.sum(1).astype(np.float64)  # [P]
    w = mk[..., None].astype(np.float64)
    safe = np.maximum(c, 1.0)[:, None]
    mean = (x * w).sum(1) / safe  # [P, d]
    xc = (x - mean[:, None, :]) * w
    cov = np.einsum("pnd,pne->pde", xc, xc) / safe[..., None]
    sd = np.sqrt(np.clip(np.einsum("pdd->pd", cov), 0.0, None))  # [P, d]
    varying = sd > tol
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = cov / (sd[:, :, None] * sd[:, None, :])
    d = x.shape[2]
    pair = varying[:, :, None] & varying[:, None, :] & ~np.eye(d, dtype=bool)[None]
    npair = pair.sum((1, 2))
    tot = np.where(pair, corr, 0.0).sum((1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(npair > 0, tot / np.maximum(npair, 1), np.nan)


def collinearity_pooled(points, mask=None) -> float:
    """:func:`collinearity` over every valid vector of every pool together (one number)."""
    x, mk = _points(points, mask)
    flat = x[mk]  # [M, d]
    return float(collinearity(flat[None], None)[0]) if flat.shape[0] else float("nan")


def non_dominated(points, mask, eps: float = 0.0) -> np.ndarray:
    """``[P, n]`` bool: masked vectors no other masked vector of the same pool dominates (higher is
    better on every axis). b dominates a when ``b_j >= a_j - eps`` for every objective and
    ``b_j > a_j + eps`` for one; equal vectors never dominate each other. The one Pareto kernel
    behind :func:`pareto_front_size` (eps 0) and the reference's ``pareto_fraction`` (eps 1e-12);
    pools are compared in chunks so memory stays bounded."""
    x = np.asarray(points, dtype=np.float64)
    mk = np.asarray(mask, dtype=bool)
    P, n, d = x.shape
    out = np.zeros((P, n), dtype=bool)
    step = max(1, (1 << 24) // max(1, n * n * d))
    for start in range(0, P, step):
        sl = slice(start, min(P, start + step))
        xi, xj = x[sl, :, None, :], x[sl, None, :, :]
        dom = (xj >= xi - eps).all(-1) & (xj > xi + eps).any(-1) & mk[sl, None, :]  # [c, i, j]: j dominates i
        out[sl] = mk[sl] & ~dom.any(-1)
    return out


def pareto_front_size(points, mask=None) -> np.ndarray:
    """Number of distinct non-dominated valid vectors in each pool (higher is better on every axis).

    ``points [P, n, d]``, ``mask [P, n]`` -> ``[P]`` int64 (0 for a pool with no valid vector).
    """
    x, mk = _points(points, mask)
    n = x.shape[1]
    eq = (x[:, :, None, :] == x[:, None, :, :]).all(-1)  # [P, i, j]: equal vectors
    first = ~(eq & mk[:, None, :] & np.tril(np.ones((n, n), dtype=bool), -1)[None]).any(2)  # no earlier valid duplicate
    return (non_dominated(x, mk) & first).sum(1).astype(np.int64)


# ---------------------------------------------------------------------------------------------
# bootstrap and fixed weightings
# ---------------------------------------------------------------------------------------------


def bootstrap_ci(
    values, num_resamples: int = 1000, level: float = 0.95, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval of the mean over prompts, NaN-aware.

    ``values [M, P]`` (M statistics, P prompts; NaN = undefined for that prompt) ->
    ``(low [M], high [M])``. All statistics share the same resamples.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 1:
        v = v[None]
    M, P = v.shape
    if num_resamples <= 0 or P == 0:
        nan = np.full(M, np.nan)
        return nan, nan.copy()
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, P, size=(num_resamples, P))
    counts = np.bincount((idx + np.arange(num_resamples)[:, None] * P).ravel(), minlength=num_resamples * P)
    counts = counts.reshape(num_resamples, P).astype(np.float64)
    ok = np.isfinite(v)
    num = counts @ np.where(ok, v, 0.0).T  # [B, M]
    den = counts @ ok.T.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = num / den
    a = (1.0 - level) / 2.0
    low = np.full(M, np.nan)
    high = np.full(M, np.nan)
    for i in range(M):  # a few dozen statistics
        col = means[:, i]
        col = col[np.isfinite(col)]
        if col.size:
            low[i], high[i] = np.quantile(col, [a, 1.0 - a])
    return low, high


def fixed_weights(
    d: int, num_weightings: int = FIXED_NUM_WEIGHTINGS, weight_alpha: float = 1.0, weight_seed: int = FIXED_WEIGHT_SEED
) -> np.ndarray:
    """:func:`vpo.core.fixed_weights` as a ``[num_weightings, d]`` numpy array (same draws for every
    method, and for the trainer's logged pool set score)."""
    from vpo.core.weights import fixed_weights as core_fixed_weights

    return core_fixed_weights(int(d), int(num_weightings), float(weight_alpha), int(weight_seed)).numpy()


# ---------------------------------------------------------------------------------------------
# everything at once
# ---------------------------------------------------------------------------------------------


def default_ks(max_budget: int) -> tuple[int, ...]:
    """(1, 3, 5, 10, 30) cut to ``max_budget`` (answer slots of the smallest pool), plus it."""
    ks = [k for k in DEFAULT_KS if k <= max_budget]
    if max_budget not in ks:
        ks.append(int(max_budget))
    return tuple(ks)


def ci_summary(per_prompt: np.ndarray, low: float, high: float) -> dict:
    vals = per_prompt[np.isfinite(per_prompt)]
    return {
        "mean": float(vals.mean()) if vals.size else float("nan"),
        "ci_low": float(low),
        "ci_high": float(high),
        "num_prompts": int(vals.size),
    }


def evaluate(
    rewards,
    valid=None,
    prompt_index=None,
    *,
    target_weights=None,
    num_tokens=None,
    prompt_ids: Sequence[str] | None = None,
    config: EvalConfig | None = None,
    **overrides,
) -> dict:
    """Every metric of this module for one pool set; JSON-serialisable result.

    ``rewards [N, m, d]``, ``valid [N, m]``, ``prompt_index [N]`` (0..P-1), ``target_weights [d]``
    (w*, default uniform), ``num_tokens [N]`` (completion tokens per rollout, optional).
    ``config`` (an :class:`EvalConfig`) or its fields as keyword overrides.

    Returns ``{"config", "shape", "metrics", "per_prompt"}``; curve metrics (indexed by ``ks``) hold
    ``{"k", "mean", "ci_low", "ci_high"}`` lists, scalar metrics ``{"mean", "ci_low", "ci_high",
    "num_prompts"}``.
    """
    cfg = config or EvalConfig()
    if overrides:
        cfg = EvalConfig(**{**asdict(cfg), **overrides})
    g = group_by_prompt(rewards, valid, prompt_index, num_tokens)
    P, R, m, d = g.shape
    ids = _prompt_ids(prompt_ids, P)
    w_star = _target_weights(target_weights, d)
    slots = g.num_slots
    ks = cfg.ks if cfg.ks is not None else default_ks(int(slots.min()))
    ks_arr = check_ks(ks, slots, "answer slots (rollouts x m)", ids)

    s = scalarize(g.rewards, g.valid, w_star, cfg.invalid_score)  # [P, R, m]
    s = np.where(g.present[..., None], s, -np.inf)
    W = fixed_weights(d, cfg.num_weightings, cfg.weight_alpha, cfg.weight_seed)  # [K, d]
    sw = scalarize(g.rewards, g.valid, W, cfg.invalid_score)  # [P, R, m, K]
    passes = g.valid & (g.rewards >= cfg.pass_threshold).all(-1)  # [P, R, m]

    per_seed, curves = _curves(g, s, sw, passes, ks_arr, cfg)
    scalars = _scalars(g, s, sw, passes, cfg.invalid_score)
    metrics = _with_intervals(curves, scalars, ks_arr, cfg)
    metrics["best_at_k"]["seed_means"] = per_seed.mean(1).tolist()  # [seeds][ks]
    metrics["best_at_k"]["seed_std"] = per_seed.mean(1).std(0).tolist()
    q = -(-ks_arr // m)
    metrics["tokens_at_k"] = {"k": ks_arr.tolist(), "mean": (q * metrics["tokens_per_rollout"]["mean"]).tolist()}
    metrics["collinearity_pooled"] = collinearity_pooled(*_answer_points(g))
    metrics["objective_means"] = _objective_means(g).tolist()
    out = {
        "config": {**asdict(cfg), "ks": ks_arr.tolist(), "seeds": list(cfg.seeds)},
        "shape": _shape(g),
        "target_weights": w_star.tolist(),
        "metrics": metrics,
    }
    out = jsonable(out)
    if cfg.per_prompt:
        out["per_prompt"] = _per_prompt(ids, curves, scalars)
    return out


def _prompt_ids(prompt_ids: Sequence[str] | None, P: int) -> list[str]:
    """The prompts' names for the report and error messages: the given ids, or "0".."P-1"."""
    ids = list(prompt_ids) if prompt_ids is not None else [str(i) for i in range(P)]
    if len(ids) != P:
        raise MetricsError(f"{len(ids)} prompt ids for {P} prompts")
    return ids


def _target_weights(target_weights, d: int) -> np.ndarray:
    """w* as a ``[d]`` float64 array (uniform when not given), checked against the rewards' d."""
    w_star = np.full(d, 1.0 / d) if target_weights is None else np.asarray(target_weights, dtype=np.float64).reshape(-1)
    if w_star.shape != (d,):
        raise MetricsError(
            f"target weights w* have {w_star.shape[0]} entries but the rewards have d={d} objectives; "
            "the pool and the task disagree on the objectives"
        )
    return w_star


def _curves(
    g: Grouped, s: np.ndarray, sw: np.ndarray, passes: np.ndarray, ks_arr: np.ndarray, cfg: EvalConfig
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The metrics indexed by k, each ``[P, len(ks)]``: matched-budget best@k (averaged over the eval
    seeds, and its exact expectation), unbiased best@k and pass@k over the n = R*m answer slots, and
    E_w[best@k]. Also returns the matched best@k of every seed, ``[seeds, P, len(ks)]``."""
    per_seed, per_seed_ew = _matched_per_seed(g, s, sw, ks_arr, cfg.seeds)
    exact = matched_best_at_k_exact(np.where(g.present[..., None], s, cfg.invalid_score), g.present, ks_arr)
    flat_s = _compact(s, g.present)  # [P, R*m], present rollouts first
    unbiased = best_at_k_unbiased(flat_s, ks_arr, g.num_slots)
    pak = pass_at_k(g.num_slots, passes.sum((1, 2)), ks_arr)
    curves = {
        "best_at_k": per_seed.mean(0),
        "best_at_k_exact": exact,
        "best_at_k_unbiased": unbiased,
        "pass_at_k": pak,
        "ew_best_at_k": per_seed_ew.mean(0),
    }
    return per_seed, curves


def _matched_per_seed(
    g: Grouped, s: np.ndarray, sw: np.ndarray, ks_arr: np.ndarray, seeds: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Matched-budget best@k under w* and E_w[best@k], one random rollout order per seed (both
    metrics share it): ``[seeds, P, len(ks)]`` each."""
    P = g.present.shape[0]
    per_seed = np.empty((len(seeds), P, ks_arr.size))
    per_seed_ew = np.empty((len(seeds), P, ks_arr.size))
    for i, seed in enumerate(seeds):
        order = rollout_order(g.present, np.random.default_rng(seed))
        per_seed[i] = matched_best_at_k(s, g.present, ks_arr, order=order)
        per_seed_ew[i] = matched_best_at_k(sw, g.present, ks_arr, order=order).mean(-1)
    return per_seed, per_seed_ew


def _scalars(g: Grouped, s: np.ndarray, sw: np.ndarray, passes: np.ndarray, invalid_score: float) -> dict:
    """The per-prompt scalar metrics, each ``[P]``, in report order: first answer, E_w[best] over
    the whole pool, pool geometry, compute."""
    m = g.shape[2]
    pass1, reward1 = _first_answer(g, s, passes, invalid_score)
    div, rho, front = _geometry(*_answer_points(g))
    tok_roll = _tokens_per_rollout(g)
    return {
        "pass_at_1": pass1,
        "reward_at_1": reward1,
        "ew_best_pool": _ew_best_pool(g, sw),
        "diversity": div,
        "collinearity": rho,
        "pareto_front_size": front,
        "tokens_per_rollout": tok_roll,
        "tokens_per_answer": tok_roll / m,
        "valid_answer_frac": g.valid.sum((1, 2)) / g.num_slots,
        "answers_per_rollout": g.valid.sum((1, 2)) / g.num_rollouts,
    }


def _first_answer(g: Grouped, s: np.ndarray, passes: np.ndarray, invalid_score: float) -> tuple[np.ndarray, np.ndarray]:
    """pass@1 and reward@1: each rollout's first answer slot, averaged over the prompt's rollouts."""
    first_valid = g.valid[:, :, 0]
    pass1 = (passes[:, :, 0] & g.present).sum(1) / g.num_rollouts
    reward1 = np.where(g.present, np.where(first_valid, s[:, :, 0], invalid_score), 0.0).sum(1) / g.num_rollouts
    return pass1, reward1


def _ew_best_pool(g: Grouped, sw: np.ndarray) -> np.ndarray:
    """E_w[best over the whole pool]: the best present slot per weighting, averaged over weightings."""
    P, R, m, d = g.shape
    ew_pool = np.where(np.isfinite(sw), sw, -np.inf).reshape(P, R * m, -1)
    return np.where(g.present.repeat(m, 1)[..., None], ew_pool, -np.inf).max(1).mean(-1)


def _answer_points(g: Grouped) -> tuple[np.ndarray, np.ndarray]:
    """Every answer slot's reward vector ``[P, R*m, d]`` and whether it is a valid answer ``[P, R*m]``."""
    P, R, m, d = g.shape
    return g.rewards.reshape(P, R * m, d), g.valid.reshape(P, R * m)


def _geometry(pts: np.ndarray, mk: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reward-space diversity, collinearity and Pareto front size of each prompt's valid answers."""
    div = reward_space_diversity(pts, mk)
    rho = collinearity(pts, mk)
    front = pareto_front_size(pts, mk).astype(np.float64)
    return div, rho, front


def _tokens_per_rollout(g: Grouped) -> np.ndarray:
    """Mean completion tokens over the prompt's rollouts with a known count (NaN if none is known)."""
    tok_known = g.present & np.isfinite(g.num_tokens)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(tok_known, g.num_tokens, 0.0).sum(1) / tok_known.sum(1)


def _objective_means(g: Grouped) -> np.ndarray:
    """``[d]`` mean of each reward component over all valid answers of all prompts."""
    return (g.rewards * g.valid[..., None]).sum((0, 1, 2)) / max(int(g.valid.sum()), 1)


def _with_intervals(curves: dict, scalars: dict, ks_arr: np.ndarray, cfg: EvalConfig) -> dict:
    """The report's ``metrics``: each metric's mean over prompts with its bootstrap interval (one
    shared set of resamples for all of them); curves as ``{"k", "mean", "ci_low", "ci_high"}``
    lists, scalars as :func:`ci_summary` dicts."""
    rows = [c[:, j] for c in curves.values() for j in range(ks_arr.size)] + list(scalars.values())
    low, high = bootstrap_ci(np.stack(rows), cfg.bootstrap, cfg.ci_level, cfg.bootstrap_seed)
    metrics: dict = {}
    r_i = 0
    for name, c in curves.items():
        lo, hi = low[r_i : r_i + ks_arr.size], high[r_i : r_i + ks_arr.size]
        r_i += ks_arr.size
        metrics[name] = {
            "k": ks_arr.tolist(),
            "mean": c.mean(0).tolist(),
            "ci_low": lo.tolist(),
            "ci_high": hi.tolist(),
        }
    for name, v in scalars.items():
        metrics[name] = ci_summary(v, low[r_i], high[r_i])
        r_i += 1
    return metrics


def _shape(g: Grouped) -> dict:
    """The report's ``shape``: sizes of the pool set."""
    P, R, m, d = g.shape
    return {
        "num_prompts": P,
        "max_rollouts_per_prompt": R,
        "min_rollouts_per_prompt": int(g.num_rollouts.min()),
        "m": m,
        "d": d,
        "num_rollouts": int(g.num_rollouts.sum()),
        "nonfinite_answers": g.nonfinite,
    }


def _per_prompt(ids: list[str], curves: dict, scalars: dict) -> dict:
    """The report's ``per_prompt``: the prompt ids and every metric's per-prompt values."""
    pp: dict = {"prompt_ids": ids}
    for name, arr in {**curves, **scalars}.items():
        pp[name] = jsonable(arr)  # arrays convert in C, not element by element
    return pp


def _compact(s: np.ndarray, present: np.ndarray) -> np.ndarray:
    """``[P, R, m]`` slot scores -> ``[P, R*m]`` with the present rollouts' slots first."""
    P, R, m = s.shape
    order = np.argsort(~present, axis=1, kind="stable")
    return np.take_along_axis(s, order[..., None], axis=1).reshape(P, R * m)


def jsonable(x):
    """NaN/inf -> None so the result is strict JSON; numpy arrays become (nested) lists."""
    if isinstance(x, np.ndarray):
        if x.dtype.kind == "f" and not np.isfinite(x).all():
            return np.where(np.isfinite(x), x, None).tolist()
        return x.tolist()
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    return x
