"""Pool the trained models of several `vpo demo` runs with the same settings, as more RL trajectories.

    python scripts/demo_pool_runs.py runs/demo runs/demo_prev_engine --out docs/demo/two_runs

(``runs/demo_prev_engine``: ``vpo demo --out runs/demo`` run at commit 535ecc8, before
``shared_prompt_forward``, then renamed.)

Two runs with the same settings and seeds can still train different models: here the second run's
engine (``shared_prompt_forward``) computes the same numbers to float rounding, the first steps of
every job are identical, and sampled tokens start to differ after 10-50 steps. Their models are then
further draws of the same training distribution, not independent seeds (same warm start, same seed
indices, shared first steps), so this table is a robustness check of the shipped report, not a
replacement. Seeds are concatenated run by run (run A's seeds, then run B's); paired differences pair
VPO's trajectory i with the other method's trajectory i (same run, same seed). Every interval is the
demo's two-level bootstrap (trajectories, then mazes). Writes ``report.md`` and ``pooled.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path


def _cfg(out: Path):
    from vpo.demo.config import DemoConfig

    return DemoConfig.load(out)


def _fmt(s: dict) -> str:
    return f"{s['mean']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]"


def _sfmt(s: dict) -> str:
    return f"{s['mean']:+.3f} [{s['ci_low']:+.3f}, {s['ci_high']:+.3f}]"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="demo output directories with the same settings")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)

    from vpo.demo.analysis import aggregate_runs, collect

    dirs = [Path(r) for r in a.runs]
    cfgs = [_cfg(d) for d in dirs]
    keys = [{k: v for k, v in c.as_dict().items() if k != "out"} for c in cfgs]
    if any(k != keys[0] for k in keys[1:]):
        sys.exit("the runs' settings differ: pooling them would mix experiments")
    runs, labels, ms, extra = collect(cfgs[0], dirs[0])
    for d, c in zip(dirs[1:], cfgs[1:]):
        more, _, _, _ = collect(c, d)
        for key, stats in more.items():
            if not key.startswith("warmstart"):  # the warm start is the same model in every run
                runs[key] = runs[key] + stats
    n = len(dirs) * len(cfgs[0].seeds)
    cfg = replace(cfgs[0], seeds=tuple(range(n)))
    agg = aggregate_runs(cfg, runs, labels, ms, ["w*"], extra)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "pooled.json").write_text(json.dumps({"runs": [str(d) for d in dirs], **agg}, indent=1))
    k_hi = max(cfg.ks)
    lines = [
        f"# {len(dirs)} demo runs pooled: {n} RL trajectories per method",
        "",
        f"Runs: {', '.join(f'`{d}`' for d in dirs)} (same settings; {cfg.eval_problems} {cfg.split} mazes). "
        f"Produced by `python scripts/demo_pool_runs.py {' '.join(map(str, dirs))} --out {out}`. "
        "Intervals: 95 % two-level bootstrap over trajectories, then mazes. The trajectories share the "
        "warm start and seed indices, so they are not independent seeds: read this as a robustness check.",
        "",
        f"| method | best@10 | best@{k_hi} | Pareto cov.@{k_hi} | diversity (completed) | completion |",
        "|---|---|---|---|---|---|",
    ]
    for r in agg["methods"].values():
        lines.append(
            f"| {r['label']} | {_fmt(r['best_at_k'][10])} | {_fmt(r['best_at_k'][k_hi])} | "
            f"{_fmt(r['pareto_coverage'][k_hi])} | {_fmt(r['completed_diversity'])} | {_fmt(r['completion_rate'])} |"
        )
    lines += [
        "",
        "VPO minus each method, paired by trajectory and maze:",
        "",
        f"| vs | Δbest@10 | Δbest@{k_hi} | ΔPareto cov.@{k_hi} | Δdiversity (completed) |",
        "|---|---|---|---|---|",
    ]
    for key, d in agg["paired_vs_vpo"].items():
        lines.append(
            f"| {labels[key]} | {_sfmt(d['best_at_k'][10])} | {_sfmt(d['best_at_k'][k_hi])} | "
            f"{_sfmt(d['pareto_coverage'][k_hi])} | {_sfmt(d['completed_diversity'])} |"
        )
    lines += [
        "",
        "Per trajectory (run A's seeds, then run B's), best@" + str(k_hi) + ":",
        "",
        "| method | " + " | ".join(f"t{i}" for i in range(n)) + " |",
        "|---|" + "---|" * n,
    ]
    for key, r in agg["methods"].items():
        if key.startswith("warmstart"):
            continue
        lines.append(f"| {r['label']} | " + " | ".join(f"{v:.3f}" for v in r["best_at_k"][k_hi]["per_seed"]) + " |")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
