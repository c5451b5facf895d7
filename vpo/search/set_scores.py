"""Registered set objectives as diagnostics of a pool: how each rollout's answer set scores.

A set objective (:mod:`vpo.core.set_objectives`: ``vpo``, ``multi_rlvr``, ``union_coverage`` and any
registered by the user) maps a rollout's m answers to one score, which training then normalises
within the group. ``vpo eval`` reports the un-normalised score itself, averaged over each prompt's
rollouts and then over prompts, with an interval over prompts: what each objective would reward this
policy's answer sets for. Objectives that use weightings get the fixed Dir(alpha) set of
:func:`vpo.core.fixed_weights` (the set behind E_w[best@k] and the trainer's ``pool_set_score`` log),
the same for every rollout, so scores compare across methods and runs. A rollout without a valid
answer scores ``invalid_score``.
"""

from __future__ import annotations

import numpy as np


def set_objective_scores(
    pool,
    names=None,
    num_weightings: int = 64,
    weight_alpha: float = 1.0,
    invalid_score: float = 0.0,
    bootstrap: int = 1000,
    ci_level: float = 0.95,
    bootstrap_seed: int = 0,
) -> dict:
    """``{"config": ..., "scores": {name: {"mean", "ci_low", "ci_high", "summary"}}}`` for ``names``
    (default: every registered set objective); the intervals are :func:`vpo.search.metrics.bootstrap_ci`
    over prompts (NaN with ``bootstrap=0``). Unknown names raise ``ValueError`` naming the known ones."""
    import torch

    from vpo.core.set_objectives import SET_OBJECTIVES
    from vpo.core.weights import fixed_weights
    from vpo.search.metrics import jsonable, bootstrap_ci

    known = sorted(SET_OBJECTIVES)
    names = known if names is None else list(names)
    unknown = [n for n in names if n not in SET_OBJECTIVES]
    if unknown:
        raise ValueError(f"unknown set objective(s) {', '.join(unknown)}; registered: {', '.join(known)}")
    r = np.asarray(pool.rewards, dtype=np.float64)
    v = np.asarray(pool.valid, dtype=bool) & np.isfinite(r).all(
        -1
    )  # a non-finite answer is invalid, as in every eval metric
    valid = torch.as_tensor(v)
    rewards = torch.as_tensor(np.where(v[..., None], r, 0.0))
    index = np.asarray(pool.prompt_index, dtype=np.int64)
    P, d = len(pool.prompt_ids), rewards.shape[-1]
    target = torch.as_tensor(np.asarray(pool.target_weights, dtype=np.float64))
    w = fixed_weights(d, num_weightings, weight_alpha).to(torch.float64)
    weights = w.unsqueeze(0).expand(P, *w.shape)
    counts = np.bincount(index, minlength=P)
    per_prompt = []  # [M, P]: each objective's mean over a prompt's rollouts (NaN for a prompt without any)
    for name in names:
        obj = SET_OBJECTIVES[name]
        s = obj.fn(rewards, valid, weights if obj.uses_weightings else None, torch.as_tensor(index), target)
        s = torch.where(valid.any(1), s.to(torch.float64), torch.full_like(s, invalid_score, dtype=torch.float64))
        with np.errstate(invalid="ignore"):
            per_prompt.append(np.bincount(index, weights=s.numpy(), minlength=P) / np.where(counts > 0, counts, np.nan))
    values = np.stack(per_prompt)
    low, high = bootstrap_ci(values, bootstrap, ci_level, bootstrap_seed)
    with np.errstate(invalid="ignore"):
        means = np.nanmean(values, axis=1)
    out = {
        name: {
            "mean": float(means[i]),
            "ci_low": float(low[i]),
            "ci_high": float(high[i]),
            "summary": SET_OBJECTIVES[name].summary,
        }
        for i, name in enumerate(names)
    }
    return jsonable(
        {
            "config": {
                "num_weightings": num_weightings,
                "weight_alpha": weight_alpha,
                "invalid_score": invalid_score,
                "bootstrap": bootstrap,
                "ci_level": ci_level,
            },
            "scores": out,
        }
    )
