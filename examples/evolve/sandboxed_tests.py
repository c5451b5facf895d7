"""Shared by the example evaluators: run a candidate's ``f`` on test inputs inside vpo's sandbox.

Each example's ``evaluator.py`` imports this (OpenEvolve evaluators load with their folder on
``sys.path``) and turns the returned values into one reward per test: 1 for the exact value, else
``0.9 * max(0, 1 - |error| / scale)``, so only an exact answer passes a test and near misses still
rank. The candidate never runs in the evaluator's process: one sandbox per program, one fork per test.
"""

from __future__ import annotations

import json

from vpo.sandbox import Sandbox, SandboxConfig, TestInput

_SANDBOX: Sandbox | None = None


def _sandbox() -> Sandbox:
    global _SANDBOX
    if _SANDBOX is None:
        _SANDBOX = Sandbox(SandboxConfig(timeout_s=2.0, memory_mb=256, concurrency=1))
    return _SANDBOX


def exact_reward(value, expected: float, scale: float) -> float:
    """1 when ``value`` equals ``expected``; else partial credit in [0, 0.9]; 0 for a non-number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    if value == expected:
        return 1.0
    return 0.9 * max(0.0, 1.0 - abs(value - expected) / scale)


def run_tests(program_path: str, tests: list[tuple[str, int, float]], scale: float) -> dict[str, float]:
    """``{name: reward}`` for tests ``(name, x, expected f(x))`` of the program's ``f``."""
    code = open(program_path).read()
    result = _sandbox().run(code, [TestInput(call="f", args=(x,)) for _, x, _ in tests])
    out = {}
    for (name, _, expected), o in zip(tests, result.outcomes):
        value = json.loads(o.value_json) if o.ok and o.value_json is not None else None
        out[name] = exact_reward(value, expected, scale)
    return out
