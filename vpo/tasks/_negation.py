"""Negated content in free-text answers (issue #50): "not X", "It is not X.", "X? No.", "X is wrong".

A scorer that reads a value, a call or a name out of prose rewards the answer that names it only to
deny it, as much as the one that commits to it. These helpers tell the two apart from the words
around the content, within its clause (a sentence boundary ``. ; ! ?`` followed by a space, or a
line break, ends a clause): a negation word up to two words before it (``not``, ``never``, ``no``,
``don't``, ``instead of``, ``rather than``, ...), or a verdict right after it (``? No``, ``is
wrong``, ``is not``, ``won't work``, ...). They are used by the bfcl, toolrl and musique scorers.
"""

from __future__ import annotations

import re

NEGATION_WORDS = frozenset(
    {
        "not",
        "no",
        "never",
        "neither",
        "nor",
        "none",
        "isnt",
        "wasnt",
        "arent",
        "werent",
        "dont",
        "doesnt",
        "didnt",
        "cannot",
        "cant",
        "wont",
        "shouldnt",
        "wrong",
        "incorrect",
    }
)
"""Words that negate (apostrophes dropped, as :func:`vpo.tasks.text.normalize_answer` drops them)."""

_WORD = r"(?:not|never|no|neither|nor|don'?t|do\s+not|doesn'?t|does\s+not|isn'?t|is\s+not|aren'?t|wasn'?t|"
_WORD += r"shouldn'?t|should\s+not|won'?t|will\s+not|can'?t|cannot|avoid|instead\s+of|rather\s+than|wrong|incorrect)"
_BEFORE = re.compile(rf"\b{_WORD}\b(?:\s+[\w'-]+){{0,2}}[\s\"'`:,(\[-]*$", re.IGNORECASE)
_AFTER = re.compile(
    r"^[\s\"'`)\].,!?-]{0,4}(?:no\b|nope\b|(?:is|was|would\s+be|seems)\s+(?:wrong|incorrect|not\b|a\s+mistake)|"
    r"isn'?t\b|won'?t\s+work|doesn'?t\s+work|is\s+false\b)",
    re.IGNORECASE,
)
_CLAUSE_END = re.compile(r"(?:[.;!?](?=\s)|\n)")


def negated_before(text_before: str) -> bool:
    """Whether the clause that ends where the content starts negates it (a negation word at most two
    words before it: "not f(x)", "It is not 7", "I would never call f(x)", "NOT: 7")."""
    starts = [m.end() for m in _CLAUSE_END.finditer(text_before)]
    clause = text_before[starts[-1] :] if starts else text_before
    return bool(_BEFORE.search(clause[-200:]))


def negated_after(text_after: str) -> bool:
    """Whether the words right after the content deny it ("? No.", "is wrong", "is not ...")."""
    return bool(_AFTER.match(text_after[:80]))


def negated(text: str, start: int, end: int) -> bool:
    """Whether the content at ``text[start:end]`` is negated by its clause (either side)."""
    return negated_before(text[:start]) or negated_after(text[end:])
