"""The ``vpo eval --search`` and ``vpo compare`` (of search runs) command paths, and :data:`SEARCH_FLAGS` (the parser is :mod:`vpo.search.cli`'s)."""

from __future__ import annotations

import sys
from pathlib import Path

from vpo.errors import UserError

__all__ = ["SEARCH_FLAGS", "searching", "run_search_eval", "compare_searches", "step_note"]

SEARCH_FLAGS = {
    "--search": "search",
    "--budget-tokens": "budget_tokens",
    "--step": "step",
    "--beam-width": "beam_width",
    "--beam-expand": "expand",
    "--tree-algo": "tree_algo",
    "--tree-batch": "tree_batch",
    "--step-scorer": "step_scorer",
    "--step-aggregate": "step_aggregate",
}
"""``vpo eval``'s search flags and the :class:`~vpo.search.step.search.SearchConfig` field each sets
(default, type and help from the field; ``max_new_tokens``, ``num_answers`` and ``seed`` come from
the generation flags)."""


def searching(args) -> bool:
    """Whether ``vpo eval`` runs a budgeted search rather than today's best-of-n pool."""
    from vpo.search.step.search import SearchConfig

    return getattr(args, "search", SearchConfig.search) != SearchConfig.search or (
        getattr(args, "budget_tokens", None) is not None
    )


def _search_config(args, m: int):
    from vpo.search.evalsetup import dest as _dest
    from vpo.search.step.search import SearchConfig

    flags = {field: getattr(args, _dest(flag)) for flag, field in SEARCH_FLAGS.items()}
    return SearchConfig(**flags, max_new_tokens=args.max_new_tokens, num_answers=m, seed=args.seed)


def step_note(cfg) -> str | None:
    """What a first user should know about the step chosen, before the run: with m = 1, answer steps make
    beam and tree best-of-n; token and delimiter steps guide the search but finish answers later."""
    if cfg.search == "bon":
        return None
    if cfg.step == "answer" and cfg.num_answers == 1:
        return (
            f"with m = 1 and --step answer every {cfg.search} step is a whole rollout, so this {cfg.search} search "
            "samples as best-of-n does; --step tokens:N lets the step scorer guide it within an answer"
        )
    if cfg.step != "answer":
        return (
            f"--step {cfg.step}: answers close only after several steps; the search stops stepping when the budget "
            "left holds no further step and closing its best candidates' answers, then closes them. search.md "
            "counts the answers finished and warns when few were"
        )
    return None


def _check_args(args) -> None:
    if args.pool:
        raise UserError(
            "--search/--budget-tokens generate; --pool only recomputes a best-of-n pool's metrics: drop one"
        )
    if args.budget_points < 1:
        raise UserError(f"--budget-points must be >= 1, got {args.budget_points}")
    if not (args.model or args.endpoint):
        raise UserError("nothing to search with: give --model PATH or --endpoint URL")
    if not args.out:
        raise UserError("--out is required: the run directory for the search records and the reports")


def run_search_eval(args) -> int:
    """``vpo eval --search ...``: search every prompt, write ``OUT/search/`` and the reports."""
    from vpo.search.backends import make_generator
    from vpo.search.evalsetup import pool_config, resolve_m, task_from_checkpoint
    from vpo.search.step.report import write_search_report
    from vpo.search.step.run import run_search, search_metrics
    from vpo.search.step.score import make_step_scorer
    from vpo.search.step.search import require_treequest
    from vpo.tasks import get as get_task
    from vpo.tasks.registry import load_split

    _check_args(args)
    task_from_checkpoint(args)
    if not args.task:
        raise UserError("--task is required when searching (`vpo tasks` lists them)")
    task = get_task(args.task, **dict(args.task_options or {}))
    if args.model:
        from vpo.search.backends import check_model

        args.model = check_model(args.model, "--model")
    m = resolve_m(args)
    cfg = _search_config(args, m)
    if cfg.search == "tree":
        require_treequest()  # before loading a model
    note = step_note(cfg)
    if note and not args.quiet:
        from vpo.search import evalsetup

        print(f"{evalsetup.PROG}: note: {note}", file=sys.stderr)
    scorer = make_step_scorer(cfg.step_scorer, task, m)
    examples = load_split(task, args.split, n=args.num_prompts, spec=args.task, required=True, purpose="search")
    pcfg = pool_config(args, m)
    gen = make_generator(args.model, pcfg)
    system = pcfg.system_prompt if pcfg.system_prompt is not None else getattr(task, "system_prompt", None)
    sampling = {k: v for k, v in pcfg.public().items() if k in ("temperature", "top_p", "top_k", "num_answers")}
    out = Path(args.out)
    try:
        meta, records = run_search(
            gen, task, examples, cfg, scorer, out_dir=out, split=args.split, sampling=sampling, system=system,
            resume=not args.no_resume, progress=not args.quiet,
        )  # fmt: skip
    except KeyboardInterrupt as err:
        from vpo.search import evalsetup

        print(
            f"\n{evalsetup.PROG}: interrupted; finished prompts are saved in {out / 'search'}. Rerun to resume.",
            file=sys.stderr,
        )
        err.vpo_reported = True
        raise
    model_name = Path(args.model).name if args.model else (args.served_model or "endpoint")
    name = args.name or f"{model_name} {cfg.search}"
    res = search_metrics(
        meta, records, num_points=args.budget_points, selectors=args.selectors, bootstrap=args.bootstrap,
        ci_level=args.ci_level,
    )  # fmt: skip
    paths = write_search_report({name: res}, out, title=args.title, plots=not args.no_plots)
    _print(name, res, paths)
    return 0


def _print(name: str, res: dict, paths: dict) -> None:
    from vpo.search import evalsetup

    e = res["best_at_budget"]
    curve = ", ".join(f"best@{b} {x:.3f}" for b, x in zip(e["tokens"], e["mean"]) if x is not None)
    t = res["tokens"]
    fin = res.get("finished")
    done = f", {fin['mean'][-1]:.1f} answers finished per prompt" if fin else ""
    print(f"{name} [{res['search']['search']}]: {curve}; {t['generated_mean']:.1f} tokens generated per prompt{done}")
    for w in res.get("warnings") or []:
        print(f"{evalsetup.PROG}: warning: {name}: {w}", file=sys.stderr)
    if paths:
        print("wrote " + ", ".join(str(p) for p in paths.values()))


def compare_searches(args, names) -> int:
    """``vpo compare`` when every run is a search run: one table, paired differences, replicate intervals."""
    from vpo.search.step.report import REPORT, load_search_report, write_search_report
    from vpo.search.step.run import load_records, search_metrics

    merged: dict[str, dict] = {}
    groups: dict[str, list[str]] = {}
    for i, run in enumerate(args.runs):
        p = Path(run)
        if (p / "search" / "meta.json").exists() and (args.recompute or not (p / REPORT).exists()):
            meta, records = load_records(p)
            found = {p.name: search_metrics(meta, records, budget=getattr(args, "budget_tokens", None),
                                            selectors=args.selectors, bootstrap=args.bootstrap,
                                            ci_level=args.ci_level)}  # fmt: skip
        else:
            found = load_search_report(p)
        if len(found) != 1 and names is not None:
            raise UserError(f"{run}: holds {len(found)} search results; --names needs one per run")
        for label, res in found.items():
            label = names[i] if names is not None else label
            key, n = label, 2
            while key in merged:
                key, n = f"{label} #{n}", n + 1
            merged[key] = res
            if args.replicates:
                groups.setdefault(names[i], []).append(key)
    paths = write_search_report(merged, args.out, title=args.title, plots=not args.no_plots,
                                replicate_groups=groups or None)  # fmt: skip
    for name, res in merged.items():
        _print(name, res, {})
    from vpo.search import evalsetup
    from vpo.search.step.report import few_against_bon

    for w in few_against_bon(merged):
        print(f"{evalsetup.PROG}: warning: {w}", file=sys.stderr)
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0
