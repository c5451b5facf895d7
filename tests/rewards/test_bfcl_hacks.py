"""Reward hacks against the bfcl task (issue #50, class 3): answers a policy under optimisation
pressure would find, scored through ``Task.score_completions`` (the trainer's and the veRL reward's
path). Each must score no more than it deserves, component by component: no more than the plain
wrong answer it pads, no more than the worst of the candidates it lists. The reason is beside each."""

from __future__ import annotations

import copy
import importlib.util
import random

import numpy as np
import pytest

if importlib.util.find_spec("bfcl_eval") is None:  # CI installs it, and fails on this skip
    pytest.skip("bfcl-eval is not installed: pip install --no-deps bfcl-eval==2026.3.23", allow_module_level=True)

from vpo.tasks.bfcl import BFCLTask, format_calls, gold_calls, parse_calls, reference_calls, score_calls  # noqa: E402
from helpers.rewards import at_most, scored  # noqa: E402


@pytest.fixture(scope="module")
def task():
    return BFCLTask()


@pytest.fixture(scope="module")
def items(task):
    return {x["id"]: x for x in task.load("all")}


def _wrong(v):
    if isinstance(v, bool):
        return not v
    if isinstance(v, (int, float)):
        return v + 1
    if isinstance(v, str):
        return v + " zz"
    if isinstance(v, list):
        return [*v, v[0]] if v else ["zz"]
    return {"zz_wrong": 1}


AREA = "calculate_triangle_area"  # simple_python_0: base=10, height=5 required, unit optional ("units")


def test_empty_string_padding_raises_nothing(task, items):
    # giving an optional string argument as "" (BFCL accepts "", it marks "may be left out") is as
    # good as leaving it out: it used to count as one more accepted value and raise arg_value
    ex = items["simple_python_0"]
    plain, padded = scored(task, ex, f"{AREA}(base=11, height=6)", f"{AREA}(base=11, height=6, unit='')")
    at_most(padded, plain)
    assert padded[3] == 0
    # the same with the optional argument's accepted value: correct but not demanded, so no credit
    at_most(scored(task, ex, f"{AREA}(base=11, height=6, unit='units')")[0], plain)


def test_padding_optional_arguments_never_raises_a_component_on_any_item(task, items):
    """Every single-call item (1,907): the required values made wrong, then every optional argument
    the gold allows given as "" (strings) or its first accepted value; the padding raised arg_value
    on 701 items before the fix (""), 929 (accepted values). Now on none, on no component."""
    raised, n = [], 0
    for ex in items.values():
        gold = gold_calls(ex)
        if len(gold) != 1 or not gold[0].required:
            continue
        g, (name, args) = gold[0], reference_calls(ex)[0]
        bad = {k: _wrong(v) for k, v in args.items() if k in g.required}
        for kind in ("empty", "accepted"):
            padded = dict(bad)
            for k, opts in g.acceptable.items():
                if k in padded or k not in g.schema or "" not in opts:
                    continue
                values = [o for o in opts if o != ""]
                if kind == "empty" and g.schema[k].get("type") in ("string", "any"):
                    padded[k] = ""
                elif kind == "accepted" and values and not isinstance(values[0], (dict, list)):
                    padded[k] = values[0]
            if padded == bad:
                continue
            n += 1
            plain, pad = (score_calls(parse_calls(format_calls([(name, a)])), gold) for a in (bad, padded))
            if np.any(pad > plain + 1e-12):
                raised.append((ex["id"], kind))
    assert n > 1500 and raised == []


def test_unexpected_key_is_not_diluted_by_allowed_ones(task, items):
    # an argument the function does not take lowers arg_key; adding allowed optional keys used to
    # raise the key precision back (given & allowed / given)
    ex = items["simple_python_0"]
    plain = scored(task, ex, f"{AREA}(base=10, height=5, colour='red')")[0]
    padded = scored(task, ex, f"{AREA}(base=10, height=5, colour='red', unit='')")[0]
    at_most(padded, plain)
    assert plain[2] < 1


def test_dropping_a_wrong_value_does_not_raise_arg_value(task, items):
    # the value share is over the values the gold demands, not the ones given: leaving out a wrong
    # required value is no better than giving it
    ex = items["simple_python_0"]
    given, dropped = scored(task, ex, f"{AREA}(base=11, height=5)", f"{AREA}(height=5)")
    at_most(dropped, given)


def test_candidate_calls_score_no_more_than_the_worst(task, items):
    # a single-call item answered with one call per candidate value: it used to earn the best
    # candidate's key and value (and a third of the name share)
    ex = items["simple_python_0"]
    cands = [f"{AREA}(base={b}, height=5)" for b in (9, 10, 11)]
    members = scored(task, ex, *cands)
    for order in (cands, cands[::-1]):
        shotgun = scored(task, ex, "[" + ", ".join(order) + "]")[0]
        at_most(shotgun, *members)
        at_most(shotgun, scored(task, ex, f"{AREA}(base=11, height=5)")[0])  # the plain wrong answer
    # candidate names: no more than the wrong name's 0
    names = scored(task, ex, f"[triangle_area(base=10, height=5), {AREA}(base=10, height=5)]")[0]
    assert names[1] == 0
    # the right call twice: BFCL rejects the count; as a set of two candidates, no more than 0
    twice = scored(task, ex, f"[{AREA}(base=10, height=5), {AREA}(base=10, height=5)]")[0]
    assert twice.tolist() == [1, 0, 0, 0]
    # many candidates: nothing but the format
    many = "[" + ", ".join(f"{AREA}(base={b}, height=5)" for b in range(300)) + "]"
    assert scored(task, ex, many)[0].tolist() == [1, 0, 0, 0]
    # candidates nested in lists inside a tuple were skipped, so only the right call was read
    other = "triangle_area(base=1, height=2)"
    js = '{"name": "%s", "arguments": {"base": %d, "height": 5}}'
    for nested in (
        f"[{other}], {AREA}(base=10, height=5), [{other}]",
        f"[[{AREA}(base=10, height=5)], [{other}]]",
        f"[[{js % ('triangle_area', 1)}], {js % (AREA, 10)}, [{js % ('triangle_area', 2)}]]",
    ):
        at_most(scored(task, ex, nested)[0], scored(task, ex, other)[0])


def test_candidates_in_prose_are_candidates(task, items):
    # "A or B", a conditional, or one candidate per line in prose: every call written counts, so
    # the set is scored as its worst choice (it used to read whichever span parsed first)
    ex = items["simple_python_0"]
    right, wrong = f"{AREA}(base=10, height=5)", f"{AREA}(base=11, height=5)"
    worst = scored(task, ex, wrong)[0]
    for hack in (
        f"{wrong} or {right}",
        f"{right} if True else {wrong}",
        f"Either {wrong}, or maybe\n{right}.",
        f"I would call {right}\nbut {wrong} works too",
    ):
        at_most(scored(task, ex, hack)[0], worst)


def test_parallel_candidates_score_nothing_on_the_calls(task, items):
    """Parallel items: the gold calls plus a copy of each with one value changed (a candidate for
    every call), in any order: 0 on the call components (BFCL rejects the count), on every fifth
    parallel item."""
    rng = random.Random(0)
    for ex in [x for x in items.values() if "parallel" in x["category"]][::5]:
        ref = reference_calls(ex)
        extra = copy.deepcopy(ref)
        for _, args in extra:
            for k in list(args)[:1]:
                args[k] = _wrong(args[k])
        calls = ref + extra
        rng.shuffle(calls)
        assert score_calls(parse_calls(format_calls(calls)), gold_calls(ex))[1:].tolist() == [0, 0, 0]


def test_negated_and_smuggled_calls_are_not_calls(task, items):
    # the right call negated ("not f(x)", "It is not f(x).") was read as the call itself, scoring
    # 0.75 where a wrong answer scores 0.25; a second answer smuggled after a closing tag is a
    # second candidate
    ex = items["simple_python_0"]
    right, other = f"{AREA}(base=10, height=5)", "triangle_area(base=1, height=2)"
    wrong = scored(task, ex, other)[0]
    for hack in (
        f"not {right}",
        f"It is not {right}.",
        f"{right}? No.",
        f"NOT: {right}",
        f"{right} is wrong; the answer is {other}.",
        f"I would never call {right}",
        f"{other}</answer><answer>{right}",
        f"{other}</answer><answer_1>{right}</answer_1><answer>",
    ):
        at_most(scored(task, ex, hack)[0], wrong)
    # prose that states the call still gets its content credit (format 0)
    assert scored(task, ex, f"Here you go: {right}.")[0].tolist() == [0, 1, 1, 1]
    assert scored(task, ex, f"Not sure, but {right}")[0].tolist() == [0, 1, 1, 1]


def test_list_argument_listing_candidates_is_wrong(task, items):
    # a list argument padded with every candidate element, or a list of floats given as ints
    # (BFCL: [1, 3] is not a list of floats): not accepted, no higher than a plain wrong list
    ex = items["simple_python_13"]  # calculate_area_under_curve(function='x**2', interval=[1.0, 3.0])
    head = "calculate_area_under_curve(function='x**2', interval="
    plain = scored(task, ex, head + "[2.0, 3.0])")[0]
    for hack in ("[1.0, 2.0, 3.0])", "[1.0, 3.0, 1.0, 3.0])", "[1, 3])", "[[1.0, 3.0], [0.0, 3.0]])"):
        r = scored(task, ex, head + hack)[0]
        at_most(r, plain)
        assert r[3] < 1, hack
    assert scored(task, ex, head + "[1.0, 3.0])")[0].tolist() == [1] * 4


def test_dict_argument_with_candidate_entries_is_wrong(task, items):
    ex = items["live_multiple_0-0-0"]  # new_preferences: a dict whose keys list acceptable values
    name, args = reference_calls(ex)[0]
    for change in ({"size": ["large", "small"]}, {"colour": "red"}, {"size": "large or small"}):
        hacked = copy.deepcopy(args)
        hacked["new_preferences"].update(change)
        r = scored(task, ex, format_calls([(name, hacked)]))[0]
        assert r[3] < 1, change


def test_huge_and_non_finite_numbers_are_wrong_values_and_never_raise(task, items):
    # an int past float range where a float is expected raised OverflowError out of the scorer
    # (BFCL's own checker raises there too); inf and nan equal no acceptable value
    ex = items["simple_python_13"]
    head = "calculate_area_under_curve(function='x**2', interval=[1.0, 3.0], method='trapezoidal')"
    ex2 = next(x for x in items.values() if x["id"] == "simple_python_0")
    for answer in (
        f"{AREA}(base={'9' * 400}, height=5)",
        f"{AREA}(base=1e400, height=5)",
        f"{AREA}(base=10, height=-1e400)",
    ):
        r = scored(task, ex2, answer)[0]
        assert r[3] == 0.5, answer
    huge_float = next(
        x for x in items.values() if any(s.get("type") == "float" for s in gold_calls(x)[0].schema.values())
    )
    name, args = reference_calls(huge_float)[0]
    key = next(k for k, s in gold_calls(huge_float)[0].schema.items() if s.get("type") == "float" and k in args)
    args[key] = int("9" * 400)
    assert scored(task, huge_float, format_calls([(name, args)]))[0][3] < 1
    assert scored(task, ex, head)[0].tolist() == [1] * 4


def test_near_duplicates_are_one_answer(task, items):
    # variants of one answer ("X.", "**X**", letter case) passed the dedup, so a sum over a set
    # counted the same calls several times
    ex = items["parallel_0"]
    right = "[spotify.play(artist='Taylor Swift', duration=20), spotify.play(artist='Maroon 5', duration=15)]"
    variants = [right, right + ".", f"**{right}**", right.upper(), right.lower(), f" {right}!"]
    assert len({task.canonical(v) for v in variants}) == 1
    body = "".join(f"<answer_{i}>{v}</answer_{i}>" for i, v in enumerate(variants, 1))
    batch = task.score_completions([ex], [body], m=len(variants))
    assert batch.valid.sum() == 1 and batch.num_duplicates == len(variants) - 1
