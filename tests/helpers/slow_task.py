"""The test-only CharStatsTask (tests/conftest.py) for `vpo train` runs in subprocesses, with an
optional sleep per scored batch, so a test can send a signal mid-run (sleeping changes no
computation). Named on the command line as ``tests/helpers/slow_task.py:make``."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from conftest import CharStatsTask  # noqa: E402


def make(n_examples: int = 32, sleep: float = 0.0):
    task = CharStatsTask.make(n_examples)
    if sleep > 0:
        score = task.score_completions

        def slow_score(*args, **kwargs):
            time.sleep(sleep)
            return score(*args, **kwargs)

        task.score_completions = slow_score
    return task
