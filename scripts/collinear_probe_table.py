"""Table of the rho-bar = 1 maze control (``collinear`` option) from its evaluation pools.

    python scripts/collinear_probe_table.py runs/probe_collinear

The models were trained and evaluated on the collinear task (every component is the route's w*-score),
so the pools' reward vectors are [s, s, s, s]. To see what the policies do in the original objective
space, every answer is re-scored with the default maze task, then the demo's own per-pool statistics
(``vpo.demo.analysis.run_stats``: best@k under w*, completion, diversity among completed answers, Pareto
coverage) are computed on those vectors; ρ̄ is reported from the pools as trained (collinear) and
re-scored. One seed, one pool per method: the intervals are over mazes, given the trained models.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np


def _rho(rewards, valid, prompt_index) -> float:
    """Mean over prompts of ρ̄ over each prompt's valid answers."""
    from vpo.search.at_k import group_by_prompt
    from vpo.search.metrics import collinearity

    g = group_by_prompt(rewards, valid, prompt_index)
    P, R, m, d = g.rewards.shape
    return float(np.nanmean(collinearity(g.rewards.reshape(P, R * m, d), g.valid.reshape(P, R * m))))


def main(argv=None) -> int:
    from vpo.demo.analysis import run_stats
    from vpo.demo.config import DemoConfig
    from vpo.demo.stages import make_task
    from vpo.search.pools import load_pool

    root = Path((argv or sys.argv[1:] or ["runs/probe_collinear"])[0])
    cfg = DemoConfig(split="validation")
    task = make_task(cfg)
    examples = task.load(cfg.split, n=cfg.eval_problems)
    fronts = cfg.domain_spec.fronts(examples)
    prefs = {"w*": np.full(task.d, 1.0 / task.d)}
    rows = []
    for name in ("warmstart_m1", "warmstart_m3", "grpo_s0", "vpo_s0"):
        d = root / "eval" / name
        rep = json.loads((d / "report.json").read_text())["results"][name]
        pool = load_pool(d / "pool")
        by_id = {e["id"]: e for e in examples}
        rewards = np.zeros_like(pool.rewards)
        for n, answers in enumerate(pool.answers):
            ex = by_id[pool.prompt_ids[pool.prompt_index[n]]]
            for j, a in enumerate(answers):
                if j < rewards.shape[1] and pool.valid[n, j]:
                    rewards[n, j] = task.score(ex, a)
        rescored = replace(pool, rewards=rewards)
        st = run_stats(rep, rescored, examples, fronts, prefs, list(cfg.ks), cfg.eval_seeds, "maze")
        k10, k30 = cfg.ks.index(10), cfg.ks.index(30)
        rows.append(
            (
                name,
                float(np.nanmean(st["best_at_k"][:, k10])),
                float(np.nanmean(st["best_at_k"][:, k30])),
                float(np.nanmean(st["completion_rate"])),
                float(np.nanmean(st["completed_diversity"])),
                float(np.nanmean(st["pareto_coverage"][:, k30])),
                _rho(pool.rewards, pool.valid, pool.prompt_index),
                _rho(rewards, pool.valid, pool.prompt_index),
            )
        )
    print(
        "| collinear maze, validation, seed 0 | best@10 | best@30 | completion | diversity (completed) | Pareto cov.@30 | ρ̄ trained on | ρ̄ re-scored |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            "| "
            + r[0]
            + " | "
            + " | ".join("n/a" if not np.isfinite(x) else f"{x:.3f}" for x in r[1:6])
            + " | "
            + " | ".join("n/a" if not np.isfinite(x) else f"{x:.2f}" for x in r[6:])
            + " |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
