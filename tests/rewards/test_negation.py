"""vpo.tasks._negation: which clauses deny the content they name (used by the bfcl, toolrl and
musique scorers to read "not X", "It is not X.", "X? No." as no answer, and prose that states X as X)."""

from __future__ import annotations

import pytest

from vpo.tasks._negation import negated


@pytest.mark.parametrize(
    "text, denied",
    [
        ("not X", True),
        ("It is not X.", True),
        ("X? No.", True),
        ("X is wrong; the answer is W.", True),
        ("NOT: X", True),
        ("I will not call X", True),
        ("Do not use X", True),
        ("Rather than X, use W", True),
        ("I would never call X", True),
        ("X", False),
        ("The call: X.", False),
        ("Here you go: X", False),
        ("Not sure, but X", False),  # the negation is about something else
        ("There is no need to wait; X", False),  # another clause
        ("No problem! X", False),
        ("X is the answer", False),
        ("X, not Y", False),
        ("I cannot say. X", False),
    ],
)
def test_negated(text, denied):
    i = text.index("X")
    assert negated(text, i, i + 1) is denied
