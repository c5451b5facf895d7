"""``vpo demo``: VPO vs GRPO and the baselines on a CPU in minutes, measured, with a report.

The embedded default: designed-conflict mazes (a route can visit the gold zone or the diamond zone
but never both within the budget), a 0.69 M-parameter Qwen2 with one token per character built from
scratch (no hub), then

1. a supervised warm start per replicate (seed) on random valid routes, in both the single-answer and
   the 3-answer format;
2. RL from that checkpoint with the product's own ``vpo train`` for each method and seed: GRPO, GRPO
   with 3x rollouts (compute control), GDPO, Max@k, Multi-RLVR (m = 3) and VPO (m = 3);
   ``--methods all`` adds MaxRL, random-weighting GRPO, goal-conditioned GRPO, VPO@k (m = 3) and
   Pareto/niche;
3. ``vpo eval`` on held-out mazes at a matched answer budget (k counts answers);
4. ``report.md``, ``demo.json`` and PNG plots: best@k under w* and under other preferences, Pareto
   coverage, diversity among completed answers, replicate t intervals.

``--domain prog`` runs the same pipeline on programs in a tiny language, one reward component per test
case (by default step-function targets such as ``x<9?5:9``), reporting pass@1, pass@k and best@k
(docs/demo.md, "Second domain: programs"; about 9 minutes here).

``--model smollm2 --domain shop`` runs it on a pretrained chat model: SmolLM2-135M-Instruct (fetched
once, offline) recommends products from six-item shop lists scored by three shoppers; its warm start
fine-tunes the model, RL trains LoRA adapters, and the methods are GRPO 3x, Max@k and VPO
(docs/pretrained.md; about 33 minutes here). ``--model DIR`` takes another checkpoint. ``--domain
animals`` asks the same model for small, fast,
long-lived animals from lists of 20 well-known ones, with a warm start on the base model's own answers,
100 LoRA steps of GRPO 3x, Max@k 3x and VPO, the start also at T = 1.0 and a uniform random answerer
(docs/pretrained.md: RL teaches the task, GRPO collapses, VPO beat GRPO at search in 2 of 5
replicates and lost its three-answer format in the others; about 2.6 hours for five replicates here).

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
            if value.strip().lower() not in ("1", "true", "yes", "0", "false", "no"):
                raise ValueError(value)
            return value.strip().lower() in ("1", "true", "yes")
        if current is None:  # an optional integer setting (test_seed)
            return None if value.strip().lower() in ("", "none") else int(value)
        return type(current)(value)
    except ValueError:
        kind = (
            "an integer or none"
            if current is None
            else "true or false"
            if isinstance(current, bool)
            else type(current).__name__
        )
        raise UserError(f"--set {name}={value}: expected {kind}") from None


def config_from_args(args):
    from vpo.demo.config import DemoConfig, parse_methods
    from vpo.demo.domains import DEFAULT_DOMAIN

    domain = getattr(args, "domain", None) or DEFAULT_DOMAIN
    cfg = DemoConfig.for_domain(domain, quick=args.quick)
    over = {}
    if getattr(args, "model", None):
        if "shop_model" not in {*cfg.domain_spec.settings, *cfg.domain_spec.shared_settings}:
            raise UserError(
                f"--model applies to --domain shop or animals (a pretrained chat model); --domain {domain} trains "
                "a tiny model of its own: drop --model or add --domain shop"
            )
        over["shop_model"] = args.model
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
    names = {f.name for f in fields(DemoConfig)}
    for kv in args.set or []:
        k, sep, v = kv.partition("=")
        if not sep or k not in names:
            raise UserError(f"--set {kv!r}: unknown demo setting {k!r}; the settings are {', '.join(sorted(names))}")
        over[k] = _parse_setting(k, v, getattr(cfg, k))
    return replace(cfg, **over)


_FIXED_S = 30.0  # worker start (imports, training problems), the report


def estimate_minutes(cfg) -> float:
    """A rough wall-time estimate on two cores from measured per-job costs (``Domain.job_costs_s``), scaled
    by warm_steps, rl_steps and the evaluated answers: the one-core work spread over the job slots,
    or the first replicate's chain (warm start, its longest job, an evaluation) when that is longer.
    The 3-replicate maze default comes out at 9.9 min (measured: 9.8)."""
    from vpo.demo.config import method_spec
    from vpo.demo.domains import DEFAULT_DOMAIN, domain_named

    cost = cfg.domain_spec.job_costs_s or domain_named(DEFAULT_DOMAIN).job_costs_s
    slots = max(1, min(cfg.jobs, 2))
    warm = cost["warm"] * cfg.warm_steps / 600
    ev = cost["eval"] * (cfg.eval_problems * cfg.eval_budget) / 3000
    jobs = []
    for m in cfg.methods:
        multi = method_spec(m)[2] > 1
        jobs.append(cost.get(m, cost["vpo"] if multi else cost["grpo"]) * cfg.rl_steps / 60)
    n_warm = len(cfg.warm_seeds())
    warm_evals = 4 if cfg.start_temperature else 2  # m = 1 and 3, and again at start_temperature
    work = n_warm * (warm + warm_evals * ev) + len(cfg.seeds) * (sum(jobs) + len(jobs) * ev)
    # a warm start trains on all cores in process (two threads: half its one-core time) or as a job
    chain = (warm / 2 if not cfg.warm_starts_as_jobs else warm) + max(jobs, default=0.0) + ev
    return (_FIXED_S + max(work / slots, chain)) / 60


_DEMO_PROCESS_GIB = 0.3  # the demo's own process (the scheduler), measured beside the shop run's workers


def estimate_memory_gib(cfg, jobs: int | None = None) -> float | None:
    """Peak resident memory of a demo run with ``jobs`` (default ``cfg.jobs``) at a time: the demo's
    process and, per job slot, the domain's largest measured job (``Domain.job_memory_gib``); None
    where the domain has no measurement."""
    mem = cfg.domain_spec.job_memory_gib
    if not mem:
        return None
    return _DEMO_PROCESS_GIB + max(1, jobs or cfg.jobs) * max(mem.values())


def memory_note(cfg, available_gib: float | None) -> str:
    """The estimate line's memory clause, and a way out when the machine has less available."""
    need = estimate_memory_gib(cfg)
    if need is None:
        return ""
    note = f"; it expects about {need:.0f} GiB of memory ({cfg.jobs} job(s) at a time)"
    if available_gib is not None and available_gib < need and cfg.jobs > 1:
        one = estimate_memory_gib(cfg, 1)
        note += (
            f", and only {available_gib:.0f} GiB are available: run it with --jobs 1 (about {one:.0f} GiB, "
            "about twice the time)"
        )
    return note


def available_gib() -> float | None:
    """MemAvailable of /proc/meminfo in GiB (None where the file is missing)."""
    try:
        for line in open("/proc/meminfo", encoding="ascii"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024**2
    except OSError:
        return None
    return None


def load_note(load: float, cores: int, jobs: int) -> str:
    """What the estimate means on a busy machine: the demo's ``jobs`` share the ``cores`` with the
    ``load`` (run-queue length) already there, so each job runs about (load + jobs) / cores times
    slower once that exceeds one (the maze replay of 2026-12: 36 min at load 3-8 against an idle 10)."""
    factor = (load + min(jobs, cores)) / max(1, cores)
    if load < 1.0 or factor < 1.25:
        return ""
    return f"; this machine is busy (load {load:.1f} on {cores} cores): expect about {factor:.1f}x that"


def _main(args) -> int:
    import os
    import sys

    from vpo.demo.report import markdown
    from vpo.demo import runner

    cfg = config_from_args(args)
    print(
        f"vpo demo: {len(cfg.methods)} methods x {len(cfg.seeds)} seed(s), {cfg.jobs} jobs at a time: about "
        f"{estimate_minutes(cfg):.0f} min on 2 idle CPU cores (less where stages in {cfg.out} are already done)"
        f"{load_note(os.getloadavg()[0], os.cpu_count() or 1, cfg.jobs)}{memory_note(cfg, available_gib())}; "
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
        "--model",
        default=None,
        help="the pretrained chat model of --domain shop and animals: 'smollm2' (default; fetched once) or a checkpoint "
        "directory (the maze and prog domains train a tiny model of their own)",
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
