"""tradeoff: two clients specify f on the same inputs and disagree at every one of them.

Client a wants f(x) = 2x + 5, client b wants f(x) = 4x - 1, each checked at x = 0, 2, 4: six
reward components (run in vpo's sandbox). No program passes all six (the clients disagree on
every input), so no candidate "solves" it; the point is the trade-off front: which tests some
program passes, and how many non-dominated programs the search keeps.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # examples/evolve: sandboxed_tests

from sandboxed_tests import run_tests  # noqa: E402

XS = [0, 2, 4]
TESTS = [(f"a_{x}", x, 2 * x + 5) for x in XS] + [(f"b_{x}", x, 4 * x - 1) for x in XS]


def evaluate(program_path):
    return run_tests(program_path, TESTS, scale=20.0)
