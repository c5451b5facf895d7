"""Paired differences between methods evaluated on the same prompts: is this one better?

``vpo compare`` (and any report of several methods) adds, for the first method against each other,
the per-prompt difference of best@k, E_w[best@k] and pass@k at every k both report, and of the
scalar pool metrics, averaged over the prompts both evaluated (matched by prompt id), with a
bootstrap interval over those prompts (the same percentile bootstrap as every other interval of the
report). A difference whose interval excludes 0 is marked. Pools with different answer budgets per
prompt, or different m, are compared anyway, with a warning in the report: at a matched k the
budget is equal, but what each pool could reach beyond it is not.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

__all__ = ["paired_differences", "paired_replicates", "budget_warnings"]

CURVES = ("best_at_k", "ew_best_at_k", "pass_at_k")
SCALARS = ("diversity", "pareto_front_size", "reward_at_1")


def _by_prompt(res: dict) -> dict[str, int] | None:
    pp = res.get("per_prompt")
    if not pp or "prompt_ids" not in pp:
        return None
    return {str(p): i for i, p in enumerate(pp["prompt_ids"])}


def paired_differences(results: Mapping[str, dict]) -> dict | None:
    """The first method minus each other one, per shared prompt; None with fewer than two methods
    or without per-prompt values."""
    from vpo.search.metrics import bootstrap_ci

    names = list(results)
    if len(names) < 2:
        return None
    base_name = names[0]
    base = results[base_name]
    base_ids = _by_prompt(base)
    if base_ids is None:
        return None
    cfg = base["config"]
    out = {"baseline": base_name, "vs": {}}
    for other in names[1:]:
        res = results[other]
        ids = _by_prompt(res)
        if ids is None:
            continue
        shared = [p for p in base_ids if p in ids]
        if not shared:
            continue
        entry: dict = {"num_prompts": len(shared)}
        for name in CURVES:
            if name not in base["per_prompt"] or name not in res["per_prompt"]:
                continue
            kb = res["metrics"][name]["k"]
            ks = [k for k in base["metrics"][name]["k"] if k in kb]
            d = _per_prompt(base, base_ids, shared, name, ks) - _per_prompt(res, ids, shared, name, ks)  # [P, K]
            lo, hi = bootstrap_ci(d.T, cfg["bootstrap"], cfg["ci_level"], cfg["bootstrap_seed"])
            entry[name] = {
                "k": ks,
                "mean": np.nanmean(d, 0).tolist(),
                "ci_low": np.asarray(lo).tolist(),
                "ci_high": np.asarray(hi).tolist(),
            }
        for name in SCALARS:
            if name not in base["per_prompt"] or name not in res["per_prompt"]:
                continue
            d = (_per_prompt(base, base_ids, shared, name, None) - _per_prompt(res, ids, shared, name, None))[:, 0]
            lo, hi = bootstrap_ci(d[None], cfg["bootstrap"], cfg["ci_level"], cfg["bootstrap_seed"])
            entry[name] = {"mean": float(np.nanmean(d)), "ci_low": float(lo[0]), "ci_high": float(hi[0])}
        out["vs"][other] = entry
    return out if out["vs"] else None


def _per_prompt(run: dict, ids: dict, prompts: list, name: str, ks) -> np.ndarray:
    """``[P, K]`` values of a curve at ``ks`` (or ``[P, 1]`` of a scalar when ``ks`` is None) for ``prompts``."""
    a = np.asarray(run["per_prompt"][name], dtype=float)[[ids[p] for p in prompts]]
    return a[:, [run["metrics"][name]["k"].index(k) for k in ks]] if ks is not None else a[:, None]


def paired_replicates(results: Mapping[str, dict], groups: Mapping[str, list[str]]) -> dict | None:
    """The first method minus each other one when each method has several independent replicates
    (``groups``: method -> its runs' names in ``results``, in replicate order): replicate i is paired
    with replicate i and each prompt with itself, over the prompts every run of both evaluated, and
    the interval is :func:`vpo.search.intervals.replicate_interval` (t over replicates and prompts,
    the demo's), so it carries the replicate-to-replicate spread that an interval over prompts of one
    run cannot see. None with fewer than two methods."""
    from vpo.errors import UserError
    from vpo.search.intervals import replicate_interval

    methods = list(groups)
    if len(methods) < 2:
        return None
    base = methods[0]
    S = len(groups[base])
    out = {"baseline": base, "num_replicates": S, "vs": {}}
    for other in methods[1:]:
        if len(groups[other]) != S:
            raise UserError(f"replicates must pair one to one: {base!r} has {S} runs, {other!r} {len(groups[other])}")
        runs = [results[r] for r in groups[base] + groups[other]]
        maps = [_by_prompt(r) for r in runs]
        if any(m is None for m in maps):
            continue
        shared = [p for p in maps[0] if all(p in m for m in maps)]
        if not shared:
            continue
        entry: dict = {"num_prompts": len(shared), "num_replicates": S}
        for name in CURVES + SCALARS:
            if not all(name in r.get("per_prompt", {}) for r in runs):
                continue
            curve = name in CURVES
            ks = (
                [k for k in runs[0]["metrics"][name]["k"] if all(k in r["metrics"][name]["k"] for r in runs)]
                if curve
                else [None]
            )
            per = [_per_prompt(r, mp, shared, name, ks if curve else None) for r, mp in zip(runs, maps)]
            d = np.stack([per[i] - per[S + i] for i in range(S)])  # [S, P, K]
            cis = [replicate_interval(d[:, :, j]) for j in range(d.shape[2])]
            vals = {k: [c[k] for c in cis] for k in ("mean", "ci_low", "ci_high")}
            entry[name] = {"k": ks, **vals} if curve else {k: v[0] for k, v in vals.items()}
        out["vs"][other] = entry
    return out if out["vs"] else None


def budget_warnings(results: Mapping[str, dict]) -> list[str]:
    """Warnings for methods whose pools differ in answer slots per prompt, or in m."""
    shapes = {n: (r["shape"]["min_rollouts_per_prompt"] * r["shape"]["m"], r["shape"]["m"]) for n, r in results.items()}
    slots = {s for s, _ in shapes.values()}
    out = []
    if len(slots) > 1:
        out.append(
            "the pools have different answer budgets per prompt ("
            + ", ".join(f"{n}: {s}" for n, (s, _) in shapes.items())
            + " slots): best@k at a matched k compares equal budgets, but each pool's largest k differs"
        )
    if len({m for _, m in shapes.values()}) > 1:
        out.append(
            "the pools differ in m ("
            + ", ".join(f"{n}: {m}" for n, (_, m) in shapes.items())
            + "): a matched budget of k answers is ceil(k/m) rollouts for each"
        )
    return out
