"""Search under hard constraints: best@k, pass@k and E_w[best@k] among admissible candidates.

``vpo eval --constraint 'avoid_lava>=1'`` (repeatable; constraints from :mod:`vpo.tasks.constrained`)
re-scores the pool with every answer that breaks a constraint treated as an invalid slot: it still
uses its share of the budget k, but can never be the one chosen; a draw with no admissible answer
scores ``invalid_score``. :func:`constrained_metrics` returns those figures plus the fraction of
valid answers filtered out and the fraction of prompts left with no admissible answer;
``evaluate_pool``'s result carries them under ``"constrained"`` and the report puts them next to
the unconstrained figures (:func:`markdown_section`).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from vpo._util import fmt_number
from vpo.tasks.constrained import ConstraintError, admissible, parse_constraints

__all__ = ["constrained_metrics", "markdown_section", "SIDE_BY_SIDE"]

SIDE_BY_SIDE = ("best_at_k", "pass_at_k", "ew_best_at_k")
"""The curve metrics the report shows unconstrained vs constrained."""
_SCALARS = ("pass_at_1", "reward_at_1", "ew_best_pool", "valid_answer_frac")


def constrained_metrics(pool, constraints, **metric_kwargs) -> dict:
    """The metrics of ``pool`` (a :class:`~vpo.search.Pool`) with inadmissible answers made invalid.

    ``constraints``: strings / callables / :class:`~vpo.tasks.constrained.Constraint` (parsed against
    ``pool.objectives``); ``metric_kwargs``: those of :func:`~vpo.search.evaluate_pool`.
    Returns ``{"constraints", "filtered_frac", "no_admissible_frac", "metrics", "per_prompt"}``.
    """
    from dataclasses import replace

    from vpo.search.pools import evaluate_pool

    cons = parse_constraints(constraints, pool.objectives)
    if not cons:
        raise ConstraintError("constrained_metrics needs at least one constraint")
    ok = admissible(pool.rewards, pool.valid, cons, pool.objectives)
    n_valid = int(pool.valid.sum())
    filtered = n_valid - int(ok.sum())
    per_prompt_any = np.zeros(pool.num_prompts, dtype=bool)
    np.logical_or.at(per_prompt_any, pool.prompt_index, ok.any(1))
    metric_kwargs = {k: v for k, v in metric_kwargs.items() if k != "embed_diversity"}
    res = evaluate_pool(replace(pool, valid=ok), **metric_kwargs)
    keep = SIDE_BY_SIDE + _SCALARS
    out = {
        "constraints": [c.text for c in cons],
        "filtered_frac": filtered / n_valid if n_valid else 0.0,
        "num_filtered": filtered,
        "no_admissible_frac": float(1.0 - per_prompt_any.mean()),
        "metrics": {k: res["metrics"][k] for k in keep},
    }
    if "per_prompt" in res:
        out["per_prompt"] = {k: res["per_prompt"][k] for k in ("prompt_ids",) + keep if k in res["per_prompt"]}
    return out


def _cell(e: dict, i: int) -> str:
    return fmt_number(e["mean"][i])


def markdown_section(results: Mapping[str, dict], ks: Sequence[int]) -> list[str]:
    """Report lines: for each method evaluated with constraints, best@k / pass@k / E_w[best@k]
    unconstrained → constrained at every k, and the fraction filtered out. Empty when none was."""
    with_c = {name: r for name, r in results.items() if r.get("constrained")}
    if not with_c:
        return []
    lines = ["", "## Under hard constraints (inadmissible answers cannot be chosen)", ""]
    texts = sorted({", ".join(r["constrained"]["constraints"]) for r in with_c.values()})
    lines.append(
        "Constraints: " + "; ".join(f"`{t}`" for t in texts) + ". Each cell is unconstrained → constrained; "
        "an inadmissible answer still uses its slot of the budget k."
    )
    lines += [
        "",
        "| method | metric | filtered out | prompts with none admissible | " + " | ".join(f"k={k}" for k in ks) + " |",
    ]
    lines.append("|" + "---|" * (len(ks) + 4))
    labels = {"best_at_k": "best@k", "pass_at_k": "pass@k", "ew_best_at_k": "E_w[best@k]"}
    for name, r in with_c.items():
        c = r["constrained"]
        for key in SIDE_BY_SIDE:
            u, v = r["metrics"][key], c["metrics"][key]
            pu, pv = {k: i for i, k in enumerate(u["k"])}, {k: i for i, k in enumerate(v["k"])}
            cells = [f"{_cell(u, pu[k])} → {_cell(v, pv[k])}" if k in pu and k in pv else "–" for k in ks]
            lines.append(
                f"| {name} | {labels[key]} | {c['filtered_frac']:.3f} | {c['no_admissible_frac']:.3f} | "
                + " | ".join(cells)
                + " |"
            )
    return lines
