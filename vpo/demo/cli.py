"""``vpo demo``: VPO vs GRPO and the baselines on a CPU in minutes, measured, with a report.

The embedded default: designed-conflict mazes (a route can visit the gold zone or the diamond zone
but never both within the budget), a 0.69 M-parameter Qwen2 with one token per character built from
scratch (no hub), then

1. a supervised warm start on random valid routes, in both the single-answer and the 3-answer format
   (one checkpoint serves every method);
2. RL from that checkpoint with the product's own ``vpo train`` for each method and seed: GRPO, GRPO
   with 3x rollouts (compute control), GDPO, Max@k, Multi-RLVR (m = 3) and VPO (m = 3);
   ``--methods all`` adds MaxRL, random-weighting and goal-conditioned GRPO;
3. ``vpo eval`` on held-out mazes at a matched answer budget (k counts answers);
4. ``report.md``, ``demo.json`` and PNG plots: best@k under w* and under other preferences, Pareto
   coverage, diversity among completed answers, every interval including seed-to-seed variance.

``--domain prog`` runs the same pipeline on programs in a tiny language, one reward component per test
case (by default step-function targets such as ``x<9?5:9``), reporting pass@1, pass@k and best@k
(docs/demo.md, "Second domain: programs"; about 9 minutes here).

``--set NAME=VALUE`` overrides any setting (``eval_problems``, ``train_problems``, ``rl_steps``, or a
domain's own, such as ``maze_size`` or ``prog_tests``). Settings are chosen with ``--set
split=validation``; the test split is for the report. Jobs run as subprocesses, ``--jobs`` at a time. Each stage records the settings that produced it: rerunning
resumes where it stopped, and a changed setting reruns the stages that depend on it.
"""

from __future__ import annotations

import argparse
from dataclasses import fields, replace

from vpo.errors import UserError


def _parse_setting(name: str, value: str, current):
    """``--set name=value`` as the field's type (tuples comma-separated)."""
    from vpo.demo.config import parse_methods

    try:
        if name == "methods":
            return parse_methods(value)
        if isinstance(current, tuple):
            return tuple(int(x) for x in value.split(",") if x.strip())
        if isinstance(current, bool):
            return value.lower() in ("1", "true", "yes")
        if current is None:  # an optional integer setting (test_seed)
            return None if value.strip().lower() in ("", "none") else int(value)
        return type(current)(value)
    except ValueError:
        kind = "an integer or none" if current is None else type(current).__name__
        raise UserError(f"--set {name}={value}: expected {kind}") from None


def config_from_args(args):
    from vpo.demo.config import DemoConfig, parse_methods

    cfg = DemoConfig.quick() if args.quick else DemoConfig()
    over = {}
    if args.out:
        over["out"] = args.out
    if args.seeds is not None:
        over["seeds"] = tuple(args.seeds)
    if args.methods:
        over["methods"] = parse_methods(args.methods)
    if args.jobs:
        over["jobs"] = args.jobs
    if args.warm_only:
        over["warm_only"] = True
    if getattr(args, "domain", None):
        over["domain"] = args.domain
    names = {f.name for f in fields(DemoConfig)}
    for kv in args.set or []:
        k, sep, v = kv.partition("=")
        if not sep or k not in names:
            raise UserError(f"--set {kv!r}: unknown demo setting {k!r}; the settings are {', '.join(sorted(names))}")
        over[k] = _parse_setting(k, v, getattr(cfg, k))
    return replace(cfg, **over)


# measured wall minutes on the 2-core CI machine (docs/demo.md): (domain, --quick) -> minutes
_MEASURED_MIN = {("maze", False): 13.3, ("maze", True): 3.5, ("prog", False): 9.4, ("prog", True): 3.1}


def estimate_minutes(cfg) -> float:
    """A rough wall-time estimate: the measured time of the domain's default (or --quick) run,
    scaled by its number of training jobs, the jobs at a time and rl_steps (warm start ~10%)."""
    from vpo.demo.config import DemoConfig

    quick = len(cfg.seeds) == 1 and len(cfg.methods) <= 2
    ref = DemoConfig.quick(domain=cfg.domain) if quick else DemoConfig(domain=cfg.domain)
    base = _MEASURED_MIN.get((cfg.domain, quick), 13.3)
    jobs = len(cfg.methods) * len(cfg.seeds) / max(len(ref.methods) * len(ref.seeds), 1)
    scale = jobs * (ref.jobs / max(cfg.jobs, 1)) * (cfg.rl_steps / max(ref.rl_steps, 1))
    return base * (0.1 + 0.9 * scale)


def _main(args) -> int:
    import sys

    from vpo.demo.report import markdown
    from vpo.demo import runner

    cfg = config_from_args(args)
    print(
        f"vpo demo: {len(cfg.methods)} methods x {len(cfg.seeds)} seed(s), {cfg.jobs} jobs at a time: about "
        f"{estimate_minutes(cfg):.0f} min on 2 CPU cores (less where stages in {cfg.out} are already done); "
        "Ctrl-C stops it, and the same command resumes",
        file=sys.stderr,
        flush=True,
    )
    try:
        agg = runner.run_demo(cfg, workers=not args.no_workers)
    except KeyboardInterrupt as err:
        print(
            f"\nvpo demo: interrupted; the finished stages are saved in {cfg.out}: rerun the same command "
            f"(vpo demo --out {cfg.out} with the same settings) to resume where it stopped",
            file=sys.stderr,
        )
        err.vpo_reported = True  # vpo.cli does not say "interrupted" a second time
        raise
    print(markdown(agg))
    return 0


def add_parser(sub) -> None:
    from vpo.demo.config import ALL_METHODS, DEFAULT_METHODS
    from vpo.demo.domains import DOMAINS

    p = sub.add_parser(
        "demo",
        help="train a tiny model with VPO, GRPO and baselines on mazes or programs and report test-time search "
        "(CPU, minutes)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", default=None, help="output directory (default runs/demo)")
    p.add_argument(
        "--domain",
        choices=tuple(DOMAINS),
        default=None,
        help="the task: " + "; ".join(d.summary for d in DOMAINS.values()),
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="the CI setting: 1 seed, grpo and vpo only, 24 problems, 12 answers each (a few minutes on 2 cores)",
    )
    p.add_argument("--seeds", type=int, nargs="+", default=None, help="RL seeds (default 0 1 2)")
    p.add_argument(
        "--methods",
        default=None,
        help=f"comma-separated methods, 'default' ({','.join(DEFAULT_METHODS)}) or 'all' "
        f"(adds {','.join(ALL_METHODS[len(DEFAULT_METHODS) :])}); any registered estimator name works",
    )
    p.add_argument("--jobs", type=int, default=None, help="jobs at a time (default 2)")
    p.add_argument(
        "--no-workers",
        action="store_true",
        help="run every job as a fresh process instead of in long-lived worker processes (same results, slower)",
    )
    p.add_argument(
        "--warm-only",
        action="store_true",
        help="stop after evaluating the warm start: a cheap probe of a task regime's headroom (use with --set split=validation)",
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="FIELD=VALUE",
        help="override any DemoConfig field, e.g. --set rl_steps=120, --set eval_problems=40 or --set split=validation",
    )
    p.set_defaults(func=_main)
