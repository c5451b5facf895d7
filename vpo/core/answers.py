"""Multi-answer format: the instruction, a robust parser, dedup, and padding to ``(m, d)``.

A VPO rollout is shared reasoning followed by up to ``m`` answers. Two formats (docs/method.md §2):

* ``tags``: ``<answer_1>...</answer_1> <answer_2>...</answer_2> ...``; with m = 1 the plain
  ``<answer>...</answer>`` is the format (and ``<answer_1>`` is accepted too);
* ``code``: fenced code blocks, separated by lines of ``---``; the first m blocks are the answers.

The parser never raises on any string and is linear in its length. Rules for ``tags``: for each
number i in 1..m the first ``<answer_i>`` that is followed by a ``</answer_i>`` opens the answer and
the first such close ends it (an unclosed tag gives no answer; a repeated number keeps the first;
numbers outside 1..m are ignored; answers are returned in number order, whatever order they appear
in). Answer tags nested inside a body are removed from it. Empty bodies are not answers.

After parsing, :func:`dedup` drops repeats (by a normalised text key, or a task-provided canonical
form such as an AST dump for code) and :func:`pad_rows` turns scored answers into the ``(m, d)``
rows plus the validity mask every estimator reads; padding is masked, never trusted to be zero.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Callable, Iterable, Sequence

import numpy as np

from vpo._util import positive_int

FORMATS = ("tags", "code")
INSTRUCTION_STYLES = ("full", "short", "tags")
MAX_ANSWER_CHARS = 20_000
"""Bodies longer than this are truncated (a scorer never sees megabytes from one answer)."""

_TAG = re.compile(r"<(/?)answer(?:_(\d{1,4}))?\s*>", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+\-]*)[ \t]*\n(.*?)```", re.DOTALL)


def answer_instruction(m: int, fmt: str = "tags", what: str = "answer", style: str = "full") -> str:
    """The instruction appended to a prompt asking for ``m`` genuinely different answers.

    ``style="short"`` gives a one-line form for tiny character-level models, where every prompt
    character costs a token; ``style="tags"`` only the tags themselves (``<answer>``, or
    ``<answer_1>..<answer_m>``): for a model trained from scratch, which reads no English, the tags
    carry all the information (the code format has no tags and falls back to ``short``).

    >>> answer_instruction(3, style="short")
    '3 different answers in <answer_1>..<answer_3>.'
    >>> answer_instruction(1, what="route", style="short")
    'Route in <answer>.'
    """
    _check_m(m)
    if fmt not in FORMATS:
        raise ValueError(f"unknown answer format {fmt!r}; choose one of {FORMATS}")
    if style not in INSTRUCTION_STYLES:
        raise ValueError(f"unknown instruction style {style!r}; choose {style_choices()}")
    if style == "tags" and fmt != "code":
        return f"<answer_1>..<answer_{m}>" if m > 1 else "<answer>"
    if style in ("short", "tags"):
        if fmt == "code":
            return (
                f"{m} different {what}s as ```python blocks split by ---."
                if m > 1
                else f"One {what} as a ```python block."
            )
        return f"{m} different {what}s in <answer_1>..<answer_{m}>." if m > 1 else f"{what.capitalize()} in <answer>."
    if fmt == "code":
        if m == 1:
            return f"Write your {what} as one fenced code block (```python ... ```)."
        return (
            f"Write {m} genuinely different {what}s, each as its own fenced code block "
            f"(```python ... ```), separated by a line containing only ---. Make them differ in "
            f"approach, not only in naming, so that together they cover different trade-offs."
        )
    if m == 1:
        return f"Give your final {what} between <answer> and </answer>."
    tags = " ".join(f"<answer_{i}>...</answer_{i}>" for i in range(1, m + 1))
    return (
        f"Give {m} genuinely different {what}s, each in its own numbered tags: {tags}. "
        f"Make them differ so that together they cover different trade-offs; do not repeat one."
    )


def style_choices() -> str:
    """``'full', 'short' or 'tags'``: the instruction styles, for error messages."""
    quoted = [repr(s) for s in INSTRUCTION_STYLES]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1]


def _check_m(m) -> None:
    positive_int(m, "m (answers per rollout)")


def parse_answers(text, m: int, fmt: str = "tags") -> list[str]:
    """Return at most ``m`` non-empty answers from ``text`` (any string; never raises).

    Numbered tags beyond ``m`` and empty answers are dropped; bodies are stripped:

    >>> parse_answers("<answer_1>RRDD</answer_1> then <answer_2> DDRR </answer_2><answer_3>x</answer_3>", 2)
    ['RRDD', 'DDRR']
    >>> parse_answers("<answer>42</answer>", 1)
    ['42']
    >>> parse_answers("no tags at all", 2)
    []
    """
    _check_m(m)
    if not isinstance(text, str):
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        else:
            return []
    if fmt == "code":
        return _parse_code(text, m)
    if fmt != "tags":
        raise ValueError(f"unknown answer format {fmt!r}; choose one of {FORMATS}")
    return _parse_tags(text, m)


def _parse_tags(text: str, m: int) -> list[str]:
    # one linear pass over the tag tokens
    opens: dict[int, int] = {}  # number -> end offset of its first open tag
    spans: dict[int, tuple[int, int]] = {}
    for tok in _TAG.finditer(text):
        closing, num = tok.group(1), tok.group(2)
        if num is None:
            i = 1 if m == 1 else None  # plain <answer> is the single-answer format
        else:
            i = int(num)
        if i is None or i < 1 or i > m or i in spans:
            continue
        if not closing:
            opens.setdefault(i, tok.end())
        elif i in opens:
            spans[i] = (opens[i], tok.start())
        if len(spans) == m:
            break
    out = []
    for i in sorted(spans):
        a, b = spans[i]
        body = _TAG.sub("", text[a:b]).strip()
        if body:
            out.append(body[:MAX_ANSWER_CHARS])
    return out


def _parse_code(text: str, m: int) -> list[str]:
    out = []
    for match in _FENCE.finditer(text):
        body = match.group(2).strip("\n")
        if body.strip():
            out.append(body[:MAX_ANSWER_CHARS])
        if len(out) == m:
            break
    return out


_WRAPPERS = ("()", "[]", "{}")
_EDGE = " \t\"'`*_\u201c\u201d\u2018\u2019"
_TRAILING = ".,;:!?"


def normalize_text(answer: str) -> str:
    """Dedup key: Unicode-compatibility folded (NFKC), lower-case, whitespace collapsed, and the
    decoration around an answer removed: quotes, backticks, markdown emphasis, trailing ``.,;:!?``,
    one pair of enclosing brackets, and a lone closing bracket (``A)``), repeatedly. So ``A``,
    ``A.``, ``(A)``, ``a``, `` A ``, ``**A**`` and ``"A"!`` are one answer, as a checker that reads
    the answer would see them; signs and inner punctuation stay (``-1`` and ``1``, ``3.14`` and ``314``
    differ).

    >>> [normalize_text(a) for a in ["A", "A.", "(A)", " a ", "**A**", "A)"]]
    ['a', 'a', 'a', 'a', 'a', 'a']
    """
    t = " ".join(unicodedata.normalize("NFKC", str(answer)).lower().split())
    prev = None
    while t != prev:
        prev = t
        t = t.strip(_EDGE).rstrip(_TRAILING).strip(_EDGE)
        if len(t) >= 2 and t[0] + t[-1] in _WRAPPERS and _encloses(t):
            t = t[1:-1].strip()
        elif t.endswith(tuple(w[1] for w in _WRAPPERS)) and not any(w[0] in t for w in _WRAPPERS):
            t = t[:-1].rstrip()
    return t


def _encloses(t: str) -> bool:
    """Whether ``t``'s first bracket closes at its last character (``(a)`` yes, ``(a) and (b)`` no)."""
    depth = 0
    for k, ch in enumerate(t):
        depth += ch == t[0]
        depth -= ch == t[-1]
        if depth == 0:
            return k == len(t) - 1
    return False


def dedup(answers: Sequence[str], key: Callable[[str], str] = normalize_text) -> list[int]:
    """Indices of the answers to keep: the first of each group with an equal ``key``.

    >>> dedup(["RRDD", "rrdd ", "DDRR"])  # the default key ignores case and spacing
    [0, 2]
    """
    seen: set = set()
    keep = []
    for i, a in enumerate(answers):
        try:
            k = key(a)
        except Exception:  # a canonicaliser that fails on junk must not drop the answer silently
            k = ("raw", a)
        if k in seen:
            continue
        seen.add(k)
        keep.append(i)
    return keep


def pad_rows(rows: Sequence[Sequence[float]] | np.ndarray, m: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Pad up to ``m`` reward rows (each length d) into ``(rewards [m, d], valid [m])``.

    Missing slots are zero *and* masked invalid; estimators never read them.
    """
    _check_m(m)
    out = np.zeros((m, d), dtype=np.float64)
    valid = np.zeros(m, dtype=bool)
    rows = list(rows)[:m]
    for i, r in enumerate(rows):
        r = np.asarray(r, dtype=np.float64).reshape(-1)
        if r.shape[0] != d:
            raise ValueError(f"reward row {i} has {r.shape[0]} entries, expected d={d}")
        out[i] = r
        valid[i] = True
    return out, valid


def dedup_rows(rewards: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Mask (in a copy of ``valid``) answers whose reward row equals an earlier valid row.

    ``rewards [..., m, d]``, ``valid [..., m]``; the alternative to text dedup when only reward
    vectors are known.
    """
    rewards = np.asarray(rewards)
    v = np.array(valid, dtype=bool, copy=True)
    m = rewards.shape[-2]
    for j in range(1, m):  # m is small (<= ~8): loop over answer slots, vectorised over the batch
        same = np.all(rewards[..., :j, :] == rewards[..., j : j + 1, :], axis=-1) & v[..., :j]
        v[..., j] &= ~same.any(-1)
    return v


def stack_rows(
    per_rollout: Iterable[tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray]:
    """Stack ``(rewards [m, d], valid [m])`` pairs into ``rewards [N, m, d]``, ``valid [N, m]``."""
    pairs = list(per_rollout)
    if not pairs:
        raise ValueError("no rollouts to stack")
    return np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])
