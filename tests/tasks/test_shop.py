"""vpo.tasks.shop: letters and names name the same product, anything else scores 0, the lists are the
designed conflict the docs describe, the exact front is what brute force finds, the splits share no
product name, and ``test_seed`` draws a fresh test split."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from vpo.tasks import get
from vpo.tasks.shop import SPLIT_ADJ, ShopTask, find_item, item_rewards, pareto_items, random_answer


def test_registered_and_letters_by_default():
    task = get("shop")
    assert (
        isinstance(task, ShopTask) and task.answer == "letter" and task.objectives == ("budget", "critic", "explorer")
    )
    q = task.question(task.load("validation", n=1)[0])
    assert "A) " in q and "F) " in q and "letter" in q


def test_a_letter_and_the_name_score_the_same_and_nothing_else_scores():
    task = ShopTask()
    ex = task.load("validation", n=1)[0]
    rewards = item_rewards(ex)
    for i, it in enumerate(ex["items"]):
        letter = "ABCDEF"[i]
        for spelled in (letter, letter.lower(), f"{letter})", f" {it['name']}. ", it["name"].upper()):
            np.testing.assert_array_equal(task.score(ex, spelled), rewards[i])
    for wrong in ("G", "Z", "", "AB", "Amber Mug Deluxe", "the cheapest"):
        assert task.score(ex, wrong).tolist() == [0.0, 0.0, 0.0]
    # the name format shows no letters: a letter there is a guess, not an answer
    assert ShopTask(answer="name").score(ex, "A").tolist() == [0.0, 0.0, 0.0]
    assert find_item(ex, "A", letters=False) is None and find_item(ex, "a") == 0


def test_each_shopper_has_its_own_best_product_and_w_star_prefers_a_compromise():
    task = ShopTask()
    for ex in task.load("validation"):
        r = item_rewards(ex)
        best = {int(np.argmax(r[:, j])) for j in range(3)}
        assert len(best) == 3, "one product is best for two shoppers"
        assert int(np.argmax(r.mean(1))) not in best, "the best product under w* should be a compromise"
        assert (r.max(0) == 1.0).all() and (r.min(0) == 0.0).all()


def test_the_front_is_what_brute_force_finds():
    task = ShopTask()
    for ex in task.load("validation"):
        r = item_rewards(ex)
        brute = [
            r[i]
            for i in range(len(r))
            if not any(np.all(r[j] >= r[i]) and np.any(r[j] > r[i]) for j in range(len(r)) if j != i)
        ]
        front = pareto_items(ex)
        assert sorted(map(tuple, front)) == sorted(map(tuple, brute))
        assert 3 <= len(front) <= 5  # the three specialists, maybe the compromises; never the decoy


def test_splits_share_no_name_and_test_seed_draws_another_test_split():
    task = ShopTask()
    names = {s: {it["name"] for ex in task.load(s) for it in ex["items"]} for s in ("train", "validation", "test")}
    for a, b in itertools.combinations(names, 2):
        assert not names[a] & names[b], (a, b)
    fresh = ShopTask(test_seed=880301).load("test")
    assert fresh != task.load("test") and ShopTask(test_seed=880301).load("validation") == task.load("validation")
    assert {it["name"].split()[0] for ex in fresh for it in ex["items"]} <= set(SPLIT_ADJ["test"])


def test_random_answers_are_listed_products_and_bad_options_are_refused():
    ex = ShopTask().load("train", n=1)[0]
    rng = np.random.default_rng(0)
    assert {random_answer(ex, rng, answer="letter") for _ in range(200)} == set("ABCDEF")
    assert {random_answer(ex, rng) for _ in range(200)} == {it["name"] for it in ex["items"]}
    with pytest.raises(ValueError, match="answer must be"):
        ShopTask(answer="index")
    with pytest.raises(ValueError, match="test_seed"):
        ShopTask(test_seed="3")
