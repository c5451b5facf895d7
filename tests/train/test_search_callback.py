"""In-loop search evaluation (SearchEvalCallback, VPOConfig.search_eval_*) and the per-batch vpo/pool/...
logs, on the tiny offline model: evaluations land at exactly the global steps that are multiples of N,
reach report_to (on_log), are the search metrics of the policy at that step, leave training unchanged,
and a run resumed from a checkpoint keeps the schedule and reproduces the evaluations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("trl")

from transformers import TrainerCallback  # noqa: E402

from vpo.search.generate import generate_pool  # noqa: E402
from vpo.search.poolstats import training_pool_stats  # noqa: E402
from vpo.train import VPOTrainer  # noqa: E402
from vpo.train.callbacks import SearchEvalCallback  # noqa: E402

from helpers.trainer_args import tiny_vpo_args  # noqa: E402


def make_args(out, **kw):
    search = dict(
        estimator="vpo",
        num_answers=3,
        max_steps=4,
        search_eval_steps=2,
        search_eval_examples=3,
        search_eval_budget=6,  # 2 rollouts of m = 3 answers per prompt
    )
    return tiny_vpo_args(out, **{**search, **kw})


class Recorder(TrainerCallback):
    """Stands in for a report_to backend: what on_log delivers, with the step."""

    def __init__(self):
        self.logs = []

    def on_log(self, args, state, control, logs=None, **kw):
        self.logs.append((state.global_step, dict(logs or {})))


def search_callback(tr) -> SearchEvalCallback:
    (cb,) = [c for c in tr.callback_handler.callbacks if isinstance(c, SearchEvalCallback)]
    return cb


def flat_params(model):
    return torch.cat([p.detach().flatten().clone() for p in model.parameters()])


def timing_free(logs):
    return {k: v for k, v in logs.items() if not k.endswith("seconds")}


def test_schedule_logs_metrics_and_resume(tmp_path, tiny_model_dir, char_task):
    rec = Recorder()
    args = make_args(tmp_path / "a", save_strategy="steps", save_steps=1)
    tr = VPOTrainer(model=tiny_model_dir, args=args, task=char_task, callbacks=[rec])
    tr.train()
    cb = search_callback(tr)
    # exactly at global steps 2 and 4, in the trainer's log history and through on_log (report_to)
    assert [s for s, _ in cb.history] == [2, 4]
    assert [h["step"] for h in tr.state.log_history if "search/best_at_1" in h] == [2, 4]
    assert [s for s, lg in rec.logs if "search/best_at_1" in lg] == [2, 4]
    logged = [lg for s, lg in rec.logs if "search/best_at_1" in lg]
    keys = set(logged[0])
    for k in (
        "search/best_at_1",
        "search/best_at_3",
        "search/best_at_6",
        "search/pass_at_6",
        "search/diversity",
        "search/completed_diversity",
        "search/seconds",
        "search/pool/witness_fraction",
    ):
        assert k in keys, k
    # the training records are untouched: one per step, with the vpo/ and vpo/pool/ logs, no search keys
    train_logs = [h for h in tr.state.log_history if "loss" in h]
    assert [h["step"] for h in train_logs] == [1, 2, 3, 4]
    assert all("vpo/pool/witness_fraction" in h and not any(k.startswith("search/") for k in h) for h in train_logs)
    # vpo/pool/... of the last step are the pool statistics of the last training batch
    last = tr.vpo_last
    want = training_pool_stats(
        last["rewards"].double().numpy(), last["valid"].numpy(), last["group_size"], tr.vpo_target
    )
    for name, val in want.items():
        assert train_logs[-1][f"vpo/pool/{name}"] == pytest.approx(val, abs=1e-6), name
    # the step-4 evaluation is the search metrics of the final policy: sampling its pool again agrees
    pool = generate_pool(
        tr.model, char_task, cb.examples, tokenizer=tr.processing_class, config=cb.config, progress=False
    )
    again = cb.pool_logs(pool)
    assert again == pytest.approx(timing_free(cb.history[-1][1]), abs=1e-12)
    # best@k grows with k at the matched budget, pass@k and diversities are in range
    b = [logged[1][f"search/best_at_{k}"] for k in (1, 3, 5, 6)]
    assert all(x <= y + 1e-12 for x, y in zip(b, b[1:]))
    assert 0 <= logged[1]["search/diversity"] <= 3

    # resumed from checkpoint-1: the schedule is the global one (2 and 4), not "every 2 steps from the
    # restart" (3), and the evaluations reproduce the uninterrupted run's
    rec2 = Recorder()
    args2 = make_args(tmp_path / "b")
    tr2 = VPOTrainer(model=tiny_model_dir, args=args2, task=char_task, callbacks=[rec2])
    tr2.train(resume_from_checkpoint=str(tmp_path / "a" / "checkpoint-1"))
    cb2 = search_callback(tr2)
    assert [s for s, _ in cb2.history] == [2, 4]
    assert [s for s, lg in rec2.logs if "search/best_at_1" in lg] == [2, 4]
    for (_, a), (_, b2) in zip(cb.history, cb2.history):
        assert timing_free(b2) == pytest.approx(timing_free(a), abs=1e-6)
    torch.testing.assert_close(flat_params(tr2.model), flat_params(tr.model), rtol=1e-5, atol=1e-6)


def test_search_evaluation_leaves_training_unchanged(tmp_path, tiny_model_dir, char_task):
    runs = []
    for steps in (1, 0):
        tr = VPOTrainer(
            model=tiny_model_dir,
            args=make_args(tmp_path / f"s{steps}", max_steps=2, search_eval_steps=steps),
            task=char_task,
        )
        tr.train()
        runs.append((tr, flat_params(tr.model)))
    (with_eval, p1), (without, p0) = runs
    assert len(search_callback(with_eval).history) == 2
    assert not [c for c in without.callback_handler.callbacks if isinstance(c, SearchEvalCallback)]
    torch.testing.assert_close(p1, p0, rtol=0, atol=0)
    losses = [[h["loss"] for h in tr.state.log_history if "loss" in h] for tr, _ in runs]
    assert losses[0] == losses[1]


def test_bad_settings(tmp_path, tiny_model_dir):
    with pytest.raises(ValueError, match="search_eval_budget must be an integer >= 1"):
        make_args(tmp_path, search_eval_budget=0)
    with pytest.raises(ValueError, match="search_eval_steps must be a non-negative integer"):
        make_args(tmp_path, search_eval_steps=-1)
    with pytest.raises(ValueError, match="search_eval_temperature"):
        make_args(tmp_path, search_eval_temperature=-0.5)
    from datasets import Dataset

    from vpo.train.trainer import TrainerSetupError

    ds = Dataset.from_list([{"prompt": f"Say something #{i}"} for i in range(8)])
    with pytest.raises(TrainerSetupError, match="search_eval_steps needs a vpo task"):
        VPOTrainer(
            model=tiny_model_dir,
            args=make_args(tmp_path, num_answers=1, estimator="grpo"),
            reward_funcs=[lambda prompts, completions, **kw: [0.0] * len(completions)],
            train_dataset=ds,
        )


def test_pool_stat_logs_accept_tensors():
    from vpo.train.callbacks import pool_stat_logs

    rng = np.random.default_rng(0)
    r = rng.integers(0, 3, size=(8, 3, 2)) / 2.0
    v = rng.random((8, 3)) < 0.8
    logs = pool_stat_logs(torch.tensor(r), torch.tensor(v), 4, [0.5, 0.5])
    assert logs == {f"vpo/pool/{k}": x for k, x in training_pool_stats(r, v, 4, [0.5, 0.5]).items()}
    assert "vpo/pool/pass_at_3_rollout" in logs and "vpo/pool/witness_ndcg" in logs
