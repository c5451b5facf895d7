"""Contract with TRL's private hooks that VPOTrainer overrides. If a TRL upgrade moves them, these
tests fail with a message naming the method, instead of training silently with TRL's advantages."""

from __future__ import annotations

import inspect
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest
import torch

trl = pytest.importorskip("trl")
from trl import GRPOTrainer  # noqa: E402


def _src(name):
    fn = getattr(GRPOTrainer, name, None)
    assert fn is not None, f"trl {trl.__version__}: GRPOTrainer.{name} is gone; VPOTrainer overrides it"
    return inspect.getsource(fn), inspect.signature(fn)


def test_trl_version_is_in_the_pinned_range():
    spec = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    pins = [d for d in spec["project"]["optional-dependencies"]["trl"] if d.startswith("trl")]
    lo, hi = re.findall(r">=([\d.]+)", pins[0])[0], re.findall(r"<([\d.]+)", pins[0])[0]
    v = tuple(int(x) for x in trl.__version__.split(".")[:2])
    assert tuple(int(x) for x in lo.split(".")[:2]) <= v < tuple(int(x) for x in hi.split(".")[:2]), (
        f"trl {trl.__version__} is outside the range pinned in pyproject.toml ({pins[0]})"
    )


def test_calculate_rewards_hook():
    src, sig = _src("_calculate_rewards")
    assert list(sig.parameters) == ["self", "inputs", "prompts", "completions", "completion_ids_list"], (
        f"GRPOTrainer._calculate_rewards signature changed to {sig}"
    )
    # its result is what _generate_and_score_completions normalises per group
    gen_src, _ = _src("_generate_and_score_completions")
    assert "self._calculate_rewards(" in gen_src, (
        "GRPOTrainer._generate_and_score_completions no longer calls _calculate_rewards"
    )


def test_generate_and_score_returns_advantages_per_rollout():
    src, sig = _src("_generate_and_score_completions")
    assert list(sig.parameters) == ["self", "inputs"], (
        f"GRPOTrainer._generate_and_score_completions signature changed to {sig}"
    )
    assert '"advantages": advantages' in src, (
        "GRPOTrainer._generate_and_score_completions no longer returns output['advantages']; VPOTrainer replaces it"
    )
    assert 'self._logs["advantages"]' in src, "GRPOTrainer no longer logs advantages in self._logs['advantages']"
    assert "process_slice" in src, "GRPOTrainer no longer slices gathered advantages per process"


def test_loss_reads_inputs_advantages():
    src, _ = _src("_compute_loss")
    assert 'inputs["advantages"]' in src, "GRPOTrainer._compute_loss no longer reads inputs['advantages']"


def test_checkpoint_hooks():
    for name in ("_save_checkpoint", "_load_optimizer_and_scheduler"):
        assert hasattr(GRPOTrainer, name), f"GRPOTrainer.{name} is gone; VPOTrainer saves its sampler state there"


def test_every_private_method_vpotrainer_overrides_is_a_checked_hook():
    """An override of a method TRL renamed would never be called, and the option it serves would
    fall back to TRL's path without a word: each one is in _TRL_HOOKS, which check_trl_hooks checks."""
    from vpo.train import trainer as tr

    overridden = {
        name
        for name, value in vars(tr.VPOTrainer).items()
        if name.startswith("_") and not name.startswith("__") and callable(value) and hasattr(GRPOTrainer, name)
    }
    assert overridden <= set(tr._TRL_HOOKS), sorted(overridden - set(tr._TRL_HOOKS))
    assert {"_generate_single_turn", "_get_per_token_logps_and_entropies"} <= overridden


@pytest.mark.parametrize("hook", ["_calculate_rewards", "_get_per_token_logps_and_entropies"])
def test_trainer_refuses_a_trl_without_the_hooks_param(monkeypatch, hook):
    from vpo.train import trainer as tr

    monkeypatch.delattr(GRPOTrainer, hook)
    with pytest.raises(RuntimeError, match=f"GRPOTrainer.{hook} is missing"):
        tr.check_trl_hooks()


def test_trainer_refuses_a_trl_without_the_hooks(monkeypatch):
    """A TRL that moved a hook makes VPOTrainer fail at construction, naming the method (the hook
    is removed from the class for this test only)."""
    from vpo.train import trainer as tr

    monkeypatch.delattr(GRPOTrainer, "_calculate_rewards")
    with pytest.raises(RuntimeError, match="GRPOTrainer._calculate_rewards is missing"):
        tr.check_trl_hooks()


# ------------------------------------------------------------------------------------------
# TRL semantics kept: reward_weights and the reward-function signature, each
# checked against TRL's own GRPOTrainer on the same inputs
# ------------------------------------------------------------------------------------------

G = 4
# three objectives' rewards for the 8 rollouts (2 prompts x G) of one batch: varied within each group
TABLE = [
    [0.1, 0.9, 0.4, 0.3, 0.8, 0.2, 0.7, 0.5],
    [1.0, 0.0, 0.0, 1.0, 0.5, 0.5, 0.0, 1.0],
    [0.2, 0.6, 0.9, 0.1, 0.3, 0.3, 0.8, 0.0],
]


def _table_func(k):
    def f(prompts, completions, **kw):  # the same rewards whatever the trainer generated
        return TABLE[k][: len(completions)]

    f.__name__ = f"obj{k}"
    return f


def _common(tmp_path, name, **kw):
    base = dict(
        output_dir=str(tmp_path / name),
        num_generations=G,
        per_device_train_batch_size=2 * G,
        max_completion_length=6,
        max_steps=1,
        learning_rate=1e-3,
        beta=0.0,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
    )
    base.update(kw)
    return base


def _pair(tmp_path, tiny_model_dir, reward_funcs, dataset, trl_kw=None, vpo_kw=None, **vpo_init):
    """TRL's GRPOTrainer and VPOTrainer (grpo estimator, m = 1: the scalar configuration) on the same
    model, data and reward functions."""
    from trl import GRPOConfig

    from vpo.train import VPOConfig, VPOTrainer

    trl_tr = GRPOTrainer(
        model=tiny_model_dir,
        reward_funcs=reward_funcs,
        train_dataset=dataset,
        args=GRPOConfig(**_common(tmp_path, "trl", **(trl_kw or {}))),
    )
    vpo_args = VPOConfig(**_common(tmp_path, "vpo", estimator="grpo", num_answers=1, **(vpo_kw or trl_kw or {})))
    vpo_tr = VPOTrainer(
        model=tiny_model_dir, args=vpo_args, reward_funcs=reward_funcs, train_dataset=dataset, **vpo_init
    )
    return trl_tr, vpo_tr


def _batch(dataset):
    return [dict(dataset[i]) for i in range(len(dataset)) for _ in range(G)]


@pytest.fixture()
def two_prompts():
    from datasets import Dataset

    return Dataset.from_list([{"prompt": "Say a", "tag": 0}, {"prompt": "Say b", "tag": 1}])


def test_reward_weights_give_trls_advantages(tmp_path, tiny_model_dir, two_prompts):
    """reward_weights = [2, 0, 1] becomes w* = [2/3, 0, 1/3]: with the same rewards the advantages
    equal TRL's (tolerance 1e-3: normalising w* scales the scalar by 1/3, so only the std epsilons,
    TRL's 1e-4 and vpo's 1e-6, differ; group stds here are >= 0.1). The uniform w* vpo used before
    gives advantages off by > 0.3."""
    funcs = [_table_func(k) for k in range(3)]
    trl_tr, vpo_tr = _pair(tmp_path, tiny_model_dir, funcs, two_prompts, trl_kw={"reward_weights": [2.0, 0.0, 1.0]})
    assert vpo_tr.vpo_target.tolist() == pytest.approx([2 / 3, 0.0, 1 / 3], abs=1e-12)
    assert vpo_tr.args.reward_weights == [2.0, 0.0, 1.0]  # the config is not rewritten
    inputs = _batch(two_prompts)
    adv = {}
    for name, tr in (("trl", trl_tr), ("vpo", vpo_tr)):
        tr.model.train()
        out = tr._generate_and_score_completions([dict(x) for x in inputs])
        adv[name] = out["advantages"].double()
    assert torch.allclose(adv["vpo"], adv["trl"], atol=1e-3), (adv["vpo"], adv["trl"])
    # TRL's logged reward is the reward_weights-weighted sum in both
    assert vpo_tr._metrics["train"]["reward"][-1] == pytest.approx(trl_tr._metrics["train"]["reward"][-1], rel=1e-6)
    # with the uniform w* they would differ
    r = torch.tensor(TABLE, dtype=torch.float64).T.unsqueeze(1)
    from vpo.core import compute_advantages

    uniform = compute_advantages("grpo", r, None, group_size=G).advantages
    assert (uniform - adv["trl"]).abs().max() > 0.3


def test_reward_weights_and_a_stated_w_star(tmp_path, tiny_model_dir, two_prompts, char_task):
    """Given with a w* of vpo's own (target_weights=, or a task that states one), reward_weights must be
    proportional to it; wrong lengths and negative weights are user errors naming what was given."""
    from vpo.errors import UserError
    from vpo.tasks import FunctionTask
    from vpo.train import VPOConfig, VPOTrainer

    funcs = [_table_func(k) for k in range(3)]

    def build(reward_weights, **kw):
        args = VPOConfig(**_common(tmp_path, "v", estimator="grpo", num_answers=1, reward_weights=reward_weights))
        if "task" in kw:
            return VPOTrainer(model=tiny_model_dir, args=args, **kw)
        return VPOTrainer(model=tiny_model_dir, args=args, reward_funcs=funcs, train_dataset=two_prompts, **kw)

    tr = build([1.0, 1.0, 2.0], target_weights=[0.25, 0.25, 0.5])  # proportional: fine
    assert tr.vpo_target.tolist() == [0.25, 0.25, 0.5] and tr.reward_weights.tolist() == [1.0, 1.0, 2.0]
    with pytest.raises(
        UserError, match=r"reward_weights \[2, 0, 1\].*disagree with the target weights w\* \[0.5, 0.5, 0\]"
    ):
        build([2.0, 0.0, 1.0], target_weights=[0.5, 0.5, 0.0])
    with pytest.raises(UserError, match="reward_weights has 2 entries but task 'reward_funcs' has d=3"):
        build([1.0, 2.0])
    with pytest.raises(UserError, match=r"reward_weights \[1, -1, 0\].*>= 0"):
        build([1.0, -1.0, 0.0])
    # a task with the uniform default: reward_weights become its w*; a task that states w*: must agree
    assert build([0.0, 3.0, 1.0], task=char_task).vpo_target.tolist() == [0.0, 0.75, 0.25]
    stated = FunctionTask(
        "stated",
        objectives={"a": lambda e, x: 1.0, "b": lambda e, x: 0.0},
        examples=[{"question": "q"}] * 4,
        target_weights=[0.9, 0.1],
    )
    with pytest.raises(UserError, match=r"w\* \[0.9, 0.1\] of task 'stated'"):
        build([1.0, 1.0], task=stated)
    assert build([9.0, 1.0], task=stated).vpo_target.tolist() == pytest.approx([0.9, 0.1])
    # unset: TRL's weights are w*, and the summary prints w*
    tr = build(None, target_weights=[0.5, 0.25, 0.25])
    assert tr.reward_weights.tolist() == [0.5, 0.25, 0.25] and "obj0 0.5, obj1 0.25, obj2 0.25" in tr.run_summary()


class _Recorder:
    """A reward function in TRL 1.16's full signature that records every call's keywords."""

    def __init__(self):
        self.calls = []
        self.__name__ = "recorder"

    def __call__(self, prompts, completions, completion_ids, trainer_state, log_metric, log_extra, **columns):
        self.calls.append(
            dict(
                prompts=prompts,
                completions=completions,
                completion_ids=completion_ids,
                trainer_state=trainer_state,
                log_metric=log_metric,
                log_extra=log_extra,
                **columns,
            )
        )
        return [float(len(ids)) for ids in completion_ids]


@pytest.mark.parametrize("chat", [False, True])
def test_reward_functions_get_what_trl_passes(tmp_path, tiny_model_dir, chat):
    """On the same inputs, a single reward-function callable is called by VPOTrainer (m = 1) with the
    keywords and values GRPOTrainer passes: prompts, completions, completion_ids, trainer_state,
    log_metric, log_extra and each dataset column."""
    from datasets import Dataset

    def prompt(s):
        return [{"role": "user", "content": s}] if chat else s

    ds = Dataset.from_list(
        [{"prompt": prompt("Say a"), "tag": 0, "gold": "x"}, {"prompt": prompt("Say b"), "tag": 1, "gold": "y"}]
    )
    rec = {"trl": _Recorder(), "vpo": _Recorder()}
    from trl import GRPOConfig

    from vpo.train import VPOConfig, VPOTrainer

    trainers = {
        "trl": GRPOTrainer(
            model=tiny_model_dir, reward_funcs=rec["trl"], train_dataset=ds, args=GRPOConfig(**_common(tmp_path, "trl"))
        ),
        "vpo": VPOTrainer(
            model=tiny_model_dir,
            reward_funcs=rec["vpo"],
            train_dataset=ds,
            args=VPOConfig(**_common(tmp_path, "vpo", estimator="grpo", num_answers=1)),
        ),
    }
    inputs = [{"prompt": prompt(f"Say {c}"), "tag": i, "gold": c} for i, c in enumerate("ab")]
    texts = ["abc", "de"]
    completions = [[{"role": "assistant", "content": t}] for t in texts] if chat else texts
    ids = [[70, 71, 72], [73, 74]]
    for name, tr in trainers.items():
        r = tr._calculate_rewards(inputs, [x["prompt"] for x in inputs], completions, ids)
        assert r[:, 0].tolist() == [3.0, 2.0], name
    got = {name: rec[name].calls[-1] for name in rec}
    assert (
        set(got["vpo"])
        == set(got["trl"])
        == {"prompts", "completions", "completion_ids", "trainer_state", "log_metric", "log_extra", "tag", "gold"}
    )
    for key in ("prompts", "completions", "completion_ids", "tag", "gold"):
        assert got["vpo"][key] == got["trl"][key], key
    for name, tr in trainers.items():
        assert got[name]["trainer_state"] is tr.state
        assert callable(got[name]["log_metric"]) and callable(got[name]["log_extra"])


def test_log_metric_and_log_extra_land_in_the_logs_as_in_trl(tmp_path, tiny_model_dir, two_prompts):
    """`def f(completions, completion_ids, **kw)` trains under both trainers; its log_metric value is in
    both trainers' log history and its log_extra column is in the completions table, one value per
    completion, aligned with the completion it was computed from."""

    def lengths(completions, completion_ids, log_metric, log_extra, **kw):
        log_metric("mean_ids", float(np.mean([len(i) for i in completion_ids])))
        log_extra("echo", list(completions))
        return [float(len(i)) for i in completion_ids]

    trl_tr, vpo_tr = _pair(tmp_path, tiny_model_dir, [lengths], two_prompts)
    for name, tr in (("trl", trl_tr), ("vpo", vpo_tr)):
        tr.train()
        log = [h for h in tr.state.log_history if "loss" in h][0]
        assert 0 < log["mean_ids"] <= 6, name
        assert list(tr._logs["extra"]["echo"]) == list(tr._logs["completion"]), name
        assert log["rewards/lengths/mean"] == pytest.approx(log["mean_ids"], rel=1e-6), name


def test_m_answers_reward_functions_see_answers_and_log_per_completion(tmp_path, tiny_model_dir, two_prompts):
    """With m = 3 each call holds one entry per parsed answer: completion_ids are the answer's tokens, and
    log_extra's per-answer values reach the completions table grouped per completion (a list each)."""
    from vpo.train import VPOConfig, VPOTrainer

    seen = {}

    def rec(completions, completion_ids, log_extra, **kw):
        seen.update(completions=list(completions), ids=list(completion_ids))
        log_extra("answer", list(completions))
        return [1.0] * len(completions)

    args = VPOConfig(**_common(tmp_path, "m3", estimator="vpo", num_answers=3, num_weightings=4))
    tr = VPOTrainer(model=tiny_model_dir, args=args, reward_funcs=rec, train_dataset=two_prompts)
    texts = ["<answer_1>ab</answer_1><answer_2>c</answer_2>", "none", "<answer_1>xyz</answer_1>"]
    inputs = [{"prompt": "p", "tag": i} for i in range(3)]
    tr._pending_extra_logs.clear()
    tr._calculate_rewards(inputs, ["p"] * 3, texts, [[1], [2], [3]])
    assert seen["completions"] == ["ab", "c", "xyz"]
    tok = tr.processing_class
    assert seen["ids"] == [
        tok("ab", add_special_tokens=False)["input_ids"],
        tok("c", add_special_tokens=False)["input_ids"],
        tok("xyz", add_special_tokens=False)["input_ids"],
    ]
    assert tr._pending_extra_logs["answer"] == [["ab", "c"], [], ["xyz"]]
