"""Reward hacks against the toolrl task (issue #50, class 3), scored through
``Task.score_completions`` (the trainer's and the veRL reward's path) on the rlla_4k-schema fixture
rows: each scores no more than it deserves, component by component (no more than the plain wrong
answer it pads, no more than the worst of the candidates it lists). The reason is beside each."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

import vpo.tasks
from vpo.tasks.toolrl import format_tool_answer
from helpers.rewards import at_most, scored  # noqa: E402

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "toolrl"
PARIS = {"city": "Paris", "unit": "celsius"}


@pytest.fixture(scope="module")
def tool():
    t = vpo.tasks.get("toolrl", path=str(FIX))
    weather, stocks, flights, bye, clock, mixed, alarm = t.load("test")
    return t, dict(weather=weather, stocks=stocks, flights=flights, bye=bye, clock=clock, mixed=mixed, alarm=alarm)


def call(name, params):
    return json.dumps({"name": name, "parameters": params})


def tc(*calls):
    return "<tool_call>\n" + "\n".join(calls) + "\n</tool_call>"


def test_candidate_calls_score_no_more_than_the_worst(tool):
    # one call per candidate value: it used to earn the best candidate's value (and most of the
    # name and key F1)
    t, ex = tool
    cands = [call("get_weather", {"city": "Paris", "unit": u}) for u in ("fahrenheit", "celsius", "kelvin")]
    members = scored(t, ex["weather"], *(tc(c) for c in cands))
    plain_wrong = scored(t, ex["weather"], tc(cands[0]))[0]
    for order in (cands, cands[::-1]):
        for body in (tc(*order), "\n".join(tc(c) for c in order)):  # one block, or a block per call
            hacked = scored(t, ex["weather"], body)[0]
            at_most(hacked, *members)
            at_most(hacked, plain_wrong)
    # candidates hidden in nested lists were skipped, so only the right call was read
    nested = json.dumps([[json.loads(cands[0])], json.loads(cands[1]), [json.loads(cands[2])]])
    at_most(scored(t, ex["weather"], tc(nested))[0], plain_wrong)
    # candidate tool names: no more than the wrong tool's
    hacked = scored(t, ex["weather"], tc(call("get_forecast", PARIS), call("get_weather", PARIS)))[0]
    assert hacked[1:].tolist() == [0, 0, 0]
    # the right call twice, or a flood of calls: more calls than the gold, 0 on the calls
    assert (
        scored(t, ex["weather"], tc(call("get_weather", PARIS), call("get_weather", PARIS)))[0][1:].tolist() == [0] * 3
    )
    many = tc(*(call("get_stock_price", {"symbol": s}) for s in ("MSFT", "AAPL", *(f"X{i}" for i in range(30)))))
    assert scored(t, ex["stocks"], many)[0][1:].tolist() == [0, 0, 0]


def test_wrong_tool_without_arguments_earns_nothing_on_arguments(tool):
    # get_current_time takes no arguments; a wrong tool scored [1, 0, 1, 1] (0.75) since the empty
    # key and value comparisons counted as perfect
    t, ex = tool
    assert scored(t, ex["clock"], tc(call("get_weather", {})))[0].tolist() == [1, 0, 0, 0]
    assert scored(t, ex["clock"], tc(call("get_current_time", {})))[0].tolist() == [1, 1, 1, 1]


def test_calling_tools_when_the_gold_responds_earns_nothing(tool):
    # the gold answers with a response only; a call used to score arg_value 1
    t, ex = tool
    assert scored(t, ex["bye"], tc(call("get_weather", {"city": "Oslo"})))[0].tolist() == [0, 0, 0, 0]


def test_lists_compare_in_order(tool):
    # ToolRL compares values with ==: ["urgent", "work"] is not ["work", "urgent"]; the multiset
    # comparison also let a reordered list pass wherever order matters
    t, ex = tool
    currency = call("convert_currency", {"amount": 250.5, "from": "USD", "to": "EUR"})
    right = scored(t, ex["mixed"], tc(call("add_tags", {"note_id": 42, "tags": ["work", "urgent"]}), currency))[0]
    swapped = scored(t, ex["mixed"], tc(call("add_tags", {"note_id": 42, "tags": ["urgent", "work"]}), currency))[0]
    padded = tc(call("add_tags", {"note_id": 42, "tags": ["work", "urgent", "work"]}), currency)
    assert right.tolist() == [1, 1, 1, 1] and swapped[3] < 1
    at_most(scored(t, ex["mixed"], padded)[0], swapped)  # a list padded with a repeat


def test_extra_keys_never_raise_arg_key_and_dropped_values_never_raise_arg_value(tool):
    t, ex = tool
    w = ex["weather"]
    plain = scored(t, w, tc(call("get_weather", {"city": "Paris", "unit": "kelvin", "days": 3})))[0]
    padded = scored(t, w, tc(call("get_weather", {"city": "Paris", "unit": "kelvin", "days": 3, "lang": "en"})))[0]
    at_most(padded, plain)  # key F1 over (name, key) pairs could be diluted by keys of other calls
    given, dropped = scored(
        t, w, tc(call("get_weather", {"city": "Lyon", "unit": "celsius"})), tc(call("get_weather", {"unit": "celsius"}))
    )
    at_most(dropped, given)  # leaving a wrong value out is no better than giving it


def test_candidates_on_every_fixture_row_score_nothing_on_the_calls(tool):
    """Every fixture row with calls: the gold calls plus a copy of each with one value changed (a
    candidate for every call), in both orders: 0 on the three call components."""
    t, ex = tool
    for row in ex.values():
        gold, response = t.gold(row)
        if not gold:
            continue
        extra = copy.deepcopy(gold)
        for _, params in extra:
            for k in list(params)[:1]:
                params[k] = f"{params[k]} zz"
        for calls in (gold + extra, extra + gold):
            assert t.score(row, format_tool_answer(calls, response))[1:].tolist() == [0, 0, 0]


def test_negated_or_empty_answers_earn_nothing(tool):
    # the right call negated was read as the call (0.75 where a wrong call scores 0); an empty or
    # placeholder answer where the gold only responds earned 1 on the three call components
    t, ex = tool
    right = tc(call("get_weather", PARIS))
    wrong = scored(t, ex["weather"], tc(call("get_forecast", PARIS)))[0]
    for hack in (
        f"not {right}",
        f"It is not {right}.",
        f"{right}? No.",
        f"NOT: {right}",
        f"not {call('get_weather', PARIS)}",
    ):
        assert np.all(scored(t, ex["weather"], hack)[0] <= wrong), hack
    for junk in ("", ".", "inf", "None", "[]"):
        assert t.score(ex["bye"], junk).tolist() == [0, 0, 0, 0], junk  # ("" is no answer in a completion)
    assert scored(t, ex["bye"], "<response>Bye!</response>")[0].tolist() == [1, 1, 1, 1]
    # the response among tool_call blocks that do not parse (a JSON list of candidate answers)
    other = tc(call("get_weather", {"city": "Oslo"}))
    listed = json.dumps([other, "<response>Bye!</response>", other])
    assert scored(t, ex["bye"], listed)[0].tolist() == [0, 0, 0, 0]
    # prose that states the call keeps its content credit (format 0)
    assert scored(t, ex["weather"], "Here you go: " + right)[0].tolist() == [0, 1, 1, 1]


def test_huge_numbers_are_wrong_values_and_never_raise(tool):
    # a 400-digit int against a float value raised OverflowError out of the comparison
    t, ex = tool
    body = tc(call("convert_currency", {"amount": 10**400, "from": "USD", "to": "EUR"}))
    body += "\n" + tc(call("add_tags", {"note_id": 10**400, "tags": ["work", "urgent"]}))
    r = scored(t, ex["mixed"], body)[0]
    assert r[3] == pytest.approx(3 / 5)  # 3 of 5 gold values; amount and note_id wrong
