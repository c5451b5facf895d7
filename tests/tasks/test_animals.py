"""The animals task (vpo.tasks.animals) and its demo domain's settings (vpo.demo.animals)."""

from __future__ import annotations

import numpy as np
import pytest

from vpo.errors import UserError
from vpo.tasks import get
from vpo.tasks.animals import (
    ANIMALS,
    AnimalsTask,
    first_listed_mention,
    item_rewards,
    mean_pairwise_correlation,
    pareto_items,
    requests,
)

EX = {"id": "t-0", "animals": ["mouse", "blue whale", "parrot", "cheetah", "giant tortoise"]}


def test_rewards_are_the_lists_log_scale_ranks():
    r = item_rewards(EX)
    assert r.shape == (5, 3)
    # small: the mouse is the lightest listed (1), the whale the heaviest (0)
    assert r[0, 0] == 1.0 and r[1, 0] == 0.0
    # fast: the cheetah is the fastest listed (1), the tortoise the slowest (0)
    assert r[3, 1] == 1.0 and r[4, 1] == 0.0
    # long-lived: the tortoise (170 y) is best, the mouse (4 y) worst
    assert r[4, 2] == 1.0 and r[0, 2] == 0.0
    # log scale, within the list: the parrot's mass (1 kg) sits between the mouse's and the whale's
    lo, hi = np.log(0.02), np.log(150000)
    assert r[2, 0] == pytest.approx(1 - (np.log(1) - lo) / (hi - lo))


def test_an_answer_scores_its_listed_animal_and_nothing_else():
    t = AnimalsTask()
    r = item_rewards(EX)
    for text in ("parrot", "Parrot.", "the parrot", "  PARROTS ", "**parrot**"):
        assert np.array_equal(t.score(EX, text), r[2]), text
    # a sentence naming several animals, an unlisted animal, or nothing names none of them
    for text in ("parrot or cheetah", "a parrot, a mouse and a cheetah", "elephant", "", "The best is the parrot"):
        assert not t.score(EX, text).any(), text


def test_near_duplicates_share_a_dedup_key_and_different_animals_do_not():
    t = AnimalsTask()
    keys = {t.canonical(a) for a in ("parrot", "Parrot.", "the parrot", "parrots", "(parrot)")}
    assert len(keys) == 1
    assert t.canonical("parrot") != t.canonical("cheetah")
    scored = t.score_completions(
        [EX], ["<answer_1>parrot</answer_1><answer_2>Parrot.</answer_2><answer_3>parrots</answer_3>"], 3
    )
    assert scored.valid[0].sum() == 1  # one real answer, not three


def test_the_task_is_registered_and_checks_its_options():
    t = get("animals", list_size=6)
    assert isinstance(t, AnimalsTask) and t.objectives == ("small", "fast", "long_lived")
    assert all(len(ex["animals"]) == 6 for ex in t.load("validation", n=5))
    for bad in (1, 0, len(ANIMALS) + 1, "8", True):
        with pytest.raises(ValueError, match="list_size"):
            AnimalsTask(list_size=bad)


def test_splits_are_fixed_draws_and_a_test_seed_draws_another():
    a, b = requests("test"), requests("test")
    assert a == b
    assert requests("test", seed=99) != a
    assert requests("train")[0]["animals"] != requests("validation")[0]["animals"]
    assert all(len(set(ex["animals"])) == len(ex["animals"]) for ex in requests("train", list_size=20))


def test_the_objectives_conflict_and_fronts_are_non_dominated():
    exs = requests("validation", list_size=12)
    assert mean_pairwise_correlation(exs) < 0  # small animals are short-lived
    for ex in exs[:10]:
        front = pareto_items(ex)
        r = item_rewards(ex)
        for f in front:  # nothing listed dominates a front member
            assert not any((x >= f).all() and (x > f).any() for x in r)
        assert len(front) >= 2


def test_first_listed_mention_reads_free_form_replies():
    assert first_listed_mention(EX, "I would pick the Parrot, though a mouse is smaller.") == "parrot"
    assert first_listed_mention(EX, "Mice are small; the blue whale lives long") == "blue whale"
    assert first_listed_mention(EX, "The cheetahs!") == "cheetah"
    assert first_listed_mention(EX, "a dog") is None
    assert first_listed_mention(EX, "mousetrap") is None  # whole words only


def test_demo_domain_settings_are_checked():
    from vpo.demo.config import DemoConfig

    cfg = DemoConfig.for_domain("animals", out="/tmp/none")
    assert cfg.animals_warm == "self" and cfg.animals_list_size == 20
    # the shop domain's model setting is the animals domain's too
    DemoConfig.for_domain("animals", out="/tmp/none", shop_model="/some/dir")
    with pytest.raises(UserError, match="animals_warm"):
        DemoConfig.for_domain("animals", out="/tmp/none", animals_warm="uniform")
    with pytest.raises(UserError, match="animals_list_size"):
        DemoConfig.for_domain("animals", out="/tmp/none", animals_list_size=len(ANIMALS) + 1)
    with pytest.raises(UserError, match="animals"):  # an animals setting on another domain is a mistake
        DemoConfig.for_domain("shop", out="/tmp/none", animals_list_size=8)
