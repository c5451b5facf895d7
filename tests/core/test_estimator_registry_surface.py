"""The public extension surface for estimators is the set objective; register_estimator (whose
functions take vpo's internal batch type) is not exported."""

from __future__ import annotations

import torch

import vpo.core
from vpo.core import EstimatorConfig, compute_advantages, register_set_objective, unregister_set_objective


def test_register_estimator_is_not_public_and_set_objectives_are():
    assert "register_estimator" not in vpo.core.__all__
    assert not hasattr(vpo.core, "register_estimator")
    assert "register_set_objective" in vpo.core.__all__


def test_a_set_objective_is_a_complete_estimator_through_public_names_only():
    def best_first(rewards, valid, weights, group_index, target_weights):
        return rewards[:, 0, :] @ target_weights  # the first answer's w*-score

    register_set_objective("surface_first", best_first, normalization="population")
    try:
        rewards = torch.tensor([[[1.0, 0.0], [0.0, 0.0]], [[0.0, 1.0], [1.0, 1.0]]], dtype=torch.float64)
        valid = torch.ones(2, 2, dtype=torch.bool)
        res = compute_advantages(
            "surface_first", rewards, valid, group_size=2, target_weights=[0.75, 0.25], config=EstimatorConfig()
        )
        assert res.scores.tolist() == [0.75, 0.25]
        assert torch.allclose(res.advantages, torch.tensor([1.0, -1.0], dtype=torch.float64))
    finally:
        unregister_set_objective("surface_first")
