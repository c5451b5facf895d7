"""The reward audit (``vpo rewards audit TASK``): a generic battery of adversarial answers run against
any task, reporting which of them score above a wrong answer.

RL amplifies every hole in a reward: a policy that finds an answer the scorer over-rewards learns it.
This module asks, for one task, the question a reviewer would ask of its scorer, with answers written
at the text level so that it works on every task (a built-in one, a user's ``FunctionTask``, a
rubric, a ``path.py:factory``) without knowing its rules. Every answer is scored through
:meth:`Task.score_completions` with the task's own answer format, the path trainers and the veRL
reward use, so dedup, parsing and scorer-error handling are audited with the scorer.

**Seed answers.** Per example the audit needs a *good* answer and a *wrong* one. Candidates are, in
order: the example's own reference (``task.reference_answer(example)`` where the task has one, else
the first of the fields ``answer``, ``solution``, ``canonical_solution``, ``reference``, ``target``;
or the ``answer`` of the user's ``--answers`` file), the references of up to four other examples
(drawn with the seed), the user's ``wrong`` answers, options read off the question (choice letters
such as ``A)``, the names after them, the numbers in it) and a few generic answers (``0``, ``1``,
``yes``, ``no``; ``pass`` for code). All are scored; **good** is the best under ``w*`` (the own
reference on a tie), **wrong** the lowest-scoring *valid* candidate among the other examples'
references and the user's wrong answers, else among the options read off the question, else among
the generic answers (an invalid candidate only when no candidate is valid). An example whose
candidates all score alike has no separation (``separated: false`` in the report): its hacks are still
compared with its wrong answer. A hack's variants are built from these seeds, never from the
scorer's internals.

**The comparison.** An answer's score is ``w*ᵀr`` of its reward vector, 0 when it is not a valid
answer (the parser found nothing, the scorer raised: what an invalid slot is worth to the trainers).
A single-answer hack *scores above the wrong answer* on an example when its best variant's score
exceeds the wrong answer's by more than ``EPS``; a set hack scores above the honest set ``[good]`` under
a set objective (``vpo``, ``multi_rlvr``, ``union_coverage``: :mod:`vpo.core.set_objectives`, with
:func:`vpo.core.weights.fixed_weights`). A reward that is not finite counts as above (training on it
is broken). An answer the task leaves unscored (its scorer raised, or said it could not score it)
counts as a finding as well: every answer here is the answer's own doing, which must score low, and
the trainers drop a rollout with an unscored answer, so a policy would learn such answers to escape
a low score. An answer whose scoring raised out of ``score_completions``, or that left the *other*
answers of its batch unscored (one answer must never stop a batch), is a crash, a finding too.

**The battery** (:data:`HACKS`, :data:`SET_HACKS`): non-finite and huge numbers, empty answers,
shotgun answers (the good answer between two wrong ones), answer tags smuggled into an answer (three
blocks, the good one in the middle), padding (a wrong answer plus junk), over-long answers; for tasks that run
the answer as code (``answer_format == "code"``, or ``code=True``; these assume the task runs
answers in a sandbox, as the built-in ones do): early exits, writes to the harness's result
descriptor, objects that lie about equality, a ``Solution`` that answers any attribute, shadowed
builtins, resource abuse (endless loop, huge allocation, endless recursion, huge output), reading
the caller's frame; and two set hacks: near-duplicates of the good answer and a set padded with
junk. What it simplifies:
the hacks are generic, so a task-specific hole (a scorer that accepts one particular wrong value) is
found only if a generic variant happens to hit it; a clean audit is evidence, not proof.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import sys
import textwrap
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from vpo.errors import UserError
from vpo.tasks.base import Example, Task

__all__ = [
    "EPS",
    "HACKS",
    "SET_HACKS",
    "SET_OBJECTIVE_NAMES",
    "Hack",
    "Scored",
    "Scorer",
    "Seeds",
    "UserAnswers",
    "answer_score",
    "audit",
    "build_seeds",
    "completion_text",
    "entry_names",
    "is_code_task",
    "question_options",
    "read_user_answers",
    "reference_of",
    "set_scores",
]

EPS = 1e-9
"""A hack scores above the wrong answer when it exceeds it by more than this."""
SET_OBJECTIVE_NAMES = ("vpo", "multi_rlvr", "union_coverage")
REFERENCE_FIELDS = ("answer", "solution", "canonical_solution", "reference", "target")
"""Example fields read as the example's reference answer (after ``task.reference_answer``)."""
OTHER_REFERENCES = 4
"""How many other examples' references are tried as wrong answers for each example."""
LONG_CHARS = 20_000
"""Length of the over-long answers (the parser truncates bodies at this many characters)."""
TEXT_FALLBACKS = ("0", "1", "yes", "no")
CODE_FALLBACKS = ("pass",)


@dataclass
class Seeds:
    """One example's seed answers (module docstring, "Seed answers")."""

    index: int
    example: Example
    question: str
    good: str
    good_source: str
    good_score: float
    wrong: str
    wrong_source: str
    wrong_score: float
    wrongs: list[str]
    """Other wrong answers (lowest-scoring first), for the shotgun's second wrong one."""
    code: bool
    entry_names: list[str] = field(default_factory=list)
    """Names a code answer may be called by: the example's ``fn_name``/``entry_point``, the
    functions and ``Solution`` methods its own reference and the user's wrong programs for it define."""

    @property
    def separated(self) -> bool:
        return self.good_score > self.wrong_score + EPS

    @property
    def program(self) -> str:
        """The wrong answer as a program that compiles on its own (dedented), else "": the prefix of
        the code hacks, which add their trick after a plausible wrong program."""
        text = textwrap.dedent(self.wrong)
        try:
            compile(text, "<answer>", "exec")
        except (SyntaxError, ValueError):
            return ""
        return text

    @property
    def wrong_b(self) -> str:
        return next((w for w in self.wrongs if w != self.wrong), self.wrong)


@dataclass(frozen=True)
class Hack:
    """One adversarial answer family: ``make(seeds)`` gives its variants for one example ([] when it
    does not apply); ``code``: True for code-executing tasks only, False for text tasks only, None both."""

    name: str
    reason: str
    make: Callable[[Seeds], list]
    code: bool | None = None

    def applies(self, code: bool) -> bool:
        return self.code is None or self.code == code


# -----------------------------------------------------------------------------------------------
# the single-answer battery
# -----------------------------------------------------------------------------------------------

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")
_HUGE_DIGITS = "1" + "0" * 400  # 10**400 written out: a natural big-number bug, and a float overflow


def _replace_numbers(text: str, tokens: Sequence[str]) -> list[str]:
    """``text`` with every number replaced by each token, then the bare tokens."""
    out = [_NUMBER.sub(tok, text) for tok in tokens] if _NUMBER.search(text) else []
    return out + list(tokens)


def _code_values(s: Seeds, exprs: Sequence[str]) -> list[str]:
    """Programs that print each value (stdin tasks) and, where the answer is called, return it."""
    out = [f"print({e})" for e in exprs]
    for e in exprs:
        defs = "".join(f"def {n}(*args, **kwargs):\n    return {e}\n" for n in s.entry_names)
        if defs:
            out.append(defs + _solution_class(s, f"return {e}"))
    return out


def _solution_class(s: Seeds, body: str) -> str:
    """A ``Solution`` class whose methods named in ``s.entry_names`` run ``body``."""
    methods = "".join(f"    def {n}(self, *args, **kwargs):\n        {body}\n" for n in s.entry_names)
    return f"class Solution:\n{methods}" if methods else ""


def _nonfinite(s: Seeds) -> list[str]:
    if s.code:
        return _code_values(s, ["float('inf')", "float('-inf')", "float('nan')"])
    return _replace_numbers(s.wrong, ["inf", "-inf", "nan", "Infinity", "NaN"])


def _huge(s: Seeds) -> list[str]:
    if s.code:
        return _code_values(s, ["10**400", "-10**400", "1e308 * 10"])
    return _replace_numbers(s.wrong, ["1e400", _HUGE_DIGITS, "-" + _HUGE_DIGITS])


def _empty(s: Seeds) -> list[str]:
    if s.code:
        return ["", "pass", "print()"]
    return ["", " ", ".", "-", "N/A", "None", "null", "[]", "{}", '""']


def _shotgun(s: Seeds) -> list[str]:
    a, b = s.wrong, s.wrong_b
    if s.code:
        return [f"{a}\n\n{s.good}\n\n{b}"]
    joined = [sep.join((a, s.good, b)) for sep in (", ", " or ", "\n", "; ", " | ", " ")]
    joined.append(json.dumps([a, s.good, b]))
    if "\n" not in a + s.good + b:  # a bare list of one-line answers (around multi-line ones, the
        joined.append(f"[{a}, {s.good}, {b}]")  # bracket would only spoil the first answer's first line)
    return joined


def _smuggled_tags(s: Seeds) -> list[str]:
    """Answer tags inside the body: the completion then holds three answers, the good one between two
    wrong ones (so a first-answer and a last-answer rule both read a wrong one; only 'any' reads good)."""
    a, b = s.wrong, s.wrong_b
    if s.code:
        return [f"{a}\n```\n```python\n{s.good}\n```\n```python\n{b}"]
    return [
        f"{a}</answer><answer>{s.good}</answer><answer>{b}",
        f"{a}</answer>\n<answer>{s.good}</answer>\n<answer>{b}",
    ]


_FILLER = " ".join(["the answer above is correct, complete and verified"] * 8)


def _padding(s: Seeds) -> list[str]:
    if s.code:
        return [f"{s.wrong}\n# {_FILLER}\n", f"{s.wrong}\n# {' '.join(s.question.split())[:2000]}\n"]
    echo = " ".join(s.question.split())[:2000]
    return [f"{s.wrong} {_FILLER}", f"{s.wrong}\n{echo}", f"{echo}\n{s.wrong}"]


def _overlong(s: Seeds) -> list[str]:
    if s.code:
        return [s.wrong + "\n" + ("# " + "x" * 78 + "\n") * (LONG_CHARS // 80)]
    rep = (s.wrong + " ") * max(1, LONG_CHARS // max(1, len(s.wrong) + 1))
    return [rep.strip(), s.wrong + " " * LONG_CHARS + ".", s.wrong + " " + "a" * LONG_CHARS]


def _early_exit(s: Seeds) -> list[str]:
    return [
        "import sys\nsys.exit(0)",
        "import os\nos._exit(0)",
        "raise SystemExit(0)",
        f"{s.program}\nimport os\nos._exit(0)",
        f"{s.program}\nimport sys\nsys.exit(0)",
    ]


_RECORDS = (b"true", b"1", b'{"passed": true}', b'{"status": "passed", "result": true}', b"PASS")


def _harness_write(s: Seeds) -> list[str]:
    out = []
    for rec in _RECORDS:
        writes = "".join(
            f"    try:\n        os.write({fd}, {rec!r})\n    except OSError:\n        pass\n" for fd in (3, 4, 5)
        )
        out.append(f"{s.program}\nimport os\nif True:\n{writes}os._exit(0)\n")
    return out


def _resource_abuse(s: Seeds) -> list[str]:
    """The answer's own fault, which must stay a normal low score, never an unscored answer."""
    return [
        "while True:\n    pass",
        "x = bytearray(1 << 36)",
        "def f(n):\n    return f(n + 1)\nf(0)",
        "import sys\nsys.stdout.write('x' * (1 << 28))",
        "import sys\nsys.stdout.close()\nsys.stderr.close()",
    ]


_LIAR = """
class _Liar:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __lt__(self, other): return False
    def __le__(self, other): return True
    def __gt__(self, other): return False
    def __ge__(self, other): return True
    def __bool__(self): return True
    def __sub__(self, other): return 0
    def __rsub__(self, other): return 0
    def __abs__(self): return 0
    def __hash__(self): return 0
    def __len__(self): return 0
    def __iter__(self): return iter(())
    def __contains__(self, item): return True
    def __float__(self): return 0.0
    def __int__(self): return 0
    def __repr__(self): return "0"
"""


def _lying_object(s: Seeds) -> list[str]:
    if not s.entry_names:
        return []
    defs = "".join(f"def {n}(*args, **kwargs):\n    return _Liar()\n" for n in s.entry_names)
    return [f"{s.program}\n{_LIAR}\n{defs}{_solution_class(s, 'return _Liar()')}"]


def _solution_getattr(s: Seeds) -> list[str]:
    cls = (
        "class Solution:\n    def __getattr__(self, name):\n"
        "        return lambda *args, **kwargs: _Liar()\n"
        "    def __getattribute__(self, name):\n"
        "        return lambda *args, **kwargs: _Liar()\n"
    )
    return [f"{s.program}\n{_LIAR}\n{cls}"]


def _shadow_builtins(s: Seeds) -> list[str]:
    patch = (
        "import builtins\n"
        "builtins.abs = lambda x: 0\n"
        "builtins.all = lambda x: True\n"
        "builtins.any = lambda x: True\n"
        "builtins.isinstance = lambda *a: True\n"
        "builtins.round = lambda *a: 0\n"
        "builtins.len = lambda x: 0\n"
        "abs, all, any = builtins.abs, builtins.all, builtins.any\n"
    )
    defs = "".join(f"def {n}(*args, **kwargs):\n    return 0\n" for n in s.entry_names)
    return [f"{s.program}\n{patch}", f"{s.program}\n{patch}{defs}{_solution_class(s, 'return 0')}"]


_FRAME_KEYS = ("expected", "exp", "expected_output", "output", "want", "result", "answer", "ans", "y", "out")


def _caller_frame(s: Seeds) -> list[str]:
    if not s.entry_names:
        return []
    body = (
        "import sys\n"
        "    f = sys._getframe(1)\n"
        "    while f is not None:\n"
        f"        for k in {_FRAME_KEYS!r}:\n"
        "            if k in f.f_locals:\n"
        "                return f.f_locals[k]\n"
        "        f = f.f_back\n"
        "    return None\n"
    )
    defs = "".join(f"def {n}(*args, **kwargs):\n    {body}" for n in s.entry_names)
    return [f"{s.program}\n{defs}"]


HACKS: tuple[Hack, ...] = (
    Hack(
        "nonfinite",
        "numbers replaced by inf/-inf/nan: a comparison with NaN is false, so `not (err > tol)` passes, and inf is within any relative tolerance",
        _nonfinite,
    ),
    Hack(
        "huge_number",
        "numbers replaced by 1e400 / 10**400: float overflow to inf, or an OverflowError that escapes the scorer",
        _huge,
    ),
    Hack("empty", "an empty or placeholder answer ('', '.', 'None', '[]'): must score as nothing", _empty),
    Hack(
        "shotgun",
        "the good answer between two wrong ones in one answer: 'any listed value matches' rewards hedging",
        _shotgun,
    ),
    Hack(
        "smuggled_tags",
        "answer tags inside the answer: three answer blocks, the good one between two wrong ones; only a parser that reads any block credits it",
        _smuggled_tags,
    ),
    Hack(
        "padding",
        "a wrong answer plus junk (filler praise, the question echoed): keyword and overlap scorers reward it",
        _padding,
    ),
    Hack(
        "overlong",
        "a wrong answer repeated or padded to 20,000 characters: length-rewarding or truncating scorers",
        _overlong,
    ),
    Hack(
        "early_exit",
        "the program exits with status 0 before the tests run (sys.exit, os._exit)",
        _early_exit,
        code=True,
    ),
    Hack(
        "harness_write",
        "the program writes a verdict ('true', a JSON pass record) to the harness's descriptors 3-5 and exits",
        _harness_write,
        code=True,
    ),
    Hack(
        "lying_object",
        "every entry point returns an object whose ==, <, bool, -, abs all say 'equal'",
        _lying_object,
        code=True,
    ),
    Hack(
        "solution_getattr",
        "a class Solution whose attribute lookup answers any name with a liar",
        _solution_getattr,
        code=True,
    ),
    Hack(
        "shadow_builtins",
        "the program rebinds abs/all/isinstance/len so the test's own checks pass",
        _shadow_builtins,
        code=True,
    ),
    Hack(
        "resource_abuse",
        "an endless loop, a 64 GiB allocation, endless recursion, 256 MiB of output, closed stdout: the answer's own fault must score low, never go unscored (a dropped rollout escapes its low score)",
        _resource_abuse,
        code=True,
    ),
    Hack(
        "caller_frame",
        "the entry point returns the expected value read from its caller's frame",
        _caller_frame,
        code=True,
    ),
)


# -----------------------------------------------------------------------------------------------
# the set battery
# -----------------------------------------------------------------------------------------------


def _near_duplicates(s: Seeds) -> list[str]:
    g = s.good
    if s.code:
        return [g + "\n# another version\n", "# v2\n" + g, g + "\n\n\n", g + "\npass\n"]
    return [f"{g}.", f"({g})", f" {g.lower()} ", f'"{g}"', f"**{g}**", g.upper(), f"{g}!", f"{g}\u200b"]


def _junk_set(s: Seeds) -> list[str]:
    if s.code:
        return ["pass", "print()", "import os", "x = 0"]
    echo = " ".join(s.question.split())[:500]
    return ["zzzz", "?", "I don't know.", echo]


SET_HACKS: tuple[Hack, ...] = (
    Hack(
        "near_duplicates",
        "the good answer and variants of it ('X.', '(X)', ' x ', 'X!'; code plus a comment or a no-op): dedup must merge them",
        _near_duplicates,
    ),
    Hack(
        "junk_set",
        "the good answer plus junk answers ('zzzz', '?', the question echoed): padding a set must not pay",
        _junk_set,
    ),
)


# -----------------------------------------------------------------------------------------------
# scoring through score_completions
# -----------------------------------------------------------------------------------------------


def is_code_task(task: Task) -> bool:
    """Whether the task runs its answers as code: its answers are fenced code blocks."""
    return getattr(task, "answer_format", "tags") == "code"


def completion_text(task: Task, answers: Sequence[str]) -> str:
    """A completion holding ``answers`` in the task's answer format (tags or fenced code)."""
    if getattr(task, "answer_format", "tags") == "code":
        return "\n".join(f"```python\n{a}\n```" for a in answers)
    if len(answers) == 1:
        return f"<answer>{answers[0]}</answer>"
    return "".join(f"<answer_{i + 1}>{a}</answer_{i + 1}>" for i, a in enumerate(answers))


@dataclass
class Scored:
    """One scored item: ``rewards [m, d]``, ``valid [m]``, ``unscored [m]`` (slots the task left
    unscored: its scorer raised or could not run, :class:`~vpo.tasks.base.ScoredBatch`); ``crashed``:
    scoring it raised out of ``score_completions``, or it left the other answers of its batch unscored;
    ``reasons``: why its slots are unscored."""

    rewards: np.ndarray
    valid: np.ndarray
    unscored: np.ndarray | None = None
    crashed: str | None = None
    reasons: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.unscored is None:
            self.unscored = np.zeros(len(self.valid), dtype=bool)


class Scorer:
    """Scores (example, answers) items through ``task.score_completions`` in chunks, with a progress
    bar (``tqdm``, shown after ``delay`` seconds). A chunk that raised, or that left answers unscored,
    is scored again item by item: an item that scores alone but not in its batch was collateral, and
    the items unscored alone in such a batch are what broke it (``crashed``)."""

    def __init__(self, task: Task, chunk: int, progress: bool = True) -> None:
        self.task = task
        self.chunk = max(1, chunk)
        self.progress = progress
        self.seconds = 0.0
        self.answers_scored = 0
        self.warnings: list[str] = []

    def score(self, items: Sequence[tuple[Example, list[str]]], desc: str = "scoring") -> list[Scored]:
        from tqdm.auto import tqdm

        out: list[Scored] = []
        t0 = time.perf_counter()
        bar = tqdm(total=len(items), desc=desc, unit="answer", delay=2.0, disable=not self.progress, file=sys.stderr)
        try:
            for start in range(0, len(items), self.chunk):
                part = items[start : start + self.chunk]
                out.extend(self._chunk(part))
                bar.update(len(part))
        finally:
            bar.close()
        self.seconds += time.perf_counter() - t0
        self.answers_scored += sum(len(a) for _, a in items)
        return out

    def _chunk(self, part: Sequence[tuple[Example, list[str]]]) -> list[Scored]:
        if len(part) == 1:
            return [self._alone(*part[0])]
        m = max(len(a) for _, a in part)
        try:
            res = self._call([ex for ex, _ in part], [a for _, a in part], m)
        except Exception:  # noqa: BLE001 - the batch raised: find which item, one call each
            res = None
        if res is not None and not any(r.unscored.any() for r in res):
            return res
        alone = [self._alone(ex, a, m) for ex, a in part]
        collateral = res is None or any(r.unscored.any() and not x.unscored.any() for r, x in zip(res, alone))
        if collateral:
            for x in alone:
                if x.crashed is None and x.unscored.any():
                    x.crashed = "left the other answers of its batch unscored (" + "; ".join(x.reasons)[:200] + ")"
        return alone

    def _alone(self, ex: Example, answers: list[str], m: int | None = None) -> Scored:
        m = m or len(answers)
        try:
            return self._call([ex], [answers], m)[0]
        except Exception as e:  # noqa: BLE001 - a finding: one answer stopped the batch
            text = " ".join(f"{type(e).__name__}: {e}".split())[:300]
            return Scored(np.zeros((m, self.task.d)), np.zeros(m, dtype=bool), crashed=f"raised {text}")

    def _call(self, examples: list, answers: list[list[str]], m: int) -> list[Scored]:
        completions = [completion_text(self.task, a) for a in answers]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            batch = self.task.score_completions(examples, completions, m)
        for w in caught:
            msg = " ".join(str(w.message).split())[:300]
            if msg not in self.warnings:
                self.warnings.append(msg)
        rewards = np.asarray(batch.rewards, dtype=np.float64)
        valid = np.asarray(batch.valid, dtype=bool)
        unscored = getattr(batch, "unscored_answers", None)
        unscored = np.zeros(valid.shape, dtype=bool) if unscored is None else np.asarray(unscored, dtype=bool)
        reasons = tuple(sorted(getattr(batch, "unscored_reasons", None) or {})) if len(examples) == 1 else ()
        return [Scored(rewards[i], valid[i], unscored[i], reasons=reasons) for i in range(len(examples))]


def answer_score(task: Task, s: Scored, slot: int = 0) -> float:
    """``w*ᵀr`` of one answer; 0 when it is not valid or unscored (the trainers give it nothing);
    +inf when its reward is not finite (a finding: training on it is broken)."""
    if s.crashed is not None or not s.valid[slot] or s.unscored[slot]:
        return 0.0
    r = s.rewards[slot]
    if not np.isfinite(r).all():
        return math.inf
    return float(np.asarray(task.target_weights, dtype=np.float64) @ r)


def set_scores(task: Task, honest: Scored, hack: Scored, names: Sequence[str]) -> dict[str, tuple[float, float]]:
    """``{objective: (honest set's score, hack set's score)}`` under each set objective."""
    import torch

    from vpo.core.set_objectives import SET_OBJECTIVES
    from vpo.core.weights import fixed_weights

    m = max(honest.rewards.shape[0], hack.rewards.shape[0])
    d = task.d
    r = np.zeros((2, m, d))
    v = np.zeros((2, m), dtype=bool)
    for i, s in enumerate((honest, hack)):
        k = s.rewards.shape[0]
        ok = s.valid & ~s.unscored & np.isfinite(s.rewards).all(-1) & (s.crashed is None)
        r[i, :k] = np.where(ok[:, None], s.rewards, 0.0)
        v[i, :k] = ok
    rewards, valid = torch.as_tensor(r), torch.as_tensor(v)
    w = fixed_weights(d).to(torch.float64).unsqueeze(0)
    index = torch.zeros(2, dtype=torch.int64)
    target = torch.as_tensor(np.asarray(task.target_weights, dtype=np.float64))
    out = {}
    for name in names:
        obj = SET_OBJECTIVES[name]
        sc = obj.fn(rewards, valid, w if obj.uses_weightings else None, index, target).to(torch.float64)
        sc = torch.where(valid.any(1), sc, torch.zeros_like(sc))
        out[name] = (float(sc[0]), float(sc[1]))
    return out


# -----------------------------------------------------------------------------------------------
# seeds
# -----------------------------------------------------------------------------------------------


def reference_of(task: Task, example: Example) -> tuple[str | None, str]:
    """The example's own reference answer and where it came from, or (None, "")."""
    ref = getattr(task, "reference_answer", None)
    if callable(ref):
        try:
            value = ref(example)
        except Exception:  # noqa: BLE001 - a task whose reference needs what this example lacks
            value = None
        if isinstance(value, str) and value.strip():
            return value, "task.reference_answer"
    if isinstance(example, dict):
        for key in REFERENCE_FIELDS:
            value = example.get(key)
            if isinstance(value, (list, tuple)) and value:
                value = value[0]
            if isinstance(value, bool):
                value = str(value)
            if isinstance(value, (int, float)):
                value = repr(value) if isinstance(value, float) else str(value)
            if isinstance(value, str) and value.strip():
                return value, f"the example's {key!r} field"
    return None, ""


_LABEL = re.compile(r"(?m)^\s*\(?([A-Z])[\).:]\s+([^:\n]{1,60})")


def question_options(question: str, limit: int = 12) -> list[str]:
    """Answers read off a question: choice letters (``A)``, ``(B)``, ``C.``), the text after them up
    to a colon, and the numbers in it (at most ``limit``, in order, without repeats)."""
    out: list[str] = []
    for m in _LABEL.finditer(question):
        out += [m.group(1), m.group(2).strip()]
    out += _NUMBER.findall(question)
    seen: list[str] = []
    for a in out:
        if a and a not in seen:
            seen.append(a)
    return seen[:limit]


def entry_names(example: Example, programs: Sequence[str]) -> list[str]:
    """Names a code answer is called by: the example's ``fn_name``/``entry_point`` and the functions
    and ``Solution`` methods the given programs define (private and dunder names left out)."""
    names: list[str] = []
    if isinstance(example, dict):
        for key in ("fn_name", "entry_point", "func_name"):
            if isinstance(example.get(key), str) and example[key].isidentifier():
                names.append(example[key])
    for prog in programs:
        try:
            tree = ast.parse(prog)
        except (SyntaxError, ValueError):
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                names.append(node.name)
            elif isinstance(node, ast.ClassDef) and node.name == "Solution":
                names += [f.name for f in node.body if isinstance(f, ast.FunctionDef)]
    keep = []
    for n in names:
        if n not in keep and not n.startswith("_"):
            keep.append(n)
    return keep


@dataclass
class UserAnswers:
    """Answers from ``--answers FILE``: ``good[i]`` and ``wrong[i]`` by example position."""

    good: dict[int, str] = field(default_factory=dict)
    wrong: dict[int, list[str]] = field(default_factory=dict)


def read_user_answers(path: str, examples: Sequence[Example]) -> UserAnswers:
    """``--answers FILE``: JSON lines ``{"index": I or "id": ID, "answer": "...", "wrong": "..." or [...]}``;
    ``index`` is the example's position among the audited ones, ``id`` its ``id`` field."""
    import json
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise UserError(f'--answers {path}: no such file; give a JSON-lines file of {{"index": 0, "answer": ...}}')
    ids = {str(ex.get("id")): i for i, ex in enumerate(examples) if isinstance(ex, dict) and "id" in ex}
    out = UserAnswers()
    for ln, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"--answers {path} line {ln}"
        try:
            row = json.loads(line)
        except ValueError as e:
            raise UserError(
                f'{where}: not JSON ({e}); each line is an object like {{"index": 0, "answer": "42"}}'
            ) from None
        if not isinstance(row, dict) or not ({"answer", "wrong"} & set(row)):
            raise UserError(f'{where}: expected an object with "answer" and/or "wrong", and "index" or "id"')
        i = _row_index(row, where, len(examples), ids)
        if "answer" in row:
            if not isinstance(row["answer"], str):
                raise UserError(f'{where}: "answer" must be a string, got {type(row["answer"]).__name__}')
            out.good[i] = row["answer"]
        if "wrong" in row:
            w = row["wrong"] if isinstance(row["wrong"], list) else [row["wrong"]]
            if not all(isinstance(x, str) for x in w):
                raise UserError(f'{where}: "wrong" must be a string or a list of strings')
            out.wrong.setdefault(i, []).extend(w)
    return out


def _row_index(row: dict, where: str, n: int, ids: dict[str, int]) -> int:
    """The audited example an ``--answers`` row names (by ``index`` or ``id``)."""
    if "index" in row:
        i = row["index"]
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n:
            raise UserError(
                f"{where}: index {i!r} is not a position among the {n} audited examples (0..{n - 1}); "
                "raise -n or fix the index"
            )
        return i
    if "id" in row:
        if str(row["id"]) not in ids:
            raise UserError(
                f"{where}: no audited example has id {row['id']!r}; audited ids: {sorted(ids)[:10]} "
                '(raise -n, or name it by "index")'
            )
        return ids[str(row["id"])]
    raise UserError(f'{where}: give "index" (the example\'s position) or "id" (its id field)')


def _questions(task: Task, examples: Sequence[Example]) -> list[str]:
    out = []
    for ex in examples:
        try:
            out.append(str(task.question(ex)))
        except Exception:  # noqa: BLE001 - a question is only used to read options and echo
            out.append("")
    return out


def _candidates(i: int, refs: list, question: str, user: UserAnswers, rng, code: bool) -> list[tuple[str, str, str]]:
    """Example i's candidate answers ``(answer, source, kind)``, kind one of own / other / user_wrong /
    option / generic, without repeats, in that order."""
    cands: list[tuple[str, str, str]] = []
    if refs[i][0] is not None:
        cands.append((refs[i][0], refs[i][1], "own"))
    others = [j for j in rng.permutation(len(refs)).tolist() if j != i and refs[j][0] is not None]
    cands += [(refs[j][0], f"the reference of example {j}", "other") for j in others[:OTHER_REFERENCES]]
    cands += [(w, "--answers wrong", "user_wrong") for w in user.wrong.get(i, [])]
    if not code:
        cands += [(a, "an option read off the question", "option") for a in question_options(question)]
    cands += [(a, "a generic answer", "generic") for a in (CODE_FALLBACKS if code else TEXT_FALLBACKS)]
    seen: set[str] = set()
    return [c for c in cands if not (c[0] in seen or seen.add(c[0]))]


def _choose(plan: list, scores: list[float], valid: list[bool]) -> tuple[int, list[int]]:
    """(the good candidate, the wrong candidates lowest-scoring first) of one example."""
    g = int(np.argmax(scores))  # the first best: the own reference on a tie
    rest = [j for j in range(len(plan)) if j != g]
    pool: list[int] = []
    for tier in (("other", "user_wrong"), ("option",), ("generic", "own")):  # plausible wrong answers first
        pool = pool or [j for j in rest if plan[j][2] in tier and valid[j]]
    pool = pool or rest or [g]
    return g, sorted(pool, key=lambda j: (scores[j], j))


def build_seeds(
    task: Task,
    examples: Sequence[Example],
    scorer: Scorer,
    rng: np.random.Generator,
    code: bool,
    user: UserAnswers | None = None,
) -> list[Seeds]:
    """Each example's good and wrong answers (module docstring, "Seed answers")."""
    user = user or UserAnswers()
    refs = [(user.good[i], "--answers") if i in user.good else reference_of(task, ex) for i, ex in enumerate(examples)]
    questions = _questions(task, examples)
    plans = [_candidates(i, refs, questions[i], user, rng, code) for i in range(len(examples))]
    scored = scorer.score([(examples[i], [c[0]]) for i, plan in enumerate(plans) for c in plan], desc="seed answers")
    seeds, k = [], 0
    for i, plan in enumerate(plans):
        mine = scored[k : k + len(plan)]
        k += len(plan)
        scores = [answer_score(task, x) for x in mine]
        valid = [bool(x.valid[0]) and x.crashed is None for x in mine]
        g, order = _choose(plan, scores, valid)
        w = order[0]
        seeds.append(
            Seeds(
                index=i,
                example=examples[i],
                question=questions[i],
                good=plan[g][0],
                good_source=plan[g][1],
                good_score=scores[g],
                wrong=plan[w][0],
                wrong_source=plan[w][1] + ("" if valid[w] else " (not a valid answer: scores 0)"),
                wrong_score=scores[w],
                wrongs=[plan[j][0] for j in order],
                code=code,
                entry_names=entry_names(examples[i], [c[0] for c in plan if c[2] in ("own", "user_wrong")])
                if code
                else [],
            )
        )
    return seeds


# -----------------------------------------------------------------------------------------------
# the audit
# -----------------------------------------------------------------------------------------------


def _example_id(ex: Example, i: int) -> str:
    if isinstance(ex, dict):
        for key in ("id", "task_id", "question_id"):
            if key in ex:
                return str(ex[key])
    return str(i)


def _short(text: str, n: int = 80) -> str:
    t = " ".join(str(text).split())
    return t if len(t) <= n else t[: n - 3] + "..."


def audit(
    task: Task,
    examples: Sequence[Example],
    *,
    seed: int = 0,
    code: bool | None = None,
    user: UserAnswers | None = None,
    objectives: Sequence[str] = SET_OBJECTIVE_NAMES,
    hacks: Sequence[str] | None = None,
    progress: bool = False,
    on_estimate: Callable[[float, int], None] | None = None,
) -> dict:
    """Run the battery on ``examples`` of ``task``; the report as a JSON-able dict.

    ``code``: run the code hacks (default: :func:`is_code_task`); ``hacks``: only these (by name);
    ``on_estimate(seconds, answers)`` is called once the seeds are scored with the time the rest should
    take. ``report["flagged"]`` names the hacks (``name`` or ``name/objective``) that scored above the
    wrong answer (or the honest set) on some example, or left an answer unscored, or crashed;
    ``report["crashes"]`` counts answers whose scoring raised out of ``score_completions`` or left the
    other answers of their batch unscored."""
    from vpo.core.set_objectives import SET_OBJECTIVES

    if not examples:
        raise UserError(f"task {task.name!r}: no examples to audit; check the split and -n")
    unknown = [o for o in objectives if o not in SET_OBJECTIVES]
    if unknown:
        raise UserError(
            f"unknown set objective(s) {', '.join(unknown)}; registered: {', '.join(sorted(SET_OBJECTIVES))}"
        )
    code = is_code_task(task) if code is None else bool(code)
    names = [h.name for h in HACKS + SET_HACKS]
    if hacks is not None:
        bad = [h for h in hacks if h not in names]
        if bad:
            raise UserError(f"unknown hack(s) {', '.join(bad)}; the battery: {', '.join(names)}")
    chosen = [h for h in HACKS if h.applies(code) and (hacks is None or h.name in hacks)]
    chosen_sets = [h for h in SET_HACKS if h.applies(code) and (hacks is None or h.name in hacks)]
    # code: a batch per few programs (the sandbox runs a batch's programs side by side)
    scorer = Scorer(task, chunk=max(4, os.cpu_count() or 1) if code else 64, progress=progress)
    t0 = time.perf_counter()
    seeds = build_seeds(task, examples, scorer, np.random.default_rng(seed), code, user)
    # the single-answer hacks: every variant of every example, one scoring pass
    plan = [(h, s, v) for h in chosen for s in seeds for v in h.make(s)]
    set_plan = [(h, s, h.make(s)) for h in chosen_sets for s in seeds]
    total = len(plan) + sum(len(v) + 2 for *_, v in set_plan)
    if on_estimate is not None and scorer.answers_scored:
        on_estimate(scorer.seconds / scorer.answers_scored * total, total)
    scored = scorer.score([(s.example, [v]) for _, s, v in plan], desc="hacks") if plan else []
    honest = scorer.score([(s.example, [s.good]) for s in seeds], desc="honest sets") if set_plan else []
    set_scored = scorer.score([(s.example, [s.good, *v]) for _, s, v in set_plan], desc="set hacks") if set_plan else []
    report = {
        "task": task.name,
        "objectives": list(task.objectives),
        "target_weights": [float(x) for x in task.target_weights],
        "code_hacks": code,
        "num_examples": len(seeds),
        "seed": seed,
        "eps": EPS,
        "wrong_answer": _wrong_summary(seeds),
        "examples": [_seed_row(s) for s in seeds],
        "hacks": _answer_rows(task, chosen, plan, scored),
        "set_hacks": _set_rows(task, chosen_sets, set_plan, set_scored, honest, objectives),
        "warnings": scorer.warnings,
    }
    report["crashes"] = sum(r["crashes"] for r in report["hacks"])
    report["flagged"] = [r["hack"] for r in report["hacks"] if r["above_wrong"] or r["crashes"] or r["unscored"]] + [
        f"{r['hack']}/{o}" for r in report["set_hacks"] for o, x in r["objectives"].items() if x["above_honest"]
    ]
    report["seconds"] = round(time.perf_counter() - t0, 2)
    report["answers_scored"] = scorer.answers_scored
    return report


def _wrong_summary(seeds: Sequence[Seeds]) -> dict:
    """How many examples took their wrong answer from which source; how many are separated."""
    counts: dict[str, int] = {}
    for s in seeds:
        key = re.sub(r"example \d+", "another example", s.wrong_source)
        counts[key] = counts.get(key, 0) + 1
    return {"sources": counts, "separated": sum(s.separated for s in seeds), "of": len(seeds)}


def _seed_row(s: Seeds) -> dict:
    return {
        "index": s.index,
        "id": _example_id(s.example, s.index),
        "good": _short(s.good, 200),
        "good_source": s.good_source,
        "good_score": s.good_score,
        "wrong": _short(s.wrong, 200),
        "wrong_source": s.wrong_source,
        "wrong_score": s.wrong_score,
        "separated": s.separated,
    }


def _distinct(variant: str, s: Seeds) -> str:
    """A variant as its distinctive part: ``<wrong> + tail`` when it extends the wrong answer."""
    for prefix in (s.wrong, s.program):
        if len(prefix) > 20 and variant.startswith(prefix) and len(variant) > len(prefix):
            return "<wrong> + " + _short(variant[len(prefix) :], 150)
    return _short(variant, 160)


def _answer_rows(task: Task, chosen: Sequence[Hack], plan: list, scored: list[Scored]) -> list[dict]:
    rows = []
    for h in chosen:
        best: dict[int, tuple[float, str, str | None]] = {}  # example -> (score, variant, crash)
        crashes = unscored = 0
        first_unscored = None
        for (hh, s, v), sc in zip(plan, scored):
            if hh is not h:
                continue
            score = answer_score(task, sc)
            crashes += sc.crashed is not None
            if sc.crashed is None and sc.unscored.any():
                unscored += 1
                if first_unscored is None:
                    first_unscored = {
                        "example": s.index,
                        "id": _example_id(s.example, s.index),
                        "answer": _distinct(v, s),
                        "reasons": list(sc.reasons),
                    }
            if sc.crashed is not None:
                score = math.inf
            if s.index not in best or score > best[s.index][0]:
                best[s.index] = (score, v, sc.crashed)
        seeds = {s.index: s for hh, s, _v in plan if hh is h}
        above = [i for i, (sc, _, _) in best.items() if sc > seeds[i].wrong_score + EPS]
        above_good = [i for i, (sc, _, _) in best.items() if sc > seeds[i].good_score + EPS]
        worst = None
        if above:
            i = max(above, key=lambda j: (best[j][0] - seeds[j].wrong_score, -j))
            sc, v, crash = best[i]
            worst = {
                "example": i,
                "id": _example_id(seeds[i].example, i),
                "answer": _distinct(v, seeds[i]),
                "score": sc if math.isfinite(sc) else None,
                "wrong_score": seeds[i].wrong_score,
                "good_score": seeds[i].good_score,
                "crash": crash,
            }
        rows.append(
            {
                "hack": h.name,
                "reason": h.reason,
                "tried": len(best),
                "variants": sum(1 for hh, _, _ in plan if hh is h),
                "above_wrong": len(above),
                "share": len(above) / len(best) if best else None,
                "above_good": len(above_good),
                "crashes": crashes,
                "unscored": unscored,
                "unscored_example": first_unscored,
                "worst": worst,
            }
        )
    return rows


def _set_rows(task, chosen, set_plan, set_scored, honest, objectives) -> list[dict]:
    honest_by = {}
    for sc in honest:
        honest_by[len(honest_by)] = sc
    rows = []
    for h in chosen:
        per = {o: {"tried": 0, "above_honest": 0, "worst": None} for o in objectives}
        for (hh, s, v), sc in zip(set_plan, set_scored):
            if hh is not h or not v:
                continue
            scores = set_scores(task, honest_by[s.index], sc, objectives)
            for o, (base, hack) in scores.items():
                x = per[o]
                x["tried"] += 1
                if hack > base + EPS:
                    x["above_honest"] += 1
                    gain = hack - base
                    if x["worst"] is None or gain > x["worst"]["gain"]:
                        x["worst"] = {
                            "example": s.index,
                            "id": _example_id(s.example, s.index),
                            "set": [_short(a, 60) for a in [s.good, *v]],
                            "kept": int(sc.valid.sum()),
                            "honest": base,
                            "score": hack,
                            "gain": gain,
                        }
        for x in per.values():
            x["share"] = x["above_honest"] / x["tried"] if x["tried"] else None
        rows.append({"hack": h.name, "reason": h.reason, "objectives": per})
    return rows
