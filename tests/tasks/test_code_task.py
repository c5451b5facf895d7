"""The code task: hand-worked reward vectors for real programs run in the real sandbox, the
fixed-d treatment of problems with fewer tests, duplicate detection by AST, the loaders (vpo
JSONL, DeepCoder, LiveCodeBench lite, through ``datasets`` too) and fuzzing of malformed answers."""

from __future__ import annotations

import base64
import json
import os
import pickle
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vpo.tasks
from vpo.tasks.code import (
    CodeTask,
    _decode_lcb_private,
    canonical_program,
    normalize_problem,
    select_tests,
    json_values_equal,
    stdout_matches,
)
from vpo.sandbox import SandboxConfig

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "code"

ADD_RIGHT = "a, b = map(int, input().split())\nprint(a + b)\n"
ADD_ABS = "a, b = map(int, input().split())\nprint(abs(a) + abs(b))\n"  # wrong only when a sign is negative
TWO_SUM = (
    "class Solution:\n"
    "    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
    "        seen = {}\n"
    "        for i, x in enumerate(nums):\n"
    "            if target - x in seen:\n"
    "                return [seen[target - x], i]\n"
    "            seen[x] = i\n"
)


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    cfg = SandboxConfig(
        timeout_s=0.7,
        memory_mb=256,
        scratch_root=str(tmp_path_factory.mktemp("scratch")),
        prelude=vpo.tasks.code.DEFAULT_PRELUDE,
    )
    return CodeTask(str(FIX / "problems.jsonl"), sandbox=cfg)


@pytest.fixture(scope="module")
def problems(task):
    return {p["id"]: p for p in task.load()}


def test_registry_builds_the_task_with_d_tests():
    t = vpo.tasks.get("code", max_tests=5)
    assert isinstance(t, CodeTask)
    assert t.objectives == ("test_1", "test_2", "test_3", "test_4", "test_5") and t.d == 5
    assert t.answer_format == "code"
    assert np.allclose(t.target_weights, 0.2)
    assert vpo.tasks.get("code").d == 16


def test_load_keeps_the_16_smallest_tests_in_order(problems):
    assert {k: len(p["tests"]) for k, p in problems.items()} == {
        "add_two": 5,
        "double": 6,
        "two_sum": 4,
        "mean": 2,
        "square": 3,
        "echo20": 16,
    }
    kept = [len(t["input"]) - 1 for t in problems["echo20"]["tests"]]
    # the 4 largest (40, 35, 33, 30 characters) are dropped, the rest keep their file order
    assert kept == [5, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
    assert select_tests([{"input": "aa", "output": ""}, {"input": "b", "output": ""}], 1) == [
        {"input": "b", "output": ""}
    ]


def test_hand_worked_reward_vectors(task, problems):
    looping_on_3 = (
        "n = int(input())\nif n == 3:\n    while True: pass\nif n == 5:\n    raise ValueError(n)\nprint(2 * n)\n"
    )
    ev = task.evaluate(
        [problems["add_two"], problems["double"], problems["double"], problems["two_sum"], problems["square"]],
        [
            [ADD_RIGHT, ADD_ABS, "def broken(:\n"],
            [looping_on_3],
            ["print(2 * int(input())"],
            [TWO_SUM],
            ["def square(x):\n    return x * x if x > 0 else 0\n", "def square(x):\n    return x ** 2\n"],
        ],
    )
    right, partial, syntax = ev[0]
    assert right.passed == [True] * 5 and right.rewards.tolist() == [1.0] * 16
    # add_two tests: (1,2) (10,-3) (0,0) (100,200) (7,8): only the negative one fails
    assert partial.passed == [True, False, True, True, True]
    assert partial.rewards.tolist() == [1, 0, 1, 1, 1] + [0.8] * 11
    assert syntax.statuses == ["syntax_error"] * 5 and syntax.rewards.tolist() == [0.0] * 16
    loop = ev[1][0]  # n = 1..6: a timeout on 3 and an exception on 5 fail only those tests
    assert loop.statuses == ["ok", "ok", "timeout", "ok", "runtime_error", "ok"]
    assert loop.passed == [True, True, False, True, False, True]
    assert ev[2][0].statuses == ["syntax_error"] * 6
    assert ev[3][0].passed == [True] * 4  # call-based, LeetCode Solution class, List from the prelude
    sq_partial, sq_right = ev[4]
    assert sq_partial.passed == [True, False, True]  # square(-3) -> 0
    assert sq_right.rewards.tolist() == [1.0] * 16


def test_fewer_tests_than_d_keeps_w_star_exact(task, problems):
    """w*ᵀr is the pass rate over the problem's own tests; all ones iff all pass."""
    w = task.target_weights
    for passed in ([True, False, True], [False, False, False], [True] * 3, [True, False], [False] * 16):
        r = task.reward_vector(passed)
        assert r.shape == (16,) and r.min() >= 0 and r.max() <= 1
        assert w @ r == pytest.approx(np.mean(passed))
        assert (r == 1).all() == all(passed) and (r == 0).all() == (not any(passed))
    with pytest.raises(ValueError, match="max_tests=16"):
        task.reward_vector([True] * 17)


def test_float_tolerance_and_output_normalisation(task, problems):
    ev = task.evaluate(
        [problems["mean"]],
        [
            [
                "n = int(input())\nxs = list(map(float, input().split()))\nprint(sum(xs) / n)\n",  # 2.3333333333333335
                "n = int(input())\nxs = list(map(float, input().split()))\nprint(round(sum(xs) / n, 2))\n",  # 2.33: too far
            ]
        ],
    )[0]
    assert ev[0].passed == [True, True]
    assert ev[1].passed == [False, True]
    assert stdout_matches("1 2  \n3\n\n\n", "1 2\n3")
    assert not stdout_matches("1 2 3\n", "1 2\n3\n")
    assert stdout_matches("0.1000001\n", "0.1\n") and not stdout_matches("0.11\n", "0.1\n")
    assert json_values_equal([1, 2.0000000001], [1, 2.0]) and not json_values_equal([1, 2], [2, 1])
    assert json_values_equal([1, 2.0], [1, 2]) and not json_values_equal([1, 2.0000000001], [1, 2])  # ints: exact
    assert (
        json_values_equal({"a": [1.5]}, {"a": [1.5]})
        and not json_values_equal("1", 1)
        and not json_values_equal(True, 1)
    )


def test_duplicates_detected_by_ast():
    a = "def f(x):\n    total = 0\n    for v in x:\n        total += v\n    return total\n"
    renamed = "def f(items):\n    '''sum them'''\n    acc = 0  # accumulator\n\n    for it in items:\n        acc += it\n    return acc"
    reformatted = "def f( x ) :\n  total=0\n  for v in x :\n     total+=v\n  return (total)\n"
    different = "def f(x):\n    return sum(x)\n"
    other_entry = "def g(x):\n    total = 0\n    for v in x:\n        total += v\n    return total\n"
    keys = [canonical_program(s) for s in (a, renamed, reformatted, different, other_entry)]
    assert keys[0] == keys[1] == keys[2]
    assert len({keys[0], keys[3], keys[4]}) == 3  # a different body or entry point is a different program
    assert canonical_program("def (:") == canonical_program("def  (:\n") != canonical_program("def [:")


def test_score_completions_dedups_pads_and_masks(task, problems):
    dup = "x, y = map(int, input().split())\n\n\nprint(x + y)  # same program, renamed\n"
    completions = [
        f"Plan...\n```python\n{ADD_RIGHT}```\n---\n```python\n{dup}```\n---\n```python\n{ADD_ABS}```",
        "no code at all",
        f"```python\n{ADD_ABS}```",
    ]
    b = task.score_completions([problems["add_two"]] * 3, completions, m=3)
    assert b.rewards.shape == (3, 3, 16) and b.num_duplicates == 1
    assert b.valid.tolist() == [[True, True, False], [False, False, False], [True, False, False]]
    assert b.rewards[0, 0].tolist() == [1.0] * 16
    assert b.rewards[0, 1, :5].tolist() == [1, 0, 1, 1, 1]
    assert b.rewards[2, 0].tolist() == b.rewards[0, 1].tolist()
    assert (b.rewards[~b.valid] == 0).all()


def test_deepcoder_rows_normalise_and_score(task):
    rows = [json.loads(line) for line in open(FIX / "deepcoder_rows.jsonl")]
    probs = [normalize_problem(r, i) for i, r in enumerate(rows)]
    assert [p["fn_name"] for p in probs] == ["twoSum", None, "add", None]
    assert probs[0]["tests"][0] == {"args": [[2, 7, 11, 15], 9], "expected": [0, 1], "wrapped": False}
    assert probs[2]["tests"][1] == {"args": [3, 4], "expected": [7], "wrapped": True}
    answers = [[TWO_SUM], [ADD_RIGHT], ["def add(a, b):\n    return a + b\n"], [ADD_RIGHT]]
    ev = task.evaluate(probs, answers)
    assert [e[0].passed for e in ev] == [[True, True], [True] * 3, [True, True], [True, True]]


def test_livecodebench_lite_rows_incl_compressed_private_tests(task):
    rows = [json.loads(line) for line in open(FIX / "lcb_lite_rows.jsonl")]
    double, mx = (normalize_problem(r, i) for i, r in enumerate(rows))
    assert double["id"] == "lcb-double" and double["question"].startswith("Double it")
    assert [t["input"] for t in double["tests"]] == ["3\n", "4\n", "10\n"]  # public + decoded private
    assert mx["fn_name"] == "maxOf" and [t["expected"] for t in mx["tests"]] == [5, -1]
    ev = task.evaluate(
        [double, mx],
        [["print(2 * int(input()))"], ["class Solution:\n    def maxOf(self, nums):\n        return max(nums)\n"]],
    )
    assert ev[0][0].passed == [True] * 3 and ev[1][0].passed == [True, True]


def test_malicious_pickle_in_a_dataset_row_is_refused(tmp_path):
    flag = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {flag}",))

    blob = base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode()
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        _decode_lcb_private(blob)
    with pytest.raises(ValueError, match="cannot read its tests"):
        normalize_problem({"question_id": "evil", "public_test_cases": "[]", "private_test_cases": blob})
    assert not flag.exists()


def test_huggingface_loader_path_with_local_files(tmp_path):
    pytest.importorskip("datasets")
    os.environ.setdefault("HF_DATASETS_CACHE", str(tmp_path / "hf"))
    hf = CodeTask(hf_dataset="json", hf_data_files={"train": str(FIX / "deepcoder_rows.jsonl")})
    direct = CodeTask(str(FIX / "deepcoder_rows.jsonl"))
    assert [p["tests"] for p in hf.load("train")] == [p["tests"] for p in direct.load("train")]


def test_question_text_says_how_the_program_is_run(problems):
    t = CodeTask()
    q = t.question(problems["two_sum"])
    assert "twoSum" in q and "class Solution" in q and "```python" in q
    assert "standard input" in t.question(problems["add_two"])
    prompt = t.build_prompt(problems["add_two"], m=3)
    assert "---" in prompt and "3 genuinely different programs" in prompt


def test_bad_inputs_give_clear_errors(tmp_path, task):
    with pytest.raises(ValueError, match="has no data"):
        CodeTask().load()
    with pytest.raises(ValueError, match="max_tests"):
        CodeTask(max_tests=0)
    with pytest.raises(FileNotFoundError, match="test.jsonl"):
        CodeTask(str(FIX)).load("test")
    with pytest.raises(ValueError, match="no fn_name"):
        normalize_problem({"id": "x", "tests": [{"args": [1], "expected": 1}]})
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "tests": []}\n{not json\n')
    with pytest.raises(ValueError, match="bad.jsonl: line 2 is not valid JSON"):
        CodeTask(str(bad)).load()
    # a problem without tests is a caller error: it is reported per answer, not a crash
    with pytest.warns(RuntimeWarning, match="raised on 1 answer"):
        b = task.score_completions([{"id": "empty", "tests": []}], ["```python\nprint(1)\n```"], m=1)
    assert b.score_errors == 1 and not b.valid.any()


_junk_text = st.one_of(
    st.text(max_size=300),
    st.binary(max_size=300).map(lambda b: b.decode("latin-1")),
    st.builds(lambda s, k: s * k, st.text(min_size=1, max_size=5), st.integers(1000, 40_000)),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_junk_text)
def test_canonical_never_raises(text):
    key = canonical_program(text)
    assert isinstance(key, str) and key == canonical_program(text)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_junk_text, min_size=1, max_size=3), st.booleans())
def test_malformed_answers_never_raise(task, problems, bodies, fenced):
    """Random text, binary-looking and huge strings, optionally fenced so they really run."""
    text = "\n---\n".join(f"```python\n{b}\n```" if fenced else b for b in bodies)
    b = task.score_completions([problems["add_two"]], [text], m=2)
    assert b.rewards.shape == (1, 2, 16)
    assert ((b.rewards >= 0) & (b.rewards <= 1)).all()
    assert b.score_errors == 0
