"""VPO@k, the deployment objective E_w[best of k rollouts under w]: its unbiased value against brute
force over every k-subset, its estimator against the definition (Max@k's transform per weighting,
averaged) and against Max@k itself when the only weighting is w*."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from vpo.core import EstimatorConfig, SimplexSampler, compute_advantages
from vpo.core.estimator_base import _prepare
from vpo.core.estimators import max_at_k_transform, vpo_at_k_value


class FixedSampler:
    """Hands out the same weightings to every group (to compare with a fixed-w* estimator)."""

    def __init__(self, weights):
        self.w = torch.as_tensor(np.asarray(weights), dtype=torch.float64)  # [K, d]

    def sample(self, num_groups, d, num_weightings=None, dtype=torch.float64):
        return self.w.to(dtype).expand(num_groups, *self.w.shape).clone()


@pytest.mark.parametrize("n, k", [(4, 1), (5, 2), (6, 3), (7, 7)])
def test_value_is_the_mean_max_over_every_k_subset(n, k):
    rng = np.random.default_rng(n * 10 + k)
    scores = rng.integers(0, 4, size=(3, n)).astype(float) / 3  # ties on purpose
    brute = [np.mean([max(row[list(c)]) for c in itertools.combinations(range(n), k)]) for row in scores]
    np.testing.assert_allclose(vpo_at_k_value(scores, k).numpy(), brute, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="k must be"):
        vpo_at_k_value(scores, n + 1)


TOL_MAX_AT_K = 1e-9  # docs/estimators.md: a share's float64 residue / eps where a group's shares are all equal


@pytest.mark.parametrize("seed", [0, 258, 1, 2, 3])  # 258: k = G, equal shares, 1.1e-10 apart (1e-12 fails)
def test_one_weighting_equal_to_w_star_is_within_1e_9_of_max_at_k(seed):
    rng = np.random.default_rng(seed)
    if seed == 0:  # the original case
        G, P, d, k = 8, 3, 3, 3
        r, valid = rng.random((24, 1, 3)), rng.random((24, 1)) > 0.2
        target = np.array([0.5, 0.3, 0.2])
    else:  # random shapes, as the 3000-batch check that found 1.1e-10 at worst drew them
        G, P, d = int(rng.integers(2, 10)), int(rng.integers(1, 5)), int(rng.integers(1, 6))
        r = rng.random((G * P, 1, d))
        if seed % 3 == 0:
            r = np.round(r * 3) / 3
        valid = rng.random((G * P, 1)) > 0.2
        target = rng.dirichlet(np.ones(d))
        k = int(rng.integers(1, G + 1))
    cfg = EstimatorConfig(max_at_k=k, num_weightings=1, compute_dtype="float64")
    ours = compute_advantages(
        "vpo_at_k", r, valid, group_size=G, target_weights=target, config=cfg, sampler=FixedSampler([target])
    )
    ref = compute_advantages("max_at_k", r, valid, group_size=G, target_weights=target, config=cfg)
    np.testing.assert_allclose(ours.advantages.numpy(), ref.advantages.numpy(), rtol=0, atol=TOL_MAX_AT_K)


@pytest.mark.parametrize("layout", ["contiguous", "ids"])
def test_estimator_is_the_per_weighting_max_at_k_share_averaged(layout):
    rng = np.random.default_rng(3)
    N, m, d, K = 18, 3, 4, 5
    r, valid = rng.random((N, m, d)), rng.random((N, m)) > 0.3
    valid[4] = False  # a rollout without an answer
    kw = dict(group_size=6) if layout == "contiguous" else dict(group_ids=[f"g{(i * 5) % 3}" for i in range(N)])
    cfg = EstimatorConfig(max_at_k=2, num_weightings=K, compute_dtype="float64", invalid_score=-0.5)
    got = compute_advantages("vpo_at_k", r, valid, config=cfg, seed=11, **kw)
    # the definition, one weighting at a time, with the weightings the estimator drew
    b = _prepare(r, valid, kw.get("group_size"), kw.get("group_ids"), None, None, False, None)
    w = SimplexSampler(K, seed=11).sample(b.num_groups, d)  # [P, K, d]
    per_w = []
    for j in range(K):
        s = torch.full((N,), -0.5, dtype=torch.float64)
        for n in range(N):
            vals = [float(w[b.index[n], j] @ torch.as_tensor(r[n, i])) for i in range(m) if valid[n, i]]
            if vals:
                s[n] = max(vals)
        per_w.append(max_at_k_transform(s, b, 2))
    eff = torch.stack(per_w, 1).mean(1)
    adv = torch.empty(N, dtype=torch.float64)
    for g in range(b.num_groups):
        rows = b.index == g
        x = eff[rows]
        adv[rows] = (x - x.mean()) / (x.std(unbiased=True) + cfg.eps)
    np.testing.assert_allclose(got.advantages.numpy(), adv.numpy(), atol=1e-9)
    assert float(got.scores[4]) == -0.5


def test_a_group_that_every_weighting_ranks_flat_gets_zero():
    r = np.tile(np.array([[[0.2, 0.4, 0.6]]]), (8, 2, 1))
    got = compute_advantages("vpo_at_k", r, group_size=4, config=EstimatorConfig(num_weightings=7))
    assert torch.equal(got.advantages, torch.zeros(8, dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_transform_of_k_columns_is_each_column_s_own_bit_for_bit(dtype):
    """VPO@k transforms its K weightings' set scores in one call; each column must be exactly what
    that column alone gives (groups of uneven sizes in any order, ties, k fixed and default)."""
    rng = np.random.default_rng(5)
    sizes = [3, 8, 5, 2, 6]
    ids = [f"g{g}" for g, c in enumerate(sizes) for _ in range(c)]
    ids = [ids[i] for i in rng.permutation(len(ids))]
    b = _prepare(rng.random((len(ids), 1, 3)), None, None, ids, None, None, False, None)
    scores = torch.as_tensor(np.round(rng.random((len(ids), 9)), 1), dtype=dtype)  # rounded: ties
    for k in (None, 2):
        together = max_at_k_transform(scores, b, k)
        assert together.shape == scores.shape
        for j in range(scores.shape[1]):
            assert torch.equal(together[:, j], max_at_k_transform(scores[:, j].contiguous(), b, k))
