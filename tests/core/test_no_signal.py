"""One rule for a flat group (scores within 1e-6, finite) and one watch over the steps without signal,
used by both VPOTrainer and the veRL metrics (#52 item 8)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from vpo.core.no_signal import FLAT_EPS, WARN_EVERY, NoSignalWatch, flat_group_fraction, flat_groups


def test_the_rule_scores_within_eps_and_finite():
    scores = [0.5, 0.5 + 0.9 * FLAT_EPS, 0.2, 0.9, 1.0, np.nan, 0.3, 0.3]
    groups = ["a", "a", "b", "b", "c", "c", "d", "d"]
    assert flat_groups(scores, groups) == [True, False, False, True]
    assert flat_group_fraction(scores, groups) == 0.5
    assert flat_group_fraction([], []) == 0.0


def test_the_watch_counts_every_flat_step_and_warns_at_most_every_ten():
    watch = NoSignalWatch()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        counts = [watch.observe(step, step != 3, lambda total, s=step: f"step {s}: {total}") for step in range(1, 16)]
    assert [str(x.message) for x in w] == ["step 1: 1", "step 11: 10"]
    assert counts[:4] == [1, 2, 2, 3] and counts[-1] == 14 == watch.flat_steps and WARN_EVERY == 10


def test_trainer_and_verl_share_the_rule_and_the_watch():
    pytest.importorskip("trl")
    import vpo.train.trainer as trainer_mod
    from vpo.core import compute_advantages
    from vpo.integrations import verl_metrics

    assert trainer_mod.flat_group_fraction is flat_group_fraction
    assert isinstance(verl_metrics._WATCH, NoSignalWatch)
    # two rollouts 1e-7 apart: GRPO's advantages are not 0 (the trainer's old rule, |A| <= 1e-8, saw a
    # signal where veRL's saw none), yet they scored alike: one rule for both callers now
    r = np.array([[[0.5]], [[0.5 + 1e-7]], [[0.0]], [[1.0]]])
    res = compute_advantages("grpo", r, np.ones((4, 1), bool), group_size=2)
    assert abs(float(res.advantages[0])) > 0.01
    trainer_frac = flat_group_fraction(res.scores, res.group_index)
    infos = [
        {"vpo_num_parsed": 1, "vpo_r0_x": float(x[0][0]), "vpo_valid0": 1.0, "score": float(s)}
        for x, s in zip(r, res.scores)
    ]
    assert trainer_frac == verl_metrics.step_metrics(infos, ["a", "a", "b", "b"])["vpo/flat_group_frac"] == 0.5
