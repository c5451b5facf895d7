"""The ``vpo`` command line. Thin: each subcommand lives next to the layer it drives and is
registered here; heavy imports (torch models, TRL, vLLM) happen only when a command runs.

Each command module exposes ``add_parser(subparsers)`` which registers one or more subcommands and
sets ``func`` (called with the parsed args; its return value is the exit code).

One error path: a user mistake (a :class:`~vpo.errors.UserError`, a task's data being unavailable, a
bad command-line value) prints ONE line, ``vpo COMMAND: error: what, where, what to do``, and exits
with code 2; ``--debug`` (anywhere on the line, or ``VPO_DEBUG=1``) prints the traceback as well.
``vpo train`` takes its arguments raw (TRL's ``--field value`` parser reads them), so that it runs from
flags alone (``vpo train --task maze --model_name_or_path X``) as well as from a config.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback

from vpo.errors import UserError

# module -> registers these subcommands
_COMMAND_MODULES = (
    "vpo.train.cli",  # train
    "vpo.train.models",  # models fetch
    "vpo.search.cli",  # eval, compare
    "vpo.search.check",  # check
    "vpo.integrations.evolve.cli",  # evolve
    "vpo.demo",  # demo
    "vpo.tasks.audit_cli",  # rewards audit
)


# subcommands whose arguments after the command name are passed through unparsed (as ``args.overrides``)
_RAW_ARGV_COMMANDS = ("train",)


class _ArgumentError(UserError):
    """A value argparse rejected (``--num-answers three``); raised instead of printing the whole usage."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises :class:`_ArgumentError` (one line) instead of printing usage and exiting."""

    def error(self, message):
        err = _ArgumentError(f"{message}; `{self.prog} --help` lists the options")
        err.prog = self.prog
        raise err


def one_line(message: object) -> str:
    """``message`` on one line (newlines and runs of spaces collapsed)."""
    return " ".join(str(message).split())


def _list_estimators(args) -> int:
    from vpo.core.estimators import ESTIMATORS

    for name in sorted(ESTIMATORS):
        spec = ESTIMATORS[name]
        kind = "m answers" if spec.multi_answer else "1 answer "
        print(f"{name:18s} {kind}  {spec.summary}  [{spec.paper}]")
    return 0


def _list_tasks(args) -> int:
    from vpo.tasks import get, list_tasks

    for name in list_tasks():
        try:
            t = get(name)
            print(f"{name:10s} d={t.d:<3d} objectives: {', '.join(t.objectives)}")
        except Exception as e:  # noqa: BLE001 - listing must not die on one task's optional dependency
            if "missing a required argument" in str(e):  # a wrapper such as noisy: built with options only
                print(f"{name:10s} (needs task options: {str(e).split(': ', 1)[-1].split(';')[0]})")
            else:
                print(f"{name:10s} (unavailable: {e})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from vpo import __version__
    from vpo.tasks.registry import add_import_argument

    p = _Parser(
        prog="vpo",
        description="Vector Policy Optimization: train for diverse candidates, measure test-time search.",
    )
    p.add_argument("--version", action="version", version=f"vpo {__version__}")
    p.add_argument("--debug", action="store_true", help="on an error, print the traceback too (anywhere on the line)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    e = sub.add_parser("estimators", help="list the advantage estimators (VPO and baselines)")
    add_import_argument(e)
    e.set_defaults(func=_list_estimators)
    t = sub.add_parser("tasks", help="list the built-in and registered tasks and their objectives")
    add_import_argument(t)
    t.set_defaults(func=_list_tasks)
    for mod in _COMMAND_MODULES:
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as err:
            if err.name == mod:  # the command module itself is absent in this build
                continue
            raise
        module.add_parser(sub)
    return p


def _split_raw(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """(argv up to and including a raw-argv command, the rest) or (argv, None)."""
    for i, tok in enumerate(argv):
        if tok in _RAW_ARGV_COMMANDS:
            return argv[: i + 1], argv[i + 1 :]
        if not tok.startswith("-"):
            break
    return argv, None


def _asks_version(argv: list[str]) -> bool:
    """``--version`` before any command name (``vpo --version``)."""
    for tok in argv:
        if tok == "--version":
            return True
        if not tok.startswith("-"):
            return False
    return False


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get("VPO_DEBUG", "").strip().lower() in ("1", "true", "yes")
    argv = [a for a in argv if a != "--debug"]
    command = "?"
    if _asks_version(argv):  # at once: no command module (torch, TRL) is imported for it
        from vpo import __version__

        print(f"vpo {__version__}")
        return 0
    try:
        parser = build_parser()
        head, raw = _split_raw(argv)
        args = parser.parse_args(head)
        if raw is not None:
            args.config, args.overrides = None, raw
        command = getattr(args, "command", None) or "?"
        if not getattr(args, "func", None):
            parser.print_help()
            return 1
        args.debug = debug
        if getattr(args, "imports", None):  # --import, for every command that takes it (vpo train: its own flag)
            from vpo.tasks import import_user_modules

            import_user_modules(args.imports)
        return int(args.func(args) or 0)
    except UserError as err:
        if debug:
            traceback.print_exc()
        prefix = getattr(err, "prog", None) or ("vpo" if command == "?" else f"vpo {command}")
        print(f"{prefix}: error: {one_line(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:
        if not getattr(err, "vpo_reported", False):  # the command already said what was saved
            print(f"vpo {command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
