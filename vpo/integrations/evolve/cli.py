"""``vpo evolve``: OpenEvolve search with one or more models side by side (m programs per call).

Registered in :data:`vpo.cli._COMMAND_MODULES`. Turns flags and an optional YAML config into
:class:`EvolveModel`/:class:`EvolveProblem`/:class:`EvolveSettings`, runs
:func:`~vpo.integrations.evolve.report.run_comparison` and prints one line per model. Bad specs
and run failures (:class:`EvolveError`) become :class:`~vpo.errors.UserError` (one line, exit 2).
The help text below is the user's reference; docs/evolve.md has the long version.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from vpo.errors import UserError

_DESCRIPTION = "OpenEvolve search with one or more models side by side (m candidate programs per LLM call)."
_EPILOG = """\
Problems come from OpenEvolve folders (--problem DIR: initial_program.py + evaluator.py
+ optional problem.yaml) or from a vpo task (--task code --task-options '{"data": "problems.jsonl"}',
one problem per example; --import MODULE first imports code that registers a task). Models are --model specs of comma-separated key=value pairs:

    --model name=grpo,api_base=http://127.0.0.1:8000/v1,model=ckpt-grpo
    --model name=vpo,num_answers=3,api_base=http://127.0.0.1:8001/v1,model=ckpt-vpo
    --model name=tiny,num_answers=3,client=vpo.integrations.evolve:LocalHFClient,path=runs/tiny

Keys: name, num_answers (m), api_base, model, api_key, client, temperature, max_tokens, timeout,
retries; any other key is passed to the client factory (values parsed as JSON when they can
be). A --config FILE.yaml may hold models: (list of such mappings), problems: (list of
{dir: ...} or {task: ..., task_options: ..., split: ..., n: ...}) and settings:
(fields of vpo.integrations.evolve.EvolveSettings); flags add to / override it.

Selection (--selection vpo, the default): island i ranks its programs by its own
w_i ~ Dir(alpha) of the metric vector (seeded by --seed, recorded in the report), and a Pareto
archive of the non-dominated metric vectors supplies parents and inspirations to every island;
--selection default is OpenEvolve's own selection on w*^T r. Example problems:
examples/evolve/poly_fit and examples/evolve/tradeoff.

Writes OUT/report.json, OUT/evolve_progress.png and per run OUT/<model>/<problem>/
(history, OpenEvolve checkpoints, best program, Pareto archive). See docs/evolve.md.
"""

_MODEL_KEYS = {
    "name",
    "num_answers",
    "api_base",
    "model",
    "api_key",
    "client",
    "temperature",
    "max_tokens",
    "timeout",
    "retries",
}
_NUMERIC_MODEL_KEYS = {"num_answers", "temperature", "max_tokens", "timeout", "retries"}
_SETTINGS_FLAGS = {
    "budget": "budget",
    "budget_unit": "budget_unit",
    "eval_timeout": "eval_timeout",
    "islands": "num_islands",
    "checkpoint_interval": "checkpoint_interval",
    "seed": "seed",
    "max_llm_failures": "max_llm_failures",
    "stop_when_solved": "stop_when_solved",
    "selection": "selection",
    "weight_alpha": "weight_alpha",
    "eval_workers": "eval_workers",
}


def add_parser(subparsers) -> None:
    from vpo.tasks.registry import add_import_argument

    p = subparsers.add_parser(
        "evolve",
        help="OpenEvolve search with several models side by side (m candidate programs per LLM call)",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_EPILOG,
    )
    p.add_argument("--config", help="YAML with models / problems / settings")
    p.add_argument(
        "--problem", action="append", default=[], metavar="DIR", help="OpenEvolve problem folder (repeatable)"
    )
    add_import_argument(p)
    p.add_argument("--task", help="vpo task whose examples are the problems (e.g. code)")
    p.add_argument("--task-options", default="{}", help="JSON options for --task")
    p.add_argument("--split", default="test", help="split of --task (default: test)")
    p.add_argument("--n", type=int, default=None, help="number of --task examples (default: all)")
    p.add_argument("--model", action="append", default=[], metavar="SPEC", help="model spec key=value,... (repeatable)")
    p.add_argument("--budget", type=int, help="budget per (model, problem) run (default 40)")
    p.add_argument(
        "--budget-unit", choices=["candidates", "calls"], help="what the budget counts (default: candidates)"
    )
    p.add_argument(
        "--eval-timeout", type=float, help="seconds per evaluation before the evaluator is killed (default 30)"
    )
    p.add_argument("--islands", type=int, help="OpenEvolve islands (default 2)")
    p.add_argument("--checkpoint-interval", type=int, help="calls between checkpoints (default 10)")
    p.add_argument("--max-llm-failures", type=int, help="consecutive failed LLM calls that stop a run (default 3)")
    p.add_argument("--seed", type=int, help="seed (default 0; also draws the islands' weightings)")
    p.add_argument(
        "--selection",
        choices=["vpo", "default"],
        help="vpo (default): each island ranks programs by its own w ~ Dir(alpha) of the metric vector and "
        "a Pareto archive feeds parents and inspirations; default: OpenEvolve's selection on w*^T r",
    )
    p.add_argument(
        "--weight-alpha", type=float, help="Dirichlet concentration of the islands' weightings (default 1.0)"
    )
    p.add_argument(
        "--eval-workers",
        type=int,
        help="evaluation processes: a call's candidates evaluated at once (default: min(m, CPU cores))",
    )
    p.add_argument(
        "--stop-when-solved", action="store_const", const=True, help="end a run at its first solving program"
    )
    p.add_argument("--out", default="runs/evolve", help="output folder (default: runs/evolve)")
    p.add_argument("--resume", action="store_true", help="continue each run from its latest checkpoint")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def _value(v: str):
    try:
        return json.loads(v)
    except json.JSONDecodeError:
        return v


def _spec_items(spec: str | dict) -> dict:
    if isinstance(spec, dict):
        return dict(spec)
    items = {}
    for part in [s for s in spec.split(",") if s.strip()]:
        if "=" not in part:
            raise UserError(
                f"--model {spec!r}: {part!r} is not key=value (e.g. name=vpo,num_answers=3,api_base=http://...)"
            )
        k, v = part.split("=", 1)
        items[k.strip()] = v.strip()
    return items


def parse_model_spec(spec: str | dict) -> dict:
    """``"name=a,num_answers=3,api_base=..."`` (or a mapping) -> EvolveModel keyword arguments."""
    items = _spec_items(spec)
    kwargs = {"client_options": dict(items.pop("client_options", {}) or {})}
    for k, v in items.items():
        if k in _MODEL_KEYS:
            kwargs[k] = _value(v) if k in _NUMERIC_MODEL_KEYS and isinstance(v, str) else v
        else:
            kwargs["client_options"][k] = _value(v) if isinstance(v, str) else v
    if "name" not in kwargs:
        raise UserError(f"--model {spec!r}: name= is required")
    if kwargs.get("model") is not None:
        kwargs["model"] = str(kwargs["model"])
    if kwargs["client_options"] and "client" not in kwargs:
        raise UserError(
            f"--model {spec!r}: unknown keys {sorted(kwargs['client_options'])} (they only go with client=...)"
        )
    return kwargs


def _read_config(path: str | None) -> dict:
    if not path:
        return {}
    import yaml

    try:
        cfg = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise UserError(f"cannot read --config {path}: {e}") from e
    if not isinstance(cfg, dict) or set(cfg) - {"models", "problems", "settings"}:
        raise UserError(f"--config {path}: expected a mapping with models / problems / settings")
    return cfg


def _problems(cfg: dict, args) -> list:
    """The config file's problems, then --problem folders, then --task examples (the task's own split:
    --seed seeds the search, not which problems)."""
    from vpo.integrations.evolve import problems as pr

    problems = []
    for entry in list(cfg.get("problems") or []):
        if "dir" in entry:
            problems.append(pr.problem_from_dir(entry["dir"]))
        elif "task" in entry:
            problems += pr.problems_from_task(
                entry["task"], entry.get("task_options"), entry.get("split", "test"), entry.get("n")
            )
        else:
            raise UserError(f"--config problems entry {entry!r}: needs dir: or task:")
    problems += [pr.problem_from_dir(d) for d in args.problem]
    if args.task:
        problems += pr.problems_from_task(args.task, json.loads(args.task_options), args.split, args.n)
    return problems


def _build(cfg: dict, args):
    """``(settings, models, problems)`` from the config file and the flags."""
    from vpo.integrations.evolve.config import EvolveModel, EvolveSettings

    try:
        settings_kw = dict(cfg.get("settings") or {})
        for flag, field in _SETTINGS_FLAGS.items():
            if getattr(args, flag) is not None:
                settings_kw[field] = getattr(args, flag)
        settings = EvolveSettings(**settings_kw)
        models = [EvolveModel(**parse_model_spec(s)) for s in list(cfg.get("models") or []) + args.model]
        problems = _problems(cfg, args)
    except UserError:
        raise
    except (TypeError, ValueError, ImportError) as e:
        raise UserError(str(e)) from e
    if not models:
        raise UserError("no model: give --model name=...,api_base=... (or client=...) at least once")
    if not problems:
        raise UserError("no problem: give --problem DIR or --task NAME")
    return settings, models, problems


def _import_user_code(modules: list[str]) -> None:
    """Import ``--import`` modules here, and (through ``IMPORTS_ENV``) in the evaluation workers,
    which build the task again in their own process."""
    import os

    from vpo.integrations.evolve.worker import IMPORTS_ENV
    from vpo.tasks import import_user_modules

    if not modules:
        return
    import_user_modules(modules)
    # file paths made absolute: a worker resolves them on its own
    refs = [str(Path(m).resolve()) if m.strip().endswith(".py") or "/" in m else m.strip() for m in modules]
    os.environ[IMPORTS_ENV] = json.dumps(json.loads(os.environ.get(IMPORTS_ENV, "[]")) + refs)


def check_openevolve() -> None:
    """A one-line UserError with the install command when openevolve is not installed."""
    from importlib.util import find_spec

    try:
        found = find_spec("openevolve") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise UserError(
            'vpo evolve needs openevolve, which is not installed; in the vpo clone: pip install -e ".[evolve]" '
            "(openevolve==0.4.0)"
        )


def run(args) -> int:
    from vpo.integrations.evolve.config import EvolveError
    from vpo.integrations.evolve.report import run_comparison

    check_openevolve()
    _import_user_code(args.imports)
    settings, models, problems = _build(_read_config(args.config), args)
    try:
        report = run_comparison(problems, models, settings, args.out, resume=args.resume, progress=not args.no_progress)
    except EvolveError as e:
        raise UserError(str(e)) from e
    out = Path(args.out)
    print(
        f"{'model':16s} {'m':>2s} {'solved':>8s} {'mean best':>10s} {'coverage':>9s} {'archive':>8s} "
        f"{'calls':>6s} {'cands':>6s}"
    )
    for name, r in report["models"].items():
        print(
            f"{name:16s} {r['answers_per_call']:2d} {r['problems_solved']:4d}/{len(problems):<3d} "
            f"{r['mean_best_score']:10.3f} {r['mean_coverage']:9.3f} {r['mean_archive_size']:8.1f} "
            f"{r['llm_calls']:6d} {r['candidates']:6d}"
        )
    print(f"report: {out / 'report.json'}\nplot:   {out / 'evolve_progress.png'}")
    return 0
