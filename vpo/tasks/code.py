"""The code task: per-test pass/fail of model-written Python programs (LiveCodeBench / DeepCoder).

A problem is a statement plus stdin/stdout tests or call-based tests (a function ``fn_name``, or a
LeetCode-style ``Solution`` method, called with ``args`` that must return ``expected``). The reward
of a program has one component per test: 1 if it passes, 0 otherwise (docs/method.md §5). Programs
run only in :mod:`vpo.sandbox`; expected outputs never enter it, comparisons happen here
(:func:`stdout_matches`, :func:`json_values_equal`). The number rule of both (LiveCodeBench compares
stdout exactly, then by exact ``Decimal``; EvalPlus applies a tolerance only to float expectations and
rejects inf/nan): an expected integer matches only the same integer (``7``, ``7.0``, ``007`` are one
value; no tolerance, absolute or relative); a tolerance (``float_tol * max(1, |expected|)``) applies
only where the expected value is a float (a stdout token with ``.`` or an exponent, a JSON float);
``inf``/``nan`` never match a finite expectation; JSON booleans match only booleans; huge numbers
are compared exactly and never raise. No comparison raises, whatever the answer printed or returned.
An answer the sandbox could not score (an infrastructure failure, :attr:`ProgramResult.unavailable
<vpo.sandbox.ProgramResult.unavailable>`) is :class:`~vpo.errors.ScoringUnavailable`, never zeros.
Fixed dimension: objectives are ``test_1..test_D`` (``max_tests``, default 16, the paper's "≤16
smallest tests"); a problem with n < D tests fills slots n+1..D with its mean pass rate, which keeps
``w*ᵀr`` exactly its pass rate and "all ones" exactly "all tests pass", at the price of pulling
Dirichlet weightings toward uniform on problems with few tests (:meth:`CodeTask.num_tests` gives n).
Answers are fenced code blocks; duplicates are found by AST (:func:`canonical_program`). Data: JSONL
in the schema of docs/sandbox.md ("Data"), or Hugging Face rows in the DeepCoder / LiveCodeBench /
TACO layouts (:func:`normalize_problem`). docs/sandbox.md ("The reward vector") says why this
padding and not another.
"""

from __future__ import annotations

import ast
import builtins
import decimal
import json
import math
import os
import pickle
import re
import warnings
import zlib
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from vpo._util import positive_int, read_jsonl
from vpo.errors import ScoringUnavailable
from vpo.tasks.base import Example, Task
from vpo.sandbox import ProgramResult, Sandbox, SandboxConfig, TestInput

DEFAULT_PRELUDE = (
    "from typing import *\n"
    "import sys, math, heapq, bisect, itertools, functools, collections, string, re\n"
    "from collections import Counter, defaultdict, deque, OrderedDict\n"
    "from functools import lru_cache, cache, reduce\n"
    "from itertools import accumulate, combinations, permutations, product\n"
    "from heapq import heappush, heappop, heapify\n"
    "from bisect import bisect_left, bisect_right, insort\n"
)
"""Run before every program: the implicit imports LeetCode-style solutions assume (``List``,
``Optional``, ``Counter``, ``heappush``...). Shadows no builtin (no ``from math import *``)."""

HF_DEEPCODER = "agentica-org/DeepCoder-Preview-Dataset"


# -------------------------------------------------------------------------------------------
# loading and normalising problems
# -------------------------------------------------------------------------------------------


def _maybe_json(x: Any) -> Any:
    if isinstance(x, str):
        try:
            return json.loads(x)
        except ValueError:
            return x
    return x


def _decode_lcb_private(text: str) -> Any:
    """LiveCodeBench stores private tests as base64(zlib(pickle(json string))). Unpickle with no
    class lookups allowed, so a malicious dataset row cannot execute code on the host."""
    import base64
    import io

    class _StringsOnly(pickle.Unpickler):
        def find_class(self, module, name):  # noqa: D401 - the only hook that could import code
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a dataset row")

    raw = zlib.decompress(base64.b64decode(text.encode("ascii")))
    return json.loads(_StringsOnly(io.BytesIO(raw)).load())


def _lines_to_args(text: str) -> list:
    """LiveCodeBench functional input: one JSON value per line, the positional arguments."""
    return [json.loads(line) for line in str(text).split("\n") if line.strip()]


def _as_text(x: Any) -> str:
    if isinstance(x, list):
        return "\n".join(str(v) for v in x)
    return "" if x is None else str(x)


def _tests_from_items(items: list, fn_name: str | None) -> tuple[list[dict], str | None]:
    tests = []
    for t in items:
        if not isinstance(t, Mapping):
            raise ValueError(f"a test must be an object, got {type(t).__name__}")
        meta = _maybe_json(t.get("metadata")) or {}
        name = t.get("fn_name") or (meta.get("func_name") if isinstance(meta, Mapping) else None)
        kind = t.get("testtype") or t.get("type")
        if "args" in t:  # vpo schema, call-based
            args = t["args"]
            tests.append(
                {
                    "args": list(args) if isinstance(args, (list, tuple)) else [args],
                    "expected": t.get("expected"),
                    "wrapped": bool(t.get("wrapped", False)),
                }
            )
        elif kind in ("functional", "function_call") or name or (fn_name and not kind):
            fn_name = fn_name or name
            inp, out = t.get("input"), t.get("output")
            if isinstance(inp, str):  # LiveCodeBench: JSON lines
                tests.append({"args": _lines_to_args(inp), "expected": _maybe_json(out), "wrapped": False})
            else:  # PrimeIntellect/TACO: already a list of args, output maybe wrapped in a list
                args = inp if isinstance(inp, list) else [inp]
                tests.append({"args": args, "expected": out, "wrapped": isinstance(out, list)})
        else:
            tests.append({"input": _as_text(t.get("input")), "output": _as_text(t.get("output"))})
    return tests, fn_name


def normalize_problem(row: Mapping[str, Any], index: int = 0) -> Example:
    """One problem in the task's schema from a row in the vpo JSONL, DeepCoder (primeintellect /
    taco / lcbv5 / codeforces), LiveCodeBench ``code_generation_lite`` or TACO/APPS layout.

    Raises ``ValueError`` naming the problem when its tests cannot be read.
    """
    if not isinstance(row, Mapping):
        raise ValueError(f"problem #{index}: expected an object, got {type(row).__name__}")
    pid = str(row.get("id", row.get("question_id", row.get("task_id", row.get("problem_id", index)))))
    question = row.get("question") or row.get("problem") or row.get("prompt") or row.get("question_content") or ""
    if row.get("question_title") and row.get("question_content"):
        question = f"{row['question_title']}\n\n{row['question_content']}"
    meta = _maybe_json(row.get("metadata")) or {}
    fn_name = row.get("fn_name") or (meta.get("func_name") if isinstance(meta, Mapping) else None)
    try:
        if "tests" in row or "ground_truth" in row:
            raw = _maybe_json(row.get("tests", row.get("ground_truth")))
        elif "public_test_cases" in row or "private_test_cases" in row:  # LiveCodeBench lite
            raw = list(_maybe_json(row.get("public_test_cases")) or [])
            priv = row.get("private_test_cases")
            if priv:
                decoded = _maybe_json(priv)
                raw += list(decoded if isinstance(decoded, list) else _decode_lcb_private(priv))
        elif "input_output" in row:  # APPS
            raw = _maybe_json(row["input_output"])
        else:
            raise ValueError("no 'tests' field")
        if isinstance(raw, Mapping) and ("inputs" in raw or "outputs" in raw):  # TACO / APPS
            fn_name = fn_name or raw.get("fn_name")
            ins, outs = list(raw.get("inputs", [])), list(raw.get("outputs", []))
            if len(ins) != len(outs):
                raise ValueError(f"{len(ins)} inputs but {len(outs)} outputs")
            items = [
                {"input": i, "output": o, "testtype": "functional" if fn_name else "stdin"} for i, o in zip(ins, outs)
            ]
            tests, fn_name = _tests_from_items(items, fn_name)
        elif isinstance(raw, list):
            tests, fn_name = _tests_from_items(raw, fn_name)
        else:
            raise ValueError(f"tests must be a list or an inputs/outputs object, got {type(raw).__name__}")
    except (ValueError, TypeError, KeyError, pickle.UnpicklingError, zlib.error) as e:
        raise ValueError(f"problem {pid!r}: cannot read its tests ({e})") from None
    if any("args" in t for t in tests) and not fn_name:
        raise ValueError(f"problem {pid!r} has call-based tests but no fn_name (function to call)")
    return {
        "id": pid,
        "question": str(question),
        "starter_code": str(row.get("starter_code") or ""),
        "fn_name": fn_name,
        "tests": tests,
    }


def _test_size(t: dict) -> int:
    if "args" in t:
        return len(json.dumps(t["args"])) + len(json.dumps(t.get("expected")))
    return len(t["input"]) + len(t["output"])


def select_tests(tests: Sequence[dict], max_tests: int) -> list[dict]:
    """The ``max_tests`` smallest tests (input + expected output size), in their original order."""
    if len(tests) <= max_tests:
        return list(tests)
    order = sorted(range(len(tests)), key=lambda i: (_test_size(tests[i]), i))[:max_tests]
    return [tests[i] for i in sorted(order)]


# -------------------------------------------------------------------------------------------
# comparing outputs
# -------------------------------------------------------------------------------------------

_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
"""A decimal numeric token: what :func:`stdout_matches` compares by value. Not ``inf``, ``nan``,
``Infinity``, ``1_000`` or hex: those match only as the same text."""
_INTEGER = re.compile(r"[+-]?\d+")
_EXACT = decimal.Context(prec=60, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[])
"""Decimal arithmetic for the tolerance check: never traps (an overflow is Infinity, not an error)."""


def _decimal(tok: str) -> decimal.Decimal | None:
    """The exact value of a decimal numeric token, or None (not a number, or not finite)."""
    if len(tok) > 10_000 or not _NUMBER.fullmatch(tok):
        return None
    try:
        d = decimal.Decimal(tok)
    except (decimal.InvalidOperation, ValueError, ArithmeticError):
        return None
    return d if d.is_finite() else None


def _within(actual: decimal.Decimal, expected: decimal.Decimal, tol: float) -> bool:
    """``|actual - expected| <= tol * max(1, |expected|)``, exactly (no overflow, no rounding surprise)."""
    try:
        diff = _EXACT.abs(_EXACT.subtract(actual, expected))
        bound = _EXACT.multiply(decimal.Decimal(repr(float(tol))), max(decimal.Decimal(1), _EXACT.abs(expected)))
        return diff.is_finite() and _EXACT.compare(diff, bound) <= 0
    except (ArithmeticError, ValueError):
        return False


def _token_matches(actual: str, expected: str, tol: float) -> bool:
    if actual == expected:
        return True
    e = _decimal(expected)
    a = _decimal(actual)
    if e is None or a is None:  # words, inf, nan: only the same text
        return False
    if a == e:  # exact value: 7 and 7.0 and 7e0 and 007 are one number (LiveCodeBench's Decimal rule)
        return True
    if _INTEGER.fullmatch(expected):  # an integer is compared exactly: no tolerance
        return False
    return _within(a, e, tol)


def stdout_matches(actual: str, expected: str, float_tol: float = 1e-6) -> bool:
    """Does a program's stdout match the expected output? Lines compared with trailing whitespace and
    trailing empty lines dropped; equal text passes. Otherwise line by line, token by token
    (whitespace-separated; same number of lines and tokens): equal text, or both decimal numbers
    (``[+-]digits[.digits][e±digits]``) of exactly the same value, or, where the expected token is a
    non-integer literal (has a ``.`` or an exponent), within ``float_tol * max(1, |expected|)``. An
    expected integer is matched exactly; ``inf``/``nan`` match only themselves as text; huge numbers
    are compared exactly and never raise. Never raises."""
    try:
        a = [ln.rstrip() for ln in str(actual).split("\n")]
        e = [ln.rstrip() for ln in str(expected).split("\n")]
    except (TypeError, ValueError, MemoryError):
        return False
    while a and not a[-1]:
        a.pop()
    while e and not e[-1]:
        e.pop()
    if a == e:
        return True
    if len(a) != len(e):
        return False
    for la, le in zip(a, e):
        ta, te = la.split(), le.split()
        if len(ta) != len(te):
            return False
        if not all(_token_matches(x, y, float_tol) for x, y in zip(ta, te)):
            return False
    return True


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _numbers_equal(predicted: int | float, expected: int | float, tol: float) -> bool:
    """A returned number against an expected one (neither a bool). Non-finite values match only the
    same non-finite value; an expected int only an equal int or a float of exactly that value (Python's
    exact ``==``); an expected float anything within ``tol * max(1, |expected|)``."""
    p_finite = not isinstance(predicted, float) or math.isfinite(predicted)
    e_finite = not isinstance(expected, float) or math.isfinite(expected)
    if not (p_finite and e_finite):
        if p_finite or e_finite:
            return False
        return math.isnan(predicted) and math.isnan(expected) or predicted == expected
    if predicted == expected:  # exact for every int/float pair: no OverflowError, no rounding
        return True
    if isinstance(expected, int):
        return False
    try:
        p = float(predicted)  # an int beyond the float range raises: it is no finite float's neighbour
    except OverflowError:
        return False
    return abs(p - expected) <= tol * max(1.0, abs(expected))


def json_values_equal(predicted: Any, expected: Any, float_tol: float = 1e-6) -> bool:
    """Whether a program's returned value equals the expected one: structural equality of JSON
    values, lists in order, dict keys equal; booleans equal only booleans (JSON ``true`` is not 1);
    numbers by :func:`_numbers_equal` (integers exactly, a tolerance only where a float is expected,
    ``inf``/``nan`` never for a finite expectation, huge ints never raise). Stricter than
    :func:`vpo.tasks.text.values_match` (the lenient comparison of tool-call arguments); both take
    the model's value first. Never raises (a structure deeper than the interpreter allows is unequal)."""
    try:
        return _json_equal(predicted, expected, float_tol)
    except (RecursionError, MemoryError, TypeError, ValueError, OverflowError):
        return False


def _json_equal(predicted: Any, expected: Any, tol: float) -> bool:
    if isinstance(expected, bool) or isinstance(predicted, bool):  # JSON true is not 1
        return isinstance(expected, bool) and isinstance(predicted, bool) and predicted == expected
    if _is_number(expected) or _is_number(predicted):
        return _is_number(expected) and _is_number(predicted) and _numbers_equal(predicted, expected, tol)
    if isinstance(expected, (list, tuple)) and isinstance(predicted, (list, tuple)):
        return len(predicted) == len(expected) and all(_json_equal(x, y, tol) for x, y in zip(predicted, expected))
    if isinstance(expected, dict) and isinstance(predicted, dict):
        return predicted.keys() == expected.keys() and all(
            _json_equal(predicted[k], expected[k], tol) for k in expected
        )
    return type(predicted) is type(expected) and predicted == expected


def outcome_passes(test: dict, outcome, float_tol: float = 1e-6) -> bool:
    """Did one sandbox :class:`~vpo.sandbox.TestOutcome` pass ``test``?"""
    if not outcome.ok:
        return False
    if "args" not in test:
        return stdout_matches(outcome.stdout, test["output"], float_tol)
    if outcome.value_json is None:
        return False
    try:
        value = json.loads(outcome.value_json)
    except (ValueError, RecursionError):
        return False
    exp = test.get("expected")
    if json_values_equal(value, exp, float_tol):
        return True
    return (
        bool(test.get("wrapped"))
        and isinstance(exp, list)
        and len(exp) == 1
        and json_values_equal(value, exp[0], float_tol)
    )


# -------------------------------------------------------------------------------------------
# duplicate detection
# -------------------------------------------------------------------------------------------

_BUILTIN_NAMES = frozenset(dir(builtins))


class _NameNormaliser(ast.NodeTransformer):
    """Renames variables, arguments and import aliases to v0, v1, ... in order of first appearance;
    keeps builtins, attribute names, keyword-argument names and def/class names (the entry point
    ``fn_name`` must not be renamed away). Drops bare string statements (docstrings)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def _rename(self, name: str) -> str:
        if name in _BUILTIN_NAMES:
            return name
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self._rename(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self._rename(node.arg)
        self.generic_visit(node)
        return node

    def visit_alias(self, node: ast.alias) -> ast.AST:
        if node.asname:
            node.asname = self._rename(node.asname)
        return node

    def visit_Global(self, node: ast.Global) -> ast.AST:
        node.names = [self._rename(n) for n in node.names]
        return node

    visit_Nonlocal = visit_Global

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            kept = [
                s
                for s in body
                if not (
                    isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)
                )
            ]
            node.body = kept or [ast.Pass()]
        return node


def canonical_program(source: str) -> str:
    """Key under which two programs count as duplicates: the AST with names normalised (renamed
    variables, reformatting, comments and docstrings do not matter); normalised text when the
    source does not parse. Never raises."""
    try:
        tree = ast.parse(source)
        tree = _NameNormaliser().visit(tree)
        return "ast:" + ast.dump(tree, annotate_fields=False)
    except (SyntaxError, ValueError, RecursionError, MemoryError, TypeError):
        return "text:" + " ".join(str(source).split())


# -------------------------------------------------------------------------------------------
# the task
# -------------------------------------------------------------------------------------------


@dataclass
class CodeEvaluation:
    """One program scored on one problem: ``rewards [D]`` (the task's vector), ``passed [n]`` (per
    real test), and the raw sandbox result (statuses, stdout, timings)."""

    rewards: np.ndarray
    passed: list[bool]
    result: ProgramResult

    @property
    def statuses(self) -> list[str]:
        return [o.status for o in self.result.outcomes]


class ScoredBySandbox:
    """``score`` and ``score_answers`` of a task whose ``evaluate(examples, answers)`` runs the answers'
    programs in the sandbox and returns, per answer, an evaluation with ``.rewards`` (of type
    ``evaluation_type``) or the exception that stopped it."""

    evaluation_type: type

    def score(self, example: Example, answer: str) -> np.ndarray:
        r = self.evaluate([example], [[answer]])[0][0]
        if isinstance(r, Exception):
            raise r
        return r.rewards

    def score_answers(self, examples: Sequence[Example], answers: Sequence[Sequence[str]]) -> list[list[Any]]:
        kind = self.evaluation_type
        return [[r.rewards if isinstance(r, kind) else r for r in row] for row in self.evaluate(examples, answers)]


class CodeTask(ScoredBySandbox, Task):
    """Per-test pass/fail of Python programs; ``d = max_tests``.

    Args:
        data: problems: a JSONL path (serves every split), a directory holding ``<split>.jsonl``,
            a list of problem rows (every split), or ``{split: path-or-rows}``. Rows may be in any
            layout :func:`normalize_problem` reads.
        max_tests: D, the number of objectives (``test_1..test_D``); problems keep their D
            smallest tests (paper: 16).
        hf_dataset: a Hugging Face dataset to load instead of ``data`` (e.g. ``HF_DEEPCODER``, or
            ``"json"`` with ``hf_data_files``); needs ``datasets``.
        hf_subsets: its configs to concatenate (DeepCoder: primeintellect, taco, lcbv5, codeforces).
        hf_data_files: passed to ``datasets.load_dataset`` (local or ``hf://`` files).
        timeout_s / memory_mb / concurrency / isolation: shortcuts for the :class:`SandboxConfig`.
        sandbox: a full :class:`SandboxConfig` (overrides the shortcuts).
        float_tol: tolerance of numeric comparisons where the expected value is a float (never for
            integers): ``|actual - expected| <= float_tol * max(1, |expected|)``.
        progress: show a progress bar while scoring.
    """

    evaluation_type = CodeEvaluation

    name = "code"
    answer_format = "code"
    answer_noun = "program"

    def __init__(
        self,
        data: Any = None,
        *,
        max_tests: int = 16,
        hf_dataset: str | None = None,
        hf_subsets: Sequence[str] | str | None = None,
        hf_data_files: Any = None,
        timeout_s: float = 6.0,
        memory_mb: int = 1024,
        concurrency: int | None = None,
        isolation: str = "auto",
        sandbox: SandboxConfig | None = None,
        float_tol: float = 1e-6,
        progress: bool = False,
    ) -> None:
        positive_int(max_tests, "max_tests", "code task", hint=" (the paper uses 16)")
        if data is not None and hf_dataset is not None:
            raise ValueError("give either data= (files/rows) or hf_dataset=, not both")
        self.max_tests = max_tests
        self.objectives = tuple(f"test_{i + 1}" for i in range(max_tests))
        self.data = data
        self.hf_dataset = hf_dataset
        self.hf_subsets = [hf_subsets] if isinstance(hf_subsets, str) else (list(hf_subsets) if hf_subsets else None)
        self.hf_data_files = hf_data_files
        self.float_tol = float(float_tol)
        self.progress = progress
        if sandbox is None:
            sandbox = SandboxConfig(
                timeout_s=timeout_s,
                memory_mb=memory_mb,
                concurrency=concurrency,
                isolation=isolation,
                prelude=DEFAULT_PRELUDE,
            )
        self.sandbox_config = sandbox
        self._sandbox: Sandbox | None = None
        self._cache: dict[str, list[Example]] = {}

    # -- data -------------------------------------------------------------------------------
    def load(self, split: str = "train", n: int | None = None, seed: int = 0) -> list[Example]:
        if split not in self._cache:
            rows = self._rows(split)
            problems, skipped = [], 0
            for i, row in enumerate(rows):
                p = normalize_problem(row, i)
                if not p["tests"]:
                    skipped += 1
                    continue
                p["tests"] = select_tests(p["tests"], self.max_tests)
                problems.append(p)
            if skipped:
                warnings.warn(f"code task: skipped {skipped} problem(s) without tests", RuntimeWarning, stacklevel=2)
            self._cache[split] = problems
        data = self._cache[split]
        if n is not None:
            idx = np.random.default_rng(seed).permutation(len(data))[:n]
            data = [data[i] for i in sorted(idx)]
        return list(data)

    def _rows(self, split: str) -> list:
        if self.hf_dataset is not None:
            return self._hf_rows(split)
        src = self.data
        if src is None:
            raise ValueError(
                "CodeTask has no data: pass data='problems.jsonl' (schema: docs/sandbox.md, section Data), a list of "
                f"problem rows, or hf_dataset={HF_DEEPCODER!r} with hf_subsets=[...]"
            )
        if isinstance(src, Mapping):
            if split not in src:
                raise ValueError(f"code task has no split {split!r}; it has {sorted(src)}")
            src = src[split]
        if isinstance(src, (str, os.PathLike)):
            path = os.fspath(src)
            if os.path.isdir(path):
                path = os.path.join(path, f"{split}.jsonl")
            if not os.path.exists(path):
                raise FileNotFoundError(f"code task: no problem file {path!r} (split {split!r})")
            return read_jsonl(path)
        return list(src)

    def _hf_rows(self, split: str) -> list:
        try:
            import datasets
        except ImportError as e:
            raise ImportError(
                f"hf_dataset={self.hf_dataset!r} needs the `datasets` package: pip install -e '.[data]' in the vpo clone ({e})"
            ) from None
        rows: list = []
        for subset in self.hf_subsets or [None]:
            kwargs = {"split": split}
            if self.hf_data_files is not None:
                kwargs["data_files"] = self.hf_data_files
            ds = datasets.load_dataset(self.hf_dataset, subset, **kwargs)
            rows.extend(dict(r) for r in ds)
        return rows

    def num_tests(self, example: Example) -> int:
        """n: the number of real tests this problem is scored on (≤ D)."""
        return len(select_tests(example["tests"], self.max_tests))

    # -- prompting --------------------------------------------------------------------------
    def question(self, example: Example) -> str:
        parts = [str(example.get("question", "")).strip()]
        fn = example.get("fn_name")
        starter = str(example.get("starter_code") or "").strip()
        if fn:
            parts.append(
                f"Write Python code that defines `{fn}` (a function, or a method of a class `Solution`). "
                f"It is called with each test's arguments and must return the answer."
            )
            if starter:
                parts.append(f"Starter code:\n```python\n{starter}\n```")
        else:
            parts.append(
                "Write a Python program that reads the input from standard input and prints the answer "
                "to standard output."
            )
        return "\n\n".join(p for p in parts if p)

    # -- answers and scoring ----------------------------------------------------------------
    def canonical(self, answer: str) -> str:
        return canonical_program(answer)

    def _get_sandbox(self) -> Sandbox:
        if self._sandbox is None:
            self._sandbox = Sandbox(self.sandbox_config)
        return self._sandbox

    def _inputs(self, example: Example) -> tuple[list[dict], list[TestInput]]:
        tests = select_tests(example.get("tests") or [], self.max_tests)
        if not tests:
            raise ValueError(f"code problem {example.get('id')!r} has no tests to score against")
        fn = example.get("fn_name")
        inputs = []
        for t in tests:
            if "args" in t:
                if not fn:
                    raise ValueError(f"code problem {example.get('id')!r} has call-based tests but no fn_name")
                inputs.append(TestInput(call=fn, args=tuple(t["args"])))
            else:
                inputs.append(TestInput(stdin=t["input"]))
        return tests, inputs

    def reward_vector(self, passed: Sequence[bool]) -> np.ndarray:
        """``[D]`` from the pass/fail of the n real tests: slots beyond n hold the mean pass rate."""
        n = len(passed)
        if not 1 <= n <= self.max_tests:
            raise ValueError(f"{n} test results for a task with max_tests={self.max_tests}")
        r = np.empty(self.max_tests, dtype=np.float64)
        r[:n] = np.asarray(passed, dtype=np.float64)
        r[n:] = r[:n].mean()
        return r

    def evaluate(
        self, examples: Sequence[Example], answers: Sequence[Sequence[str]]
    ) -> list[list[CodeEvaluation | Exception]]:
        """Run every ``answers[i][j]`` on ``examples[i]``'s tests (all in parallel); detailed results."""
        jobs, where, prepared = [], [], []
        out: list[list[Any]] = []
        for i, (ex, ans) in enumerate(zip(examples, answers)):
            try:
                prepared.append(self._inputs(ex))
            except (ValueError, TypeError, KeyError) as e:
                prepared.append(None)
                out.append([e for _ in ans])
                continue
            out.append([None] * len(ans))
            for j, a in enumerate(ans):
                jobs.append((a if isinstance(a, str) else str(a), prepared[i][1]))
                where.append((i, j))
        results = self._get_sandbox().run_many(jobs, progress=self.progress, desc="scoring programs")
        for (i, j), res in zip(where, results):
            out[i][j] = self._judge(examples[i], prepared[i][0], res)
        return out

    def _judge(self, example: Example, tests: list[dict], res: ProgramResult) -> CodeEvaluation | Exception:
        """One program's evaluation, or :class:`ScoringUnavailable` (the sandbox's raw result attached as
        ``.result``) when the sandbox could not give every test a verdict of the program's own."""
        if res.unavailable is not None:
            err = ScoringUnavailable(f"code problem {example.get('id')!r}: the sandbox failed: {res.unavailable}")
            err.result = res  # type: ignore[attr-defined] - the tests that did finish keep their outcome
            return err
        try:
            passed = [outcome_passes(t, o, self.float_tol) for t, o in zip(tests, res.outcomes)]
        except Exception as e:  # noqa: BLE001 - a comparison bug fails this answer's scoring, not the batch
            return ScoringUnavailable(f"code problem {example.get('id')!r}: comparing outputs failed: {e!r}")
        return CodeEvaluation(self.reward_vector(passed), passed, res)
