"""``vpo demo``: the CPU proof. See :mod:`vpo.demo.cli` for what it runs and docs/demo.md for results.

Modules: ``config`` (settings, methods), ``domains`` (one object per domain: what differs between
the maze and the programs), ``stages`` (warm start, train/eval jobs), ``jobs`` (the
subprocess runner with settings-checked resume), ``analysis`` (per-problem statistics, intervals),
``report`` (markdown and plots), ``runner`` (the whole pipeline), ``cli`` (the command).
"""

from vpo.demo.cli import add_parser
from vpo.demo.config import ALL_METHODS, DEFAULT_METHODS, METHODS, DemoConfig, method_spec
from vpo.demo.runner import aggregate, run_demo

__all__ = [
    "ALL_METHODS",
    "DEFAULT_METHODS",
    "METHODS",
    "DemoConfig",
    "add_parser",
    "aggregate",
    "method_spec",
    "run_demo",
]
