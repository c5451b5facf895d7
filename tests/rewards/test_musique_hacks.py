"""Reward hacks against the musique task (issue #50, class 3), scored through
``Task.score_completions`` (the trainer's and the veRL reward's path) on the MuSiQue-schema fixture
rows: padding an answer with wrong citations or candidate answers never raises a component, and
honest answers keep their scores. The reason is beside each."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import numpy as np
import pytest

import vpo.tasks
from helpers.rewards import at_most, scored  # noqa: E402

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "musique"


@pytest.fixture(scope="module", params=["stretch", "pass"])
def mus(request):
    t = vpo.tasks.get("musique", path=str(FIX), short_chains=request.param)
    return t, {ex["id"]: ex for ex in t.load("validation")}


TWO = "2hop__482757_12019"  # gold paragraphs 2, 4; answer Christopher Nolan (alias Nolan)


def test_citing_up_to_the_cap_with_wrong_paragraphs_is_not_the_exact_answer(mus):
    # hop credit was recall only: 4 paragraphs cited, 2 of them wrong, scored like the exact answer
    t, ex = mus
    exact, padded = scored(
        t, ex[TWO], "Paragraphs: 2, 4\nAnswer: Christopher Nolan", "Paragraphs: 2, 4, 1, 3\nAnswer: Christopher Nolan"
    )
    assert exact.tolist() == [1] * 5
    assert np.all(padded[:2] < 1) and np.all(padded <= exact)  # the two slots of the two steps
    if t.short_chains == "stretch":  # mean hop credit = recall x precision: 1 x 2/4
        assert padded[:4].mean() == pytest.approx(0.5)


def test_padding_citations_never_raises_a_hop_on_any_row(mus):
    """Every fixture row, every subset of its gold paragraphs cited, padded with 1 to 6 wrong
    numbers (other paragraphs, numbers naming no paragraph, past the cap): no hop rises."""
    t, ex = mus
    rng = random.Random(0)
    for row in ex.values():
        gold = t.gold_paragraphs(row)
        wrong = [i for i in range(1, len(row["paragraphs"]) + 1) if i not in gold] + [99, 0, 1234]
        for r in range(len(gold) + 1):
            for chosen in itertools.combinations(dict.fromkeys(gold), r):
                plain = t.score(row, f"Paragraphs: {', '.join(map(str, chosen))}\nAnswer: {row['answer']}")
                for _ in range(3):
                    pad = rng.sample(wrong, rng.randint(1, min(6, len(wrong))))
                    cited = list(chosen) + pad
                    rng.shuffle(cited)
                    padded = t.score(row, f"Paragraphs: {', '.join(map(str, cited))}\nAnswer: {row['answer']}")
                    at_most(padded, plain)


def test_flooding_every_paragraph_scores_less_than_one_honest_citation(mus):
    # citing every paragraph (the two gold ones among them) is worth less on the gold's hop slots
    # than citing one gold paragraph and nothing else
    t, ex = mus
    row = ex[TWO]
    every = ", ".join(str(i) for i in range(1, len(row["paragraphs"]) + 1))
    flood = scored(t, row, f"Paragraphs: {every}\nAnswer: Christopher Nolan")[0]
    one = scored(t, row, "Paragraphs: 2\nAnswer: Christopher Nolan")[0]
    at_most(flood, scored(t, row, "Paragraphs: 2, 4\nAnswer: Christopher Nolan")[0])
    slots = 4 if t.short_chains == "stretch" else 2
    assert flood[:slots].sum() < one[:slots].sum()


def test_listing_candidate_answers_scores_no_more_than_the_worst(mus):
    # token F1 gave "Christopher Nolan or Ang Lee" 0.67 where committing to the wrong name gets 0:
    # listing candidates beat choosing one
    t, ex = mus
    row = ex[TWO]
    wrong = scored(t, row, "Paragraphs: 2, 4\nAnswer: Ang Lee")[0]
    for listed in (
        "Christopher Nolan or Ang Lee",
        "Ang Lee, Christopher Nolan",
        "Ang Lee / Nolan",
        "either Nolan or Lee",
        "Christopher Nolan and Ang Lee",
        "Nolan; Ang Lee; Steven Spielberg",
        "Nolan (or Ang Lee)",
        "Christopher Nolan vs Ang Lee",
    ):
        at_most(scored(t, row, f"Paragraphs: 2, 4\nAnswer: {listed}")[0], wrong)
    # repeating the right answer is not better than saying it once
    at_most(
        scored(t, row, "Paragraphs: 2, 4\nAnswer: Nolan, Nolan")[0],
        scored(t, row, "Paragraphs: 2, 4\nAnswer: Nolan")[0],
    )


def test_honest_answers_keep_their_scores(mus):
    t, ex = mus
    row = ex[TWO]
    assert scored(t, row, "Paragraphs: 2, 4\nAnswer: Christopher Nolan")[0].tolist() == [1] * 5
    assert scored(t, row, "Paragraphs: 4, 2\nAnswer: Nolan")[0].tolist() == [1] * 5  # order, alias
    assert scored(t, row, "Paragraphs: 2, 4\nAnswer: Christopher Nolan Jr")[0][4] == pytest.approx(0.8)  # no list
    for row in ex.values():  # every reference answer scores all ones
        assert scored(t, row, t.reference_answer(row))[0].tolist() == [1] * 5


def test_several_answers_in_one_body_score_no_more_than_the_worst(mus):
    # three complete answers one after another (the right one in the middle): citations were
    # pooled from all three and the last answer line read, so the right citations paid
    t, ex = mus
    row = ex[TWO]
    good, wrong, wrong_b = (
        "Paragraphs: 2, 4\nAnswer: Christopher Nolan",
        "Paragraphs: 1, 3\nAnswer: Ang Lee",
        "Paragraphs: 5\nAnswer: Tim Burton",
    )
    members = scored(t, row, good, wrong, wrong_b)
    for sep in (", ", " or ", "\n", "; ", " "):
        at_most(scored(t, row, sep.join((wrong, good, wrong_b)))[0], *members)
    at_most(scored(t, row, f"{wrong}\n{good}")[0], members[1])
    # the same answer twice is one answer
    assert scored(t, row, f"{good}\n{good}")[0].tolist() == [1] * 5


def test_negated_answers_earn_nothing(mus):
    # "not X" scored 0.8 on answer_f1 (one extra token) and kept its citations; a body introduced
    # by a negation scored as the answer it negates
    t, ex = mus
    row = ex[TWO]
    good = "Paragraphs: 2, 4\nAnswer: Christopher Nolan"
    for hack in (
        "Paragraphs: 2, 4\nAnswer: not Christopher Nolan",
        f"not {good}",
        f"It is not {good}.",
        f"{good}? No.",
        f"NOT: {good}",
        "Paragraphs: 2, 4\nAnswer: Christopher Nolan is wrong",
        "Paragraphs: 2, 4\nAnswer: I don't know",
    ):
        assert scored(t, row, hack)[0].tolist() == [0] * 5, hack


def test_echoed_question_and_float_literals_cite_nothing(mus):
    # the question copied back lists "[1] Title" for every paragraph: it cited all of them; "1e400"
    # was read as citations 1 and 400
    t, ex = mus
    for row in ex.values():
        slots = 4 if t.short_chains == "stretch" else len(t.gold_paragraphs(row))  # "pass": the rest free
        echo = " ".join(t.question(row).split())
        for answer in (echo, echo[:500], "Paragraphs: 1e400, 2.5\nAnswer: x"):
            assert t.score(row, answer)[:slots].tolist() == [0] * slots
    # a citation after its claim still counts
    assert scored(t, ex[TWO], "Nolan directed it [2] [4].\nAnswer: Nolan")[0].tolist() == [1] * 5


def test_invisible_characters_are_the_same_answer(mus):
    # "Nolan\u200b" scored 2/3 and passed the dedup as a second answer
    t, ex = mus
    row = ex[TWO]
    a, b = "Paragraphs: 2, 4\nAnswer: Christopher Nolan", "Paragraphs: 2, 4\nAnswer: Christopher Nolan\u200b"
    assert t.canonical(a) == t.canonical(b) and t.score(row, b).tolist() == [1] * 5
