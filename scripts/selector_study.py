"""Search with an imperfect verifier: best@k of the answer a selector keeps, on VPO's and the baselines' pools.

    python scripts/selector_study.py runs/decomp/w0 runs/decomp/w1 --out docs/demo/selectors

Reads the evaluation pools that ``vpo demo`` (or ``scripts/variance_decomposition.py``) left in each
demo directory (``eval/<method>_s<seed>/pool``; only the demo's own evaluation draw), and for each
selector (``--selector``, repeatable; the ``vpo eval --selector`` specs) computes, with
:func:`vpo.search.selection.selected_best_at_k`, the true w*ᵀr of the answer it keeps among the same
matched-budget draws as best@k, and its hit rate. Per method: the mean over runs; per selector, VPO
minus each other method paired by run (same warm start and seed), with a t interval over the runs
(the runs of one directory share a warm start, so read it as descriptive). The exact selector
(``noisy:0``) is best@k itself. Writes ``selectors.json`` and ``selectors.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

DEFAULT_SELECTORS = ("noisy:0", "noisy:0.1", "noisy:0.3", "objectives:completion", "objectives:gold,diamond")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("demo_dirs", type=Path, nargs="+")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--methods", default="grpo,max_at_k,vpo")
    ap.add_argument(
        "--selector", dest="selectors", action="append", help="repeatable; default: " + ", ".join(DEFAULT_SELECTORS)
    )
    ap.add_argument("--k", type=int, default=30)
    args = ap.parse_args(argv)
    from vpo.demo.config import DemoConfig
    from vpo.search.intervals import t_quantile
    from vpo.search.pools import load_pool
    from vpo.search.selection import selected_best_at_k

    methods = [m for m in args.methods.split(",") if m]
    selectors = args.selectors or list(DEFAULT_SELECTORS)
    runs: list[tuple[str, str, int]] = []
    for d in args.demo_dirs:
        cfg = DemoConfig.load(d)
        for s in cfg.seeds:
            runs.append((str(d), d.name, s))
    vals: dict = {sel: {m: {"best": [], "hit": []} for m in methods} for sel in selectors}
    for d, _, s in runs:
        for m in methods:
            pool = load_pool(Path(d) / "eval" / f"{m}_s{s}" / "pool")
            for sel in selectors:
                res = selected_best_at_k(
                    pool.rewards,
                    pool.valid,
                    pool.prompt_index,
                    sel,
                    pool.objectives,
                    [args.k],
                    target_weights=pool.target_weights,
                    bootstrap=0,
                )
                vals[sel][m]["best"].append(res["selected_best_at_k"]["mean"][0])
                vals[sel][m]["hit"].append(res["hit_rate"]["mean"][0])
    table: dict = {}
    for sel in selectors:
        row = {
            m: {"best": float(np.mean(vals[sel][m]["best"])), "hit": float(np.mean(vals[sel][m]["hit"]))}
            for m in methods
        }
        diffs = {}
        if "vpo" in methods:
            for o in (m for m in methods if m != "vpo"):
                d = np.array(vals[sel]["vpo"]["best"]) - np.array(vals[sel][o]["best"])
                n = len(d)
                half = t_quantile(0.975, n - 1) * d.std(ddof=1) / math.sqrt(n) if n > 1 else float("nan")
                diffs[o] = {
                    "mean": float(d.mean()),
                    "ci_low": float(d.mean() - half),
                    "ci_high": float(d.mean() + half),
                }
        table[sel] = {"methods": row, "vpo_minus": diffs, "per_run": vals[sel]}
    args.out.mkdir(parents=True, exist_ok=True)
    res = {"k": args.k, "runs": [f"{n} s{s}" for _, n, s in runs], "selectors": table}
    (args.out / "selectors.json").write_text(json.dumps(res, indent=1))
    others = [m for m in methods if m != "vpo"]
    L = [
        f"Selected best@{args.k} (true w*ᵀr of the kept answer) and hit rate, mean over {len(runs)} runs "
        f"({', '.join(sorted({n for _, n, _ in runs}))}); VPO minus the others paired by run, t interval over runs.",
        "",
        "| selector | "
        + " | ".join(f"{m} best / hit" for m in methods)
        + " | "
        + " | ".join(f"VPO − {o}" for o in others)
        + " |",
        "|---|" + "---|" * (len(methods) + len(others)),
    ]
    for sel, t in table.items():
        cells = [f"{t['methods'][m]['best']:.3f} / {t['methods'][m]['hit']:.2f}" for m in methods]
        dcells = (
            [
                f"{t['vpo_minus'][o]['mean']:+.3f} [{t['vpo_minus'][o]['ci_low']:+.3f}, {t['vpo_minus'][o]['ci_high']:+.3f}]"
                for o in others
            ]
            if t["vpo_minus"]
            else []
        )
        L.append(f"| `{sel}` | " + " | ".join(cells + dcells) + " |")
    text = "\n".join(L) + "\n"
    (args.out / "selectors.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
