"""Selection by an imperfect verifier: best@k when the search keeps what a selector prefers.

best@k on w* assumes the search can see the exact reward. A real one picks with a reward model or a
partial check. ``vpo eval --selector SPEC`` scores every answer with a selector, and for each k
draws the same matched answer budget as best@k (the same rollout orders, seed by seed), keeps the
answer the selector ranks first among the k, and reports:

* ``selected_best_at_k``: the **true** w*ᵀr of the kept answer (0 for an invalid one), and
* ``hit_rate``: how often the kept answer is a true best of the k (ties count as hits).

Selectors (``SPEC``):

* ``noisy:SIGMA``: w*ᵀr plus Gaussian noise of standard deviation SIGMA (seeded per eval seed);
* ``objectives:A,B``: w* restricted to the named objectives (renormalised): a partial check;
* ``module:function`` or ``path/to/file.py:function``: ``fn(rewards [N, m, d], valid [N, m],
  objectives) -> scores [N, m]`` (higher is preferred).

Invalid answers are never selected while a valid one is among the k. Values are means over the
prompts with a bootstrap interval over the prompts, as the other curves.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from vpo.errors import UserError

__all__ = ["parse_selector", "selected_best_at_k"]


def parse_selector(spec: str, objectives: Sequence[str]) -> tuple[str, Callable]:
    """``(name, fn)`` with ``fn(rewards [N, m, d], valid [N, m], target [d], rng) -> scores [N, m]``."""
    if not isinstance(spec, str) or ":" not in spec:
        raise UserError(f"--selector {spec!r}: use noisy:SIGMA, objectives:A,B or module:function")
    kind, _, arg = spec.partition(":")
    if kind == "noisy":
        try:
            sigma = float(arg)
        except ValueError:
            raise UserError(f"--selector {spec!r}: noisy takes a number, e.g. noisy:0.1") from None
        if not sigma >= 0:
            raise UserError(f"--selector {spec!r}: the noise must be >= 0")
        return spec, lambda r, v, w, rng: r @ w + rng.normal(0.0, sigma, size=r.shape[:2])
    if kind == "objectives":
        names = [n.strip() for n in arg.split(",") if n.strip()]
        unknown = [n for n in names if n not in objectives]
        if not names or unknown:
            raise UserError(f"--selector {spec!r}: objectives must be among {list(objectives)}")
        idx = [list(objectives).index(n) for n in names]

        def partial(r, v, w, rng):
            sub = np.zeros_like(w)
            sub[idx] = w[idx] if w[idx].sum() > 0 else 1.0
            return r @ (sub / sub.sum())

        return spec, partial
    from vpo.tasks.registry import load_factory

    fn = load_factory(spec)
    if not callable(fn):
        raise UserError(f"--selector {spec!r} names a {type(fn).__name__}, not a function")
    return spec, lambda r, v, w, rng: np.asarray(fn(r, v, list(objectives)), dtype=np.float64)


def selected_best_at_k(
    rewards,
    valid,
    prompt_index,
    selector: str,
    objectives: Sequence[str],
    ks: Sequence[int],
    *,
    target_weights=None,
    seeds: Sequence[int] = (0, 1, 2, 3, 4),
    invalid_score: float = 0.0,
    bootstrap: int = 1000,
    ci_level: float = 0.95,
    bootstrap_seed: int = 0,
) -> dict:
    """The kept answer's true w*ᵀr and the hit rate per k, under the matched-budget draws of best@k."""
    from vpo.search.at_k import check_ks, rollout_order, group_by_prompt, scalarize
    from vpo.search.metrics import jsonable, bootstrap_ci

    r = np.asarray(rewards, dtype=np.float64)
    v = np.asarray(valid, dtype=bool)
    d = r.shape[-1]
    w = np.full(d, 1.0 / d) if target_weights is None else np.asarray(target_weights, dtype=np.float64)
    name, fn = parse_selector(selector, objectives)
    g = group_by_prompt(r, v, prompt_index)
    P, R, m, _ = g.shape
    ks_arr = check_ks(ks, g.num_slots, "answer slots (rollouts x m)")
    true = np.where(g.present[..., None], scalarize(g.rewards, g.valid, w, invalid_score), -np.inf)  # [P, R, m]
    best_sel = np.zeros((len(seeds), P, ks_arr.size))
    hits = np.zeros_like(best_sel)
    flat_rows = np.nan_to_num(g.rewards, nan=0.0).reshape(P * R, m, d)
    for i, seed in enumerate(seeds):
        rng = np.random.default_rng(seed)
        sel = np.asarray(fn(flat_rows, g.valid.reshape(P * R, m), w, np.random.default_rng(10_000 + seed)))
        if sel.shape != (P * R, m):
            raise UserError(f"--selector {name!r} returned scores of shape {sel.shape}, expected {(P * R, m)}")
        sel = sel.reshape(P, R, m)
        # an invalid answer is preferred by no one while a valid one is there; an absent rollout never
        sel = np.where(g.valid, sel, -1e300)
        sel = np.where(g.present[..., None], sel, -np.inf)
        order = rollout_order(g.present, rng)
        rows = np.arange(P)[:, None]
        t_flat = true[rows, order].reshape(P, R * m)
        s_flat = sel[rows, order].reshape(P, R * m)
        for j, k in enumerate(ks_arr):
            pick = np.argmax(s_flat[:, :k], axis=1)
            kept = t_flat[np.arange(P), pick]
            best_sel[i, :, j] = kept
            hits[i, :, j] = kept >= t_flat[:, :k].max(1) - 1e-12
    per_prompt = best_sel.mean(0)
    hit = hits.mean(0)
    out = {"selector": name, "k": [int(k) for k in ks_arr]}
    for key, vals in (("selected_best_at_k", per_prompt), ("hit_rate", hit)):
        lo, hi = bootstrap_ci(vals.T, bootstrap, ci_level, bootstrap_seed)
        out[key] = {
            "k": out["k"],
            "mean": jsonable(vals.mean(0).tolist()),
            "ci_low": jsonable(np.asarray(lo).tolist()),
            "ci_high": jsonable(np.asarray(hi).tolist()),
        }
    return out
