"""vpo's per-step training metrics in veRL (vpo.integrations.verl_metrics), without veRL.

The rollouts' ``reward_extra_info`` dicts come from the real score function
(:func:`vpo.integrations.verl_reward.compute_score`) on a registered test task; the trainer class whose
method is wrapped is a stand-in (veRL's own is checked in test_verl.py's veRL stage and by the real
``main_ppo`` run in test_verl_main_ppo.py).
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

from vpo.integrations import verl_metrics
from vpo.integrations.verl_metrics import SignalWatch, step_metrics
from vpo.integrations.verl_reward import compute_score
from vpo.tasks import FunctionTask, register_task

TASK = "verl_metrics_pair"


def _make_task():
    """Test-only task (named as such): an answer "3" scores (0.3, 0.7); a non-number raises."""
    return FunctionTask(
        TASK,
        objectives={"up": lambda ex, a: float(a) / 10, "down": lambda ex, a: 1 - float(a) / 10},
        examples=[{"id": 0, "question": "A digit?"}],
    )


register_task(TASK, _make_task)


def _info(answers: list[str] | str) -> dict:
    text = (
        answers
        if isinstance(answers, str)
        else "".join(f"<answer_{i + 1}>{a}</answer_{i + 1}>" for i, a in enumerate(answers))
    )
    return compute_score(
        f"vpo/{TASK}", text, {"id": 0}, {"vpo_group": "g", "vpo_method": "vpo"}, task=TASK, num_answers=2
    )


def test_step_metrics_average_objectives_over_valid_answers_and_count_flat_groups():
    infos = [
        _info(["1", "2"]),  # group a: two rollouts with the same answers, same set score -> flat
        _info(["1", "2"]),
        _info(["3"]),  # group b: one valid answer
        _info("no tags here"),  # no answer parsed at all
    ]
    uids = ["a", "a", "b", "b"]
    out = step_metrics(infos, uids)
    # valid answers: 1, 2, 1, 2, 3 -> up = 0.9 / 5, down = 4.1 / 5
    assert out["vpo/objective/up"] == pytest.approx(0.9 / 5)
    assert out["vpo/objective/down"] == pytest.approx(4.1 / 5)
    assert out["vpo/parse_failure_rate"] == pytest.approx(0.25)
    assert out["vpo/answers_per_completion"] == pytest.approx(5 / 4)
    assert out["vpo/flat_group_frac"] == pytest.approx(0.5)
    scores = [i["score"] for i in infos]
    assert out["vpo/score"] == pytest.approx(np.mean(scores))
    assert out["vpo/group_std"] == pytest.approx(np.std(scores[2:]) / 2)
    assert scores[3] == 0.0 and scores[2] > 0


def test_an_unscored_rollout_is_counted_and_left_out_of_the_group_statistics():
    """An answer whose scorer raises (the 'x' is no number) leaves its rollout unscored (score NaN):
    counted in vpo/unscored_frac, out of vpo/score and of its group's flatness (#50)."""
    infos = [_info(["3", "x"]), _info(["3"]), _info(["1"]), _info(["1", "2"]), _info(["1", "2"])]
    assert np.isnan(infos[0]["score"]) and infos[0]["vpo_unscored"] == 1
    out = step_metrics(infos, ["b", "b", "b", "a", "a"])
    assert out["vpo/unscored_frac"] == pytest.approx(1 / 5)
    scored = [i["score"] for i in infos[1:]]
    assert out["vpo/score"] == pytest.approx(np.mean(scored))
    # group b without its unscored rollout: "3" and "1" differ, so not flat; group a is flat
    assert out["vpo/flat_group_frac"] == pytest.approx(0.5)


def test_rollouts_not_scored_by_vpo_give_no_metrics():
    assert step_metrics([{"acc": 1.0}, {}], ["a", "a"]) == {}
    assert step_metrics([], []) == {}


def test_the_watch_warns_on_a_step_without_signal_at_most_every_ten_steps():
    watch = SignalWatch()
    seen = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for step in range(1, 16):
            m = {"vpo/flat_group_frac": 1.0 if step != 3 else 0.5, "vpo/parse_failure_rate": 1.0}
            watch.observe(step, m)
            seen.append(m["vpo/flat_group_batches"])
    steps = [str(x.message).split(":")[1].strip() for x in w]
    assert steps == ["step 1", "step 11"], steps
    assert "no rollout had a parsable answer" in str(w[0].message)
    assert seen[:4] == [1.0, 2.0, 2.0, 3.0] and seen[-1] == 14.0
    assert watch.flat_steps == 14


def test_the_wrapped_method_adds_vpo_metrics_once_however_often_installed(monkeypatch):
    calls = []

    class Trainer:
        config = None

        def _compute_metrics(self, batch, metrics, timing_raw, global_steps, epoch):
            calls.append(global_steps)
            metrics["veRL"] = 1.0

    infos = [_info(["1", "2"]), _info(["4", "5"])]
    monkeypatch.setattr(verl_metrics, "_rollout_infos", lambda batch: (infos, ["a", "a"]))
    monkeypatch.setattr(verl_metrics, "_WATCH", SignalWatch())
    verl_metrics._wrap(Trainer)
    verl_metrics._wrap(Trainer)
    metrics: dict = {}
    Trainer()._compute_metrics(None, metrics, {}, global_steps=3, epoch=0)
    assert calls == [3]
    assert metrics["veRL"] == 1.0 and metrics["vpo/flat_group_frac"] == 0.0
    assert metrics["vpo/flat_group_batches"] == 0.0 and "vpo/objective/up" in metrics


def test_a_failure_to_read_the_step_is_said_once_and_training_goes_on(monkeypatch):
    class Trainer:
        config = None

        def _compute_metrics(self, batch, metrics, timing_raw, global_steps, epoch):
            metrics["veRL"] = 1.0

    def broken(batch):
        raise KeyError("extra_fields")

    monkeypatch.setattr(verl_metrics, "_rollout_infos", broken)
    verl_metrics._wrap(Trainer)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for step in (1, 2):
            m: dict = {}
            Trainer()._compute_metrics(None, m, {}, global_steps=step, epoch=0)
            assert m == {"veRL": 1.0}
    assert len(w) == 1 and "extra_fields" in str(w[0].message)


def test_install_wraps_the_trainer_when_its_module_is_imported_later(tmp_path, monkeypatch):
    name = "vpo_fake_verl_trainer_base"
    (tmp_path / f"{name}.py").write_text(
        "class PPOTrainer:\n"
        "    def _compute_metrics(self, batch, metrics, timing_raw, global_steps, epoch):\n"
        "        metrics['veRL'] = 1.0\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(verl_metrics, "TRAINER_MODULE", name)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    sys.modules.pop(name, None)
    assert verl_metrics.install() is False
    assert verl_metrics.install() is False  # one finder, however often installed
    assert sum(isinstance(f, verl_metrics._AfterImport) for f in sys.meta_path) == 1
    module = __import__(name)
    try:
        assert module.PPOTrainer._compute_metrics._vpo_wrapped
        assert not any(isinstance(f, verl_metrics._AfterImport) for f in sys.meta_path)
        assert verl_metrics.install() is True
    finally:
        sys.modules.pop(name, None)
