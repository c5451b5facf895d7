"""The bfcl task on the real bfcl-eval data: the ground truth scores 1 on every component of every
item in both answer syntaxes; a wrong function name, a missing argument and a wrong value each lower
exactly their component (real items); parallel calls match as a set; values follow BFCL's own
checker, compared answer by answer with that checker (imported with its model-config module stubbed:
the rest of its import chain needs the SDKs that ``--no-deps`` leaves out); Python calls are read
with ``ast`` and never evaluated."""

from __future__ import annotations

import copy
import importlib.util
import random
import sys
import types

import numpy as np
import pytest

import vpo.tasks
from vpo.tasks import TaskSpecError

if importlib.util.find_spec("bfcl_eval") is None:  # CI installs it, and fails on this skip
    pytest.skip("bfcl-eval is not installed: pip install --no-deps bfcl-eval==2026.3.23", allow_module_level=True)

from vpo.tasks.bfcl import (  # noqa: E402
    CATEGORIES,
    UNSATISFIABLE,
    BFCLTask,
    format_calls,
    gold_calls,
    parse_calls,
    reference_calls,
    score_calls,
)


@pytest.fixture(scope="module")
def task():
    return BFCLTask()


@pytest.fixture(scope="module")
def items(task):
    return {x["id"]: x for x in task.load("all")}


def vec(task, ex, answer):
    return task.score(ex, answer).tolist()


def test_items_and_splits(task, items):
    assert len(items) == 2347  # 2,351 single-turn Python items with answers, less the 4 unsatisfiable
    assert not set(UNSATISFIABLE) & set(items)
    counts = {c: sum(x["category"] == c for x in items.values()) for c in CATEGORIES}
    assert counts == {
        "simple_python": 400,
        "multiple": 200,
        "parallel": 200,
        "parallel_multiple": 200,
        "live_simple": 256,
        "live_multiple": 1051,
        "live_parallel": 16,
        "live_parallel_multiple": 24,
    }
    val, test = task.load("validation"), task.load("test")
    assert len(val) + len(test) == len(items) and not {x["id"] for x in val} & {x["id"] for x in test}
    assert 0.15 < len(val) / len(items) < 0.25
    assert len(BFCLTask(categories="parallel").load("all")) == 200
    with pytest.raises(ValueError, match="evaluation set"):
        task.load("train")
    with pytest.raises(TaskSpecError, match="unknown categories"):
        vpo.tasks.get("bfcl", categories=["simple_java"])


def test_ground_truth_scores_one_everywhere(task, items):
    for ex in items.values():
        for style in ("python", "json"):
            r = task.score(ex, task.reference_answer(ex, style))
            assert r.tolist() == [1.0] * 4, (ex["id"], style, task.reference_answer(ex, style))


def test_each_mistake_lowers_exactly_its_component(task, items):
    ex = items["simple_python_0"]  # calculate_triangle_area(base=10, height=5, unit="units"?)
    assert vec(task, ex, "calculate_triangle_area(base=10, height=5)") == [1, 1, 1, 1]
    assert vec(task, ex, "triangle_area(base=10, height=5)") == [1, 0, 1, 1]
    assert vec(task, ex, "calculate_triangle_area(base=10)") == [1, 1, 0.5, 0.5]  # height missing: not given
    assert vec(task, ex, "calculate_triangle_area(base=11, height=5)") == [1, 1, 1, 0.5]
    assert vec(task, ex, "calculate_triangle_area(base=10, height=5, colour='red')") == [1, 1, 2 / 3, 1]
    assert vec(task, ex, "The call: calculate_triangle_area(base=10, height=5).") == [0, 1, 1, 1]
    assert vec(task, ex, "calculate_triangle_area(10, height=5)") == [0, 1, 0.5, 0.5]  # positional: base not given
    assert vec(task, ex, "I cannot help with that.") == [0, 0, 0, 0]
    # multiple: the other function of the list, with the right arguments
    ex = items["multiple_0"]
    right = "triangle_properties.get(side1=5, side2=4, side3=3)"
    assert vec(task, ex, right) == [1, 1, 1, 1]
    assert vec(task, ex, right.replace("triangle_properties", "circle_properties")) == [1, 0, 1, 1]
    assert vec(task, ex, "triangle_properties.get(side1=5, side2=4)") == [1, 1, 2 / 3, 2 / 3]
    assert vec(task, ex, "triangle_properties.get(side1=5, side2=4, side3=30)") == [1, 1, 1, 2 / 3]


def test_parallel_calls_match_as_a_set(task, items):
    ex = items["parallel_0"]  # spotify.play twice: Taylor Swift 20, Maroon 5 15
    a = "spotify.play(artist='Taylor Swift', duration=20)"
    b = "spotify.play(artist='Maroon 5', duration=15)"
    assert vec(task, ex, f"[{a}, {b}]") == [1, 1, 1, 1]
    assert vec(task, ex, f"[{b}, {a}]") == [1, 1, 1, 1]
    assert vec(task, ex, f"{b}\n{a}") == [1, 1, 1, 1]  # one call per line
    assert vec(task, ex, b) == [1, 0.5, 0.5, 0.5]  # a call missing: its keys and values were not given
    assert vec(task, ex, f"[{a}, {b}, {a}]") == [1, 0, 0, 0]  # an extra call: BFCL rejects the count
    swapped = "[spotify.play(artist='Taylor Swift', duration=15), spotify.play(artist='Maroon 5', duration=20)]"
    assert vec(task, ex, swapped) == [1, 1, 1, 0.5]
    # the same function twice with different values (parallel_multiple_3): paired by values
    ex = items["parallel_multiple_3"]
    calls = reference_calls(ex)
    assert vec(task, ex, format_calls(calls[::-1])) == [1, 1, 1, 1]
    assert task.canonical(format_calls(calls)) == task.canonical(format_calls(calls[::-1], "json"))


def test_values_follow_bfcl(task, items):
    ex = items["simple_python_0"]
    assert vec(task, ex, "calculate_triangle_area(base='10', height=5)")[3] == 0.5  # a string for an integer
    assert vec(task, ex, "calculate_triangle_area(base=10.0, height=5)")[3] == 0.5  # a float for an integer
    assert vec(task, ex, "calculate_triangle_area(base=True, height=5)")[3] == 0.5  # a bool is not 1
    assert vec(task, ex, "calculate_triangle_area(base=10, height=5, unit='UNITS')")[3] == 1  # case
    ex = items["parallel_0"]
    assert (
        vec(
            task, ex, "[spotify.play(artist='taylor-swift', duration=20), spotify.play(artist='MAROON 5', duration=15)]"
        )
        == [1] * 4
    )
    ex = items["live_multiple_0-0-0"]  # a dict argument whose keys list their acceptable values
    ref = reference_calls(ex)
    assert vec(task, ex, format_calls(ref)) == [1] * 4
    name, args = copy.deepcopy(ref[0])
    args["new_preferences"]["special_instructions"] = "boiling hot"  # another acceptable value
    assert vec(task, ex, format_calls([(name, args)])) == [1] * 4
    args["new_preferences"]["size"] = "small"
    assert vec(task, ex, format_calls([(name, args)])) == [1, 1, 1, 0.5]


def test_answer_syntaxes_and_safety(task, items):
    ex = items["simple_python_0"]
    for answer in (
        '{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}',
        '{"name": "calculate_triangle_area", "parameters": {"base": 10, "height": 5}}',
        '{"name": "calculate_triangle_area", "arguments": "{\\"base\\": 10, \\"height\\": 5}"}',
        '[{"calculate_triangle_area": {"base": 10, "height": 5}}]',
        "```python\ncalculate_triangle_area(base=10, height=5)\n```",
    ):
        assert vec(task, ex, answer) == [1, 1, 1, 1], answer
    # a definition of the function is not a call of it: no credit for the name
    defined = "```python\ndef calculate_triangle_area(base=10, height=5):\n    return base * height / 2\n```"
    assert vec(task, ex, defined) == [0, 0, 0, 0]
    # an expression is never evaluated: it is not a literal, so it is not accepted
    hostile = "calculate_triangle_area(base=__import__('os').system('touch /tmp/vpo_bfcl_pwned'), height=5)"
    assert vec(task, ex, hostile) == [0, 1, 1, 0.5]
    assert parse_calls("f(a=[1, 2], b={'x': (1, 2)}, c=-3.5)").calls == [
        ("f", {"a": [1, 2], "b": {"x": (1, 2)}, "c": -3.5})
    ]
    for junk in ("", "(" * 5000, "x" * 30_000, "[f(a=1)", '{"name": 3}', "import os", None, b"\xff"):
        r = task.score(ex, junk)
        assert r.shape == (4,) and r[0] == 0


def test_score_completions_and_prompt(task, items):
    ex = items["parallel_0"]
    a = "[spotify.play(artist='Taylor Swift', duration=20), spotify.play(artist='Maroon 5', duration=15)]"
    b = "[spotify.play(artist='Maroon 5', duration=15), spotify.play(artist='Taylor Swift', duration=20)]"
    batch = task.score_completions([ex], [f"<answer_1>{a}</answer_1><answer_2>{b}</answer_2>"], m=2)
    assert batch.valid.tolist() == [[True, False]] and batch.num_duplicates == 1  # the same set of calls
    prompt = task.build_prompt(ex, 2)
    assert '"name": "spotify.play"' in prompt and "Taylor Swift" in prompt and "<answer_2>" in prompt


def test_missing_package_is_one_line(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "bfcl_eval" else real(name, *a))
    with pytest.raises(TaskSpecError) as e:
        vpo.tasks.get("bfcl")
    msg = str(e.value)
    assert "\n" not in msg and "pip install --no-deps bfcl-eval==2026.3.23" in msg


def _bfcl_checker(monkeypatch):
    """BFCL's own ast_checker; its model-config module (which imports every provider's SDK) is
    replaced by a stub that says no model renames dotted function names."""

    class _Config:
        underscore_to_dot = False

    stub = types.ModuleType("bfcl_eval.constants.model_config")
    stub.MODEL_CONFIG_MAPPING = {"vpo": _Config()}
    monkeypatch.setitem(sys.modules, "bfcl_eval.constants.model_config", stub)
    for name in [m for m in sys.modules if m.startswith("bfcl_eval.eval_checker")]:
        monkeypatch.delitem(sys.modules, name)
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

    def valid(ex, calls):
        out = [{n: a} for n, a in calls]
        return ast_checker(ex["functions"], out, ex["ground_truth"], Language.PYTHON, ex["category"], "vpo")["valid"]

    return valid


def _mutants(calls, rng):
    """The ground truth and four random single changes of it: a name, a dropped argument, a changed
    value, a value turned into a string, an int turned float (or back)."""
    out = [calls]
    for _ in range(4):
        c = copy.deepcopy(calls)
        i = rng.randrange(len(c))
        name, args = c[i]
        kind = rng.choice(["name", "drop", "value", "string", "type"])
        key = rng.choice(list(args)) if args else None
        if kind == "name":
            c[i] = (name + "_v2", args)
        elif key is None:
            pass
        elif kind == "drop":
            del args[key]
        elif kind == "value":
            v = args[key]
            if isinstance(v, bool):
                args[key] = not v
            elif isinstance(v, (int, float)):
                args[key] = v + 1
            elif isinstance(v, str):
                args[key] = v + " x"
        elif kind == "string":
            args[key] = str(args[key])
        elif isinstance(args[key], float) and args[key] == int(args[key]):
            args[key] = int(args[key])
        elif isinstance(args[key], int) and not isinstance(args[key], bool):
            args[key] = float(args[key])
        out.append(c)
    return out


def _agreement(items, valid, every: int) -> tuple[int, list]:
    rng = random.Random(0)
    n, disagree = 0, []
    for ex in list(items.values())[::every]:
        for calls in _mutants(reference_calls(ex), rng):
            mine = bool(np.all(score_calls(parse_calls(format_calls(calls)), gold_calls(ex)) == 1))
            n += 1
            if mine != valid(ex, calls):
                disagree.append((ex["id"], format_calls(calls)))
    return n, disagree


def test_all_ones_exactly_when_bfcl_accepts(items, monkeypatch):
    """Every fourth item, the ground truth and four random changes of it: vpo scores all ones
    exactly when BFCL's own checker accepts the calls."""
    n, disagree = _agreement(items, _bfcl_checker(monkeypatch), every=4)
    assert n > 2900 and disagree == []


@pytest.mark.slow
def test_all_ones_exactly_when_bfcl_accepts_every_item(items, monkeypatch):
    n, disagree = _agreement(items, _bfcl_checker(monkeypatch), every=1)
    assert n == 5 * 2347 and disagree == []


@pytest.mark.slow
def test_smollm2_check_on_bfcl(tmp_path):
    """`vpo check` of the real SmolLM2 (the slow suite's shared checkpoint) on BFCL: the pool is
    generated from prompts with the function's schema and scored, and the verdict follows the figures."""
    import json

    pytest.importorskip("gguf")
    from tests.helpers.smollm2 import smollm2_checkpoint
    from vpo.cli import main
    from vpo.search.report import load_report

    out = tmp_path / "check"
    argv = ["check", str(smollm2_checkpoint()), "--task", "bfcl", "--split", "validation", "--num-answers", "3"]
    argv += ["--task-options", '{"categories": ["simple_python"]}']  # one schema a prompt: short prompts
    argv += ["--rollouts", "2", "--num-prompts", "1", "--max-new-tokens", "48", "--ks", "1,2", "--threads", "2"]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    res = next(iter(load_report(out).values()))
    assert res["shape"]["m"] == 3 and res["shape"]["num_prompts"] == 1
    assert sum(res["failures"]["counts"].values()) == res["failures"]["slots"] == 6
    check = next(iter(json.loads((out / "check.json").read_text()).values()))
    assert (check["verdict"] == "warm start first") == (check["valid_share"] < 0.10)


def _type_flips(value):
    """Variants of a list or dict argument with its elements' types flipped one level down (int and
    float, numbers and strings, bools and ints), in lists, dicts and lists of dicts: BFCL checks
    list elements' types without its top-level int-for-float allowance ([1, 3] is not a list of
    floats), and compares dict entries by equality."""

    def flip(fn, x):
        if isinstance(x, list):
            return [{k: fn(y) for k, y in e.items()} if isinstance(e, dict) else fn(e) for e in x]
        return {k: fn(y) for k, y in x.items()} if isinstance(x, dict) else x

    def as_number(x):
        try:
            return int(x) if type(x) is str else x
        except ValueError:
            return x

    fns = (
        lambda x: int(x) if type(x) is float and x == int(x) else x,
        lambda x: float(x) if type(x) is int else x,
        lambda x: str(x) if type(x) in (int, float) else x,
        as_number,
        lambda x: int(x) if type(x) is bool else x,
    )
    for fn in fns:
        flipped = flip(fn, value)
        if repr(flipped) != repr(value):
            yield flipped


def test_type_flipped_lists_and_nested_values_agree_with_bfcl(items, monkeypatch):
    """Every list or dict argument of every ground truth with its element types flipped (issue #50:
    `[1, 3]` for a list of floats scored all ones where BFCL rejects it; 3 of the 106 int/float list
    flips agreed before the fix): all ones exactly when BFCL's checker accepts."""
    valid = _bfcl_checker(monkeypatch)
    n, rejected, disagree = 0, 0, []
    for ex in items.values():
        ref = reference_calls(ex)
        for i, (_, args) in enumerate(ref):
            for key, value in args.items():
                for flipped in _type_flips(value):
                    calls = copy.deepcopy(ref)
                    calls[i][1][key] = flipped
                    official = valid(ex, calls)
                    n += 1
                    rejected += not official
                    mine = bool(np.all(score_calls(parse_calls(format_calls(calls)), gold_calls(ex)) == 1))
                    if mine != official:
                        disagree.append((ex["id"], key, flipped))
    assert n > 300 and rejected > 100 and disagree == []
