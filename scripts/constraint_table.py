"""Constrained vs unconstrained best@k on the demo's saved eval pools (docs/constraints.md).

Reads ``runs/demo/eval/<method>_s<seed>/pool`` (read-only; nothing is generated or written) and
prints, per method averaged over its seeds, best@k and E_w[best@k] on w* without and with the
constraints, the fraction of valid answers filtered out (a route that never reaches E scores all
zero, so it breaks ``avoid_lava>=1`` too), the fraction of completed routes filtered out, and the
fraction of mazes left with no admissible answer. Maze pools only (it reads ``completion``). ``--json``: one JSON object on the last line.

    python scripts/constraint_table.py --constraint 'avoid_lava>=1'
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eval-dir", default="runs/demo/eval", help="the demo's eval directory (default runs/demo/eval)")
    ap.add_argument("--constraint", action="append", default=None, help="repeatable (default: avoid_lava>=1)")
    ap.add_argument("--ks", default="1,3,10,30")
    ap.add_argument("--eval-seeds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from vpo.search import evaluate_pool, load_pool
    from vpo.search.constraints import constrained_metrics
    from vpo.tasks.constrained import admissible, parse_constraints

    cons = args.constraint or ["avoid_lava>=1"]
    ks = tuple(int(k) for k in args.ks.split(","))
    kw = dict(ks=ks, seeds=tuple(range(args.eval_seeds)), bootstrap=0)
    rows: dict[str, list[dict]] = defaultdict(list)
    for run in sorted(Path(args.eval_dir).glob("*/pool")):
        method = re.sub(r"_s\d+$", "", run.parent.name)
        pool = load_pool(run, texts=False)
        plain = evaluate_pool(pool, **kw)["metrics"]
        c = constrained_metrics(pool, cons, **kw)
        ok = admissible(pool.rewards, pool.valid, parse_constraints(cons, pool.objectives), pool.objectives)
        done = pool.valid & (pool.rewards[..., list(pool.objectives).index("completion")] >= 1)
        rows[method].append(
            {
                "m": pool.m,
                "best": plain["best_at_k"]["mean"],
                "best_c": c["metrics"]["best_at_k"]["mean"],
                "ew": plain["ew_best_at_k"]["mean"],
                "ew_c": c["metrics"]["ew_best_at_k"]["mean"],
                "filtered_frac": c["filtered_frac"],
                "filtered_completed": float((done & ~ok).sum() / max(done.sum(), 1)),
                "no_admissible_frac": c["no_admissible_frac"],
            }
        )
    if not rows:
        raise SystemExit(f"no pools under {args.eval_dir}/*/pool (run `vpo demo` first)")
    out = {}
    for method, rs in rows.items():
        mean = {k: np.mean([r[k] for r in rs], axis=0).tolist() for k in rs[0] if k != "m"}
        out[method] = {"m": rs[0]["m"], "seeds": len(rs), **mean}
    print(f"constraints: {', '.join(cons)}; ks {ks}; mean over seeds; cells: unconstrained -> constrained")
    print(
        "| method | m | seeds | valid answers filtered out | completed routes filtered out | mazes with none admissible | "
        + " | ".join(f"best@{k}" for k in ks)
        + " | "
        + " | ".join(f"E_w best@{k}" for k in ks)
        + " |"
    )
    print("|" + "---|" * (6 + 2 * len(ks)))
    for method, r in out.items():
        cells = [f"{a:.3f} → {b:.3f}" for a, b in zip(r["best"], r["best_c"])]
        cells += [f"{a:.3f} → {b:.3f}" for a, b in zip(r["ew"], r["ew_c"])]
        print(
            f"| {method} | {r['m']} | {r['seeds']} | {r['filtered_frac']:.3f} | {r['filtered_completed']:.3f} | {r['no_admissible_frac']:.3f} | "
            + " | ".join(cells)
            + " |"
        )
    if args.json:
        print(json.dumps({"constraints": cons, "ks": list(ks), "methods": out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
