"""Real TRL training on CPU with a tiny offline model: every estimator through VPOTrainer, the
advantages used in the loss equal the core estimator's, logging, user reward functions, bad configs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytest.importorskip("trl")

from vpo.core import SimplexSampler, compute_advantages  # noqa: E402
from vpo.core.estimators import EstimatorConfig  # noqa: E402
from vpo.train import VPOTrainer  # noqa: E402

from helpers.trainer_args import tiny_vpo_args  # noqa: E402


def make_args(tmp_path, **kw):
    return tiny_vpo_args(tmp_path / "out", **kw)


def params(model):
    return torch.cat([p.detach().flatten().clone() for p in model.parameters()])


ESTIMATOR_CASES = [
    ("vpo", 3),
    ("multi_rlvr", 3),
    ("grpo", 1),
    ("gdpo", 1),
    ("random_weight", 1),
    ("goal_conditioned", 1),
    ("max_at_k", 1),
    ("maxrl", 1),
    ("trl_grpo", 1),
    ("trl_gdpo", 1),
]


@pytest.mark.parametrize("estimator,m", ESTIMATOR_CASES)
def test_every_estimator_trains(tmp_path, tiny_model_dir, char_task, estimator, m):
    args = make_args(tmp_path, estimator=estimator, num_answers=m)
    tr = VPOTrainer(model=tiny_model_dir, args=args, task=char_task)
    before = params(tr.model)
    tr.train()
    after = params(tr.model)
    logs = [h for h in tr.state.log_history if "loss" in h]
    assert len(logs) == 2
    # the random tiny model gets varied rewards on this task, so advantages are non-zero and the
    # parameters move
    assert not torch.allclose(before, after), f"{estimator}: parameters did not change"
    assert all(0.0 <= h["vpo/parse_failure_rate"] <= 1.0 for h in logs)
    assert all(h["vpo/answers_per_completion"] > 0 for h in logs)
    if estimator.startswith("trl_"):
        assert tr.vpo_last is None  # TRL's own advantage code ran
    else:
        adv = tr.vpo_last["advantages"]
        assert adv.shape == (8,) and adv.abs().sum() > 0
        assert set(h for h in logs[0] if h.startswith("vpo/objective/")) == {
            "vpo/objective/vowels",
            "vpo/objective/digits",
            "vpo/objective/upper",
        }


class RecordingTrainer(VPOTrainer):
    """Test subclass: records the sampler state before each generation and the advantages that
    reach TRL's loss."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.sampler_states, self.batches, self.loss_advantages = [], [], []

    def _generate_and_score_completions(self, inputs):
        self.sampler_states.append(self.vpo_sampler.state_dict())
        out = super()._generate_and_score_completions(inputs)
        self.batches.append(dict(self.vpo_last))
        return out

    def _compute_loss(self, model, inputs):
        self.loss_advantages.append(inputs["advantages"].detach().clone())
        return super()._compute_loss(model, inputs)


def test_loss_uses_the_core_estimators_advantages(tmp_path, tiny_model_dir, char_task):
    # generation batch of 16 rollouts = 4 groups of G = 4, split into 2 shuffled micro-batches of 8
    args = make_args(tmp_path, estimator="vpo", num_answers=3, steps_per_generation=2, max_steps=2, num_weightings=32)
    tr = RecordingTrainer(model=tiny_model_dir, args=args, task=char_task)
    tr.train()
    assert len(tr.batches) == 1 and len(tr.loss_advantages) == 2
    b = tr.batches[0]
    assert b["rewards"].shape == (16, 3, 3)
    sampler = SimplexSampler(32, 1.0, "iid", seed=0)
    sampler.load_state_dict(tr.sampler_states[0])
    ref = compute_advantages(
        "vpo",
        b["rewards"].double(),
        b["valid"],
        group_size=4,
        config=EstimatorConfig(num_weightings=32),
        sampler=sampler,
    ).advantages.float()
    used = torch.cat(tr.loss_advantages)
    assert torch.allclose(torch.sort(used).values, torch.sort(ref).values, atol=1e-5)
    # TRL's own logged advantages are the ones used, not TRL's GRPO advantages
    logged = torch.tensor(list(tr._logs["advantages"]))[-16:]
    assert torch.allclose(logged, ref, atol=1e-5)


def test_user_reward_functions_without_a_task(tmp_path, tiny_model_dir):
    from datasets import Dataset

    calls = []

    def lots_of_e(prompts, completions, **kw):
        calls.append(len(completions))
        return [c.count("e") / max(1, len(c)) for c in completions]

    def brevity(prompts, completions, **kw):
        return [1.0 / (1 + len(c)) for c in completions]

    ds = Dataset.from_list([{"prompt": f"Say something #{i}"} for i in range(8)])
    args = make_args(tmp_path, estimator="grpo", num_answers=1, max_steps=1)
    tr = VPOTrainer(model=tiny_model_dir, args=args, reward_funcs=[lots_of_e, brevity], train_dataset=ds)
    tr.train()
    assert calls == [8]  # one call per objective per batch, on every (single) answer
    assert tr.vpo_objectives == ["lots_of_e", "brevity"]
    r = tr.vpo_last["rewards"]
    assert r.shape == (8, 1, 2) and float(r[:, 0, 1].min()) > 0


def test_user_reward_functions_get_the_m_answer_instruction(tmp_path, tiny_model_dir):
    from datasets import Dataset

    ds = Dataset.from_list([{"prompt": "Name a colour."} for _ in range(4)])
    args = make_args(tmp_path, estimator="vpo", num_answers=3, max_steps=1)
    tr = VPOTrainer(
        model=tiny_model_dir,
        args=args,
        reward_funcs=[lambda prompts, completions, **k: [1.0] * len(completions)],
        objectives=["one"],
        train_dataset=ds,
    )
    assert "<answer_3>" in tr.train_dataset[0]["prompt"]


def _reward_func_trainer(tmp_path, tiny_model_dir, funcs, m=3, **kw):
    from datasets import Dataset

    ds = Dataset.from_list([{"prompt": f"Say something #{i}", "tag": i} for i in range(4)])
    args = make_args(tmp_path, estimator="vpo" if m > 1 else "grpo", num_answers=m, max_steps=1, **kw)
    return VPOTrainer(model=tiny_model_dir, args=args, reward_funcs=funcs, train_dataset=ds)


def test_user_reward_functions_score_parsed_deduped_answers(tmp_path, tiny_model_dir):
    """The reward-function path (RewardFunctionsTask through Task.score_completions): answers parsed
    from tags, repeats dropped, each function called once on every kept answer with the row's
    columns and the trainer state, values in slot order; None (no reward) leaves the answer unscored."""
    seen = {}

    def length(prompts, completions, trainer_state, tag, **kw):
        seen.update(prompts=list(prompts), tag=list(tag), state=trainer_state)
        return [float(len(c)) for c in completions]

    def has_b(prompts, completions, **kw):
        return [None if c == "zz" else float("b" in c) for c in completions]

    tr = _reward_func_trainer(tmp_path, tiny_model_dir, [length, has_b])
    texts = [
        "<answer_1>a</answer_1><answer_2>bb</answer_2><answer_3>A</answer_3>",
        "no tags",
        "<answer_1>zz</answer_1>",
    ]
    inputs = [{"prompt": f"p{i}", "tag": 10 + i} for i in range(3)]
    with pytest.warns(RuntimeWarning, match="NaN/inf for objective\\(s\\) has_b"):
        rewards, valid, num_parsed, dups = tr._score_local(inputs, [x["prompt"] for x in inputs], texts)
    assert num_parsed.tolist() == [3, 0, 1] and dups == 1  # "A" repeats "a"
    # "zz" got None from has_b: unscored (neither valid nor a zero), its rollout dropped from the update
    assert valid.tolist() == [[True, True, False], [False, False, False], [False, False, False]]
    assert rewards[0, :2].tolist() == [[1.0, 0.0], [2.0, 1.0]]
    assert rewards[2].tolist() == [[0.0, 0.0]] * 3
    assert tr._local_unscored.tolist() == [False, False, True] and tr._local_nonfinite.tolist() == [0.0, 1.0]
    assert seen["prompts"] == ["p0", "p0", "p2"] and seen["tag"] == [10, 10, 12] and seen["state"] is tr.state

    # m = 1: the whole completion is the answer, no tags needed
    tr1 = _reward_func_trainer(tmp_path, tiny_model_dir, [length], m=1)
    rewards, valid, num_parsed, _ = tr1._score_local(inputs[:2], ["p0", "p1"], ["abc", ""])
    assert rewards[:, 0, 0].tolist() == [3.0, 0.0] and valid.all() and num_parsed.tolist() == [1, 1]


def test_a_reward_function_that_raises_is_a_counted_scorer_error(tmp_path, tiny_model_dir):
    """As with a Task's scorer: the answer it raised on is invalid and counted (with a warning), the
    others keep their rewards; strict_rewards re-raises."""
    from vpo.tasks import RewardFunctionsTask

    def picky(prompts, completions, **kw):
        if "boom" in completions:
            raise RuntimeError("cannot score boom")
        return [1.0 for _ in completions]

    tr = _reward_func_trainer(tmp_path, tiny_model_dir, [picky])
    texts = ["<answer_1>ok</answer_1><answer_2>boom</answer_2>", "<answer_1>fine</answer_1>"]
    inputs = [{"prompt": "p", "tag": 0}, {"prompt": "q", "tag": 1}]
    with pytest.warns(RuntimeWarning, match="raised on 1 answer.*cannot score boom"):
        rewards, valid, _, _ = tr._score_local(inputs, ["p", "q"], texts)
    assert valid.tolist() == [[True, False, False], [True, False, False]]
    assert rewards[0, 0, 0] == 1.0 and rewards[1, 0, 0] == 1.0
    # the count reaches the step's gathered scores, which log it as vpo/score_errors
    with pytest.warns(RuntimeWarning):
        tr._calculate_rewards(inputs, ["p", "q"], texts, None)
    assert tr._pending.score_errors == 1.0

    task = RewardFunctionsTask([picky])
    examples = [{"prompt": "p"}, {"prompt": "q"}]
    with pytest.warns(RuntimeWarning):
        assert task.score_completions(examples, texts, 3).score_errors == 1
    with pytest.raises(RuntimeError, match="cannot score boom"):
        task.score_completions(examples, texts, 3, strict=True)
    # a wrong number of values is a bug in the function, not an answer's fault: it raises
    with pytest.raises(ValueError, match="returned 1 values for 3 answers"):
        RewardFunctionsTask([lambda prompts, completions, **k: [0.0]]).score_completions(
            [{"prompt": "p"}], ["<answer_1>a</answer_1><answer_2>b</answer_2><answer_3>c</answer_3>"], 3
        )


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(estimator="nope"), "unknown estimator"),
        (dict(num_answers=0), "num_answers"),
        (dict(num_weightings=0), "num_weightings"),
        (dict(weight_alpha=0.0), "alpha"),
        (dict(weight_alpha=-1.0), "alpha"),
        (dict(num_generations=1, per_device_train_batch_size=1), "num_generations"),
        (dict(estimator="grpo", num_answers=3), "one answer per rollout"),
        (dict(estimator="multi_rlvr", num_answers=1), "plain GRPO"),
        (dict(weight_sampler="sobol", weight_alpha=0.5), "Dir\\(1\\)"),
        (dict(task_options="{not json"), "JSON"),
        (dict(compute_dtype="float16"), "compute_dtype"),
    ],
)
def test_bad_config_fails_fast(tmp_path, kw, match):
    with pytest.raises(ValueError, match=match):
        make_args(tmp_path, **kw)


def test_bad_task_and_objectives_fail_fast(tmp_path, tiny_model_dir, char_task):
    with pytest.raises(ValueError, match="unknown task"):
        VPOTrainer(model=tiny_model_dir, args=make_args(tmp_path, task="no_such_task"))
    with pytest.raises(ValueError, match="objectives"):
        VPOTrainer(
            model=tiny_model_dir,
            args=make_args(tmp_path, estimator="grpo", num_answers=1),
            reward_funcs=[lambda **k: [0.0]],
            objectives=["a", "b"],
            train_dataset=None,
        )
    with pytest.raises(ValueError, match="exactly one"):
        VPOTrainer(model=tiny_model_dir, args=make_args(tmp_path))
    with pytest.raises(ValueError, match="d=3"):
        VPOTrainer(
            model=tiny_model_dir,
            args=make_args(tmp_path, reward_weights=[0.5, 0.5]),
            task=char_task,
        )


def test_default_m_follows_the_estimator(tmp_path):
    assert make_args(tmp_path, estimator="vpo").num_answers == 3
    assert make_args(tmp_path, estimator="grpo").num_answers == 1
    assert math.isclose(make_args(tmp_path).num_weightings, 16)


def test_weighting_settings_reach_the_estimator_config(tmp_path):
    """VPOConfig and EstimatorConfig share the names; the trainer builds its config from them."""
    args = make_args(
        tmp_path, weight_alpha=0.5, invalid_score=-1.0, strict_rewards=True, compute_dtype="float64", max_at_k=3
    )
    cfg = args.estimator_config()
    got = (
        cfg.num_weightings,
        cfg.weight_alpha,
        cfg.weight_sampler,
        cfg.invalid_score,
        cfg.strict_rewards,
        cfg.compute_dtype,
        cfg.max_at_k,
    )
    assert got == (16, 0.5, "iid", -1.0, True, "float64", 3)


def test_logged_diversity_is_the_eval_metric_per_group():
    """vpo/diversity: mean pairwise L1 of a group's valid answers (brute force here), averaged over
    groups with at least two valid answers."""
    import itertools

    from vpo.train.trainer import group_reward_diversity

    g = torch.Generator().manual_seed(0)
    r = torch.rand(16, 3, 4, generator=g, dtype=torch.float64)
    v = torch.rand(16, 3, generator=g) > 0.3
    v[4:8] = False  # a group with no valid answer is left out, not counted as 0
    per_group = []
    for grp in range(4):
        pts = [r[n, i] for n in range(grp * 4, grp * 4 + 4) for i in range(3) if v[n, i]]
        if len(pts) >= 2:
            per_group.append(np.mean([float((a - b).abs().sum()) for a, b in itertools.combinations(pts, 2)]))
    assert group_reward_diversity(r, v, 4) == pytest.approx(np.mean(per_group), rel=1e-9)
    assert group_reward_diversity(r, torch.zeros_like(v), 4) == 0.0
