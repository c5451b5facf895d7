"""Any method minus any other in a finished demo directory, paired by seed and problem, with the
demo's interval (the report itself gives VPO minus each method only).

    python scripts/paired_methods.py runs/decomp/w0 --base vpo_at_k --others vpo,max_at_k
    python scripts/paired_methods.py runs/decomp/w0 --base vpo_at_k --others vpo --json   # + one JSON object

Statistics: best@k and Pareto coverage at ``--k`` (default 30; for prog, pass@k too), and diversity
among completed answers. Intervals as the run's ``interval`` setting says (replicate t by default).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("demo_dir", type=Path)
    ap.add_argument("--base", required=True)
    ap.add_argument("--others", required=True, help="comma-separated method names")
    ap.add_argument("--k", type=int, default=30)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from vpo.demo.analysis import _stack, collect, paired, summarize
    from vpo.demo.config import DemoConfig

    cfg = DemoConfig.load(args.demo_dir)
    runs, labels, _, _ = collect(cfg, args.demo_dir)
    ks = list(cfg.ks)
    if args.k not in ks:
        print(f"--k {args.k} is not among the run's ks {ks}", file=sys.stderr)
        return 2
    curves = ["best_at_k", "pareto_coverage"] + (["pass_at_k"] if "pass_at_k" in runs[args.base][0] else [])
    out: dict = {}
    for other in [o for o in args.others.split(",") if o]:
        for name in (args.base, other):
            if name not in runs:
                print(f"{args.demo_dir}: no method {name!r} (it has {', '.join(runs)})", file=sys.stderr)
                return 2
        row = {}
        for c in curves:
            a, b = _stack(runs[args.base], c), _stack(runs[other], c)
            j = ks.index(args.k)
            row[f"{c}@{args.k}"] = summarize(paired(a[:, :, j], b[:, :, j]), cfg.bootstrap, interval=cfg.interval)
        row["completed_diversity"] = summarize(
            paired(_stack(runs[args.base], "completed_diversity"), _stack(runs[other], "completed_diversity")),
            cfg.bootstrap,
            interval=cfg.interval,
        )
        out[other] = row
        print(f"{labels[args.base]} minus {labels[other]} ({len(cfg.seeds)} seeds, {cfg.split} split):")
        for k, s in row.items():
            print(f"  {k:24s} {s['mean']:+.3f} [{s['ci_low']:+.3f}, {s['ci_high']:+.3f}]")
    if args.json:
        print(json.dumps({"base": args.base, "vs": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
