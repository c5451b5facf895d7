"""From the demo's evaluation pools to its numbers: per-problem statistics per run, then per method with
intervals that include replicate-to-replicate variance.

For every run (a method trained with one seed, or the warm start) and every evaluated problem (a maze,
or a program problem): best@k under w*, under each of the task's named deployment preferences and
E_w[best@k] over fixed Dir(1) weightings; completion rate; reward-space diversity over all answers
(the paper's definition) and over completed answers only; Pareto coverage at each k (fraction of the
problem's exact Pareto-front trade-offs the first k answers hit); distinct completed answers; union
coverage Σ_j max_i r_ij; and what the domain adds (:meth:`vpo.demo.domains.Domain.extra_stats`:
pass@k for programs). What the exact front is and when two answers are the same is the domain's
(:mod:`vpo.demo.domains`): for programs the front is the all-pass vector, so Pareto coverage is
pass@k, "completed" means passing at least one test and distinct answers are distinct programs.

Intervals (``DemoConfig.interval``): 'replicate_t', :func:`vpo.search.intervals.replicate_interval`
over the seeds as replicates crossed with the problems (its coverage is checked by simulation); or
'two_level_bootstrap', :func:`two_level_interval`, which resamples the seeds, then the problems (one
problem resample shared by every seed of a replicate, since all seeds are evaluated on the same
problems), the interval of the runs made before the setting existed (it undercovers with 3 seeds).
Paired differences (VPO minus another method) pair seed s with seed s and each problem with itself;
with one warm start per replicate the warm start rows have a run per seed and pair the same way.
The report also gives every seed's own value.
"""

from __future__ import annotations

import collections
import functools
import json
import math
import warnings
from pathlib import Path

import numpy as np

from vpo.demo.config import DemoConfig
from vpo.demo.domains import DEFAULT_DOMAIN, domain_named
from vpo.demo.stages import eval_entries, make_task
from vpo.errors import UserError

SCALARS = (
    "reward_at_1",
    "pass_at_1",
    "diversity",
    "tokens_per_rollout",
    "tokens_per_answer",
    "completion_rate",
    "completed_diversity",
    "distinct_routes",
    "union_coverage",
    "collinearity",
    "menu_share",
)
CURVES = ("best_at_k", "ew_best_at_k", "pareto_coverage")
"""Curves every domain reports; a domain adds its own (:attr:`vpo.demo.domains.Domain.extra_curves`)."""


class DemoDataError(UserError, ValueError):
    """Evaluations that cannot be compared (different mazes, orders or shapes)."""


# ---------------------------------------------------------------------------------------------
# per run
# ---------------------------------------------------------------------------------------------


def answer_keys(domain: str, examples: list[dict], pool, done: np.ndarray) -> np.ndarray:
    """``[P, R, m]`` what makes two completed answers the same (None for the others), as the domain
    says (:meth:`vpo.demo.domains.Domain.answer_key`: a maze route's executed moves, a program's
    canonical AST text)."""
    P, R, m = done.shape
    keys = np.empty((P, R, m), dtype=object)
    key_of = domain_named(domain).answer_key(examples)
    pos = np.zeros(P, dtype=np.int64)
    for i, p in enumerate(pool.prompt_index):
        r = pos[p]
        pos[p] += 1
        for j in range(m):
            text = pool.answers[i][j] if pool.answers is not None and j < len(pool.answers[i]) else ""
            keys[p, r, j] = key_of(p, text) if done[p, r, j] else None
    return keys


def answer_set(answers) -> frozenset:
    """What a rollout answered, as a set of texts (case and spacing ignored; an empty answer counts)."""
    return frozenset(" ".join(str(a).lower().split()) for a in answers)


def menu_share(pool, num_problems: int) -> np.ndarray:
    """``[P]`` per problem, the share of its rollouts whose answer set (:func:`answer_set`) is the
    run's most common set across all problems: how much of a pool is a fixed menu that ignores the
    request (1: every rollout of every problem wrote the same answers). NaN when the pool kept no
    answer texts."""
    out = np.full(num_problems, np.nan)
    if pool.answers is None:
        return out
    sets = [answer_set(a) for a in pool.answers]
    counts = collections.Counter(sets)
    modal = min(counts.items(), key=lambda kv: (-kv[1], sorted(kv[0])))[0]  # ties: the first set in text order
    hit = np.zeros(num_problems)
    n = np.zeros(num_problems)
    for p, s in zip(pool.prompt_index, sets):
        n[p] += 1
        hit[p] += s == modal
    return np.divide(hit, n, out=out, where=n > 0)


def preference_ceilings(fronts: list[np.ndarray], prefs: dict[str, np.ndarray]) -> dict[str, float]:
    """Mean over mazes of the best single route's score under each weighting (exact): no best@k under
    that weighting can exceed it. A linear score with non-negative weights peaks on the Pareto front."""
    return {name: float(np.mean([float((f @ w).max()) for f in fronts])) for name, w in prefs.items()}


def run_stats(
    report: dict,
    pool,
    examples: list[dict],
    fronts: list[np.ndarray],
    prefs: dict[str, np.ndarray],
    ks: list[int],
    eval_seeds: int,
    domain: str = DEFAULT_DOMAIN,
) -> dict:
    """Per-problem arrays of one evaluated run: scalars ``[P]`` and curves ``[P, len(ks)]``, plus the
    curves the domain (a :data:`~vpo.demo.domains.DOMAINS` name) adds, e.g. the prog domain's
    ``pass_at_k`` (some answer of the matched-budget sub-pool passes every test)."""
    from vpo.search.metrics import group_by_prompt, matched_best_at_k, scalarize
    from vpo.search.poolstats import (
        completed_diversity,
        completed_mask,
        distinct_count,
        matched_prefix,
        pareto_coverage,
        pool_union_coverage,
    )

    ids = [ex["id"] for ex in examples]
    if list(pool.prompt_ids) != ids or list(report["per_prompt"]["prompt_ids"]) != ids:
        raise DemoDataError(
            f"run {pool.meta.get('name', '?')}: its pool lists other mazes, or the same mazes in another order, "
            "than the evaluation split; delete its eval directory and rerun the demo"
        )
    g = group_by_prompt(pool.rewards, pool.valid, pool.prompt_index, num_prompts=len(ids))
    P, R, m, d = g.shape
    comp_idx = list(pool.objectives).index("completion") if "completion" in pool.objectives else None
    done = completed_mask(g.rewards, g.valid, comp_idx)  # [P, R, m]; prog (no completion component): >= 1 test passed
    keys = answer_keys(domain, examples, pool, done)
    pts = g.rewards.reshape(P, R * m, d)
    out: dict[str, np.ndarray] = {}
    pp = report["per_prompt"]
    rk = report["metrics"]["best_at_k"]["k"]
    for name in ("best_at_k", "ew_best_at_k"):
        arr = np.asarray(pp[name], dtype=float)
        out[name] = arr[:, [rk.index(k) for k in ks]]
    for name in ("reward_at_1", "pass_at_1", "diversity", "tokens_per_rollout", "tokens_per_answer", "collinearity"):
        out[name] = np.asarray(pp[name], dtype=float)
    flat_done = done.reshape(P, R * m)
    out["completion_rate"] = flat_done.sum(1) / (g.num_rollouts * m)
    out["completed_diversity"] = completed_diversity(pts, flat_done)
    out["distinct_routes"] = distinct_count(keys.reshape(P, R * m).tolist(), flat_done)
    out["union_coverage"] = pool_union_coverage(pts, g.valid.reshape(P, R * m))
    out["menu_share"] = menu_share(pool, P)
    seeds = list(range(eval_seeds))
    out["pareto_coverage"] = matched_prefix(
        lambda keep: pareto_coverage(pts, (keep & g.valid).reshape(P, R * m), fronts), g.present, m, ks, seeds
    )
    for name, w in prefs.items():
        s = np.where(g.present[..., None], scalarize(g.rewards, g.valid, w), -np.inf)
        draws = [matched_best_at_k(s, g.present, ks, rng=seed) for seed in seeds]
        out[f"pref_{name}"] = np.mean(draws, axis=0)
    out.update(domain_named(domain).extra_stats(g, ks, seeds))
    return out


# ---------------------------------------------------------------------------------------------
# intervals
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def _resample_counts(num_resamples: int, S: int, P: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """How often each seed ``[B, S]`` and each maze ``[B, P]`` is drawn in each replicate."""
    rng = np.random.default_rng(seed)
    si = rng.integers(0, S, size=(num_resamples, S))
    pi = rng.integers(0, P, size=(num_resamples, P))
    rows = np.arange(num_resamples)[:, None]
    C = np.zeros((num_resamples, S))
    D = np.zeros((num_resamples, P))
    np.add.at(C, (rows, si), 1.0)
    np.add.at(D, (rows, pi), 1.0)
    return C, D


def two_level_interval(
    values: np.ndarray, num_resamples: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile interval of the grand mean of ``values [S, P]`` (seeds x mazes): each replicate
    resamples the S seeds with replacement, then the P mazes with replacement (one maze draw shared
    by the replicate's seeds). NaN entries are ignored. ``(nan, nan)`` with no resamples.

    A replicate's mean is ``cᵀ V d / cᵀ M d`` with ``c``, ``d`` the seed and maze draw counts and
    ``M`` the finite mask, so all replicates are two matrix products (the draws are cached: every
    statistic of a report shares them)."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 2:
        raise ValueError(f"values must be [seeds, mazes], got shape {v.shape}")
    if num_resamples <= 0:
        return float("nan"), float("nan")
    S, P = v.shape
    C, D = _resample_counts(int(num_resamples), S, P, int(seed))
    finite = np.isfinite(v)
    num = ((C @ np.where(finite, v, 0.0)) * D).sum(1)
    den = ((C @ finite.astype(float)) * D).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        stats = num / den  # an all-NaN replicate is NaN, ignored below
    a = (1 - level) / 2
    return float(np.nanquantile(stats, a)), float(np.nanquantile(stats, 1 - a))


SIGNED = ("collinearity",)
"""Per-method statistics that can be negative (ρ̄ is a correlation); every other one is >= 0, and its
interval is cut at 0 (:func:`summarize`'s ``lower``)."""


def summarize(
    values: np.ndarray,
    num_resamples: int,
    seed: int = 0,
    interval: str = "two_level_bootstrap",
    lower: float | None = None,
) -> dict:
    """``values [S, P]`` -> mean, per-seed means, SE over seeds, the interval, and the maze-level
    SE of the seed-averaged values (conditional on the trained models). ``interval``:
    'replicate_t' (:func:`vpo.search.intervals.replicate_interval`) or 'two_level_bootstrap'
    (:func:`two_level_interval` with ``num_resamples``)."""
    v = np.asarray(values, dtype=float)
    with warnings.catch_warnings():  # a statistic undefined for every problem of a run (ρ̄ of a collapsed
        # pool) is nan, said by "defined" below, not by numpy's "Mean of empty slice"
        warnings.filterwarnings("ignore", message="Mean of empty slice", category=RuntimeWarning)
        per_seed = np.nanmean(v, axis=1)
        maze_mean = np.nanmean(v, axis=0)
        overall = float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")
    S = v.shape[0]
    maze_mean = maze_mean[np.isfinite(maze_mean)]
    if interval == "replicate_t":
        from vpo.search.intervals import replicate_interval

        lo, hi = (replicate_interval(v)[k] for k in ("ci_low", "ci_high"))
    else:
        lo, hi = two_level_interval(v, num_resamples, seed=seed)
    if lower is not None:
        # a statistic that cannot go below ``lower`` (a rate, a best@k): the interval is cut there, which
        # drops no value the statistic can take, so its coverage is unchanged
        lo, hi = (x if x is None or not np.isfinite(x) else max(float(x), lower) for x in (lo, hi))
    out = {
        "mean": overall,
        "per_seed": per_seed.tolist(),
        "se_seeds": float(per_seed.std(ddof=1) / math.sqrt(S)) if S > 1 else float("nan"),
        "ci_low": lo,
        "ci_high": hi,
        "se_mazes_given_models": float(maze_mean.std(ddof=1) / math.sqrt(len(maze_mean)))
        if len(maze_mean) > 1
        else float("nan"),
    }
    if not np.isfinite(v).all():
        # a statistic some problems leave undefined (ρ̄ needs two valid answers that vary): how many
        # (seed, problem) values the mean is over, of how many
        out["defined"] = [int(np.isfinite(v).sum()), int(v.size)]
    return out


def paired(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a [S, P]`` minus ``b [S', P]`` seed by seed (a one-seed ``b``, the warm start, is broadcast)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape[1] != b.shape[1]:
        raise DemoDataError(f"paired difference over different maze counts: {a.shape[1]} vs {b.shape[1]}")
    if b.shape[0] not in (1, a.shape[0]):
        raise DemoDataError(f"paired difference needs matching seeds: {a.shape[0]} vs {b.shape[0]}")
    return a - b


# ---------------------------------------------------------------------------------------------
# the whole demo
# ---------------------------------------------------------------------------------------------


def _stack(per_run: list[dict], name: str) -> np.ndarray:
    return np.stack([r[name] for r in per_run])  # [S, P] or [S, P, K]


def aggregate_runs(
    cfg: DemoConfig,
    runs: dict[str, list[dict]],
    labels: dict[str, str],
    ms: dict[str, int],
    prefs: list[str],
    extra: dict | None = None,
) -> dict:
    """Methods' summaries and paired differences vs VPO from per-run statistics.

    ``runs[key]`` lists one :func:`run_stats` result per seed (one for the warm start); every run
    must cover the same mazes in the same order (checked by shape; the caller checks ids).
    """
    ks = list(cfg.ks)
    B = cfg.bootstrap
    shapes = {key: {r["best_at_k"].shape for r in rs} for key, rs in runs.items()}
    if len({s for ss in shapes.values() for s in ss}) != 1:
        raise DemoDataError(f"evaluations differ in shape (mazes x ks): {shapes}")
    first = next(iter(runs.values()))[0]
    curves = list(CURVES) + [c for c in cfg.domain_spec.extra_curves if c in first] + [f"pref_{p}" for p in prefs]
    rows: dict[str, dict] = {}
    for key, rs in runs.items():
        row = {"label": labels[key], "m": ms[key], "num_seeds": len(rs)}
        for name in SCALARS:
            low = None if name in SIGNED else 0.0
            row[name] = summarize(_stack(rs, name), B, interval=cfg.interval, lower=low)
        for name in curves:
            arr = _stack(rs, name)
            row[name] = {k: summarize(arr[:, :, i], B, interval=cfg.interval, lower=0.0) for i, k in enumerate(ks)}
        rows[key] = row
    diffs: dict[str, dict] = {}
    if "vpo" in runs:
        for other in (k for k in runs if k != "vpo"):
            d: dict = {}
            for name in curves:
                a, b = _stack(runs["vpo"], name), _stack(runs[other], name)
                d[name] = {
                    k: summarize(paired(a[:, :, i], b[:, :, i]), B, interval=cfg.interval) for i, k in enumerate(ks)
                }
            for name in ("completed_diversity", "completion_rate", "distinct_routes", "union_coverage", "diversity"):
                d[name] = summarize(
                    paired(_stack(runs["vpo"], name), _stack(runs[other], name)), B, interval=cfg.interval
                )
            diffs[other] = d
    return {"config": cfg.as_dict(), "methods": rows, "paired_vs_vpo": diffs, **(extra or {})}


def _load_run(out: Path, name: str):
    from vpo.search.pools import load_pool

    rep = json.loads((out / "eval" / name / "report.json").read_text())["results"][name]
    return rep, load_pool(out / "eval" / name / "pool")


def evaluation_examples(cfg: DemoConfig) -> tuple:
    """``(task, problems)`` the evaluation jobs ran on: the split, its size and the ``test_seed``."""
    task = make_task(cfg, evaluation=True)
    return task, task.load(cfg.split, n=cfg.eval_problems)


class StatsContext:
    """What :func:`run_stats` needs besides a run, computed once per demo configuration: the
    evaluation's problems, their exact fronts and the preferences scored (w* and, with
    ``all_preferences``, the task's named ones)."""

    def __init__(self, cfg: DemoConfig, all_preferences: bool = True) -> None:
        task, self.examples = evaluation_examples(cfg)
        self.cfg = cfg
        self.fronts = cfg.domain_spec.fronts(self.examples)
        named = task.preferences.items() if all_preferences else ()
        self.prefs = {"w*": np.full(task.d, 1.0 / task.d), **{k: np.asarray(v, dtype=float) for k, v in named}}

    def stats(self, out: Path, name: str) -> tuple[dict, int]:
        """``(run_stats of OUT/eval/NAME, its pool's m)``."""
        cfg = self.cfg
        rep, pool = _load_run(Path(out), name)
        st = run_stats(rep, pool, self.examples, self.fronts, self.prefs, list(cfg.ks), cfg.eval_seeds, cfg.domain)
        return st, pool.m


def collect(cfg: DemoConfig, out: Path) -> tuple[dict[str, list[dict]], dict[str, str], dict[str, int], dict]:
    """Per-run statistics of every evaluation of a finished demo directory."""
    ctx = StatsContext(cfg)
    examples, fronts, prefs = ctx.examples, ctx.fronts, ctx.prefs
    runs: dict[str, list[dict]] = {}
    labels: dict[str, str] = {}
    ms: dict[str, int] = {}
    for key, label, names in eval_entries(cfg):
        stats = []
        for n in names:
            st, ms[key] = ctx.stats(out, n)
            stats.append(st)
        runs[key], labels[key] = stats, label
    extra = {
        "ceilings": preference_ceilings(fronts, prefs),
        "preferences": {k: v.tolist() for k, v in prefs.items()},
        "front_size": float(np.mean([len(f) for f in fronts])),
        "num_mazes": len(examples),  # of any domain (domain_base.num_problems reads it)
    }
    return runs, labels, ms, extra
