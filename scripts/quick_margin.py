"""Size the CI quick maze demo's VPO assertion on the validation split.

    python scripts/quick_margin.py runs/maze10 --out docs/demo/quick_margin     # table + quick_margin.json

``vpo demo --quick`` trains GRPO and VPO exactly as the default demo does (seed 0) and evaluates them
at small settings (24 problems, 12 answers per problem, 2 evaluation draws). What a CI test may
assert about VPO there depends on how much a single replicate's quick-setting result spreads. This
script takes the trained GRPO and VPO models of a demo run with many independent replicates (each
with its own warm start), evaluates every one at the quick settings on the **validation** split
(never the test split), and reports per replicate the VPO - GRPO difference of the statistics a CI
test could assert (completed diversity, distinct finished routes, Pareto coverage and best@k at
k = 12), with their mean, standard deviation and minimum, and the one-sided normal-theory chance
that a fresh replicate falls below a margin. The CI test's margin and its stated false-failure
chance come from this table (tests/demo/test_demo.py).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

STATS = {
    "completed_diversity": ("diversity (completed)", None),
    "distinct_routes": ("distinct finished routes", None),
    "pareto_coverage": ("Pareto coverage@12", 12),
    "best_at_k": ("best@12 (w*)", 12),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("demo_dir", type=Path, help="a finished maze demo with grpo and vpo trained per replicate")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--margins", default="0,0.05,0.1,0.15,0.2")
    args = ap.parse_args(argv)
    from vpo.demo.analysis import StatsContext
    from vpo.demo.config import DemoConfig, method_spec
    from vpo.demo.jobs import run_jobs
    from vpo.demo.stages import eval_job

    src = DemoConfig.load(args.demo_dir)
    if src.domain != "maze" or not {"grpo", "vpo"} <= set(src.methods):
        print(f"{args.demo_dir}: needs a maze demo with grpo and vpo", file=sys.stderr)
        return 2
    q = DemoConfig.quick()
    cfg = replace(
        src,
        out=str(args.out),
        split="validation",
        test_seed=None,
        eval_problems=q.eval_problems,
        eval_budget=q.eval_budget,
        ks=q.ks,
        eval_seeds=q.eval_seeds,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = []
    for method in ("grpo", "vpo"):
        for s in src.seeds:
            name = f"{method}_s{s}"
            model = args.demo_dir / "runs" / name
            settings = {"eval": cfg.eval_settings(), "seed": s, "model": str(model)}
            jobs.append(eval_job(cfg, args.out, name, model, method_spec(method)[2], s, settings))
    run_jobs(jobs, args.jobs, log_dir=args.out / "logs")
    ctx = StatsContext(cfg, all_preferences=False)
    ks = list(cfg.ks)
    per: dict = {k: {"grpo": [], "vpo": []} for k in STATS}
    for method in ("grpo", "vpo"):
        for s in src.seeds:
            st, _ = ctx.stats(args.out, f"{method}_s{s}")
            for key, (_, k) in STATS.items():
                v = st[key][:, ks.index(k)] if k else st[key]
                per[key][method].append(float(np.nanmean(v)))
    margins = [float(x) for x in args.margins.split(",")]
    rows = {}
    for key, (label, _) in STATS.items():
        d = np.array(per[key]["vpo"]) - np.array(per[key]["grpo"])
        mu, sd = float(d.mean()), float(d.std(ddof=1))
        below = {str(mg): 0.5 * math.erfc((mu - mg) / (sd * math.sqrt(2))) for mg in margins}
        rows[key] = {
            "label": label,
            "grpo": per[key]["grpo"],
            "vpo": per[key]["vpo"],
            "difference": d.round(4).tolist(),
            "mean": mu,
            "sd": sd,
            "min": float(d.min()),
            "p_below_margin_normal": below,
        }
    res = {"source": str(args.demo_dir), "seeds": list(src.seeds), "settings": cfg.eval_settings(), "stats": rows}
    (args.out / "quick_margin.json").write_text(json.dumps(res, indent=1))
    L = [
        f"VPO - GRPO at the quick settings ({cfg.eval_problems} validation mazes, {cfg.eval_budget} answers), "
        f"{len(src.seeds)} replicates of {args.demo_dir}:",
        "",
        "| statistic | mean | sd | min | per replicate | " + " | ".join(f"P(< {m:g})" for m in margins) + " |",
        "|---|---|---|---|---|" + "---|" * len(margins),
    ]
    for r in rows.values():
        L.append(
            f"| {r['label']} | {r['mean']:+.3f} | {r['sd']:.3f} | {r['min']:+.3f} | "
            + " ".join(f"{x:+.2f}" for x in r["difference"])
            + " | "
            + " | ".join(f"{100 * p:.1f} %" for p in r["p_below_margin_normal"].values())
            + " |"
        )
    text = "\n".join(L) + "\n"
    (args.out / "quick_margin.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
