"""One answer never stops a batch, and an answer that could not be scored is never a false zero.

An answer whose scorer raises (``ScoringUnavailable`` for an infrastructure failure, or any other
exception: a bug), returns an exception, None, NaN/inf or a wrong-shaped vector, or whose
completion makes ``parse`` raise, is *unscored*: counted by reason, warned about once per batch,
and its rollout is marked in ``ScoredBatch.unscored``. Training leaves such rollouts out: advantage
0, outside their group's baseline, tokens masked out of TRL's loss. Each test says the mutation
that breaks it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from vpo.core.estimators import compute_advantages
from vpo.core.unscored import advantages_without
from vpo.errors import ScoringUnavailable
from vpo.tasks import FunctionTask
from vpo.tasks.constrained import constrained
from vpo.tasks.noisy import NoisyTask


def _scorer(ex, a):
    if a == "boom":
        raise ZeroDivisionError("a bug in the scorer")
    if a == "down":
        raise ScoringUnavailable("sandbox worker died")
    if a == "nan":
        return float("nan")
    if a == "inf":
        return float("inf")
    return 1.0 if a.startswith("good") else 0.25


def _task():
    return FunctionTask(
        "flaky",
        objectives={"right": _scorer, "short": lambda ex, a: float(len(a) < 6)},
        examples=[{"question": "q"}],
    )


def _tags(*answers):
    return "".join(f"<answer_{i}>{a}</answer_{i}>" for i, a in enumerate(answers, 1))


def _score(task, completions, m, **kw):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        b = task.score_completions([{"question": "q"}] * len(completions), completions, m, **kw)
    return b, [str(w.message) for w in rec if issubclass(w.category, RuntimeWarning)]


def test_each_kind_of_failure_is_unscored_counted_and_warned_and_the_batch_goes_on():
    """Mutations: score_completions counting a raise as invalid without marking it (unscored all
    False), a NaN passing through as valid, or a ScoringUnavailable raised out of the batch."""
    comps = [
        _tags("good one", "boom"),  # a scorer bug on the second answer
        _tags("down"),  # infrastructure failure
        _tags("nan"),  # NaN from a user's scorer
        _tags("inf"),
        _tags("good"),  # fine
        _tags("meh"),  # a wrong answer: low but scored
    ]
    b, warned = _score(_task(), comps, 2)
    assert b.unscored.tolist() == [True, True, True, True, False, False]
    assert b.unscored_answers[0].tolist() == [False, True]  # only the failing answer; its sibling keeps its score
    assert b.valid.tolist() == [[True, False], [False, False], [False, False], [False, False], [True, False]] + [
        [True, False]
    ]
    assert b.rewards[0, 0].tolist() == [1.0, 0.0] and b.rewards[5, 0].tolist() == [0.25, 1.0]
    assert np.all(b.rewards[b.unscored_answers] == 0.0) and np.isfinite(b.rewards).all()  # NaN never leaks
    assert b.score_errors == 4 and b.num_unscored == 4
    assert b.unscored_reasons == {
        "ZeroDivisionError": 1,
        "ScoringUnavailable: sandbox worker died": 1,
        "non-finite reward": 2,
    }
    assert b.nonfinite.tolist() == [2, 0]  # the NaN/inf were on objective "right"
    assert len(warned) == 1  # one warning per batch, with the count and the first reason
    assert "raised on 4 answer(s)" in warned[0] and "in 4 of 6 rollout(s)" in warned[0]
    assert "first: ZeroDivisionError: a bug in the scorer" in warned[0] and "unscored, not wrong" in warned[0]


def test_strict_raises_on_the_first_failure_with_a_note_naming_it():
    """Mutation: strict swallowing the exception."""
    with pytest.raises(ScoringUnavailable, match="sandbox worker died") as err:
        _task().score_completions([{}] * 2, [_tags("good"), _tags("ok", "down")], 2, strict=True)
    assert any("rollout 1, answer 1" in n for n in err.value.__notes__)


class _Odd(FunctionTask):
    """Scorer machinery that misbehaves in every way besides raising: a parse that raises on one
    completion, and score_answers returning an exception object, None, a wrong-shaped vector and a
    string in place of answers' vectors."""

    def parse(self, completion, m):
        if "PARSE-BUG" in completion:
            raise KeyError("parser bug")
        return super().parse(completion, m)

    def score_answers(self, examples, answers):
        out = super().score_answers(examples, answers)
        special = {"exc": ScoringUnavailable("cleanup failed"), "none": None, "short": np.zeros(1), "str": "x"}
        return [[special.get(a, r) for a, r in zip(ans, row)] for ans, row in zip(answers, out)]


def test_parse_errors_returned_exceptions_none_and_wrong_shapes_are_unscored():
    """Mutations: letting parse raise out of score_completions; a wrong-shaped vector raising
    ValueError for the whole batch (the old behaviour)."""
    t = _Odd("odd", objectives={"a": lambda e, a: 0.5, "b": lambda e, a: 0.5}, examples=[{"question": "q"}])
    comps = ["PARSE-BUG " + _tags("good"), _tags("exc"), _tags("none"), _tags("short"), _tags("str"), _tags("fine")]
    b, warned = _score(t, comps, 1)
    assert b.unscored.tolist() == [True, True, True, True, True, False]
    assert b.valid[:, 0].tolist() == [False] * 5 + [True] and b.rewards[5, 0].tolist() == [0.5, 0.5]
    assert b.unscored_reasons["parse raised KeyError"] == 1
    assert b.unscored_reasons["ScoringUnavailable: cleanup failed"] == 1
    assert b.unscored_reasons["scorer returned None"] == 1 and b.unscored_reasons["wrong number of values"] == 1
    assert b.unscored_reasons["not a reward vector (ValueError)"] == 1
    assert len(warned) == 1 and "first: KeyError" in warned[0]


def test_a_scorer_that_returns_too_few_rows_or_answers_leaves_the_missing_ones_unscored():
    """A batched scorer that drops the last rollout and an answer: those are unscored, not invalid.
    Mutation: iterating over the rows returned only (the missing rollout would read as no answer)."""

    class Short(FunctionTask):
        def score_answers(self, examples, answers):
            return [row[:1] for row in super().score_answers(examples, answers)][:-1]

    t = Short("short", objectives={"a": lambda e, a: 1.0}, examples=[{"question": "q"}])
    b, warned = _score(t, [_tags("x", "y"), _tags("z")], 2)
    assert b.valid.tolist() == [[True, False], [False, False]]
    assert b.unscored_answers.tolist() == [[False, True], [True, False]]
    assert b.unscored_reasons == {"scorer returned None": 2} and len(warned) == 1


def test_a_batched_scorer_that_fails_whole_leaves_its_batch_unscored():
    """Mutation: re-raising the batched scorer's exception (one bad answer would stop training)."""

    class Batched(FunctionTask):
        def score_answers(self, examples, answers):
            raise ScoringUnavailable("the scoring service is unreachable")

    t = Batched("batched", objectives={"a": lambda e, a: 1.0}, examples=[{"question": "q"}])
    b, warned = _score(t, [_tags("x", "y"), _tags("z")], 2)
    assert b.unscored_answers.tolist() == [[True, True], [True, False]] and not b.valid.any()
    assert b.unscored_reasons == {"ScoringUnavailable: the scoring service is unreachable": 3}


def test_wrappers_carry_the_mask():
    """noisy and constrained return new batches: they must keep unscored, its reasons and counts.
    Mutation: constrained rebuilding the batch from the old positional fields (mask lost)."""
    inner = _task()
    comps = [_tags("good", "boom"), _tags("meh")]
    ref, _ = _score(inner, comps, 2)
    for wrapped in (NoisyTask(inner, sigma=0.2, seed=0), constrained(inner, ["short>=1"])):
        b, _ = _score(wrapped, comps, 2)
        assert b.unscored_answers.tolist() == ref.unscored_answers.tolist()
        assert b.unscored_reasons == ref.unscored_reasons and b.score_errors == ref.score_errors


# -------------------------------------------------------------------------------------------------
# advantages: unscored rollouts are dropped, not zeros
# -------------------------------------------------------------------------------------------------


def test_unscored_rollouts_get_zero_advantage_and_leave_the_group_baseline():
    """Group 0 = rollouts 0-3 with rollout 1 unscored; group 1 = 4-7 with 5, 6 and 7 unscored (one
    scored rollout left: no baseline, the whole group is dropped). The kept advantages are GRPO's
    over the scored rollouts alone. Mutation (read unscored as reward 0): the advantages of
    rollouts 0, 2, 3 change and rollout 1 gets a negative advantage."""
    r = np.array([0.9, 0.0, 0.5, 0.1, 0.7, 0.3, 0.0, 0.0])[:, None, None]
    valid = np.array([True, False, True, True, True, False, False, False])[:, None]
    unscored = np.array([False, True, False, False, False, True, True, True])
    out = advantages_without("grpo", r, valid, unscored, group_size=4)
    assert out.dropped.tolist() == [False, True, False, False, True, True, True, True]
    assert torch.all(out.advantages[out.dropped] == 0)
    s = np.array([0.9, 0.5, 0.1])
    expected = (s - s.mean()) / (s.std(ddof=1) + 1e-4)
    assert out.advantages[[0, 2, 3]].numpy() == pytest.approx(expected, abs=1e-3)
    as_zero = compute_advantages("grpo", r, np.ones_like(valid), group_size=4).advantages
    assert not torch.allclose(as_zero[[0, 2, 3]], out.advantages[[0, 2, 3]], atol=1e-3)
    assert float(as_zero[1]) < 0  # what the false zero would have taught
    # nothing unscored: exactly compute_advantages
    same = advantages_without("vpo", np.random.default_rng(0).random((8, 2, 2)), None, None, group_size=4)
    ref = compute_advantages("vpo", np.random.default_rng(0).random((8, 2, 2)), None, group_size=4)
    assert torch.equal(same.advantages, ref.advantages)


class _RecordingTask(FunctionTask):
    """Remembers the unscored mask of each batch it scores."""

    masks: list

    def score_completions(self, *a, **k):
        b = super().score_completions(*a, **k)
        self.masks.append(b.unscored.copy())
        return b


def test_a_real_trl_step_drops_the_unscored_rollouts(tmp_path, tiny_model_dir):
    """A FunctionTask whose scorer raises on every third answer trains one real TRL step (tiny model,
    GRPO, 2 groups of 4): the step runs, the dropped rollouts' advantages are 0 and their tokens
    leave the loss (TRL's tool_mask), the kept advantages are GRPO's over the scored rollouts of each
    group, and vpo/unscored_frac is logged. Mutation (advantages over the whole batch with unscored as
    invalid, i.e. the old false zero): the kept advantages differ, so the comparison fails."""
    from helpers.trainer_args import tiny_vpo_args

    from vpo.train import VPOTrainer

    calls = {"n": 0}

    def flaky(ex, a):
        calls["n"] += 1
        if calls["n"] % 3 == 2:
            raise ScoringUnavailable("sandbox worker died")
        return float(np.mean([c in "aeiou" for c in a])) if a else 0.0

    class _Whole(_RecordingTask):
        def parse(self, completion, m):
            return [completion] if completion else ["(empty)"]

    task = _Whole(
        "flaky_chars",
        objectives={"vowels": flaky, "len": lambda ex, a: min(len(a), 12) / 12},
        examples=[{"question": f"Write characters #{i}."} for i in range(8)],
    )
    task.masks = []
    seen = {}

    class Recording(VPOTrainer):
        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            seen.update(out=out, last=dict(self.vpo_last))
            return out

    args = tiny_vpo_args(tmp_path / "out", estimator="grpo", num_answers=1, max_steps=1, logging_steps=1)
    tr = Recording(model=tiny_model_dir, args=args, task=task)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        tr.train()
    unscored = task.masks[0]
    assert unscored.sum() >= 2 and (~unscored).sum() >= 4  # every third answer raised
    last = seen["last"]
    dropped, adv = last["dropped"].numpy(), last["advantages"]
    assert np.all(dropped[unscored])
    assert torch.all(adv[torch.as_tensor(dropped)] == 0)
    # the kept rollouts' advantages: GRPO over the scored rollouts of their group only
    keep = ~dropped
    groups = np.arange(8) // 4
    ref = compute_advantages(
        "grpo", last["rewards"][keep].double(), last["valid"][keep], group_ids=groups[keep]
    ).advantages
    assert torch.allclose(adv[torch.as_tensor(keep)].double(), ref, atol=1e-5)
    # TRL's loss mask: a dropped rollout's tokens are out of the loss, the others in
    mask = seen["out"]["tool_mask"]
    assert torch.all(mask[torch.as_tensor(dropped)] == 0)
    assert torch.equal(mask[torch.as_tensor(keep)], torch.ones_like(mask[torch.as_tensor(keep)]))
    logs = [h for h in tr.state.log_history if "loss" in h]
    assert logs and logs[0]["vpo/unscored_frac"] == pytest.approx(unscored.mean())
    assert np.isfinite(logs[0]["loss"])


def test_a_pool_lists_and_counts_the_answers_it_could_not_score():
    """vpo eval's pools: an answer the task could not score is invalid in the pool (no reward to
    store), listed under the prompt record's "unscored" and counted in one warning, so a pool never
    reads an infrastructure failure as the model's mistake without saying so. Mutation: the record
    without "unscored" (the pool would silently undercount)."""
    from vpo.search.backends import Generation
    from vpo.search.generate import generate_pool

    class Canned:
        """A backend that answers every prompt with the same rollouts."""

        name = "canned"

        def format(self, prompt, system):
            return prompt

        def generate(self, prompts, n, seed=0, **kw):
            texts = [_tags("good", "down"), _tags("meh")]
            return [[Generation(texts[k % 2], 3.0) for k in range(n)] for _ in prompts]

    with pytest.warns(RuntimeWarning, match=r"pool flaky: 2 answer\(s\) could not be scored"):
        pool = generate_pool(
            task=_task(), examples=[{"question": "q"}], generator=Canned(), progress=False,
            num_answers=2, n_rollouts=4,
        )  # fmt: skip
    assert pool.valid.tolist() == [[True, False], [True, False]] * 2


def test_a_step_whose_every_answer_is_unscored_trains_nothing_and_says_why(tmp_path, tiny_model_dir):
    """The sandbox is down for a whole step: every rollout is dropped, the step runs with loss 0 (no
    rollout in the loss), vpo/unscored_frac is 1, and the zero-signal warning names the cause.
    Mutations: advantages_without calling the estimator on the empty scored set (the step raises
    "rewards must be non-empty"), or the old wording of the cause (blaming the answers)."""
    from helpers.trainer_args import tiny_vpo_args

    from vpo.train import VPOTrainer

    def down(ex, a):
        raise ScoringUnavailable("sandbox worker died")

    task = FunctionTask(
        "down", objectives={"a": down}, examples=[{"question": f"Q{i}"} for i in range(8)], answer_format="tags"
    )
    task.parse = lambda completion, m: [completion or "(empty)"]
    args = tiny_vpo_args(tmp_path / "out", estimator="grpo", num_answers=1, max_steps=1, zero_signal_patience=0)
    tr = VPOTrainer(model=tiny_model_dir, args=args, task=task)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        tr.train()
    said = [str(w.message) for w in rec]
    assert any("could not score 8 of them (unscored" in s for s in said), said
    assert torch.all(tr.vpo_last["advantages"] == 0) and bool(tr.vpo_last["dropped"].all())
    logs = [h for h in tr.state.log_history if "loss" in h]
    assert logs[0]["vpo/unscored_frac"] == 1.0 and logs[0]["loss"] == 0.0
