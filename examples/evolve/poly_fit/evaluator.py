"""poly_fit: f must equal 2x^2 - 3x + 1 on eight integers; one reward per test (run in vpo's sandbox)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # examples/evolve: sandboxed_tests

from sandboxed_tests import run_tests  # noqa: E402

XS = [-3, -2, -1, 0, 1, 2, 3, 4]
TESTS = [(f"x_{i}", x, 2 * x * x - 3 * x + 1) for i, x in enumerate(XS)]


def evaluate(program_path):
    return run_tests(program_path, TESTS, scale=30.0)
