"""MuSiQue, EUREQA and ToolRL tasks: hand-worked scores, parsing robustness, loading, prompts.

Data come from the small fixture files in tests/fixtures/{musique,eureqa,toolrl}/, written in each
dataset's real schema (MuSiQue JSONL, EUREQA and ToolRL rows as the Hub/parquet files hold them).
The offline-Hub test runs a subprocess with HF_HUB_OFFLINE=1 so that `datasets` really is offline.
"""

from __future__ import annotations

import inspect
import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vpo.tasks
from vpo.tasks.eureqa import EureqaTask, entity_match, parse_eureqa_answer
from vpo.tasks.musique import MusiqueTask, hop_slot_matrix, parse_musique_answer
from vpo.tasks.text import (
    DatasetUnavailableError,
    multiset_f1,
    normalize_answer,
    read_records,
    token_f1,
    values_match,
)
from vpo.tasks.toolrl import ToolRLTask, parse_tool_answer

FIX = Path(__file__).resolve().parents[1] / "fixtures"
SPLIT = {"musique": "validation", "eureqa": "questions_hard_5", "toolrl": "test"}


def make(name: str, **kw):
    kw.setdefault("path", str(FIX / name))
    return vpo.tasks.get(name, **kw)


@pytest.fixture(scope="module")
def mus():
    t = make("musique")
    return t, {ex["id"]: ex for ex in t.load("validation")}


@pytest.fixture(scope="module")
def eur():
    t = make("eureqa")
    return t, {ex["idx"]: ex for ex in t.load("questions_hard_5")}


@pytest.fixture(scope="module")
def tool():
    t = make("toolrl")
    return t, t.load("test")


def close(a, b):
    return np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), atol=1e-9)


# -------------------------------------------------------------------------------------------
# shared text helpers
# -------------------------------------------------------------------------------------------


def test_squad_normalisation_and_f1_hand_worked():
    assert normalize_answer("The  Cat's hat!") == "cats hat"
    assert normalize_answer("An apple, a day") == "apple day"
    # Unicode punctuation (non-breaking hyphen U+2011, curly quote) behaves like ASCII punctuation
    assert normalize_answer("Bong Joon\u2011ho\u2019s") == normalize_answer("Bong Joon-ho's") == "bong joonhos"
    assert token_f1("the big cat", "big dog") == pytest.approx(0.5)  # P = 1/2, R = 1/2
    assert token_f1("Christopher Nolan Jr", "Christopher Nolan") == pytest.approx(0.8)  # P 2/3, R 1
    assert token_f1("", "") == 1.0 and token_f1("x", "") == 0.0
    assert multiset_f1(["a", "a", "b"], ["a", "b", "c"]) == pytest.approx(2 / 3)
    assert multiset_f1([], []) == 1.0 and multiset_f1(["a"], []) == 0.0


@pytest.mark.parametrize(
    "pred, gold, same",
    [
        (5, 5.0, True),
        ("5", 5, True),
        ("250.50", 250.5, True),
        ("1,000", 1000, True),
        (6, 5, False),
        ("true", True, True),
        (1, True, False),
        ("Paris ", "paris", True),
        ("Paris, TX", "Paris", False),
        (["urgent", "work"], ["work", "urgent"], True),
        (["work"], ["work", "urgent"], False),
        ({"a": 1, "b": [2]}, {"b": [2.0], "a": "1"}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        (None, None, True),
        ("null", None, True),
        ("nan", 5, False),
    ],
)
def test_values_match(pred, gold, same):
    assert values_match(pred, gold) is same


def test_values_match_takes_the_prediction_first():
    """One argument order: (model's value, expected value); the expected value's type decides the
    comparison, so swapping them changes the answer. The code task's strict comparison of program
    results (a different function on purpose: "1" is not 1 there) takes the same order."""
    from vpo.tasks.code import json_values_equal

    assert values_match("null", None) and not values_match(None, "null")
    assert values_match(predicted="5", expected=5)
    assert list(inspect.signature(values_match).parameters)[:2] == ["predicted", "expected"]
    assert list(inspect.signature(json_values_equal).parameters)[:2] == ["predicted", "expected"]
    assert not json_values_equal("5", 5)


# -------------------------------------------------------------------------------------------
# registry, laziness, w*
# -------------------------------------------------------------------------------------------


def test_get_with_no_options_builds_without_network(monkeypatch):
    def no_network(*a, **k):
        raise AssertionError("a task constructor touched the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr("vpo.tasks.text.load_hub", no_network)
    monkeypatch.setattr("vpo.tasks.text.download_cached", no_network)
    expected = {
        "musique": (("hop_1", "hop_2", "hop_3", "hop_4", "answer_f1"), [1, 1, 1, 1, 3]),
        "eureqa": (("entity_A", "entity_B", "entity_C", "entity_D", "entity_E"), [1, 1, 1, 1, 1]),
        "toolrl": (("format", "tool_name", "arg_key", "arg_value"), [1, 1, 1, 1]),
    }
    for name, (objectives, w) in expected.items():
        t = vpo.tasks.get(name)
        assert t.objectives == objectives and t.d == len(objectives)
        assert close(t.target_weights, np.array(w) / sum(w))


@pytest.mark.parametrize(
    "name, options, what",
    [
        ("musique", {"short_chains": "zero"}, "short_chains"),
        ("musique", {"max_citations": 0}, "max_citations"),
        ("eureqa", {"split_seed": -1}, "split_seed"),
        ("toolrl", {"url": "https://example.org/data.parquet"}, "{split}"),
    ],
)
def test_bad_options_are_rejected_clearly(name, options, what):
    with pytest.raises(ValueError, match=what.replace("{", r"\{").replace("}", r"\}")):
        vpo.tasks.get(name, **options)


# -------------------------------------------------------------------------------------------
# MuSiQue
# -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, cited, answer",
    [
        ("Paragraphs: 3, 7\nAnswer: Paris", [3, 7], "Paris"),
        ("Paragraphs: 3, 7. Answer: Paris", [3, 7], "Paris"),
        ("Answer: Paris\nParagraphs: [3] [7]", [3, 7], "Paris"),
        ("Answer: Paris (paragraphs 3 and 7)", [3, 7], "Paris"),
        ("Paris [3][7]", [3, 7], "Paris"),
        ("Paragraph(s): #3, #12\nParis", [3, 12], "Paris"),
        ("Support = 3; 4\n**Answer:** Miquette Giraudy", [3, 4], "Miquette Giraudy"),
        ("The answer is Paris.", [], "Paris."),
        ("answer: Rome\nFinal answer: Paris", [], "Paris"),
        ("Paragraphs: 3, 7", [3, 7], ""),
        ("", [], ""),
    ],
)
def test_musique_parse(body, cited, answer):
    assert parse_musique_answer(body) == (cited, answer)


def test_hop_slot_matrix_stretches_steps_with_equal_weight():
    assert close(hop_slot_matrix(2), [[1, 0], [1, 0], [0, 1], [0, 1]])
    assert close(hop_slot_matrix(3), [[1, 0, 0], [1 / 3, 2 / 3, 0], [0, 2 / 3, 1 / 3], [0, 0, 1]])
    assert close(hop_slot_matrix(4), np.eye(4))
    for k in range(1, 7):
        m = hop_slot_matrix(k)
        assert close(m.sum(1), np.ones(4)) and close(m.sum(0), np.full(k, 4 / k))


def test_musique_hand_worked_scores(mus):
    t, ex = mus
    two, three, four = ex["2hop__482757_12019"], ex["3hop1__136129_87694_64412"], ex["4hop1__94201_642284_131926_89261"]
    assert t.gold_paragraphs(two) == [2, 4] and t.gold_paragraphs(four) == [2, 4, 6, 1]
    cases = [
        (two, "Paragraphs: 2, 4\nAnswer: Christopher Nolan", [1, 1, 1, 1, 1]),
        (two, "Answer: christopher nolan.\nParagraphs: [4] [2]", [1, 1, 1, 1, 1]),  # order/format
        (two, "Paragraphs: 2\nAnswer: Christopher Nolan", [1, 1, 0, 0, 1]),  # first step only
        (two, "Paragraphs: 4\nAnswer: Nolan", [0, 0, 1, 1, 1]),  # alias "Nolan"
        (two, "Paragraphs: 2, 4\nAnswer: Ang Lee", [1, 1, 1, 1, 0]),  # wrong answer
        (two, "Paragraphs: 2, 4\nAnswer: Christopher Nolan Jr", [1, 1, 1, 1, 0.8]),  # partial F1
        (two, "Paragraphs: 99, 2, 4\nAnswer: Christopher Nolan", [2 / 3] * 4 + [1]),  # 99: a wrong citation
        (two, "Paragraphs: 2, 4", [0, 0, 0, 0, 0]),  # no answer: nothing
        (three, "Paragraphs: 2\nAnswer: won", [1, 1 / 3, 0, 0, 1]),  # step 1 of 3, alias
        (three, "Paragraphs: 4\nAnswer: South Korean won", [0, 2 / 3, 2 / 3, 0, 1]),  # step 2 of 3
        (three, "Paragraphs: 1\nAnswer: Korean won", [0, 0, 1 / 3, 1, 0.8]),  # step 3; F1 2·1·2/3/(5/3)
        (four, "Paragraphs: 6, 1\nAnswer: Asia", [0, 0, 1, 1, 0]),  # citation subset
        (
            four,
            "Paragraphs: 1, 2, 3, 4, 5, 6\nAnswer: North America",
            [0.5, 0.5, 0, 0.5, 1],
        ),  # flood: first 4 hit, precision 3/6
    ]
    for example, body, expected in cases:
        assert close(t.score(example, body), expected), (body, t.score(example, body))
    # w* of "first step of a 2-hop question + right answer": (1 + 1 + 0 + 0 + 3) / 7
    assert t.target_weights @ t.score(two, "Paragraphs: 2\nAnswer: Christopher Nolan") == pytest.approx(5 / 7)


def test_musique_short_chain_and_citation_options(mus):
    _, ex = mus
    three, four = ex["3hop1__136129_87694_64412"], ex["4hop1__94201_642284_131926_89261"]
    passing = make("musique", short_chains="pass")
    assert close(passing.score(three, "Answer: South Korean won"), [0, 0, 0, 1, 1])  # hop_4 given free
    assert close(passing.score(three, "Paragraphs: 2, 4, 1\nAnswer: won"), [1, 1, 1, 1, 1])
    stretch = make("musique")
    assert close(stretch.score(three, "Answer: South Korean won"), [0, 0, 0, 0, 1])  # nothing free
    unlimited = make("musique", max_citations=None)
    assert close(unlimited.score(four, "Paragraphs: 1, 2, 3, 4, 5, 6\nAnswer: North America"), [2 / 3] * 4 + [1])


def test_musique_prompt_has_numbered_paragraphs_question_and_format(mus):
    t, ex = mus
    example = ex["4hop1__94201_642284_131926_89261"]
    prompt = t.build_prompt(example, m=3)
    for i, p in enumerate(example["paragraphs"], 1):
        assert f"[{i}] {p['title']}" in prompt and p["paragraph_text"] in prompt
    assert example["question"] in prompt
    assert "Paragraphs:" in prompt and "Answer:" in prompt and "<answer_3>" in prompt


def test_musique_load_filters_unanswerable_and_samples_deterministically(tmp_path):
    t = make("musique")
    val = t.load("validation")
    assert [ex["id"][:4] for ex in val] == ["2hop", "2hop", "3hop", "3hop", "4hop", "4hop"]  # file order
    assert [ex["id"] for ex in t.load("train")] == ["2hop__13548_13529", "2hop__52220_52243"]  # unanswerable dropped
    assert t.load("dev") == val
    a = t.load("validation", n=3, seed=7)
    assert a == t.load("validation", n=3, seed=7)
    assert sorted(len(ex["question_decomposition"]) for ex in a) == [2, 3, 4]  # hop-stratified
    flat = make("musique", stratify_hops=False).load("validation", n=4, seed=3)
    assert len(flat) == 4 and flat == make("musique", stratify_hops=False).load("validation", n=4, seed=3)
    assert json.loads(json.dumps(val)) == val
    # a single file works for any split
    single = make("musique", path=str(FIX / "musique" / "musique_ans_v1.0_dev.jsonl"))
    assert single.load("train") == val
    with pytest.raises(ValueError, match="no split 'test'.*train.*validation"):
        t.load("test")
    with pytest.raises(ValueError, match="non-negative integer"):
        t.load("validation", n=-1)


def test_musique_stratified_sample_matches_reference_recipe():
    """The reference eval split: per hop count, Dataset.shuffle(seed).select(range(per_hop)), then the
    concatenation shuffled with the same seed. Same recipe at fixture scale (1 per hop count)."""
    datasets = pytest.importorskip("datasets")
    t = make("musique")
    ds = datasets.Dataset.from_list(t.load("validation"))
    parts = []
    for h in (2, 3, 4):
        bucket = ds.filter(lambda r: len(r["question_decomposition"]) == h)  # noqa: B023 (filter calls it now)
        parts.append(bucket.shuffle(seed=42).select(range(1)))
    expected = datasets.concatenate_datasets(parts).shuffle(seed=42)["id"]
    assert [ex["id"] for ex in t.load("validation", n=3, seed=42)] == expected


def test_musique_bad_data_gives_clear_errors(tmp_path):
    bad = tmp_path / "validation.jsonl"
    row = json.loads((FIX / "musique" / "musique_ans_v1.0_dev.jsonl").read_text().splitlines()[0])
    del row["question_decomposition"]
    bad.write_text(json.dumps(row) + "\n")
    with pytest.raises(
        ValueError, match=r"record 0 \(id '2hop__482757_12019'\) lacks field\(s\) \['question_decomposition'\]"
    ):
        MusiqueTask(path=str(tmp_path)).load("validation")
    (tmp_path / "validation.jsonl").write_text('{"id": 1}\n{not json\n')
    with pytest.raises(ValueError, match="line 2 is not valid JSON"):
        MusiqueTask(path=str(tmp_path)).load("validation")
    with pytest.raises(DatasetUnavailableError, match="no file for split 'train'.*validation.jsonl"):
        MusiqueTask(path=str(tmp_path)).load("train")
    with pytest.raises(DatasetUnavailableError, match="neither a data file nor a directory"):
        MusiqueTask(path=str(tmp_path / "missing")).load("train")


# -------------------------------------------------------------------------------------------
# EUREQA
# -------------------------------------------------------------------------------------------


def test_eureqa_parse_is_robust_to_order_and_formatting():
    gold = {
        "A": "Quentin Tarantino",
        "B": "Inglourious Basterds",
        "C": "Christoph Waltz",
        "D": "Vienna",
        "E": "Austria",
    }
    bodies = [
        "A: Quentin Tarantino\nB: Inglourious Basterds\nC: Christoph Waltz\nD: Vienna\nE: Austria",
        "E: Austria\nD = Vienna\n- **B**: Inglourious Basterds\nPerson A is Quentin Tarantino\nEntity C \u2014 Christoph Waltz",
        "A: Quentin Tarantino; B: Inglourious Basterds, C: Christoph Waltz | D -> Vienna, E: Austria",
        "1. A) Quentin Tarantino\n2. (B) Inglourious Basterds\n[C] Christoph Waltz\nD. Vienna\nE: Austria.",
        "<entity_A>Quentin Tarantino</entity_A><entity_B>Inglourious Basterds</entity_B>"
        "<entity_C>Christoph Waltz</entity_C><entity_D>Vienna</entity_D><entity_E>Austria</entity_E>",
        "Quentin Tarantino\nInglourious Basterds\nChristoph Waltz\nVienna\nAustria",  # positional
    ]
    for body in bodies:
        assert parse_eureqa_answer(body) == gold, body
    assert parse_eureqa_answer("A: Washington, D.C.") == {"A": "Washington, D.C"}  # comma inside a name
    assert parse_eureqa_answer("A: first\nA: second") == {"A": "first"}
    assert parse_eureqa_answer("") == {}


def test_eureqa_entity_match_normalisation():
    assert entity_match("the Robert Rodriguez!", "Robert_Rodriguez")
    assert entity_match("Queen", "Queen_(band)") and entity_match("Hamlet (play)", "Hamlet")
    assert entity_match("Zurich", "Z\u00fcrich")
    assert not entity_match("Queen Latifah", "Queen_(band)")
    assert not entity_match("", "Vienna") and not entity_match("(band)", "Queen_(band)")


def test_eureqa_hand_worked_scores(eur):
    t, ex = eur
    tarantino, queen, gates = ex[0], ex[2], ex[3]
    cases = [
        (tarantino, t.reference_answer(tarantino), [1, 1, 1, 1, 1]),
        (
            tarantino,
            "E: austria\nC: Christoph_Waltz\nA: The Quentin Tarantino\nD: Vienna.\nB: Inglourious basterds",
            [1, 1, 1, 1, 1],
        ),
        (
            tarantino,
            "A: Quentin Tarantino\nB: Pulp Fiction\nC: Christoph Waltz\nD: Berlin\nE: Germany",
            [1, 0, 1, 0, 0],
        ),
        (tarantino, "A: Robert Rodriguez\nB: Sin City", [0, 0, 0, 0, 0]),
        (tarantino, "B: Inglourious Basterds", [0, 1, 0, 0, 0]),
        (
            queen,
            "A: Queen\nB: A Night at the Opera\nC: Bohemian Rhapsody\nD: Freddie Mercury\nE: Zanzibar",
            [1, 1, 1, 1, 1],
        ),
        (
            gates,
            "A: Bill Gates\nB: Microsoft\nC: Redmond\nD: Washington\nE: Canada",
            [1, 1, 0, 1, 1],
        ),  # "Redmond" != "Redmond, Washington"
    ]
    for example, body, expected in cases:
        assert close(t.score(example, body), expected), (body, t.score(example, body))
    assert t.target_weights @ t.score(tarantino, cases[2][1]) == pytest.approx(0.4)


def test_eureqa_prompt_lists_narrative_masks_and_format(eur):
    t, ex = eur
    example = ex[1]
    prompt = t.build_prompt(example, m=5)
    for sentence in example["question"]:
        assert sentence in prompt
    for letter, mask in zip("ABCDE", example["entity_masks"]):
        assert f"{letter}: {mask}" in prompt
    assert "A: <name>" in prompt and "<answer_5>" in prompt
    assert "Tolkien" not in prompt and "Peter_Jackson" not in prompt and "Peter Jackson" not in prompt


def test_eureqa_paper_split_reproduces_datasets_shuffle():
    t = make("eureqa")
    hard, normal = t.load("questions_hard_5"), t.load("questions_normal_5")
    train, test = t.load("train"), t.load("test")
    assert len(hard) == 6 and len(normal) == 2 and len(train) == 2 + 3 and len(test) == 3
    assert train[:2] == normal
    ids = lambda rows: [r["idx"] for r in rows]  # noqa: E731
    assert sorted(ids(train[2:]) + ids(test)) == ids(hard)
    datasets = pytest.importorskip("datasets")
    shuffled = datasets.Dataset.from_list(hard).shuffle(seed=0)
    assert ids(train[2:]) == shuffled["idx"][:3] and ids(test) == shuffled["idx"][3:]
    assert ids(make("eureqa", split_seed=1).load("test")) != ids(test)  # the seed matters
    with pytest.raises(ValueError, match="5-hop"):
        t.load("questions_hard_3")


def test_eureqa_rejects_short_chains(tmp_path):
    row = json.loads((FIX / "eureqa" / "questions_hard_5.jsonl").read_text().splitlines()[0])
    row["entities"], row["entity_masks"] = row["entities"][:3], row["entity_masks"][:3]
    (tmp_path / "questions_hard_5.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match="has 3 entities / 3 masks.*5-hop split"):
        EureqaTask(path=str(tmp_path)).load("questions_hard_5")


# -------------------------------------------------------------------------------------------
# ToolRL
# -------------------------------------------------------------------------------------------


def call(name, params, key="parameters"):
    return json.dumps({"name": name, key: params})


def tc(*calls):
    return "<tool_call>\n" + "\n".join(calls) + "\n</tool_call>"


def test_toolrl_hand_worked_scores(tool):
    t, ex = tool
    weather, stocks, flights, bye, clock, mixed, alarm = ex
    paris = {"city": "Paris", "unit": "celsius"}
    cases = [
        (weather, tc(call("get_weather", paris)), [1, 1, 1, 1]),
        (
            weather,
            "<think>easy</think>\n" + tc(call("get_weather", {"unit": "Celsius", "city": "paris"})),
            [1, 1, 1, 1],
        ),
        (weather, tc(call("get_weather", {"city": "Paris", "unit": "fahrenheit"})), [1, 1, 1, 0.5]),  # wrong value
        (
            weather,
            tc(call("get_weather", {"city": "Paris"})),
            [1, 1, 0.5, 0.5],
        ),  # missing key: Jaccard, value not given
        (weather, tc(call("get_forecast", paris)), [1, 0, 0, 0]),  # wrong tool
        (weather, "Here you go: " + tc(call("get_weather", paris)), [0, 1, 1, 1]),  # stray text
        (weather, call("get_weather", paris), [0, 1, 1, 1]),  # bare JSON, no tags
        (weather, tc(call("get_weather", paris), "{broken"), [0, 1, 1, 1]),  # unparsable line
        (weather, tc(json.dumps([{"name": "get_weather", "arguments": json.dumps(paris)}])), [1, 1, 1, 1]),
        (weather, tc(json.dumps([{"name": "get_weather", "parameters": paris}]), "[]"), [0, 1, 1, 1]),  # two arrays
        (weather, tc(call("get_weather", paris)) + "<response>Checking.</response>", [0, 1, 1, 1]),  # extra section
        (weather, "<response>It is sunny.</response>", [0, 0, 0, 0]),  # needed a call
        (
            stocks,
            tc(call("get_stock_price", {"symbol": "MSFT"}), call("get_stock_price", {"symbol": "AAPL"})),
            [1, 1, 1, 1],
        ),
        (stocks, tc(call("get_stock_price", {"symbol": "AAPL"})), [1, 0.5, 0.5, 0.5]),  # missing call
        (
            stocks,
            tc(*(call("get_stock_price", {"symbol": s}) for s in ("AAPL", "MSFT", "GOOG"))),
            [1, 0, 0, 0],
        ),  # extra call: candidates score 0 on the calls
        (
            flights,
            tc(
                call(
                    "search_flights",
                    {"origin": "SFO", "destination": "JFK", "date": "2024-05-01", "passengers": "2", "nonstop": "true"},
                )
            ),
            [1, 1, 1, 1],
        ),
        (
            flights,
            tc(
                call(
                    "search_flights",
                    {"origin": "SFO", "destination": "JFK", "date": "2024-05-01", "passengers": 3, "nonstop": True},
                )
            ),
            [1, 1, 1, 0.8],
        ),
        (bye, "<response>Bye!</response>", [1, 1, 1, 1]),
        (bye, tc(call("get_weather", {"city": "Oslo"})), [0, 0, 0, 0]),  # the gold calls nothing: no credit
        (clock, tc(call("get_current_time", {})), [1, 1, 1, 1]),
        (clock, tc(call("get_current_time", {"tz": "UTC"})), [1, 1, 0, 1]),  # spurious key
        (
            mixed,
            tc(
                call("add_tags", {"note_id": "42", "tags": ["work", "urgent"]}),
                call("convert_currency", {"amount": "250.50", "from": "usd", "to": "EUR"}),
            ),
            [1, 1, 1, 1],
        ),
        (
            mixed,
            tc(
                call("add_tags", {"note_id": "42", "tags": ["urgent", "work"]}),
                call("convert_currency", {"amount": "250.50", "from": "usd", "to": "EUR"}),
            ),
            [1, 1, 1, 0.8],
        ),  # a list in another order: ToolRL compares values with ==
        (alarm, tc(call("set_alarm", {"time": "06:30", "label": "gym"})), [0, 1, 1, 1]),  # response missing
        (
            alarm,
            "<response>Done.</response>" + tc(call("set_alarm", {"time": "06:30", "label": "gym"})),
            [0, 1, 1, 1],
        ),  # order
        (
            alarm,
            tc(call("set_alarm", {"time": "06:30", "label": "gym"})) + "\n<response>Done.</response>",
            [1, 1, 1, 1],
        ),
    ]
    for example, body, expected in cases:
        assert close(t.score(example, body), expected), (body, t.score(example, body))


def test_toolrl_prompt_keeps_tools_and_dialogue_and_replaces_format(tool):
    t, ex = tool
    prompt = t.build_prompt(ex[3], m=3)
    assert "Name: get_weather" in prompt and "Name: set_alarm" in prompt and "Get the current weather" in prompt
    assert "Great, thanks! That's all I needed." in prompt and "<obs>" in prompt
    assert "**Output Format**" not in prompt and "AI's final response" not in prompt  # single-answer format dropped
    assert "<tool_call>" in prompt and "<response>" in prompt and "<answer_3>" in prompt


def test_toolrl_gold_parsing_and_malformed_rows_dropped(tmp_path, tool):
    t, ex = tool
    assert t.gold(ex[5]) == (
        [
            ("convert_currency", {"amount": 250.5, "from": "USD", "to": "EUR"}),
            ("add_tags", {"note_id": 42, "tags": ["work", "urgent"]}),
        ],
        "",
    )
    assert t.gold(ex[6])[1] == "Your alarm is set for 06:30 with the label gym."
    parsed = parse_tool_answer("<think>a</think>\n<tool_call>[]</tool_call>\n<response> ok </response>")
    assert parsed.calls == [] and not parsed.has_tool_block and parsed.response == "ok" and parsed.well_formed
    rows = read_records(FIX / "toolrl" / "test.jsonl")[:2]
    rows[1]["reward_model"]["ground_truth"] = "<think>x</think>\n<tool_call>\n{not json\n</tool_call>"
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.warns(RuntimeWarning, match="dropped 1 row"):
        kept = ToolRLTask(path=str(tmp_path)).load("test")
    assert len(kept) == 1
    del rows[0]["reward_model"]
    (tmp_path / "test.jsonl").write_text(json.dumps(rows[0]) + "\n")
    with pytest.raises(ValueError, match="lacks prompt or reward_model.ground_truth"):
        ToolRLTask(path=str(tmp_path)).load("test")


# -------------------------------------------------------------------------------------------
# all three tasks
# -------------------------------------------------------------------------------------------

NAMES = ("musique", "eureqa", "toolrl")


@pytest.mark.parametrize("name", NAMES)
def test_reference_answers_score_perfectly_on_every_fixture(name):
    t = make(name)
    splits = {"musique": ("train", "validation"), "eureqa": ("train", "test"), "toolrl": ("train", "test")}[name]
    for split in splits:
        for example in t.load(split):
            assert close(t.score(example, t.reference_answer(example)), np.ones(t.d)), example


# a "partly right" answer per task, for the first example of the split in SPLIT
PARTIAL = {
    "musique": ("Paragraphs: 2\nAnswer: Christopher Nolan", [1, 1, 0, 0, 1]),
    "eureqa": ("A: Quentin Tarantino\nB: Pulp Fiction", [1, 0, 0, 0, 0]),
    "toolrl": (tc(call("get_weather", {"city": "Paris", "unit": "kelvin"})), [1, 1, 1, 0.5]),
}


@pytest.mark.parametrize("name", NAMES)
def test_score_completions_gives_expected_rows(name):
    t = make(name)
    example = t.load(SPLIT[name])[0]
    ref = t.reference_answer(example)
    partial, partial_row = PARTIAL[name]
    completions = [
        f"Let me think.\n<answer_1>{ref}</answer_1>\n<answer_2>{partial}</answer_2>",
        "I am not sure, no tags here.",
        f"<answer_2>{partial}</answer_2><answer_1>{ref}</answer_1><answer_3>{ref}</answer_3>",  # duplicate
        f"<answer_3>{partial}</answer_3>",
    ]
    batch = t.score_completions([example] * 4, completions, m=3)
    assert batch.rewards.shape == (4, 3, t.d) and batch.valid.shape == (4, 3)
    expected_valid = [[True, True, False], [False, False, False], [True, True, False], [True, False, False]]
    assert batch.valid.tolist() == expected_valid
    ones = np.ones(t.d)
    expected = np.zeros((4, 3, t.d))
    expected[0, 0], expected[0, 1] = ones, partial_row
    expected[2, 0], expected[2, 1] = ones, partial_row
    expected[3, 0] = partial_row
    assert close(batch.rewards, expected)
    assert batch.num_duplicates == 1 and batch.score_errors == 0
    assert batch.num_parsed.tolist() == [2, 0, 3, 1]


def test_dedup_uses_task_canonical_forms():
    t = make("musique")
    example = t.load("validation")[0]
    same = ["Paragraphs: 2, 4\nAnswer: Christopher Nolan", "Answer: christopher nolan.\nParagraphs: [4] [2]"]
    batch = t.score_completions(
        [example], ["".join(f"<answer_{i}>{a}</answer_{i}>" for i, a in enumerate(same, 1))], m=2
    )
    assert batch.num_duplicates == 1 and batch.valid.tolist() == [[True, False]]
    e = make("eureqa")
    ex = e.load("questions_hard_5")[0]
    same = ["A: Quentin Tarantino\nB: Inglourious Basterds", "B: inglourious_basterds; A: the Quentin Tarantino"]
    batch = e.score_completions([ex], ["".join(f"<answer_{i}>{a}</answer_{i}>" for i, a in enumerate(same, 1))], m=2)
    assert batch.num_duplicates == 1


HUGE = [
    "x" * 1_000_000,
    "[" * 100_000,
    "{" * 100_000,
    "<tool_call>" + '{"name": "a", "parameters": {}}' * 5000,
    "Paragraphs: " + "1, " * 100_000 + "\nAnswer: " + "Paris " * 10_000,
    "A: " + "(" * 100_000,
    "A:" * 100_000,
    "Paragraphs" + " " * 100_000 + "x",  # once quadratic in the citation-label regex
    "final" + " " * 100_000 + "answer",
    "Person " * 20_000,
    "<tool_call" + " " * 100_000,
    "\n" * 100_000,
    " " * 100_000 + "x",
    bytes(range(256)) * 400,
    None,
]


@pytest.mark.parametrize("name", NAMES)
def test_huge_and_odd_answers_never_raise(name):
    t = make(name)
    example = t.load(SPLIT[name])[0]
    for answer in HUGE:
        r = t.score(example, answer)
        assert r.shape == (t.d,) and np.isfinite(r).all() and (r >= 0).all() and (r <= 1).all()


_FUZZ = st.one_of(
    st.text(max_size=300),
    st.binary(max_size=300).map(lambda b: b.decode("latin-1")),
    st.lists(
        st.sampled_from(
            [
                "Paragraphs:",
                "Answer:",
                "A:",
                "E =",
                "[3]",
                "7",
                ",",
                "\n",
                "<tool_call>",
                "</tool_call>",
                "<response>",
                "</response>",
                "<think>",
                '{"name": "get_weather", "parameters": {"city": "Paris"}}',
                "{",
                "}",
                "[",
                "]",
                '"',
                "Person A is",
                "(",
                ")",
                "_",
                "\u2014",
            ]
        ),
        max_size=40,
    ).map("".join),
)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(answer=_FUZZ)
def test_fuzzed_answers_score_in_unit_box(name, answer):
    t = _FUZZ_TASKS[name]
    for example in _FUZZ_EXAMPLES[name]:
        r = t.score(example, answer)
        assert r.shape == (t.d,) and np.isfinite(r).all() and (r >= 0).all() and (r <= 1).all()
        t.canonical(answer)


_FUZZ_TASKS = {n: make(n) for n in NAMES}
_FUZZ_EXAMPLES = {n: _FUZZ_TASKS[n].load(SPLIT[n])[:3] for n in NAMES}


# -------------------------------------------------------------------------------------------
# loading round trips and the offline Hub
# -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_parquet_copy_loads_the_same_examples(name, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    src = FIX / name
    for f in sorted(src.glob("*.jsonl")):
        rows = read_records(f)
        # Hub-style shard name inside data/, as in a downloaded dataset repository
        (tmp_path / "data").mkdir(exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / "data" / f"{f.stem}-00000-of-00001.parquet")
    t_json, t_parquet = make(name), vpo.tasks.get(name, path=str(tmp_path))
    splits = {"musique": "validation", "eureqa": "test", "toolrl": "test"}
    a, b = t_json.load(splits[name]), t_parquet.load(splits[name])
    assert a == b and json.loads(json.dumps(b)) == b


def test_hub_offline_gives_clear_errors(tmp_path):
    script = textwrap.dedent(
        """
        import vpo.tasks
        from vpo.tasks.text import DatasetUnavailableError
        for name, split in (("musique", "validation"), ("eureqa", "test"), ("toolrl", "test")):
            try:
                vpo.tasks.get(name).load(split, n=3)
            except DatasetUnavailableError as e:
                print(f"{name}|{e}")
            else:
                print(f"{name}|LOADED")
        """
    )
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "HF_DATASETS_CACHE": str(tmp_path / "hf" / "datasets"),
        "VPO_CACHE": str(tmp_path / "vpo"),
    }
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    msgs = dict(line.split("|", 1) for line in out.stdout.strip().splitlines())
    assert "dgslibisey/MuSiQue" in msgs["musique"] and "vincentleebang/EUREQA" in msgs["eureqa"]
    assert "qiancheng0/ToolRL" in msgs["toolrl"]
    for name, msg in msgs.items():
        assert "offline" in msg.lower() and "path=" in msg, (name, msg)
