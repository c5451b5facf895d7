"""noisy: training-split rewards corrupted (Gaussian per continuous component, flips of the binary
ones, per rollout and shared by its valid answers, at the stated rates), other splits scored clean,
bad options refused."""

from __future__ import annotations

import numpy as np
import pytest

from vpo.errors import UserError
from vpo.tasks import FunctionTask
from vpo.tasks.noisy import NoisyTask


def _task():
    def obj(j):
        return lambda ex, a: float(a[j]) if len(a) > j and a[j].isdigit() else 0.0

    exs = [{"id": i, "question": "q", "split": "train" if i < 2 else "test"} for i in range(4)]
    return FunctionTask("digits3", objectives={"done": obj(0), "x": obj(1), "y": obj(2)}, examples=exs)


def _score(task, split, n=400):
    ex = {"id": 0, "question": "q", "split": split}
    comps = ["<answer_1>101</answer_1><answer_2>nope</answer_2>"] * n
    return task.score_completions([ex] * n, comps, 2)


def test_training_rewards_are_corrupted_at_the_stated_rates_and_test_rewards_are_clean():
    clean = _task()
    t = NoisyTask(clean, sigma=0.3, flip=0.25, binary=["done"], seed=1)
    b, ref = _score(t, "train"), _score(clean, "train")
    assert np.array_equal(b.valid, ref.valid)
    v = b.valid
    assert v.all()  # "nope" is a valid (all-zero) answer
    # a flip acts on the set's value of the binary objective: every answer gets 1 - (the best one's value)
    best, best_ref = b.rewards[..., 0].max(1), ref.rewards[..., 0].max(1)
    flipped = best != best_ref
    assert set(np.unique(b.rewards[..., 0][v])) <= {0.0, 1.0}  # a binary objective stays binary
    assert abs(flipped.mean() - 0.25) < 0.06
    assert np.all(b.rewards[flipped, :, 0] == 1.0 - best_ref[flipped, None])
    assert np.array_equal(b.rewards[~flipped, :, 0], ref.rewards[~flipped, :, 0])
    noise = b.rewards[..., 1:] - ref.rewards[..., 1:]
    # one draw per rollout, shared by its answers (so more answers do not mean more chances of luck)
    assert np.allclose(noise[:, 0], noise[:, 1])
    assert abs(noise[:, 0].std() - 0.3) < 0.04 and abs(noise[:, 0].mean()) < 0.04
    assert np.all(b.rewards[~v] == 0.0)  # invalid slots untouched
    test = _score(t, "test")
    assert np.array_equal(test.rewards, _score(clean, "test").rewards)


def test_same_seed_same_noise_and_options_checked():
    a, b = (NoisyTask(_task(), sigma=0.1, seed=4) for _ in range(2))
    assert np.array_equal(_score(a, "train", 20).rewards, _score(b, "train", 20).rewards)
    assert not np.array_equal(
        _score(NoisyTask(_task(), sigma=0.1, seed=5), "train", 20).rewards, _score(a, "train", 20).rewards
    )
    for bad, match in (
        (dict(sigma=-1), "sigma"),
        (dict(flip=1.5, binary=["done"]), "flip"),
        (dict(flip=0.1), "binary"),
        (dict(flip=0.1, binary=["nope"]), "does not have"),
    ):
        with pytest.raises(UserError, match=match):
            NoisyTask(_task(), **bad)


def test_by_name_through_the_registry_with_a_real_task():
    from vpo.tasks import get

    t = get("noisy", task="maze", task_options={"size": 5}, sigma=0.2)
    assert t.objectives == get("maze", size=5).objectives and t.load("test", n=2) == get("maze", size=5).load(
        "test", n=2
    )
