"""Loud zero learning signal: a training batch with no parsable answer, no valid
answer or no finite reward is warned about (at most once every ZERO_SIGNAL_WARN_EVERY steps), counted in
the logs (``vpo/zero_signal_batches``, ``vpo/nonfinite_answers``) and, after ``zero_signal_patience``
such batches in a row, stops training with a UserError; ``strict_rewards: true`` failures are one line
from the CLI naming ``strict_rewards``, the objective and the rollout."""

from __future__ import annotations

import textwrap
import warnings

import numpy as np
import pytest
import torch

pytest.importorskip("trl")

from vpo.cli import main  # noqa: E402
from vpo.core.unscored import dropped_rollouts  # noqa: E402
from vpo.errors import UserError  # noqa: E402
from vpo.tasks import FunctionTask  # noqa: E402
from vpo.train import VPOConfig, VPOTrainer  # noqa: E402
from vpo.train.trainer import ZERO_SIGNAL_WARN_EVERY, ZeroSignalError, _GatheredScores  # noqa: E402
from vpo.train.tiny import ANSWER_TAG_TOKENS  # noqa: E402


def _args(tmp_path, **kw):
    base = dict(
        output_dir=str(tmp_path / "out"),
        num_generations=2,
        per_device_train_batch_size=4,
        max_completion_length=4,
        max_steps=1,
        learning_rate=1e-3,
        beta=0.0,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
        num_weightings=4,
    )
    base.update(kw)
    return VPOConfig(**base)


def _prompts():
    from datasets import Dataset

    return Dataset.from_list([{"prompt": f"Say {i}"} for i in range(8)])


def always_nan(prompts, completions, **kw):
    return [None for _ in completions]  # TRL's "no reward": NaN


def length(prompts, completions, **kw):
    return [float(len(c)) for c in completions]


def _zero_signal_warnings(record):
    return [str(w.message) for w in record if "no learning signal" in str(w.message)]


def test_an_always_nan_objective_is_warned_counted_and_stops_after_the_patience(tmp_path, tiny_model_dir):
    """Objective ``always_nan`` is NaN on every answer, so no answer is valid and every advantage is 0.
    Patience 3: one warning (step 0; the next would be at step 10), counters 1 and 2 logged for the first
    two steps, and the third batch raises, naming the objective and the setting."""
    args = _args(tmp_path, estimator="grpo", num_answers=1, max_steps=10, zero_signal_patience=3)
    tr = VPOTrainer(tiny_model_dir, args, reward_funcs=[length, always_nan], train_dataset=_prompts())
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with pytest.raises(ZeroSignalError) as err:
            tr.train()
    msg = str(err.value)
    assert isinstance(err.value, UserError)
    assert "3 in a row" in msg and "zero_signal_patience = 3" in msg and "objective(s) always_nan" in msg
    assert "length" not in msg.split("objective(s)")[1].split(" of task")[0]  # only the NaN one is named
    warned = _zero_signal_warnings(record)
    assert len(warned) == 1 and "step 0" in warned[0] and "objective(s) always_nan of task 'reward_funcs'" in warned[0]
    logs = [h for h in tr.state.log_history if "loss" in h]
    assert [h["vpo/zero_signal_batches"] for h in logs] == [1.0, 2.0]
    assert [h["vpo/nonfinite_answers"] for h in logs] == [4.0, 4.0]  # 4 rollouts x 1 answer, all NaN
    assert all(h["loss"] == 0.0 for h in logs)


def test_warnings_are_rate_limited_and_patience_0_never_stops(tmp_path, tiny_model_dir):
    """12 zero-signal steps with zero_signal_patience: 0: training completes, the counter reaches 12,
    and exactly two warnings are printed (steps 0 and ZERO_SIGNAL_WARN_EVERY = 10), not twelve."""
    assert ZERO_SIGNAL_WARN_EVERY == 10
    args = _args(tmp_path, estimator="grpo", num_answers=1, max_steps=12, zero_signal_patience=0)
    tr = VPOTrainer(tiny_model_dir, args, reward_funcs=[always_nan], train_dataset=_prompts())
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        tr.train()
    warned = _zero_signal_warnings(record)
    assert len(warned) == 2 and "step 0:" in warned[0] and "step 10:" in warned[1] and "11 in a row" in warned[1]
    logs = [h for h in tr.state.log_history if "loss" in h]
    assert [h["vpo/zero_signal_batches"] for h in logs] == [float(i) for i in range(1, 13)]


def test_answers_that_never_parse_stop_training(tmp_path, tiny_model_dir):
    """A tags task on a fresh model forbidden to write the tag tokens: no completion has an answer. The
    warning and the error say so, name the tags and the task, and parse_failure_rate is logged as 1."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    task = FunctionTask(
        "tagged",
        objectives={"a": lambda e, x: 1.0, "b": lambda e, x: 0.5},
        examples=[{"question": f"Q{i}"} for i in range(8)],
    )
    args = _args(
        tmp_path,
        estimator="vpo",
        num_answers=3,
        max_steps=10,
        zero_signal_patience=2,
        generation_kwargs={"bad_words_ids": [[tok.convert_tokens_to_ids(t)] for t in ANSWER_TAG_TOKENS]},
    )
    tr = VPOTrainer(tiny_model_dir, args, task=task)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with pytest.raises(
            ZeroSignalError,
            match=r"no completion contained a parsable answer \(task 'tagged' parses "
            r"<answer_1>..<answer_3> tags\).*zero_signal_patience = 2",
        ):
            tr.train()
    assert "no completion contained a parsable answer" in _zero_signal_warnings(record)[0]
    logs = [h for h in tr.state.log_history if "loss" in h]
    assert len(logs) == 1 and logs[0]["vpo/parse_failure_rate"] == 1.0 and logs[0]["vpo/zero_signal_batches"] == 1.0
    assert logs[0]["vpo/nonfinite_answers"] == 0.0


def test_a_batch_with_signal_resets_the_streak(tmp_path, tiny_model_dir, char_task):
    """The counting itself, on hand-made batches: patience counts zero-signal batches *in a row*; eval
    batches are neither counted nor warned about; NaN answers are counted per batch."""
    tr = VPOTrainer(tiny_model_dir, _args(tmp_path, zero_signal_patience=3, num_answers=3), task=char_task)
    d = 3

    def batch(kind):
        r = torch.rand(4, 3, d)
        v = torch.ones(4, 3, dtype=torch.bool)
        if kind == "nan":
            r[..., 1] = float("nan")
        tr._pending = _GatheredScores(r, v, None, no_answer=0.0, parsed=12.0, duplicates=0.0, completions=4.0)

    metrics = {"nonfinite": [], "total": []}

    def step(kind, mode="train"):
        batch(kind)
        m = {"vpo/nonfinite_answers": [], "vpo/zero_signal_batches": []}
        tr._check_zero_signal(mode, m)
        metrics["nonfinite"] += m["vpo/nonfinite_answers"]
        metrics["total"] += m["vpo/zero_signal_batches"]

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        for kind in ["nan", "nan", "ok", "nan", "nan"]:
            step(kind)
        step("nan", mode="eval")  # not counted
        assert tr._zero_signal["streak"] == 2
        with pytest.raises(ZeroSignalError, match="objective\\(s\\) digits of task 'char_stats'"):
            step("nan")
    assert metrics["nonfinite"] == [12.0, 12.0, 0.0, 12.0, 12.0, 12.0]  # the 6th is eval's (logged there too)
    assert metrics["total"] == [1.0, 2.0, 2.0, 3.0, 4.0] and tr._zero_signal["total"] == 5


def test_zero_signal_patience_is_checked(tmp_path):
    assert _args(tmp_path).zero_signal_patience == 20
    with pytest.raises(ValueError, match="zero_signal_patience must be an integer >= 0"):
        _args(tmp_path, zero_signal_patience=-1)


# ------------------------------------------------------------------------------------------
# from the CLI: one line, exit code 2
# ------------------------------------------------------------------------------------------

NAN_TASK = textwrap.dedent(
    """
    from vpo.tasks import FunctionTask

    class _Always(FunctionTask):
        def parse(self, completion, m):  # every completion is an answer, so the scorer always runs
            return [f"{completion}#{i}" for i in range(m)]

    def make():
        return _Always("nan_task", objectives={"fine": lambda ex, a: 1.0, "broken": lambda ex, a: float("nan")},
                       examples=[{"id": i, "question": f"Q{i}"} for i in range(8)])
    """
)


def _cli_config(tmp_path, tiny_model_dir, **extra):
    (tmp_path / "nan_tasks.py").write_text(NAN_TASK)
    lines = {
        "task": f"{tmp_path / 'nan_tasks.py'}:make",
        "model_name_or_path": tiny_model_dir,
        "output_dir": str(tmp_path / "o"),
        "estimator": "vpo",
        "num_answers": 2,
        "use_cpu": "true",
        "bf16": "false",
        "report_to": "none",
        "num_generations": 2,
        "per_device_train_batch_size": 4,
        "max_completion_length": 4,
        "num_weightings": 4,
        "max_steps": 3,
        "save_strategy": "'no'",
        "disable_tqdm": "true",
    }
    lines.update(extra)
    cfg = tmp_path / "run.yaml"
    cfg.write_text("".join(f"{k}: {v}\n" for k, v in lines.items()))
    return str(cfg)


def _one_line(capsys):
    err = capsys.readouterr().err
    lines = [ln for ln in err.strip().splitlines() if ln.strip() and "it/s]" not in ln]  # progress bars
    assert len(lines) == 1, err
    return lines[0]


def test_strict_rewards_from_the_cli_is_one_line_naming_the_setting_and_objective(tmp_path, tiny_model_dir, capsys):
    assert main(["train", _cli_config(tmp_path, tiny_model_dir, strict_rewards="true")]) == 2
    line = _one_line(capsys)
    assert line.startswith("vpo train: error: strict_rewards: true stopped training at step 0")
    assert "objective(s) broken (rollout 0, answer 0; 8 answer(s) in all)" in line
    assert "strict_rewards: false" in line and "strict=False" not in line


def test_zero_signal_from_the_cli_is_one_line(tmp_path, tiny_model_dir, capsys):
    assert main(["train", _cli_config(tmp_path, tiny_model_dir, zero_signal_patience=1)]) == 2
    line = _one_line(capsys)
    assert line.startswith("vpo train: error: vpo: step 0: no learning signal")
    assert "objective(s) broken of task 'nan_task'" in line and "zero_signal_patience = 1" in line


def test_a_raising_reward_function_under_strict_rewards_names_it_and_the_row(tmp_path, tiny_model_dir):
    def picky(prompts, completions, **kw):
        if "boom" in completions:
            raise RuntimeError("cannot score boom")
        return [1.0 for _ in completions]

    from datasets import Dataset

    ds = Dataset.from_list([{"prompt": "p"}] * 4)
    tr = VPOTrainer(
        tiny_model_dir, _args(tmp_path, num_answers=3, strict_rewards=True), reward_funcs=[picky], train_dataset=ds
    )
    texts = ["<answer_1>ok</answer_1>", "<answer_1>fine</answer_1><answer_2>boom</answer_2>"]
    with pytest.raises(UserError) as err:
        tr._score_local([{"prompt": "p"}, {"prompt": "q"}], ["p", "q"], texts)
    msg = str(err.value)
    assert "strict_rewards: true" in msg and "RuntimeError: cannot score boom" in msg
    assert "reward function 'picky' (objective 'picky')" in msg and "rollout 1, answer 1" in msg
    assert "\n" not in msg


def test_a_batch_whose_rollouts_are_all_left_out_as_unscored_is_a_zero_signal_batch(
    tmp_path, tiny_model_dir, char_task
):
    """Valid answers, yet no rollout reaches the update: in each group of 2, at least one rollout has an
    unscored answer, so every group is left with fewer than 2 scored rollouts (vpo.core.unscored). That
    batch teaches nothing and is said to; one group with both rollouts scored is a batch with signal."""
    tr = VPOTrainer(tiny_model_dir, _args(tmp_path, zero_signal_patience=0, num_answers=3), task=char_task)
    r, v = torch.rand(4, 3, 3), torch.ones(4, 3, dtype=torch.bool)

    def cause(unscored):
        tr._pending = _GatheredScores(
            r, v, None, no_answer=0.0, parsed=12.0, duplicates=0.0, completions=4.0,
            score_errors=float(sum(unscored)), unscored=torch.tensor(unscored),
            dropped=torch.from_numpy(dropped_rollouts(np.array(unscored), np.arange(4) // 2)),
        )  # fmt: skip
        m = {"vpo/nonfinite_answers": [], "vpo/zero_signal_batches": []}
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            out = tr._check_zero_signal("train", m)
        return out, _zero_signal_warnings(record)

    out, warned = cause([True, False, False, True])  # groups (0, 1) and (2, 3): one scored rollout each
    assert "every rollout was left out of the update: 2 of 4" in out and "char_stats" in out
    assert len(warned) == 1 and "no learning signal" in warned[0]
    out, warned = cause([True, True, False, False])  # group (2, 3) keeps both: signal
    assert out is None and warned == []
    out, warned = cause([False, False, False, False])
    assert out is None


def none_for_say_1(prompts, completions, **kw):
    return [None if "Say 1" in str(p) else 1.0 for p in prompts]


def test_the_trainer_records_which_rollouts_its_update_left_out(tmp_path, tiny_model_dir):
    """Through a real step (Max@k, vpo's estimator path): the group of "Say 1" is unscored, so both its
    rollouts are left out of the update and ``_pending.dropped`` (what the zero-signal check reads) says
    so; the other group trains."""
    from datasets import Dataset

    args = _args(tmp_path, estimator="max_at_k", num_answers=1, zero_signal_patience=0)
    data = Dataset.from_list([{"prompt": "Say 0"}, {"prompt": "Say 1"}])
    tr = VPOTrainer(tiny_model_dir, args, reward_funcs=[length, none_for_say_1], train_dataset=data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tr.train()
    p = tr._pending
    assert p.dropped is not None and p.dropped.tolist() == p.unscored.tolist()
    assert int(p.dropped.sum()) == 2 and not bool(p.dropped.all())
