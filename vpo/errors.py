"""Error classes shared by every layer.

They live in their own module at the bottom of the import graph so that any layer (core, tasks,
search, train, integrations, demo) can raise them without importing the CLI above it.
"""

from __future__ import annotations


class VPOError(Exception):
    """Base class of the errors vpo raises on purpose (as opposed to bugs)."""


class UserError(VPOError):
    """A mistake in what the user asked for, whose message is the whole story: what was wrong, where,
    and what to do. The CLI prints it on one line without a traceback and exits with code 2."""


class ScoringUnavailable(VPOError, RuntimeError):
    """An answer could not be scored for a reason outside the answer: the sandbox or the scorer's own
    machinery failed (a worker died, a cleanup failed, a service was unreachable).

    A scorer raises it (or returns it from ``score_answers`` in place of the answer's vector) instead
    of returning zeros, so that an infrastructure failure never reads as a wrong answer:
    ``Task.score_completions`` counts such answers apart from wrong ones, warns, and the trainers drop
    the rollouts that hold one rather than learning from a false zero. ``reason`` says what failed."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
