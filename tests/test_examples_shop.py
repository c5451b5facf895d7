"""examples/smollm2/shop_task.py, the pretrained-model study's candidate task: the shoppers score
as documented, the lists are a designed conflict (a specialist is best for each shopper, a compromise
is best under uniform weights, no item is best for all), a name off the list scores 0, the splits
share no product name, and the SmolLM2 warm start draws its answers from the list."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "examples" / "smollm2" / "shop_task.py"


def _module():
    spec = importlib.util.spec_from_file_location("vpo_test_shop_task", TASK)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _matrix(task, ex):
    return np.array([task.score(ex, it["name"]) for it in ex["items"]])


def test_shoppers_score_as_documented():
    from vpo.tasks import get

    task = get(f"{TASK}:make_task")
    assert task.objectives == ("budget", "critic", "explorer") and task.d == 3
    ex = task.load("validation")[0]
    items = ex["items"]
    prices, ratings = [it["price"] for it in items], [it["rating"] for it in items]
    logb = np.log([it["buyers"] for it in items])
    for it in items:
        r = task.score(ex, it["name"])
        assert r[0] == pytest.approx((max(prices) - it["price"]) / (max(prices) - min(prices)))
        assert r[1] == pytest.approx((it["rating"] - min(ratings)) / (max(ratings) - min(ratings)))
        assert r[2] == pytest.approx((logb.max() - np.log(it["buyers"])) / (logb.max() - logb.min()))
    name = items[0]["name"]
    # case, spacing and trailing punctuation do not matter; a name off the list is a wasted slot
    assert task.score(ex, f"  {name.upper()}. ").tolist() == task.score(ex, name).tolist()
    assert task.score(ex, "Sage Backpack Deluxe").tolist() == [0, 0, 0]
    assert "$" in task.question(ex) and name in task.question(ex)


def test_every_list_is_a_designed_conflict():
    from vpo.tasks import get

    task = get(f"{TASK}:make_task")
    for split in ("train", "validation", "test"):
        for ex in task.load(split)[:40]:
            R = _matrix(task, ex)
            # no item is best for every shopper
            assert not any((R[i] >= R.max(0)).all() for i in range(len(R)))
            # each shopper's favourite is a different item (three specialists)
            assert len({int(R[:, j].argmax()) for j in range(3)}) == 3
            # under uniform weights the best single item is none of the specialists
            best = int(R.mean(1).argmax())
            assert best not in {int(R[:, j].argmax()) for j in range(3)}
            # a set of the three specialists beats the best single item for every one-shopper weighting
            assert (R.max(0) > R[best]).all()


def test_splits_are_disjoint_and_fixed():
    mod = _module()
    names = {s: {it["name"] for ex in mod.requests(s) for it in ex["items"]} for s in mod.SPLIT_SIZE}
    assert not names["train"] & names["validation"]
    assert not names["train"] & names["test"] and not names["validation"] & names["test"]
    assert {s: len(mod.requests(s)) for s in mod.SPLIT_SIZE} == {"train": 512, "validation": 64, "test": 100}
    assert mod.requests("test") == mod.requests("test")  # a fixed draw
    with pytest.raises(ValueError, match="splits"):
        mod.requests("dev")


def test_warm_start_answers_come_from_the_list():
    sys.path.insert(0, str(ROOT / "examples" / "smollm2"))
    try:
        import warm_start
    finally:
        sys.path.pop(0)
    from vpo.tasks import get

    spec = f"{TASK}:make_task"
    task = get(spec)
    rng = np.random.default_rng(0)
    answer = warm_start._random_answer(spec, rng)
    examples = task.load("train", n=20)
    pairs = warm_start.pairs_for(task, examples, rng, answer=answer)
    assert len(pairs) == 2 * len(examples)
    for (prompt, completion), ex in zip(pairs[::2], examples):
        assert prompt == task.build_prompt(ex, 1)
        (a,) = task.parse(completion, 1)
        assert a in {it["name"] for it in ex["items"]}
    for (prompt, completion), ex in zip(pairs[1::2], examples):
        assert prompt == task.build_prompt(ex, 3)
        answers = task.parse(completion, 3)
        assert 1 <= len(answers) <= 3 and set(answers) <= {it["name"] for it in ex["items"]}
