"""What both ``vpo eval`` paths (a best-of-n pool, :mod:`vpo.search.cli`; a budgeted search,
:mod:`vpo.search.step.cli`) set up alike before they generate: the command name their notes start
with (:data:`PROG`), a checkpoint's training settings (:func:`checkpoint_settings`): its task and
task options (:func:`task_from_checkpoint`) and its answers per rollout m (:func:`resolve_m`), and the
generation flags' :class:`~vpo.search.backends.PoolConfig` (:data:`POOL_FLAGS`, :func:`pool_config`)."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from vpo.errors import UserError
from vpo.search.backends import PoolConfig

__all__ = [
    "POOL_FLAGS",
    "PROG",
    "as_command",
    "checkpoint_settings",
    "dest",
    "pool_config",
    "resolve_m",
    "task_from_checkpoint",
]

PROG = "vpo eval"
"""The command name this module's notes, warnings and interruption lines start with: ``vpo check``
runs ``vpo eval`` in its own process and sets it to ``vpo check`` meanwhile, ``vpo compare`` to
``vpo compare`` while it runs (:func:`as_command`); read it as ``evalsetup.PROG`` (an imported copy
would not follow)."""


@contextlib.contextmanager
def as_command(name: str):
    """``with as_command("vpo check"):`` the lines :data:`PROG` starts say that command's name."""
    global PROG
    previous, PROG = PROG, name
    try:
        yield
    finally:
        PROG = previous


POOL_FLAGS = {
    "--rollouts": "n_rollouts",
    "--temperature": "temperature",
    "--top-p": "top_p",
    "--top-k": "top_k",
    "--max-new-tokens": "max_new_tokens",
    "--seed": "seed",
    "--stop-at-last-answer": "stop_at_last_answer",
    "--backend": "backend",
    "--device": "device",
    "--threads": "num_threads",
    "--batch-rows": "max_batch_rows",
    "--plain-generate": "plain_generate",
    "--api": "api",
    "--served-model": "served_model",
    "--api-key": "api_key",
    "--concurrency": "concurrency",
}
"""``vpo eval``'s generation flags and the :class:`~vpo.search.backends.PoolConfig` field each sets: the
flag's default, type and help are the field's (``--endpoint`` too, in the "what to evaluate" group)."""


def checkpoint_settings(model: str | None) -> tuple[dict, str | None]:
    """(settings, the file they came from) of a checkpoint trained by VPOTrainer: its ``vpo_args.json``,
    else ``num_answers`` from its ``training_args.bin``; ``({}, None)`` when the model has neither."""
    import json

    if not model or not Path(model).is_dir():
        return {}, None
    p = Path(model) / "vpo_args.json"
    if p.is_file():
        try:
            return dict(json.loads(p.read_text())), str(p)
        except (OSError, ValueError):
            return {}, None
    p = Path(model) / "training_args.bin"
    if p.is_file():
        try:
            import torch

            targs = torch.load(p, weights_only=False)
        except Exception:  # noqa: BLE001 - an unreadable or foreign pickle just means "no settings"
            return {}, None
        m = getattr(targs, "num_answers", None)
        if isinstance(m, int) and m >= 1:
            return {"num_answers": m, "estimator": getattr(targs, "estimator", None)}, str(p)
    return {}, None


def resolve_m(args) -> int:
    """``--num-answers``, else the checkpoint's training num_answers (said on stderr), else 1."""

    settings, source = checkpoint_settings(args.model)
    fmt = settings.get("answer_format", "tags")
    if fmt != "tags":
        raise UserError(f"{source}: answer_format {fmt!r} is not one vpo eval can parse (only 'tags')")
    trained_m = settings.get("num_answers")
    if args.num_answers is not None:
        if trained_m and trained_m != args.num_answers:
            print(
                f"{PROG}: note: --num-answers {args.num_answers}, but the checkpoint was trained with num_answers = "
                f"{trained_m} ({source})",
                file=sys.stderr,
            )
        return args.num_answers
    if trained_m:
        print(
            f"{PROG}: num_answers = {trained_m} answers per rollout, as the checkpoint was trained ({source}); "
            "--num-answers overrides",
            file=sys.stderr,
        )
        return int(trained_m)
    return 1


def task_from_checkpoint(args) -> None:
    """``--task`` and ``--task-options`` against the checkpoint's ``vpo_args.json``: without ``--task``, the
    checkpoint's task and options (said on stderr); with the same task, the checkpoint's options merged under
    ``--task-options`` (whose keys win); another task: a UserError unless ``--task-options`` is given."""
    if not args.model:
        return
    settings, source = checkpoint_settings(args.model)
    trained = settings.get("task")
    if not isinstance(trained, str) or not trained:
        return
    trained_opts = settings.get("task_options")
    trained_opts = dict(trained_opts) if isinstance(trained_opts, dict) else {}
    if not args.task:
        args.task = trained
        args.task_options = {**trained_opts, **(args.task_options or {})}
        opts = f" with task options {json.dumps(args.task_options)}" if args.task_options else ""
        print(
            f"{PROG}: task {trained}{opts}, as the checkpoint was trained ({source}); --task overrides",
            file=sys.stderr,
        )
    elif _same_task(args.task, trained, trained_opts):
        _merge_task_options(args, trained, trained_opts, source)
    elif args.task_options is None and _task_name(args.task, {}) is not None:
        opts = f" with task options {json.dumps(trained_opts)}" if trained_opts else ""
        raise UserError(
            f"--task {args.task}, but {args.model} was trained on task {trained}{opts} ({source}), so it would be "
            f"scored on another task with that task's default options; drop --task to evaluate on {trained}, or give "
            "--task-options (e.g. '{}') to evaluate on the other task on purpose"
        )
    else:
        print(
            f"{PROG}: note: evaluating on task {args.task}, but the checkpoint was trained on task {trained} "
            f"({source})",
            file=sys.stderr,
        )


def _same_task(named: str, trained: str, trained_opts: dict) -> bool:
    """Whether two task specs name one task: equal, one factory spelled ``module:f`` and ``path/module.py:f``,
    or two specs (a registered name and a factory) that build tasks of one name."""

    def key(spec: str) -> str:
        mod, _, fn = spec.rpartition(":")
        return f"{Path(mod).stem}:{fn}" if mod else spec

    if key(named) == key(trained):
        return True
    name = _task_name(trained, trained_opts)
    return name is not None and name == _task_name(named, trained_opts)


def _task_name(spec: str, options: dict) -> str | None:
    """The name of the task ``spec`` builds with ``options`` (else with its defaults); None when it cannot be
    built here (the command's own task loading says why, later)."""
    from vpo.tasks import get as get_task

    for opts in (options, {}):
        try:
            return get_task(spec, **opts).name
        except Exception:  # noqa: BLE001, S112 - an unbuildable spec: the caller falls back to a note
            continue
    return None


def _merge_task_options(args, trained: str, trained_opts: dict, source: str) -> None:
    """``args.task_options``: the checkpoint's options with ``--task-options`` on top (said on stderr, with each
    option the command line changes)."""
    given = dict(args.task_options or {})
    args.task_options = {**trained_opts, **given}
    spelled = "" if args.task == trained else f" (note: the checkpoint was trained on task {trained}, the same factory)"
    changed = [
        f"{k} = {json.dumps(v)} (trained with {json.dumps(trained_opts[k])})"
        for k, v in given.items()
        if k in trained_opts and trained_opts[k] != v
    ]
    print(
        f"{PROG}: task {args.task}{spelled} with task options {json.dumps(args.task_options)}: the checkpoint's "
        f"({source}) with --task-options on top",
        file=sys.stderr,
    )
    if changed:
        print(f"{PROG}: note: --task-options changes {', '.join(changed)}", file=sys.stderr)


def dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def pool_config(args, m: int):
    """The :class:`~vpo.search.backends.PoolConfig` of the generation flags (a ValueError on a bad one)."""
    try:
        return PoolConfig(
            num_answers=m,
            endpoint=args.endpoint,
            **{field: getattr(args, dest(flag)) for flag, field in POOL_FLAGS.items()},
        )
    except ValueError as err:
        raise UserError(str(err)) from None
