"""The prog interpreter fuzzed: any text evaluates or fails cleanly within its step budget, never raises
and finishes quickly; random ASTs, written with full parentheses, evaluate as an independent
plain-Python evaluator says, and their compact rendering parses back to the same AST."""

from __future__ import annotations

import time

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vpo.tasks.prog import ProgTask, score_program
from vpo.tasks.prog_lang import MAX_NEST, MAX_PROGRAM_CHARS, VALUE_BOUND, parse_program, render, run_program

FUZZ = settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
TIME_LIMIT_S = 1.0
"""One run of a program of at most 200 characters on 16 inputs takes well under a millisecond; a
second allows for a loaded shared machine while still catching anything that loops or backtracks."""

TOKENS = [
    "x",
    "0",
    "1",
    "2",
    "7",
    "12",
    "999999999",
    "+",
    "-",
    "*",
    "/",
    "//",
    "%",
    "<",
    ">",
    "=",
    "==",
    "?",
    ":",
    "(",
    ")",
    ",",
    "min",
    "max",
    "abs",
    " ",
    "((",
    "))",
    "--",
    "y",
    ".",
    "\n",
]
INPUTS = [-8, -1, 0, 1, 2, 5, 15]


def _check_clean(text, max_steps: int = 1000) -> None:
    t0 = time.perf_counter()
    res = run_program(text, INPUTS, max_steps=max_steps)
    assert time.perf_counter() - t0 < TIME_LIMIT_S
    assert len(res.outputs) == len(res.errors) == len(INPUTS)
    for out, err in zip(res.outputs, res.errors):
        assert (out is None) != (err is None)
        if out is not None:
            assert isinstance(out, int) and -VALUE_BOUND <= out <= VALUE_BOUND
        else:
            assert err.startswith(("syntax:", "runtime:"))
    if res.program is None:
        assert all(e == res.errors[0] and e.startswith("syntax:") for e in res.errors)


@FUZZ
@given(st.text(max_size=300))
def test_arbitrary_text_fails_cleanly(text):
    _check_clean(text)


@FUZZ
@given(st.binary(max_size=200))
def test_arbitrary_bytes_fail_cleanly(data):
    _check_clean(data)


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=120), st.integers(1, 60))
def test_token_soups_evaluate_or_fail_within_the_step_budget(tokens, max_steps):
    text = "".join(tokens)
    _check_clean(text, max_steps=max_steps)
    res = run_program(text, [3], max_steps=max_steps)
    if res.program is None:
        return
    err = res.errors[0]
    if res.program.size <= max_steps:  # one step per node visited: the budget cannot run out
        assert err is None or "step budget" not in err
    elif not _has_conditional(res.program):  # every node is visited: it must fail, at the latest on the budget
        assert err is not None and err.startswith("runtime:")


def _has_conditional(node) -> bool:
    return node.op == "?" or any(_has_conditional(k) for k in node.kids)


@FUZZ
@given(st.integers(0, 400), st.sampled_from(["(", "-(", "abs(", "min(x,", "x?(", "1+("]))
def test_deep_nesting_never_overflows_the_stack(depth, opener):
    closer = {"(": ")", "-(": ")", "abs(": ")", "min(x,": ")", "x?(": "):0", "1+(": ")"}[opener]
    _check_clean(opener * depth + "x" + closer * depth)


# --- random ASTs against an independent evaluator --------------------------------------------------

BINARY = ["+", "-", "*", "/", "%", "<", ">", "="]


def _trees():
    leaves = st.one_of(st.just(("x",)), st.integers(-999, 999).map(lambda v: ("num", v)))

    def grow(kids):
        return st.one_of(
            st.tuples(st.sampled_from(BINARY), kids, kids),
            st.tuples(st.just("?"), kids, kids, kids),
            st.tuples(st.sampled_from(["min", "max"]), kids, kids),
            st.tuples(st.sampled_from(["abs", "neg"]), kids),
        )

    return st.recursive(leaves, grow, max_leaves=16)


def _text(t) -> str:
    """Fully parenthesised text of a tree (independent of the module's renderer)."""
    op = t[0]
    if op == "x":
        return "x"
    if op == "num":
        return f"({t[1]})"
    if op == "neg":
        return f"(-{_text(t[1])})"
    if op in ("abs", "min", "max"):
        return f"{op}({','.join(_text(k) for k in t[1:])})"
    if op == "?":
        return f"({_text(t[1])}?{_text(t[2])}:{_text(t[3])})"
    return f"({_text(t[1])}{op}{_text(t[2])})"


def _nest(t) -> int:
    """The nesting the parser counts for :func:`_text`: parentheses, arguments, conditional branches."""
    op = t[0]
    if op == "x":
        return 0
    if op == "num":
        return 1
    if op == "?":
        return 1 + max(_nest(t[1]), 1 + _nest(t[2]), 1 + _nest(t[3]))
    return 1 + max(_nest(k) for k in t[1:])


class _Fail(Exception):
    pass


def _ref(t, x: int) -> int:
    """Plain-Python semantics: floor division and Python's modulo, comparisons 1/0, lazy
    conditional, every value within +-VALUE_BOUND."""
    op = t[0]
    if op == "x":
        v = x
    elif op == "num":
        v = t[1]
    elif op == "?":
        v = _ref(t[2], x) if _ref(t[1], x) != 0 else _ref(t[3], x)
    else:
        a = [_ref(k, x) for k in t[1:]]
        if op in ("/", "%") and a[1] == 0:
            raise _Fail
        v = {
            "neg": lambda: -a[0],
            "abs": lambda: abs(a[0]),
            "min": lambda: min(a),
            "max": lambda: max(a),
            "+": lambda: a[0] + a[1],
            "-": lambda: a[0] - a[1],
            "*": lambda: a[0] * a[1],
            "/": lambda: a[0] // a[1],
            "%": lambda: a[0] % a[1],
            "<": lambda: int(a[0] < a[1]),
            ">": lambda: int(a[0] > a[1]),
            "=": lambda: int(a[0] == a[1]),
        }[op]()
    if abs(v) > VALUE_BOUND:
        raise _Fail
    return v


def _ref_or_none(t, x):
    try:
        return _ref(t, x)
    except _Fail:
        return None


@FUZZ
@given(_trees())
def test_random_programs_match_the_reference_evaluator(tree):
    text = _text(tree)
    res = run_program(text, INPUTS)
    if _nest(tree) > MAX_NEST or len(text) > MAX_PROGRAM_CHARS:
        assert res.program is None and res.errors[0].startswith("syntax:")
        return
    assert res.program is not None, (text, res.errors[0])
    assert list(res.outputs) == [_ref_or_none(tree, x) for x in INPUTS], text
    compact = render(res.program)
    assert parse_program(compact) == res.program
    assert run_program(compact, INPUTS).outputs == res.outputs


# --- through the task ---------------------------------------------------------------------------

TASK = ProgTask()
PROBLEM = TASK.load("validation", 1)[0]


@FUZZ
@given(st.one_of(st.text(max_size=80), st.lists(st.sampled_from(TOKENS), max_size=30).map("".join)))
def test_task_scores_any_answer(answer):
    r = score_program(PROBLEM, answer)
    assert r.shape == (TASK.d,) and set(np.unique(r)) <= {0.0, 1.0}
    assert np.array_equal(TASK.score(PROBLEM, answer), r)


@FUZZ
@given(st.lists(st.one_of(st.text(max_size=40), st.sampled_from(["x", "x<7?2:3*x+4", "3*x+4", "( x )"])), max_size=4))
def test_score_completions_never_raises(bodies):
    completion = "".join(f"<answer_{i + 1}>{b}</answer_{i + 1}>" for i, b in enumerate(bodies))
    batch = TASK.score_completions([PROBLEM], [completion], m=3, strict=True)
    assert batch.rewards.shape == (1, 3, TASK.d) and batch.score_errors == 0
    assert ((batch.rewards == 0) | (batch.rewards == 1)).all()
    assert not batch.rewards[0][~batch.valid[0]].any()


@FUZZ
@given(_trees(), st.integers(1, 40))
def test_the_step_budget_counts_nodes_visited(tree, max_steps):
    res = run_program(_text(tree), INPUTS, max_steps=max_steps)
    if res.program is None:
        return
    full = run_program(_text(tree), INPUTS)
    for out, err, ref in zip(res.outputs, res.errors, full.outputs):
        if res.program.size <= max_steps:  # one step per node visited: the budget cannot run out
            assert out == ref and (err is None or "step budget" not in err)
        elif not _has_conditional(res.program):  # every node is visited
            assert out is None and err.startswith("runtime:")
        else:
            assert out in (None, ref)
