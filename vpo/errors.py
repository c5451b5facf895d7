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
