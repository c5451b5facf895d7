"""The ``prog`` task: program synthesis in a tiny language, one reward component per test case.

The model writes one expression in ``x`` (:mod:`vpo.tasks.prog_lang`, e.g. ``x<6?2*x+1:3*x-4``) that
must reproduce a hidden integer function on ``tests`` inputs; component i is 1 when the program's
output on input i equals the target's, else 0 (``w*`` uniform: the pass rate). Targets are
piecewise linear with a designed conflict, the analogue of the maze's: a threshold (``x<t``) or a
parity split between 2-3 distinct lines, each piece holding at least ``min_piece`` tests, so one
line passes at most one test of any other piece, short partial programs pass different subsets,
and a program passing all exists within ``max_chars`` (the reference) but needs every piece and the
right split. Splits are generated deterministically per (seed, split, index) like the maze's;
:func:`random_program` draws plausible valid programs for the supervised warm start.
docs/prog_task.md has the language, the generator, the options and the measured headroom.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from vpo._util import positive_int
from vpo.core.answers import INSTRUCTION_STYLES, style_choices
from vpo.tasks.base import Example, Task, partial_answers, split_seeds
from vpo.tasks.prog_lang import ProgramError, parse_program, render, run_program

SPLITS = ("train", "validation", "test")
SPLIT_SIZES = {"train": 1000, "validation": 100, "test": 100}
CASES = ("threshold", "parity", "mixed")
LANGUAGE = (
    "Language: x, integers, + - * / % (floor division, modulo), < > = (1 or 0), "
    "c?a:b (a if c is not 0), min(a,b), max(a,b), abs(a)."
)


def _as_range(value: Any, name: str) -> tuple[int, int]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value), int(value)
    if (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value)
        and value[0] <= value[1]
    ):
        return int(value[0]), int(value[1])
    raise ValueError(f"prog option {name} must be an int or a (lo, hi) pair of ints with lo <= hi, got {value!r}")


@dataclass(frozen=True)
class ProgConfig:
    """Generator options (docs/prog_task.md "Options"); :meth:`check` validates them."""

    tests: int = 8
    pieces: int = 2
    cases: str = "threshold"
    slope: Any = (0, 3)
    intercept: Any = (0, 9)
    inputs: Any = (0, 15)
    min_piece: int = 3
    max_chars: int = 40
    max_attempts: int = 1000

    def check(self) -> None:
        positive_int(self.tests, "tests", "prog", minimum=2)
        if self.pieces not in (2, 3):
            raise ValueError(f"prog option pieces must be 2 or 3, got {self.pieces!r}")
        if self.cases not in CASES:
            raise ValueError(f"prog option cases must be one of {CASES}, got {self.cases!r}")
        if self.cases != "threshold" and self.pieces != 2:
            raise ValueError(f"prog option cases={self.cases!r} needs pieces=2 (parity splits in two)")
        positive_int(
            self.min_piece, "min_piece", "prog", minimum=2, hint=" (two distinct lines share at most one point)"
        )
        positive_int(self.max_chars, "max_chars", "prog", minimum=1)
        positive_int(self.max_attempts, "max_attempts", "prog")
        if self.tests > 16:
            raise ValueError(
                f"prog option tests must be at most 16 (the paper's code tasks keep <= 16), got {self.tests}"
            )
        if self.tests < self.pieces * self.min_piece:
            raise ValueError(
                f"prog option tests={self.tests} cannot give {self.pieces} pieces {self.min_piece} tests each"
            )
        lo, hi = _as_range(self.inputs, "inputs")
        s_lo, s_hi = _as_range(self.slope, "slope")
        b_lo, b_hi = _as_range(self.intercept, "intercept")
        if hi - lo + 1 < self.tests:
            raise ValueError(f"prog option inputs={self.inputs!r} has fewer than tests={self.tests} distinct values")
        if (hi - lo + 1) // 2 < self.min_piece and self.cases != "threshold":
            raise ValueError(f"prog option inputs={self.inputs!r} has too few odd or even values for a parity split")
        if (s_hi - s_lo + 1) * (b_hi - b_lo + 1) < self.pieces:
            raise ValueError(f"prog options slope and intercept allow fewer than {self.pieces} distinct lines")


class _Draw:
    """Draws built only on ``random.Random.random()`` (its sequence is stable across Python
    versions for an int seed), so generated problems never change with an upgrade."""

    def __init__(self, seed: int) -> None:
        self.u = random.Random(seed).random

    def below(self, n: int) -> int:
        return min(int(self.u() * n), n - 1)

    def between(self, lo: int, hi: int) -> int:
        return lo + self.below(hi - lo + 1)

    def sample(self, xs: Sequence, k: int) -> list:
        pool = list(xs)
        for i in range(k):
            j = i + self.below(len(pool) - i)
            pool[i], pool[j] = pool[j], pool[i]
        return pool[:k]


def instance_seed(seed: int, split: str, index: int) -> int:
    """The integer seed of problem ``index`` of ``split`` (a hash, so splits never share streams)."""
    h = hashlib.sha256(f"vpo-prog|{int(seed)}|{split}|{int(index)}".encode()).digest()
    return int.from_bytes(h[:8], "little")


def linear_text(a: int, b: int) -> str:
    """The shortest text of ``a*x+b``: ``linear_text(1, -2) == "x-2"``, ``linear_text(0, 5) == "5"``."""
    if a == 0:
        return str(b)
    head = {1: "x", -1: "-x"}.get(a, f"{a}*x")
    return head if b == 0 else f"{head}{b:+d}"


def _cut_points(rnd: _Draw, n: int, pieces: int, min_piece: int) -> list[int]:
    """Indices where a new piece starts in the sorted inputs, each piece >= min_piece long."""
    for _ in range(1000):
        cuts = sorted(rnd.sample(range(min_piece, n - min_piece + 1), pieces - 1))
        bounds = [0, *cuts, n]
        if all(b - a >= min_piece for a, b in zip(bounds, bounds[1:])):
            return cuts
    return [round(n * (i + 1) / pieces) for i in range(pieces - 1)]  # equal pieces (ProgConfig.check: feasible)


def _draw_problem(rnd: _Draw, cfg: ProgConfig, kind: str) -> dict | None:
    lo, hi = _as_range(cfg.inputs, "inputs")
    xs = sorted(rnd.sample(range(lo, hi + 1), cfg.tests))
    lines: list[tuple[int, int]] = []
    while len(lines) < cfg.pieces:
        line = (rnd.between(*_as_range(cfg.slope, "slope")), rnd.between(*_as_range(cfg.intercept, "intercept")))
        if line not in lines:
            lines.append(line)
    texts = [linear_text(a, b) for a, b in lines]
    if kind == "parity":
        piece = [0 if x % 2 else 1 for x in xs]  # piece 0: odd inputs (the "then" branch of x%2?..:..)
        if min(piece.count(0), piece.count(1)) < cfg.min_piece:
            return None
        reference = f"x%2?{texts[0]}:{texts[1]}"
    else:
        cuts = _cut_points(rnd, cfg.tests, cfg.pieces, cfg.min_piece)
        ts = [rnd.between(xs[c - 1] + 1, xs[c]) for c in cuts]  # any t in the gap splits the tests alike
        piece = [sum(x >= t for t in ts) for x in xs]
        reference = "".join(f"x<{t}?{txt}:" for t, txt in zip(ts, texts)) + texts[-1]
    ys = [lines[p][0] * x + lines[p][1] for x, p in zip(xs, piece)]
    reference = render(parse_program(reference))
    if len(reference) > cfg.max_chars or run_program(reference, xs).outputs != tuple(ys):
        return None
    return {
        "inputs": xs,
        "outputs": ys,
        "piece": piece,
        "kind": kind,
        "reference": reference,
        "lines": [list(line) for line in lines],
    }


def generate_problem(seed: int, config: ProgConfig | None = None) -> dict:
    """One problem from an integer seed: ``inputs``, ``outputs``, ``piece`` (piece index per
    test), ``kind`` (threshold or parity), ``reference`` (a program passing every test, at most
    ``max_chars`` long) and ``lines`` (``[slope, intercept]`` per piece)."""
    cfg = config or ProgConfig()
    cfg.check()
    rnd = _Draw(seed)
    for _ in range(cfg.max_attempts):
        kind = cfg.cases if cfg.cases != "mixed" else ("threshold", "parity")[rnd.below(2)]
        prob = _draw_problem(rnd, cfg, kind)
        if prob is not None:
            return prob
    raise RuntimeError(f"no problem within {cfg.max_attempts} draws for {cfg}; raise max_chars or widen inputs")


def choose_shown(rnd: _Draw, piece: Sequence[int], shown: int | None) -> list[int]:
    """Indices of the tests the prompt shows: all, or ``shown`` of them with two from every piece."""
    n = len(piece)
    if shown is None or shown >= n:
        return list(range(n))
    chosen: list[int] = []
    for p in sorted(set(piece)):
        chosen += rnd.sample([i for i in range(n) if piece[i] == p], 2)
    rest = [i for i in range(n) if i not in chosen]
    return sorted(chosen + rnd.sample(rest, shown - len(chosen)))


# -------------------------------------------------------------------------------------------------
# scoring
# -------------------------------------------------------------------------------------------------


def score_program(example: Example, answer, max_chars: int | None = None) -> np.ndarray:
    """Per-test pass/fail ``[tests]`` of ``answer`` on ``example``; all zero for a text that does
    not parse or is longer than ``max_chars`` (default: the example's). Never raises on the answer."""
    ins, outs = example["inputs"], example["outputs"]
    limit = int(example.get("max_chars", 40) if max_chars is None else max_chars)
    if isinstance(answer, bytes):
        answer = answer.decode("utf-8", errors="replace")
    if not isinstance(answer, str) or len(answer.strip()) > limit:
        return np.zeros(len(ins))
    got = run_program(answer.strip(), ins).outputs
    return np.array([1.0 if g is not None and g == y else 0.0 for g, y in zip(got, outs)])


_NEVER = 987654321  # an output no test of the generator expects: marks "not decided yet"
_CLOSERS = tuple(tail for n in range(3) for tail in (")" * n, ":" + str(_NEVER) + ")" * n, ")" * n + ":" + str(_NEVER)))


def partial_program_score(example: Example, text: str) -> np.ndarray:
    """The tests a program still being written already passes (a step scorer's view): the longest
    prefix of ``text`` that parses once closed (open parentheses closed, an unfinished ``c?a``
    given an else branch that matches no test) is run, and component i is 1 when its output on
    input i is the expected one. ``x<6?2*x+1`` passes the tests with ``x<6`` its branch gets right;
    the others wait for the ``:`` branch. All zero when no prefix parses or the text is over the
    length limit.
    """
    text = text.strip()
    limit = int(example.get("max_chars", 40))
    zeros = np.zeros(len(example["inputs"]))
    if not text or len(text) > limit:
        return zeros
    for cut in range(len(text), 0, -1):
        for tail in _CLOSERS:
            try:
                parse_program(text[:cut] + tail)
            except (ProgramError, RecursionError):
                continue
            got = run_program(text[:cut] + tail, example["inputs"]).outputs
            return np.array([1.0 if g is not None and g == y else 0.0 for g, y in zip(got, example["outputs"])])
    return zeros


def canonical_program(answer: str) -> Any:
    """The dedup key of an answer: its AST's compact text (``"( x+1 )"`` == ``"x+1"``), or the
    stripped text when it does not parse."""
    try:
        return render(parse_program(answer.strip()))
    except (ProgramError, AttributeError):
        return ("unparsed", str(answer).strip())


# -------------------------------------------------------------------------------------------------
# the warm-start sampler
# -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """A program and its reward vector on the problem it was drawn for."""

    program: str
    reward: np.ndarray

    @property
    def passes_all(self) -> bool:
        return bool(self.reward.size) and bool((self.reward >= 1).all())

    @property
    def target_score(self) -> float:
        return float(self.reward.mean()) if self.reward.size else 0.0


def _uniform(rng) -> Any:
    if isinstance(rng, np.random.Generator):
        return lambda: float(rng.random())
    if isinstance(rng, random.Random):
        return rng.random
    return random.Random(rng).random


class _Sampler:
    def __init__(self, example: Example, u, p_fit: float, slopes: tuple[int, int] = (0, 3)) -> None:
        idx = example.get("shown") or range(len(example["inputs"]))
        self.points = [(example["inputs"][i], example["outputs"][i]) for i in idx]
        self.xs = [x for x, _ in self.points]
        self.u, self.p_fit, self.slopes = u, p_fit, slopes

    def below(self, n: int) -> int:
        return min(int(self.u() * n), n - 1)

    def line(self) -> str:
        """A line through two shown points when their slope is whole (probability p_fit), else a
        line through one shown point with a slope from ``self.slopes``."""
        (x1, y1) = self.points[self.below(len(self.points))]
        if len(self.points) > 1 and self.u() < self.p_fit:
            (x2, y2) = self.points[self.below(len(self.points))]
            if x2 != x1 and (y2 - y1) % (x2 - x1) == 0:
                a = (y2 - y1) // (x2 - x1)
                return linear_text(a, y1 - a * x1)
        lo, hi = self.slopes
        a = lo + self.below(hi - lo + 1)
        return linear_text(a, y1 - a * x1)

    def condition(self) -> str:
        lo, hi = min(self.xs), max(self.xs)
        r = self.u()
        if r < 0.25:
            return "x%2"
        t = lo + 1 + self.below(max(1, hi - lo))
        return f"x<{t}" if r < 0.75 else f"x>{t - 1}"

    def two_lines(self) -> tuple[str, str]:
        first = second = self.line()
        for _ in range(4):  # two different lines (equal ones would make a plain line)
            second = self.line()
            if second != first:
                break
        return first, second

    def program(self, p_single: float, p_minmax: float) -> str:
        r = self.u()
        if r < p_single:
            return self.line()
        a, b = self.two_lines()
        if r < p_single + p_minmax:
            return f"{'min' if self.u() < 0.5 else 'max'}({a},{b})"
        return f"{self.condition()}?{a}:{b}"


def random_program(
    example: Example,
    rng: np.random.Generator | random.Random | int | None = None,
    *,
    p_single: float = 0.5,
    p_fit: float = 0.5,
    p_minmax: float = 0.1,
    slopes: Any = (0, 3),
) -> Candidate:
    """A random valid program of at most ``max_chars`` characters for the warm start: plausible
    shapes built from the shown examples only, mediocre by design.

    With probability ``p_single`` one line, else (``p_minmax``) ``min``/``max`` of two lines, else a
    conditional (``x%2``, ``x<t`` or ``x>t`` with a random t) between two lines. A line goes through
    two random shown examples when their slope is whole (probability ``p_fit``: one branch's
    formula when both lie in the same piece), else through one with a slope drawn from ``slopes``
    (an int or an inclusive ``(lo, hi)`` range; pass the task's ``slope`` option so the fallback lines
    have the targets' slopes). ``rng``: a numpy Generator, ``random.Random`` or an int seed.
    """
    u = _uniform(rng)
    s = _Sampler(example, u, p_fit, _as_range(slopes, "slopes"))
    limit = int(example.get("max_chars", 40))
    text = ""
    for _ in range(20):
        text = render(parse_program(s.program(p_single, p_minmax)))
        if len(text) <= limit:
            break
    else:  # every draw too long (a tiny max_chars): the shortest shape, one shown output
        text = str(s.points[s.below(len(s.points))][1])
    return Candidate(text, score_program(example, text))


# -------------------------------------------------------------------------------------------------
# the task
# -------------------------------------------------------------------------------------------------


class ProgTask(Task):
    """Per-test rewards of tiny-language programs (docs/prog_task.md). Options: the fields of
    :class:`ProgConfig`, plus ``shown`` (tests shown in the prompt; None: all), ``seed`` (train
    split; ``validation_seed`` and ``test_seed`` default to seed + 2100 and seed + 4200),
    ``compact`` (prompt = the ``x:f(x)`` pairs only) and ``instruction`` (``full``, ``short`` or
    ``tags``; default ``short`` when compact)."""

    name = "prog"
    answer_noun = "program"

    def __init__(
        self,
        tests: int = 8,
        pieces: int = 2,
        cases: str = "threshold",
        slope: Any = (0, 3),
        intercept: Any = (0, 9),
        inputs: Any = (0, 15),
        min_piece: int = 3,
        max_chars: int = 40,
        shown: int | None = None,
        seed: int = 42,
        validation_seed: int | None = None,
        test_seed: int | None = None,
        compact: bool = False,
        instruction: str | None = None,
        max_attempts: int = 1000,
    ) -> None:
        self.config = ProgConfig(tests, pieces, cases, slope, intercept, inputs, min_piece, max_chars, max_attempts)
        self.config.check()
        if shown is not None:
            positive_int(shown, "shown", "prog", minimum=2 * pieces, hint=" (two examples of every piece)")
        self.shown = shown
        self.seeds = split_seeds("prog", seed, validation_seed, test_seed)
        self.objectives = tuple(f"test_{i + 1}" for i in range(tests))
        self.compact = bool(compact)
        style = instruction if instruction is not None else ("short" if self.compact else "full")
        if style not in INSTRUCTION_STYLES:
            raise ValueError(f"prog option instruction must be {style_choices()}, got {style!r}")
        self.instruction_style = style

    def load(
        self, split: str = "train", n: int | None = None, seed: int | None = None, *, exclude: Iterable[Example] = ()
    ) -> list[Example]:
        """The first ``n`` distinct problems of ``split`` (default n: 1000 train, 100 validation,
        100 test). Problem i depends only on (config, seed, split, i); a problem equal (same inputs
        and outputs) to an earlier one or to one in ``exclude`` is skipped, so ``load(s, 10)`` is a
        prefix of ``load(s, 100)``. Example keys: id, split, seed, index, inputs, outputs, shown,
        piece, kind, reference, lines, max_chars; JSON-serialisable."""
        if split not in SPLITS:
            raise ValueError(f"prog task has splits {SPLITS}, not {split!r}")
        n = SPLIT_SIZES[split] if n is None else n
        positive_int(n, "n", "prog", minimum=0)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise ValueError(f"seed must be an integer or None, got {seed!r}")
        base = self.seeds[split] if seed is None else int(seed)
        seen = {(tuple(e["inputs"]), tuple(e["outputs"])) for e in exclude}
        out: list[Example] = []
        limit = 20 * int(n) + 100
        for i in range(limit):
            if len(out) == n:
                break
            s = instance_seed(base, split, i)
            prob = generate_problem(s, self.config)
            key = (tuple(prob["inputs"]), tuple(prob["outputs"]))
            if key in seen:
                continue
            seen.add(key)
            shown = choose_shown(_Draw(s ^ 0x5EED), prob["piece"], self.shown)
            out.append(
                {
                    "id": f"prog-{split}-{base}-{i}",
                    "split": split,
                    "seed": base,
                    "index": i,
                    **prob,
                    "shown": shown,
                    "max_chars": self.config.max_chars,
                }
            )
        if len(out) < n:
            raise RuntimeError(f"only {len(out)} distinct problems in {limit} draws for {self.config}; ask for fewer")
        return out

    def question(self, example: Example) -> str:
        pairs = " ".join(f"{example['inputs'][i]}:{example['outputs'][i]}" for i in example["shown"])
        if self.compact:
            return pairs
        limit = example.get("max_chars", self.config.max_chars)
        return f"Write f(x) as one expression of at most {limit} characters with these values (x:f(x)): {pairs}\n{LANGUAGE}"

    def score(self, example: Example, answer: str) -> np.ndarray:
        return score_program(example, answer)

    def canonical(self, answer: str) -> Any:
        return canonical_program(answer)

    def dedup_key(self, example: Example, answer: str) -> Any:
        """Two programs are one answer when they give the same output on every test input of
        ``example``: the scorer cannot tell them apart (``x``, ``(x)``, ``x+0`` and ``x*1`` are one).
        Programs that fail to parse or exceed the length limit all score 0: one answer too."""
        limit = int(example.get("max_chars", 40))
        text = answer.strip() if isinstance(answer, str) else None
        if text is None or len(text) > limit:
            return ("fails",)
        try:
            parse_program(text)
        except (ProgramError, RecursionError):
            return ("fails",)
        return ("outputs", tuple(run_program(text, example["inputs"]).outputs))

    def step_score(self, example: Example, partial_text: str) -> np.ndarray:
        """A partial completion's per-test vector for step-wise search (``vpo eval --search beam|tree``):
        the best (by w*) of its closed answers' true scores and :func:`partial_program_score` of the
        program still being written."""
        closed, open_ = partial_answers(partial_text)
        vecs = [score_program(example, a) for a in closed if a]
        if open_:
            vecs.append(partial_program_score(example, open_))
        if not vecs:
            return np.zeros(len(example["inputs"]))
        return max(vecs, key=lambda v: float(v.mean()))


__all__ = [
    "CASES",
    "Candidate",
    "LANGUAGE",
    "ProgConfig",
    "ProgTask",
    "canonical_program",
    "choose_shown",
    "generate_problem",
    "instance_seed",
    "linear_text",
    "partial_program_score",
    "random_program",
    "score_program",
]
