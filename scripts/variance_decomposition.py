"""Where a demo result's run-to-run spread comes from: warm start, RL seed, evaluation draws.

    python scripts/variance_decomposition.py --out runs/decomp                  # train, evaluate, analyse
    python scripts/variance_decomposition.py --out runs/decomp --json           # + one JSON object, last line

A crossed/nested experiment on the **validation** split (no test-split evaluation): W warm starts
(``--warm-seeds``, default 0 1), each shared by R RL seeds (``--rl-seeds``, default 0 1 2), each
trained model evaluated with E evaluation seeds (``--eval-draws``, default 2). Every run uses the
demo's default settings otherwise (``vpo demo --set warm_start=shared --set shared_warm_seed=W``),
with the methods of ``--methods`` (default grpo,max_at_k,vpo: the comparisons the 3-seed runs could
not settle, and GRPO). For each statistic and each paired difference (VPO minus another method,
per maze, then averaged over the mazes) it fits the nested random-effects model
``x_wre = mu + a_w + b_wr + c_wre`` (:func:`vpo.search.intervals.nested_variance_components`) and
reports each component's share of one replicate's variance. Also: whether a warm start is
bit-reproducible (``--repeat-warm``: the first warm start trained a second time, weights hashes
compared).

Writes ``OUT/decomposition.json`` and ``OUT/decomposition.md``. About 10 minutes on 2 idle cores
with the defaults.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

STATS = (
    ("best@30 (w*)", "best_at_k", 30),
    ("best@10 (w*)", "best_at_k", 10),
    ("Pareto coverage@30", "pareto_coverage", 30),
    ("diversity (completed)", "completed_diversity", None),
    ("completion rate", "completion_rate", None),
)


def _cfg(out: Path, warm_seed: int, rl_seeds, methods, jobs: int):
    from vpo.demo.config import DemoConfig

    return DemoConfig(
        out=str(out / f"w{warm_seed}"),
        warm_start="shared",
        shared_warm_seed=warm_seed,
        seeds=tuple(rl_seeds),
        methods=tuple(methods),
        split="validation",
        jobs=jobs,
    )


def eval_seed(rl_seed: int, draw: int) -> int:
    """Draw 0 is the demo's own evaluation (seed = the RL seed); draw e > 0 uses ``1000 e + seed``."""
    return rl_seed if draw == 0 else 1000 * draw + rl_seed


def run_name(method: str, rl_seed: int, draw: int) -> str:
    return f"{method}_s{rl_seed}" if draw == 0 else f"{method}_s{rl_seed}_e{draw}"


def train_and_evaluate(args) -> list:
    """Train every cell with the demo (resumable), then the extra evaluation draws as demo jobs."""
    from vpo.demo.config import method_spec
    from vpo.demo.jobs import run_jobs
    from vpo.demo.runner import run_demo
    from vpo.demo.stages import eval_job

    cfgs = []
    for w in args.warm_seeds:
        cfg = _cfg(args.out, w, args.rl_seeds, args.methods, args.jobs)
        run_demo(cfg)
        cfgs.append(cfg)
    jobs = []
    for cfg in cfgs:
        d = Path(cfg.out)
        for method in cfg.methods:
            m = method_spec(method)[2]
            for s in cfg.seeds:
                for e in range(1, args.eval_draws):
                    name, seed = run_name(method, s, e), eval_seed(s, e)
                    settings = {"eval": cfg.eval_settings(), "seed": seed, "model": f"{method}_s{s}"}
                    model = d / "runs" / f"{method}_s{s}"
                    jobs.append(eval_job(cfg, d, name, model, m, seed, settings, job_name=f"eval {d.name} {name}"))
    run_jobs(jobs, args.jobs, log_dir=args.out / "logs")
    return cfgs


def per_run_stats(cfgs, methods, rl_seeds, eval_draws) -> dict:
    """``{method: {stat label: array [W, R, E, P]}}`` of per-maze values."""
    from vpo.demo.analysis import StatsContext

    ctx = StatsContext(cfgs[0], all_preferences=False)  # the cells differ in warm start only, not in evaluation
    ks = list(cfgs[0].ks)
    out: dict = {}
    for method in methods:
        cells = []
        for cfg in cfgs:
            row = []
            for s in rl_seeds:
                draws = []
                for e in range(eval_draws):
                    st, _ = ctx.stats(Path(cfg.out), run_name(method, s, e))
                    draws.append({label: (st[key][:, ks.index(k)] if k else st[key]) for label, key, k in STATS})
                row.append(draws)
            cells.append(row)
        out[method] = {
            label: np.array([[[d[label] for d in r] for r in row] for row in cells]) for label, _, _ in STATS
        }
    return out


def decompose(values: dict, methods) -> dict:
    """Variance components of each method's level and of each VPO-minus-other difference."""
    from vpo.search.intervals import nested_variance_components

    res: dict = {"levels": {}, "differences": {}}
    for method in methods:
        res["levels"][method] = {
            label: nested_variance_components(np.nanmean(arr, axis=-1)) for label, arr in values[method].items()
        }
    if "vpo" in values:
        for other in (m for m in methods if m != "vpo"):
            res["differences"][other] = {}
            for label in values["vpo"]:
                d = values["vpo"][label] - values[other][label]  # [W, R, E, P], paired by cell and maze
                comp = nested_variance_components(np.nanmean(d, axis=-1))
                # the maze-sampling variance of one run's mean, for scale: var over mazes / P, averaged over runs
                P = d.shape[-1]
                comp["maze_var_of_mean"] = float(np.nanmean(np.nanvar(d, axis=-1, ddof=1)) / P)
                comp["cells"] = np.nanmean(d, axis=-1).round(4).tolist()
                res["differences"][other][label] = comp
    return res


def repeat_warm(cfg) -> dict:
    """Train the first warm start again in a fresh directory; compare the fingerprints."""
    import shutil
    import tempfile

    from vpo.demo.stages import warm_dir, warm_start

    first = json.loads((warm_dir(Path(cfg.out), cfg.warm_seeds()[0]) / "warmstart.json").read_text())
    tmp = Path(tempfile.mkdtemp(prefix="vpo_warm_repeat_"))
    try:
        again_dir = warm_start(cfg, tmp, cfg.warm_seeds()[0])
        again = json.loads((again_dir / "warmstart.json").read_text())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "first": {k: first.get(k) for k in ("loss_first", "loss_last", "weights_sha256")},
        "again": {k: again.get(k) for k in ("loss_first", "loss_last", "weights_sha256")},
        "identical": first.get("weights_sha256") == again.get("weights_sha256"),
    }


def _pct(share: float) -> str:
    return "—" if not np.isfinite(share) else f"{100 * share:.0f} %"


def markdown(res: dict, args) -> str:
    W, R, E = len(args.warm_seeds), len(args.rl_seeds), args.eval_draws
    L = [
        "# Where the spread comes from: warm start, RL seed, evaluation draws",
        "",
        f"Maze demo defaults, **validation split** ({res['num_problems']} mazes), {W} warm starts x {R} RL seeds "
        f"x {E} evaluation draws; methods {', '.join(args.methods)}. Each run's value is its mean over the "
        "mazes; the nested random-effects model splits the variance of one replicate's value into the "
        "warm start's, the RL seed's (given the warm start) and the evaluation draws' (given the model). "
        f"Degrees of freedom: warm start {W - 1}, seed {W * (R - 1)}, evaluation {W * R * (E - 1)}: with "
        f"{W} warm starts the warm-start share is a rough estimate.",
        "",
        f"Reproduce: `python scripts/variance_decomposition.py --out {args.out}`.",
        "",
    ]
    for other, per in res["differences"].items():
        L += [
            f"## VPO minus {other}",
            "",
            "| statistic | mean | sd of one replicate | warm start | RL seed | eval draws | maze SE of one run |",
            "|---|---|---|---|---|---|---|",
        ]
        for label, c in per.items():
            pct = lambda k, sh=c["shares"]: _pct(sh[k])  # noqa: E731
            L.append(
                f"| {label} | {c['mean']:+.3f} | {np.sqrt(c['total']):.3f} | {pct('warm_start')} | {pct('seed')} | "
                f"{pct('eval')} | {np.sqrt(c['maze_var_of_mean']):.3f} |"
            )
        L += ["", "Per run (rows: warm starts; then RL seeds, each with its evaluation draws), best@30:", ""]
        for w, row in zip(args.warm_seeds, per["best@30 (w*)"]["cells"]):
            L.append(f"- warm start {w}: " + "; ".join(" / ".join(f"{v:+.3f}" for v in r) for r in row))
        L.append("")
    L += ["## Levels (each method alone)", "", "| method | statistic | mean | sd | warm start | RL seed | eval |"]
    L += ["|---|---|---|---|---|---|---|"]
    for method, per in res["levels"].items():
        for label, c in per.items():
            f = lambda k, sh=c["shares"]: _pct(sh[k])  # noqa: E731
            L.append(
                f"| {method} | {label} | {c['mean']:.3f} | {np.sqrt(c['total']):.3f} | {f('warm_start')} | "
                f"{f('seed')} | {f('eval')} |"
            )
    if res.get("warm_repeat"):
        r = res["warm_repeat"]
        L += [
            "",
            "## Is a warm start bit-reproducible on one machine?",
            "",
            f"Warm start {args.warm_seeds[0]} trained twice: first loss {r['first']['loss_first']:.6f} vs "
            f"{r['again']['loss_first']:.6f}; weights SHA-256 {r['first']['weights_sha256'][:16]} vs "
            f"{r['again']['weights_sha256'][:16]}: **{'identical' if r['identical'] else 'different'}**.",
        ]
    return "\n".join(L) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("runs/decomp"))
    ap.add_argument("--warm-seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--rl-seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--eval-draws", type=int, default=2)
    ap.add_argument("--methods", default="grpo,max_at_k,vpo")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeat-warm", action="store_true", help="train the first warm start again and compare")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    args.methods = [m for m in args.methods.split(",") if m]
    if len(args.warm_seeds) < 2 or len(args.rl_seeds) < 2 or args.eval_draws < 2:
        ap.error("need at least 2 warm seeds, 2 RL seeds and 2 eval draws to separate the three levels")
    if 0 in args.warm_seeds and args.warm_seeds.index(0) != 0:
        ap.error("list warm seed 0 first")
    args.out.mkdir(parents=True, exist_ok=True)
    cfgs = train_and_evaluate(args)
    values = per_run_stats(cfgs, args.methods, args.rl_seeds, args.eval_draws)
    res = decompose(values, args.methods)
    res["num_problems"] = int(next(iter(next(iter(values.values())).values())).shape[-1])
    res["design"] = {
        "warm_seeds": args.warm_seeds,
        "rl_seeds": args.rl_seeds,
        "eval_draws": args.eval_draws,
        "methods": args.methods,
    }
    if args.repeat_warm:
        res["warm_repeat"] = repeat_warm(cfgs[0])
    (args.out / "decomposition.json").write_text(json.dumps(res, indent=1))
    (args.out / "decomposition.md").write_text(markdown(res, args))
    print(markdown(res, args))
    if args.json:
        print(json.dumps({"differences": res["differences"], "warm_repeat": res.get("warm_repeat")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
