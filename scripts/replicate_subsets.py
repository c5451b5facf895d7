"""How often a 3-replicate interval contains the 10-replicate mean: a check of the intervals on real runs.

    python scripts/replicate_subsets.py runs/maze10 --out docs/demo/maze10/subsets.json

From a demo run with S independent replicates (each with its own warm start), every subset of
``--size`` replicates (default 3, the default demo's count) is treated as a run of its own: its
interval for each paired difference (VPO minus another method) is computed as the demo would
(``replicate_t``, and the former two-level bootstrap for contrast), and the script counts how often
it contains the mean of all S replicates. The all-S mean is itself uncertain and the subsets
overlap, so this is a sanity check of the intervals' width on real data, not a coverage estimate
(the coverage is simulated in tests/search/test_intervals.py); a 95 % interval that contains the
all-S mean far less often than ~95 % of the time is too narrow.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

STATS = (
    ("best@30", "best_at_k", 30),
    ("Pareto coverage@30", "pareto_coverage", 30),
    ("diversity (completed)", "completed_diversity", None),
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("demo_dir", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--size", type=int, default=3)
    args = ap.parse_args(argv)
    from vpo.demo.analysis import _stack, collect, two_level_interval
    from vpo.demo.config import DemoConfig
    from vpo.search.intervals import replicate_interval

    cfg = DemoConfig.load(args.demo_dir)
    runs, labels, _, _ = collect(cfg, args.demo_dir)
    ks = list(cfg.ks)
    S = len(cfg.seeds)
    subsets = list(itertools.combinations(range(S), args.size))
    res: dict = {
        "source": str(args.demo_dir),
        "replicates": S,
        "subset_size": args.size,
        "subsets": len(subsets),
        "rows": [],
    }
    for other in (k for k in runs if k not in ("vpo", "warmstart_m3")):
        for label, key, k in STATS:
            a, b = _stack(runs["vpo"], key), _stack(runs[other], key)
            if k is not None:
                a, b = a[:, :, ks.index(k)], b[:, :, ks.index(k)]
            d = a - b  # [S, P]
            full = float(np.nanmean(d))
            hit_t = hit_boot = 0
            widths_t = []
            for sub in subsets:
                v = d[list(sub)]
                r = replicate_interval(v)
                hit_t += r["ci_low"] <= full <= r["ci_high"]
                widths_t.append(r["ci_high"] - r["ci_low"])
                lo, hi = two_level_interval(v, 1000, seed=0)
                hit_boot += lo <= full <= hi
            res["rows"].append(
                {
                    "vs": labels[other],
                    "statistic": label,
                    "mean_all": full,
                    "replicate_t_contains": hit_t / len(subsets),
                    "two_level_bootstrap_contains": hit_boot / len(subsets),
                    "replicate_t_median_width": float(np.median(widths_t)),
                }
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1))
    print(
        f"{len(subsets)} subsets of {args.size} of {S} replicates; share whose 95 % interval contains the all-{S} mean"
    )
    print(f"{'VPO minus':22s} {'statistic':22s} {'all-S mean':>10s} {'replicate t':>11s} {'bootstrap':>9s}")
    for r in res["rows"]:
        print(
            f"{r['vs']:22s} {r['statistic']:22s} {r['mean_all']:+10.3f} {100 * r['replicate_t_contains']:10.0f}% "
            f"{100 * r['two_level_bootstrap_contains']:8.0f}%"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
