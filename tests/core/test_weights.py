"""Simplex samplers (vpo.core.weights): distribution, QMC structure, reproducibility, validation.

Distributional checks use fixed seeds; tolerances are stated next to each assertion (k standard
errors, or a KS p-value floor). All draws are float64.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from vpo.core import (
    EstimatorConfig,
    SimplexSampler,
    check_simplex,
    compute_advantages,
    dirichlet,
    fixed_weights,
    set_score,
    spacings_to_simplex,
)
from vpo.core.weights import SamplerSpec

# one torch thread: set for the whole suite in tests/conftest.py


def dir_moments(alpha: float, d: int) -> tuple[float, float, float]:
    """Mean, variance and covariance of one coordinate of Dir(alpha * 1_d)."""
    a0 = alpha * d
    return 1.0 / d, alpha * (a0 - alpha) / (a0**2 * (a0 + 1)), -(alpha**2) / (a0**2 * (a0 + 1))


def assert_on_simplex(w: torch.Tensor, atol: float = 1e-12) -> None:
    assert torch.isfinite(w).all()
    assert (w >= 0).all()
    assert torch.allclose(w.sum(-1), torch.ones_like(w[..., 0]), atol=atol, rtol=0)


# ---------------------------------------------------------------------------------------------
# iid Dirichlet
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("d", [3, 5])
def test_dirichlet_mean_variance_and_marginal(alpha, d):
    w = SimplexSampler(num_weightings=500, weight_alpha=alpha, seed=11).sample(num_groups=40, d=d)
    assert w.shape == (40, 500, d) and w.dtype == torch.float64
    assert_on_simplex(w)
    x = w.reshape(-1, d).numpy()
    n = x.shape[0]  # 20_000 draws
    mean, var, cov = dir_moments(alpha, d)
    # mean: within 5 standard errors sqrt(var / n)
    assert np.all(np.abs(x.mean(0) - mean) < 5 * math.sqrt(var / n))
    # variance: SE of the sample variance is sqrt((mu4 - var^2) / n), mu4 from the sample itself
    mu4 = ((x - x.mean(0)) ** 4).mean(0)
    assert np.all(np.abs(x.var(0) - var) < 5 * np.sqrt((mu4 - var**2) / n))
    # covariance of two coordinates (negative for a Dirichlet), 5 SE with SE ~ sqrt(var^2 / n) * 2
    c = np.cov(x[:, 0], x[:, 1])[0, 1]
    assert abs(c - cov) < 10 * var / math.sqrt(n)
    # each coordinate is Beta(alpha, (d-1) alpha): KS test, p-value floor 1e-3 at a fixed seed
    for j in range(d):
        assert stats.kstest(x[:, j], stats.beta(alpha, (d - 1) * alpha).cdf).pvalue > 1e-3


def test_dirichlet_tiny_alpha_stays_on_simplex():
    # alpha = 1e-3 makes all-zero Gamma rows possible in float64: the fallback must keep rows valid
    w = dirichlet(20, 200, 4, 1e-3, torch.Generator().manual_seed(0))
    assert_on_simplex(w, atol=1e-9)
    # near-vertex draws: most rows put almost all mass on one objective
    assert (w.max(-1).values > 0.99).double().mean() > 0.9


def test_d1_is_the_only_point_and_consumes_no_randomness():
    s = SimplexSampler(num_weightings=7, seed=3)
    before = s.generator.get_state().clone()
    w = s.sample(num_groups=4, d=1)
    assert w.shape == (4, 7, 1) and torch.equal(w, torch.ones(4, 7, 1, dtype=torch.float64))
    assert torch.equal(s.generator.get_state(), before)


def test_num_weightings_override_and_spec():
    s = SimplexSampler.from_spec(SamplerSpec(num_weightings=5, weight_sampler="sobol"), seed=2)
    assert s.sample(3, 4).shape == (3, 5, 4)
    assert s.sample(3, 4, num_weightings=1).shape == (3, 1, 4)
    assert s.sample(0, 4).shape == (0, 5, 4)


# ---------------------------------------------------------------------------------------------
# Sobol
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [2, 4, 16])
def test_sobol_rows_on_simplex_and_marginally_dir1(d):
    w = SimplexSampler(num_weightings=100, weight_sampler="sobol", seed=5).sample(num_groups=2000, d=d)
    assert_on_simplex(w)
    beta = stats.beta(1, d - 1).cdf
    # Marginal uniformity: over the random shift, *each* point of the net is exactly Dir(1), so
    # a fixed point index across 2000 groups (independent shifts) is a Beta(1, d-1) sample.
    # (The points of one group share a shift, so the 8 KS tests below are dependent.)
    for point in (0, 1, 37, 99):
        for j in (0, d - 1):
            assert stats.kstest(w[:, point, j].numpy(), beta).pvalue > 1e-3
    # pooled over all points, the first coordinate has the Dir(1) mean and variance (5 SE)
    x = w[..., 0].reshape(-1).numpy()
    mean, var, _ = dir_moments(1.0, d)
    assert abs(x.mean() - mean) < 5 * math.sqrt(var / 2000)  # SE of group means <= iid SE
    assert abs(x.var() - var) < 0.05 * var


@pytest.mark.parametrize("d", [4, 16])
def test_sobol_point_sets_are_more_balanced_than_iid(d):
    """The reason to use Sobol: the K-point average of a smooth function varies less than iid's.

    f(w) = w_0^2 (E = 2 / (d (d+1)) under Dir(1)); compare the spread of its K = 64 average over
    400 groups. Threshold: Sobol variance < 0.5x iid's (measured ~0.01-0.2x)."""
    k, groups = 64, 400
    target = 2.0 / (d * (d + 1))
    spreads = {}
    for kind in ("iid", "sobol"):
        w = SimplexSampler(num_weightings=k, weight_sampler=kind, seed=9).sample(groups, d)
        est = (w[..., 0] ** 2).mean(-1)
        spreads[kind] = float(((est - target) ** 2).mean())
    assert spreads["sobol"] < 0.5 * spreads["iid"]


@pytest.mark.parametrize("d", [3, 8])
def test_sobol_set_score_is_unbiased(d):
    """Mean of many K = 16 Sobol set-score estimates equals a K = 200k iid estimate (5 SE)."""
    g = torch.Generator().manual_seed(1)
    rewards = torch.rand(6, 3, d, generator=g, dtype=torch.float64)
    exact = set_score(rewards, weights=SimplexSampler(200_000, seed=77).sample(1, d)[0])
    w = SimplexSampler(num_weightings=16, weight_sampler="sobol", seed=4).sample(num_groups=2000, d=d)
    groups = w.shape[0]
    # one call: row (i, n) pairs rollout n with group i's weightings
    est = set_score(rewards.repeat(groups, 1, 1), weights=w.repeat_interleave(6, dim=0)).view(groups, 6)
    se = est.std(0) / math.sqrt(est.shape[0])
    ref_se = 1.0 / math.sqrt(200_000)  # the reference's own MC error is below this
    assert ((est.mean(0) - exact).abs() < 5 * se + 5 * ref_se).all()


def test_sobol_requires_alpha_one():
    with pytest.raises(ValueError, match="sobol.*alpha"):
        SimplexSampler(weight_sampler="sobol", weight_alpha=0.5)


# ---------------------------------------------------------------------------------------------
# reproducibility and group structure
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["iid", "sobol"])
def test_same_seed_same_stream_and_groups_differ(kind):
    a = SimplexSampler(num_weightings=10, weight_sampler=kind, seed=123)
    b = SimplexSampler(num_weightings=10, weight_sampler=kind, seed=123)
    c = SimplexSampler(num_weightings=10, weight_sampler=kind, seed=124)
    wa, wb, wc = a.sample(6, 4), b.sample(6, 4), c.sample(6, 4)
    assert torch.equal(wa, wb)
    assert not torch.allclose(wa, wc)
    for i in range(6):  # every group has its own weightings
        for j in range(i + 1, 6):
            assert not torch.allclose(wa[i], wa[j])
    # the stream moves on: the next step's draws differ from this step's
    assert not torch.allclose(a.sample(6, 4), wa)


@pytest.mark.parametrize("kind, alpha", [("iid", 1.0), ("iid", 0.7), ("sobol", 1.0)])
def test_state_dict_resumes_exact_stream(kind, alpha):
    s = SimplexSampler(num_weightings=8, weight_alpha=alpha, weight_sampler=kind, seed=42)
    s.sample(5, 4)
    state = s.state_dict()
    expected = [s.sample(5, 4), s.sample(3, 6), s.sample(2, 4, num_weightings=1)]
    resumed = SimplexSampler(num_weightings=8, weight_alpha=alpha, weight_sampler=kind, seed=999)  # seed overwritten
    resumed.load_state_dict(state)
    got = [resumed.sample(5, 4), resumed.sample(3, 6), resumed.sample(2, 4, num_weightings=1)]
    for e, g in zip(expected, got):
        assert torch.equal(e, g)
    # the saved state is a snapshot, not a view of the live generator: loading it again after the
    # original sampler moved on still replays the same draws
    s2 = SimplexSampler(num_weightings=8, weight_alpha=alpha, weight_sampler=kind, seed=0)
    s2.load_state_dict(state)
    assert torch.equal(s2.sample(5, 4), expected[0])


def test_state_dict_refuses_other_configuration():
    state = SimplexSampler(num_weightings=8, weight_sampler="iid", seed=1).state_dict()
    with pytest.raises(ValueError, match="num_weightings"):
        SimplexSampler(num_weightings=9, weight_sampler="iid").load_state_dict(state)
    with pytest.raises(ValueError, match="weight_sampler"):
        SimplexSampler(num_weightings=8, weight_sampler="sobol").load_state_dict(state)


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_weightings=0), r"num_weightings \(K\) must be an integer >= 1"),
        (dict(num_weightings=2.5), r"num_weightings \(K\)"),
        (dict(num_weightings=True), r"num_weightings \(K\)"),
        (dict(weight_alpha=0.0), "weight_alpha must be a finite number > 0"),
        (dict(weight_alpha=-1.0), "weight_alpha must be a finite number > 0"),
        (dict(weight_alpha=float("nan")), "weight_alpha must be a finite number > 0"),
        (dict(weight_alpha=float("inf")), "weight_alpha must be a finite number > 0"),
        (dict(weight_sampler="halton"), "unknown weight_sampler 'halton'"),
    ],
)
def test_bad_sampler_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SimplexSampler(**kwargs)


def test_bad_sample_arguments():
    s = SimplexSampler(num_weightings=4)
    with pytest.raises(ValueError, match="num_weightings must be >= 1"):
        s.sample(2, 3, num_weightings=0)
    with pytest.raises(ValueError, match="dimension d must be >= 1"):
        s.sample(2, 0)
    with pytest.raises(ValueError, match="num_groups must be >= 0"):
        s.sample(-1, 3)


def test_check_simplex_messages():
    check_simplex(torch.tensor([[0.25, 0.75], [1.0, 0.0]], dtype=torch.float64))
    with pytest.raises(ValueError, match="non-negative"):
        check_simplex(torch.tensor([1.5, -0.5]))
    with pytest.raises(ValueError, match="sum to 1"):
        check_simplex(torch.tensor([0.5, 0.6]))
    with pytest.raises(ValueError, match="NaN or inf"):
        check_simplex(torch.tensor([float("nan"), 1.0]))


def test_spacings_map_of_uniforms_is_dir1():
    u = torch.rand(20_000, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    w = spacings_to_simplex(u)
    assert w.shape == (20_000, 4)
    assert_on_simplex(w)
    for j in range(4):
        assert stats.kstest(w[:, j].numpy(), stats.beta(1, 3).cdf).pvalue > 1e-3


@settings(max_examples=50, deadline=None)
@given(
    groups=st.integers(0, 5),
    k=st.integers(1, 40),
    d=st.integers(1, 20),
    kind=st.sampled_from(["iid", "sobol"]),
    alpha=st.sampled_from([0.05, 0.5, 1.0, 3.0]),
    seed=st.integers(0, 2**31 - 1),
)
def test_any_shape_gives_finite_simplex_rows(groups, k, d, kind, alpha, seed):
    if kind == "sobol":
        alpha = 1.0
    w = SimplexSampler(num_weightings=k, weight_alpha=alpha, weight_sampler=kind, seed=seed).sample(groups, d)
    assert w.shape == (groups, k, d)
    assert_on_simplex(w, atol=1e-9)


# ---------------------------------------------------------------------------------------------
# one vocabulary: deprecated names of the weighting settings, the shared fixed weight set
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, old",
    [
        (SimplexSampler, "alpha"),
        (SimplexSampler, "kind"),
        (SamplerSpec, "alpha"),
        (SamplerSpec, "kind"),
        (EstimatorConfig, "alpha"),
        (EstimatorConfig, "sampler"),
        (EstimatorConfig, "strict"),
    ],
)
def test_weighting_settings_have_one_name(make, old):
    """The pre-0.1 names of the weighting settings are not accepted (CHANGELOG.md lists the renames)."""
    with pytest.raises(TypeError, match=old):
        make(**{old: 1.0})


@pytest.mark.filterwarnings("error::DeprecationWarning")
def test_new_names_do_not_warn():
    SimplexSampler(num_weightings=3, weight_alpha=1.0, weight_sampler="sobol", seed=1).sample(2, 3)
    SamplerSpec(num_weightings=3, weight_alpha=0.5, weight_sampler="iid")
    EstimatorConfig(num_weightings=3, weight_alpha=1.0, weight_sampler="sobol", strict_rewards=True, invalid_score=-1.0)


def test_sampler_state_resumes_and_refuses_another_configuration():
    s = SimplexSampler(num_weightings=6, weight_alpha=0.7, seed=3)
    s.sample(2, 4)
    state = s.state_dict()
    resumed = SimplexSampler(num_weightings=6, weight_alpha=0.7, seed=0)
    resumed.load_state_dict(state)
    assert torch.equal(resumed.sample(2, 4), s.sample(2, 4))
    with pytest.raises(ValueError, match="weight_alpha"):
        SimplexSampler(num_weightings=6, weight_alpha=1.0).load_state_dict(state)


def test_fixed_weights_are_the_eval_draw_and_stable():
    """The shared fixed set is eval's historical one: Dir(1) from a generator seeded 1234, K = 64."""
    for d in (1, 2, 3, 7):
        w = fixed_weights(d)
        assert w.shape == (64, d) and w.dtype == torch.float64
        assert_on_simplex(w)
        expected = (
            torch.ones(64, 1, dtype=torch.float64)
            if d == 1
            else dirichlet(1, 64, d, 1.0, torch.Generator().manual_seed(1234))[0]
        )
        assert torch.equal(w, expected)
    # a fresh tensor each call: mutating one does not change the next
    w = fixed_weights(3)
    w.zero_()
    assert torch.equal(fixed_weights(3), dirichlet(1, 64, 3, 1.0, torch.Generator().manual_seed(1234))[0])
    assert not torch.equal(fixed_weights(3, 64, 0.5), fixed_weights(3))
    assert not torch.equal(fixed_weights(3, weight_seed=1), fixed_weights(3))
    assert fixed_weights(np.int64(4), np.int64(8)).shape == (8, 4)
    with pytest.raises(ValueError, match="dimension d"):
        fixed_weights(0)
    with pytest.raises(ValueError, match="num_weightings"):
        fixed_weights(3, 0)


def test_training_diagnostics_score_pools_with_the_fixed_weights():
    """``pool_set_score`` is the mean over groups of E_w[max over the group's answers] on fixed_weights."""
    gen = torch.Generator().manual_seed(0)
    r = torch.rand(12, 3, 4, generator=gen, dtype=torch.float64)
    valid = torch.rand(12, 3, generator=gen) > 0.3
    valid[5] = False  # a rollout without answers
    res = compute_advantages(
        "vpo", r, valid, group_size=4, config=EstimatorConfig(num_weightings=8, compute_dtype="float64")
    )
    w = fixed_weights(4)
    s = torch.where(valid.unsqueeze(-1), r @ w.T, torch.tensor(float("-inf"), dtype=torch.float64))  # [N, m, K]
    pool = s.view(3, 4 * 3, 64).amax(1).mean(-1)
    assert res.diagnostics["pool_set_score"] == pytest.approx(float(pool.mean()), abs=1e-12)
