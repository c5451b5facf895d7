"""docs/paper_tasks.md's hand-worked vectors are what the scorers give: each row's vector is read
from the doc and compared with the scorer's on that row's answer body (MuSiQue and ToolRL on the
fixture rows, BFCL on the real items of the installed bfcl-eval). A scorer change that moves a
documented number, or a doc edit that does, fails here."""

from __future__ import annotations

import importlib.util
import json
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import vpo.tasks

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "paper_tasks.md").read_text(encoding="utf-8")
FIX = ROOT / "tests" / "fixtures"


def _section(title: str) -> str:
    start = DOC.index(title)
    nxt = DOC.find("\n## ", start + 1)
    nxt_sub = DOC.find("\n### ", start + 1)
    ends = [e for e in (nxt, nxt_sub) if e > 0]
    return DOC[start : min(ends) if ends else len(DOC)]


def _number(text: str) -> float:
    return float(Fraction(text.strip()))


def _rows(section: str) -> dict[str, tuple[float, ...]]:
    """Table rows of a section: first cell -> the vector in the second cell (``(1, 2/3, 0.5)``)."""
    out = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and re.fullmatch(r"\([0-9./, ]+\)", cells[1]):
            out[cells[0]] = tuple(_number(x) for x in cells[1][1:-1].split(","))
    return out


def _check(rows: dict, cases: dict, score) -> None:
    assert set(cases) == set(rows), f"doc rows and test cases differ: {set(rows) ^ set(cases)}"
    for label, body in cases.items():
        got = score(body)
        assert np.allclose(got, rows[label], atol=1e-9), (label, got.tolist(), rows[label])


def test_musique_hand_worked_vectors_and_w_star():
    task = vpo.tasks.get("musique", path=str(FIX / "musique"))
    two = next(ex for ex in task.load("validation") if ex["id"] == "2hop__482757_12019")
    section = _section("## MuSiQue")
    rows = _rows(section)
    # the answer body is the row's backticked parts, one per line (" / " in the doc)
    cases = {}
    for label in rows:
        parts = re.findall(r"`([^`]*)`", label)
        cases[label] = "\n".join(p for p in parts if p.startswith(("Paragraphs:", "Answer:")))
    assert len(rows) == 10 and all(cases.values())
    _check(rows, cases, lambda body: task.score(two, body))
    # the w* column too
    checked = 0
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] in rows:
            assert float(task.target_weights @ task.score(two, cases[cells[0]])) == pytest.approx(
                _number(cells[2]), abs=5e-4
            ), cells[0]
            checked += 1
    assert checked == len(rows)


def test_toolrl_hand_worked_vectors():
    task = vpo.tasks.get("toolrl", path=str(FIX / "toolrl"))
    weather = task.load("test")[0]
    assert task.gold(weather) == ([("get_weather", {"city": "Paris", "unit": "celsius"})], "")

    def call(name, params):
        return json.dumps({"name": name, "parameters": params})

    def block(*calls):
        return "<tool_call>\n" + "\n".join(calls) + "\n</tool_call>"

    paris = {"city": "Paris", "unit": "celsius"}
    gold = call("get_weather", paris)
    cases = {
        "the gold call": block(gold),
        '`unit: "fahrenheit"`': block(call("get_weather", {**paris, "unit": "fahrenheit"})),
        "only `city`": block(call("get_weather", {"city": "Paris"})),
        "the gold call with an extra `days: 3`": block(call("get_weather", {**paris, "days": 3})),
        "`get_forecast` with the same arguments": block(call("get_forecast", paris)),
        '"Here you go: " + the gold call block': "Here you go: " + block(gold),
        'the gold call + `get_forecast(city="Paris")`': block(gold, call("get_forecast", {"city": "Paris"})),
        'the gold call + the same call with `unit: "fahrenheit"` (two candidates)': block(
            gold, call("get_weather", {**paris, "unit": "fahrenheit"})
        ),
    }
    _check(_rows(_section("## ToolRL")), cases, lambda body: task.score(weather, body))


@pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None, reason="bfcl-eval is not installed")
def test_bfcl_hand_worked_vectors():
    task = vpo.tasks.get("bfcl")
    items = {x["id"]: x for x in task.load("all")}
    tri, par = items["simple_python_0"], items["parallel_0"]
    good = "calculate_triangle_area(base=10, height=5"
    ts, m5 = 'spotify.play(artist="Taylor Swift", duration=20)', 'spotify.play(artist="Maroon 5", duration=15)'
    cases = {
        "`calculate_triangle_area(base=10, height=5)` (or the JSON form)": (tri, good + ")"),
        "`triangle_area(base=10, height=5)`: wrong name": (tri, "triangle_area(base=10, height=5)"),
        "`calculate_triangle_area(base=10)`: `height` missing": (tri, "calculate_triangle_area(base=10)"),
        "`calculate_triangle_area(base=11, height=5)`: wrong value": (
            tri,
            "calculate_triangle_area(base=11, height=5)",
        ),
        '`calculate_triangle_area(base="10", height=5)`: a string for an integer': (
            tri,
            'calculate_triangle_area(base="10", height=5)',
        ),
        '`... colour="red")`: an argument BFCL does not allow': (tri, good + ', colour="red")'),
        '`... unit="")`: the optional argument given its accepted `""`': (tri, good + ', unit="")'),
        '`... unit="cm")`: the optional argument given a value BFCL rejects': (tri, good + ', unit="cm")'),
        "`[calculate_triangle_area(base=10, height=5), calculate_triangle_area(base=11, height=5)]`: two candidates": (
            tri,
            f"[{good}), calculate_triangle_area(base=11, height=5)]",
        ),
        "`The call: calculate_triangle_area(base=10, height=5).`": (tri, f"The call: {good})."),
        "`parallel_0`: both calls, in either order": (par, f"[{m5}, {ts}]"),
        "`parallel_0`: only the Maroon 5 call": (par, m5),
        "`parallel_0`: the two durations swapped": (
            par,
            '[spotify.play(artist="Taylor Swift", duration=15), spotify.play(artist="Maroon 5", duration=20)]',
        ),
    }
    rows = _rows(_section("### BFCL"))
    assert set(cases) == set(rows), set(rows) ^ set(cases)
    for label, (ex, body) in cases.items():
        got = task.score(ex, body)
        assert np.allclose(got, rows[label], atol=1e-9), (label, got.tolist(), rows[label])
    # the rows' alternatives: the JSON form, the other order
    assert np.all(task.score(tri, task.reference_answer(tri, style="json")) == 1)
    assert np.all(task.score(par, f"[{ts}, {m5}]") == 1)
