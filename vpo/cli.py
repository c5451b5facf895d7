"""The ``vpo`` command line. Thin: each subcommand lives next to the layer it drives and is
registered here; heavy imports (torch models, TRL, vLLM) happen only when a command runs.

Each command module exposes ``add_parser(subparsers)`` which registers one or more subcommands and
sets ``func`` (called with the parsed args; its return value is the exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from vpo.errors import UserError

# module -> registers these subcommands
_COMMAND_MODULES = (
    "vpo.train.cli",  # train
    "vpo.search.cli",  # eval, compare
    "vpo.integrations.evolve.cli",  # evolve
    "vpo.demo",  # demo
)


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
            print(f"{name:10s} (unavailable: {e})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from vpo import __version__

    p = argparse.ArgumentParser(
        prog="vpo",
        description="Vector Policy Optimization: train for diverse candidates, measure test-time search.",
    )
    p.add_argument("--version", action="version", version=f"vpo {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    e = sub.add_parser("estimators", help="list the advantage estimators (VPO and baselines)")
    e.set_defaults(func=_list_estimators)
    t = sub.add_parser("tasks", help="list the built-in tasks and their objectives")
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    try:
        return int(args.func(args) or 0)
    except UserError as err:
        print(f"vpo {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"vpo {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
