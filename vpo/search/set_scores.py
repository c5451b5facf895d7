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


def set_objective_scores(pool, names=None, num_weightings: int = 64, weight_alpha: float = 1.0,
                         invalid_score: float = 0.0, bootstrap: int = 1000, ci_level: float = 0.95,
                         bootstrap_seed: int = 0) -> dict:
    """``{"config": ..., "scores": {name: {"mean", "ci_low", "ci_high", "per_prompt"}}}`` for ``names``
    (default: every registered set objective). Unknown names raise ``ValueError`` naming the known ones."""
    import torch

    from vpo.core.set_objectives import SET_OBJECTIVES
    from vpo.core.weights import fixed_weights

    known = sorted(SET_OBJECTIVES)
    names = known if names is None else list(names)
    unknown = [n for n in names if n not in SET_OBJECTIVES]
    if unknown:
        raise ValueError(f"unknown set objective(s) {', '.join(unknown)}; registered: {', '.join(known)}")
    valid = torch.as_tensor(np.asarray(pool.valid, dtype=bool))
    rewards = torch.as_tensor(np.nan_to_num(np.asarray(pool.rewards, dtype=np.float64)))
    rewards = torch.where(valid[..., None], rewards, torch.zeros_like(rewards))
    index = torch.as_tensor(np.asarray(pool.prompt_index, dtype=np.int64))
    P, d = len(pool.prompt_ids), rewards.shape[-1]
    target = torch.as_tensor(np.asarray(pool.target_weights, dtype=np.float64))
    w = fixed_weights(d, num_weightings, weight_alpha).to(torch.float64)
    weights = w.unsqueeze(0).expand(P, *w.shape)
    rng = np.random.default_rng(bootstrap_seed)
    draws = rng.integers(0, P, size=(bootstrap, P)) if bootstrap > 0 else None
    a = (1.0 - ci_level) / 2
    counts = np.bincount(index.numpy(), minlength=P)
    out = {}
    for name in names:
        obj = SET_OBJECTIVES[name]
        s = obj.fn(rewards, valid, weights if obj.uses_weightings else None, index, target)
        s = torch.where(valid.any(1), s.to(torch.float64), torch.full_like(s, invalid_score, dtype=torch.float64))
        per_prompt = np.bincount(index.numpy(), weights=s.numpy(), minlength=P) / np.maximum(counts, 1)
        per_prompt = per_prompt[counts > 0]
        mean = float(per_prompt.mean()) if len(per_prompt) else float("nan")
        lo = hi = mean
        if draws is not None and len(per_prompt) == P:
            boot = per_prompt[draws].mean(1)
            lo, hi = float(np.quantile(boot, a)), float(np.quantile(boot, 1 - a))
        out[name] = {"mean": mean, "ci_low": lo, "ci_high": hi, "summary": obj.summary}
    return {"config": {"num_weightings": num_weightings, "weight_alpha": weight_alpha, "invalid_score": invalid_score,
                       "bootstrap": bootstrap, "ci_level": ci_level}, "scores": out}


def markdown_section(results: dict) -> list[str]:
    """The report's "Set objectives" table (results without ``set_objectives`` show "–")."""
    have = [r["set_objectives"] for r in results.values() if r.get("set_objectives")]
    if not have:
        return []
    names = sorted({n for h in have for n in h["scores"]})
    cfg = have[0]["config"]
    lines = ["", "## Set objectives (each rollout's answer set, before group normalisation)", "",
             f"Mean over prompts of the mean over their rollouts [{cfg['ci_level']:.0%} bootstrap over prompts]; weightings: "
             f"{cfg['num_weightings']} fixed Dir({cfg['weight_alpha']:g}) draws; a rollout without a valid answer scores "
             f"{cfg['invalid_score']:g}.", "",
             "| method | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1)]
    for method, r in results.items():
        sc = (r.get("set_objectives") or {}).get("scores", {})
        cells = [f"{sc[n]['mean']:.3f} [{sc[n]['ci_low']:.3f}, {sc[n]['ci_high']:.3f}]" if n in sc else "–" for n in names]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return lines
