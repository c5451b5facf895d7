"""pareto_niche on hand-built groups: specialists and front members above the group mean, dominated
answers and crowded modes below it, a repeated mode splitting its niche, and the same numbers for
any group layout."""

from __future__ import annotations

import numpy as np
import pytest

from vpo.core import EstimatorConfig, compute_advantages

A, B, C, D = (1.0, 0.0), (0.0, 1.0), (0.5, 0.5), (0.4, 0.4)


def _scores(rows, **kw):
    r = np.asarray(rows, dtype=float)[:, None, :]
    return compute_advantages("pareto_niche", r, group_size=len(rows), **kw)


def test_specialists_front_and_dominated_by_hand():
    res = _scores([A, B, C, D])
    # front: A, B, C undominated (1), D dominated by C (1/2); niche: A and B own objective 1 and 2 (1/2 each)
    np.testing.assert_allclose(res.scores.numpy(), [1.5, 1.5, 1.0, 0.5])
    adv = res.advantages.numpy()
    assert adv[0] > 0 and adv[1] > 0 and adv[2] < 0 and adv[3] < adv[2]
    s = np.array([1.5, 1.5, 1.0, 0.5])
    np.testing.assert_allclose(adv, (s - s.mean()) / (s.std(ddof=1) + 1e-6))


def test_a_repeated_mode_splits_its_niche():
    res = _scores([A, A, B, D])
    # both copies of A are on the front and share objective 1's best: 1 + 1/4 each; B alone: 1 + 1/2;
    # D = (0.4, 0.4) is dominated by neither A nor B here (each is worse on one objective): 1, no niche
    np.testing.assert_allclose(res.scores.numpy(), [1.25, 1.25, 1.5, 1.0])
    adv = res.advantages.numpy()
    assert adv[2] > adv[0] == adv[1] > adv[3]  # the lone specialist above the crowded mode


def test_invalid_rollouts_flat_groups_and_layouts():
    rows = [A, B, C, D, B, C, C, A]
    valid = np.array([True, True, False, True, True, True, True, True])
    r = np.asarray(rows, dtype=float)[:, None, :]
    cfg = EstimatorConfig(invalid_score=-1.0)
    blocks = compute_advantages("pareto_niche", r, valid[:, None], group_size=4, config=cfg)
    assert float(blocks.scores[2]) == -1.0
    ids = compute_advantages(
        "pareto_niche",
        r[[0, 4, 1, 5, 2, 6, 3, 7]],
        valid[[0, 4, 1, 5, 2, 6, 3, 7], None],
        group_ids=[0, 1] * 4,
        config=cfg,
    )
    order = [0, 4, 1, 5, 2, 6, 3, 7]
    np.testing.assert_allclose(ids.advantages.numpy(), blocks.advantages.numpy()[order])
    flat = compute_advantages("pareto_niche", np.tile(r[:1], (4, 1, 1)), group_size=4)
    assert np.all(flat.advantages.numpy() == 0.0)
    with pytest.raises(ValueError, match="one answer per rollout"):
        compute_advantages("pareto_niche", np.zeros((4, 3, 2)), group_size=4)


def test_the_sign_rule_is_a_tendency_the_two_counterexamples_in_the_docs():
    """docs/estimators.md: a front member below the group mean, a dominated answer above it."""
    from vpo.core import compute_advantages

    front = np.array([[0.5, 0.25], [0.75, 0.0], [0.0, 0.5]])  # no answer dominates another
    a = np.asarray(compute_advantages("pareto_niche", front[:, None, :], group_size=3, seed=0).advantages)
    np.testing.assert_allclose(a, [-1.155, 0.577, 0.577], atol=1e-3)
    group = np.array([[0.5, 0.5], [1.0, 0.25], [0.75, 0.5], [1.0, 1.0], [0.0, 0.25]])  # (1, 0.25) < (1, 1)
    a = np.asarray(compute_advantages("pareto_niche", group[:, None, :], group_size=5, seed=0).advantages)
    assert a[1] == pytest.approx(0.070, abs=1e-3) and a[3] > a[1]
