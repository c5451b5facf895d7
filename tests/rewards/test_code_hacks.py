"""Numbers in the code task (issue #50, class 2): answers that a policy under optimisation pressure
would find score more than they deserve, or crash the batch, through the code task's comparisons.

The rule (vpo/tasks/code.py, docs/sandbox.md "Comparing outputs"): an expected integer matches only
the same integer (no tolerance, absolute or relative); a tolerance ``float_tol * max(1, |expected|)``
only where the expected value is a float; ``inf``/``nan`` never match a finite expectation; JSON
booleans match only booleans; huge numbers are compared exactly and never raise. Anchors:
LiveCodeBench compares stdout exactly, then by exact ``Decimal``; EvalPlus applies a tolerance only to
float expectations and rejects inf/nan. Each hack below says why it must fail; a fuzz checks that no
comparison raises on any answer.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vpo.sandbox import TestOutcome
from vpo.tasks.code import CodeTask, json_values_equal, outcome_passes, stdout_matches

# (printed, expected, why it must not pass)
STDOUT_HACKS = [
    ("inf", "5", "inf is no integer"),
    ("inf", "2.5", "inf is not within any tolerance of a finite float"),
    ("-inf", "-2.5", "same, negative"),
    ("nan", "0.5", "nan equals nothing"),
    ("Infinity", "5", "Decimal spells inf this way too"),
    (str(10**400), "5", "print(10**400): a natural big-number bug, was read as inf ~ anything"),
    ("1e400", "1.5", "overflows a float to inf"),
    ("123456700", "123456789", "relative tolerance on an integer accepted 9 digits off"),
    ("5.0000001", "5", "an absolute 1e-6 on an integer output"),
    ("1000001", "1000000", "relative 1e-6 of a million is 1: integers are exact"),
    ("1e999999999999999999999", "1.5", "a huge exponent: no overflow, no raise"),
    ("9" * 20000, "2.5", "20,000 digits (past int()'s 4,300-digit limit): no raise"),
    ("1_000", "1000", "Python's digit separator is not a number in an output"),
    ("0x10", "16", "hex is text"),
    ("2.33", "2.3333333333", "0.0033 off is outside 1e-6"),
    ("1 2 3", "1 2", "extra tokens"),
    ("5\n5", "5", "extra lines"),
]

# (printed, expected): honest outputs that must keep passing
STDOUT_FINE = [
    ("5", "5"),
    ("7.0", "7"),  # the same value (LiveCodeBench's exact Decimal comparison)
    ("007", "7"),
    ("-0", "0"),
    ("0.1000001", "0.1"),
    ("2.3333333333333335", "2.33333333"),
    ("1e3", "1000.0"),
    ("3", "3.0000001"),  # a float is expected: the tolerance applies
    ("12345678.9", "12345678.91"),  # relative to the expected value's size
    (str(10**400), str(10**400)),
    ("1 2  \n3\n\n", "1 2\n3"),
]

# (returned value, expected value, why it must not pass)
JSON_HACKS = [
    (math.inf, 5, "inf is no integer"),
    (math.inf, 2.5, "inf is not within any tolerance"),
    (math.nan, 2.5, "nan equals nothing"),
    (-math.inf, [1.0], "shape and value"),
    (10**400, 1.5, "a huge int where a float is expected raised OverflowError out of the whole batch"),
    (10**400, 5, "a huge int is not 5"),
    (123456700, 123456789, "integers are exact"),
    (5.0000001, 5, "no absolute tolerance on an expected integer"),
    (1e20, 10**20 + 1, "a float of an int's magnitude is not that int"),
    (True, 1, "JSON true is not 1"),
    (1, True, "1 is not JSON true"),
    ([1, True], [1, 1], "nor inside a list"),
    ("5", 5, "a string is not a number"),
    ([2, 1], [1, 2], "lists are ordered"),
    ({"a": 1, "b": 2}, {"a": 1}, "extra keys"),
]

JSON_FINE = [
    (5, 5),
    (5.0, 5),  # exactly the value (Python's exact ==): no tolerance involved
    (2.0000001, 2.0),
    (2, 2.0000001),
    (10**400, 10**400),
    ([1, [2.0, {"a": None}]], [1, [2, {"a": None}]]),
    (math.inf, math.inf),  # a non-finite expectation matches only itself
]


@pytest.mark.parametrize("printed, expected, why", STDOUT_HACKS, ids=[h[2][:40] for h in STDOUT_HACKS])
def test_stdout_hacks_fail(printed, expected, why):
    assert stdout_matches(printed + "\n", expected + "\n") is False, why


@pytest.mark.parametrize("printed, expected", STDOUT_FINE, ids=[f[1][:20] for f in STDOUT_FINE])
def test_honest_stdout_still_passes(printed, expected):
    assert stdout_matches(printed, expected) is True


@pytest.mark.parametrize("returned, expected, why", JSON_HACKS, ids=[h[2][:40] for h in JSON_HACKS])
def test_returned_value_hacks_fail(returned, expected, why):
    assert json_values_equal(returned, expected) is False, why
    # and through the path the task takes: the value crosses the boundary as JSON text
    out = TestOutcome(status="ok", value_json=json.dumps(returned))
    assert outcome_passes({"args": [], "expected": expected}, out) is False, why


@pytest.mark.parametrize("returned, expected", JSON_FINE, ids=[str(k) for k in range(len(JSON_FINE))])
def test_honest_returned_values_still_pass(returned, expected):
    assert json_values_equal(returned, expected) is True


def test_unreadable_returned_values_fail_without_raising():
    for text in ["1" * 5000, "[" * 100_000, "NaN", "-Infinity", "{", "\udcff", '"5"']:
        out = TestOutcome(status="ok", value_json=text)
        assert outcome_passes({"args": [], "expected": 5}, out) is False, text[:20]
        assert outcome_passes({"args": [], "expected": 2.5}, out) is False, text[:20]


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**300, max_value=10**1000)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)
_token = st.one_of(
    st.integers().map(str),
    st.integers(min_value=10**300, max_value=10**4000).map(str),
    st.text("0123456789", min_size=4400, max_size=5000),  # past int()'s 4,300-digit limit
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["inf", "-inf", "nan", "Infinity", "1e999999999999", "1_0", "0x1f", ".", "-", "+.5e-3", "٣"]),
    st.text(max_size=6),
)
_output = st.lists(st.lists(_token, max_size=4).map(" ".join), max_size=4).map("\n".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(predicted=_json, expected=_json, tol=st.sampled_from([0.0, 1e-9, 1e-6, 0.5]))
def test_fuzz_json_comparison_never_raises(predicted, expected, tol):
    got = json_values_equal(predicted, expected, tol)
    assert got in (True, False)
    if isinstance(expected, int) and not isinstance(expected, bool) and got:
        assert predicted == expected  # an expected integer: exactly that value
    if isinstance(expected, float) and math.isfinite(expected) and isinstance(predicted, float):
        assert math.isfinite(predicted) or not got  # non-finite never matches a finite expectation


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actual=_output, expected=_output)
def test_fuzz_stdout_comparison_never_raises(actual, expected):
    got = stdout_matches(actual, expected)
    assert got in (True, False)
    assert stdout_matches(expected, expected) is True


@settings(max_examples=200, deadline=None)
@given(a=st.integers(), b=st.integers())
def test_fuzz_integers_are_exact(a, b):
    assert stdout_matches(str(a), str(b)) == (a == b)
    assert json_values_equal(a, b) == (a == b)


# -- through the trainer's path, in the real sandbox ------------------------------------------------

PROBLEMS = [
    {"id": "mul", "question": "Print a*b.", "tests": [{"input": "123 1000003\n", "output": "123000369\n"}]},
    {
        "id": "half",
        "question": "Return x / 2.",
        "fn_name": "half",
        "tests": [{"args": [5], "expected": 2.5}, {"args": [1], "expected": 0.5}],
    },
]


def _fence(code: str) -> str:
    return f"```python\n{code}\n```"


def test_numeric_hacks_score_zero_and_never_stop_the_batch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        task = CodeTask(PROBLEMS, max_tests=2, timeout_s=2.0)
    mul, half = task.load("train")
    completions = [
        (mul, "a, b = map(int, input().split())\nprint(a * b)"),  # honest: full marks
        (mul, "print(float('inf'))"),  # inf for an integer
        (mul, "print(10**400)"),  # the natural big-number bug
        (mul, "print(123000300)"),  # 69 off: a relative 1e-6 accepted it
        (half, "def half(x):\n    return x / 2"),  # honest
        (half, "def half(x):\n    return 10**400"),  # raised OverflowError out of the whole batch
        (half, "def half(x):\n    return float('nan')"),
        (half, "def half(x):\n    return True"),
    ]
    batch = task.score_completions([ex for ex, _ in completions], [_fence(c) for _, c in completions], m=1)
    got = batch.rewards[:, 0, :]
    assert batch.valid[:, 0].all() and batch.score_errors == 0, batch.unscored_reasons
    assert np.array_equal(got[0], np.ones(2)) and np.array_equal(got[4], np.ones(2))
    for k in (1, 2, 3, 5, 6, 7):
        assert not got[k].any(), (completions[k][1], got[k])
