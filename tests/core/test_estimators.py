"""VPO and every baseline (vpo.core.estimators) against slow, obviously-correct references.

The references below are plain Python loops over groups, rollouts, answers and weightings, written
from docs/method.md §3-4 (and, for GDPO, from TRL 1.16's ``normalize_then_sum`` code path); they share
no code with the vectorised estimators. VPO's reference is the library's own readable loop,
``vpo.core.reference.vpo_advantages_reference`` (the loop docs/method.md §3 shows; checked here
against hand-computed values first). VPO's weights are reconstructed by calling a
``SimplexSampler`` with the same seed (one ``sample(P, d)`` call; group p = the p-th group to
appear in the batch). Random inputs use fixed seeds; tolerances are stated at each assertion.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vpo.core import (
    EstimatorConfig,
    SimplexSampler,
    compute_advantages,
    group_index_from,
    list_estimators,
    set_score,
)
from vpo.core.reference import vpo_advantages_reference

EXACT = dict(rtol=0, atol=1e-9)  # float64 vectorised vs python loops: rounding only
FLOAT32 = dict(rtol=0, atol=1e-5)  # VPO's default float32 set score vs the float64 loops

# one torch thread: set for the whole suite in tests/conftest.py

# ---------------------------------------------------------------------------------------------
# slow references (python loops, no torch)
# ---------------------------------------------------------------------------------------------


def groups_in_order(ids) -> list[list[int]]:
    """Rows of each group, groups listed in order of first appearance."""
    order: dict = {}
    for n, g in enumerate(ids):
        order.setdefault(g, []).append(n)
    return list(order.values())


def is_valid(rewards, valid, n, i) -> bool:
    return bool(valid[n][i]) and all(math.isfinite(float(x)) for x in rewards[n][i])


def dot(w, r) -> float:
    return sum(float(a) * float(b) for a, b in zip(w, r))


def znorm(values, eps, bessel, zero_flat=False) -> list[float]:
    g = len(values)
    mean = sum(values) / g
    var = sum((x - mean) ** 2 for x in values) / (g - 1 if bessel else g)
    std = math.sqrt(var)
    if zero_flat and std < eps:
        return [0.0] * g
    return [(x - mean) / (std + eps) for x in values]


def single_scalar(rewards, valid, n, w, invalid_score) -> float:
    return dot(w, rewards[n][0]) if is_valid(rewards, valid, n, 0) else invalid_score


def ref_vpo(rewards, valid, ids, weights, invalid_score=0.0, eps=1e-6):
    """docs/method.md §3: per group, K weightings shared by its rollouts; raw = mean_k max_i w_k.r_i;
    population-std z-score; 0 for a flat group. ``weights[p]`` is [K, d] for the p-th group.
    The oracle is the core's readable per-group loop (tested by hand below)."""
    return vpo_advantages_reference(rewards, ids, weights, valid, invalid_score=invalid_score, eps=eps)


def ref_grpo_like(scores, ids, eps=1e-6):
    adv = [0.0] * len(scores)
    for rows in groups_in_order(ids):
        for n, a in zip(rows, znorm([scores[n] for n in rows], eps, bessel=True)):
            adv[n] = a
    return adv


def ref_grpo(rewards, valid, ids, target, invalid_score=0.0, eps=1e-6):
    s = [single_scalar(rewards, valid, n, target, invalid_score) for n in range(len(rewards))]
    return s, ref_grpo_like(s, ids, eps)


def ref_multi_rlvr(rewards, valid, ids, target, invalid_score=0.0, eps=1e-6):
    s = []
    for n in range(len(rewards)):
        answers = [i for i in range(len(rewards[n])) if is_valid(rewards, valid, n, i)]
        s.append(sum(dot(target, rewards[n][i]) for i in answers) if answers else invalid_score)
    return s, ref_grpo_like(s, ids, eps)


def ref_weighted(rewards, valid, ids, per_row_w, invalid_score=0.0, eps=1e-6):
    """random_weight / goal_conditioned: w_n^T r_n, GRPO z-score."""
    s = [single_scalar(rewards, valid, n, per_row_w[n], invalid_score) for n in range(len(rewards))]
    return s, ref_grpo_like(s, ids, eps)


def ref_maxrl(rewards, valid, ids, target, invalid_score=0.0, eps=1e-6):
    s = [single_scalar(rewards, valid, n, target, invalid_score) for n in range(len(rewards))]
    adv = [0.0] * len(s)
    for rows in groups_in_order(ids):
        mean = sum(s[n] for n in rows) / len(rows)
        for n in rows:
            adv[n] = (s[n] - mean) / (mean + eps)
    return s, adv


def ref_max_at_k_effective(values, k) -> list[float]:
    """Each rollout's effective reward: sum over the k-subsets containing it of the subset max,
    divided by C(n, k). Enumerates every subset."""
    n = len(values)
    eff = [0.0] * n
    for subset in itertools.combinations(range(n), k):
        best = max(values[i] for i in subset)
        for i in subset:
            eff[i] += best
    c = math.comb(n, k)
    return [e / c for e in eff]


def ref_max_at_k(rewards, valid, ids, target, k=None, invalid_score=0.0, eps=1e-6):
    s = [single_scalar(rewards, valid, n, target, invalid_score) for n in range(len(rewards))]
    eff = [0.0] * len(s)
    for rows in groups_in_order(ids):
        kk = max(2, len(rows) // 2) if k is None else k
        for n, e in zip(rows, ref_max_at_k_effective([s[n] for n in rows], kk)):
            eff[n] = e
    return s, ref_grpo_like(eff, ids, eps)


def bessel_std(xs) -> float:
    mean = sum(xs) / len(xs)
    return math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))


def ref_gdpo(rewards, valid, ids, target, invalid_score=0.0, eps=1e-6):
    """TRL 1.16 ``normalize_then_sum`` with ``reward_weights = w*`` and 1e-4 -> eps: per group and
    objective z = (r - mean) / (bessel_std + eps); s = sum_j w_j z_j; A = (s - mean_batch) /
    (bessel_std_batch + eps). A rollout without a valid answer has invalid_score everywhere."""
    n_rows, d = len(rewards), len(rewards[0][0])
    r = [
        [float(x) for x in rewards[n][0]] if is_valid(rewards, valid, n, 0) else [invalid_score] * d
        for n in range(n_rows)
    ]
    s = [0.0] * n_rows
    for rows in groups_in_order(ids):
        for j in range(d):
            col = [r[n][j] for n in rows]
            mean, std = sum(col) / len(col), bessel_std(col)
            for n in rows:
                s[n] += target[j] * (r[n][j] - mean) / (std + eps)
    mean, std = sum(s) / n_rows, bessel_std(s)
    return s, [(x - mean) / (std + eps) for x in s]


# ---------------------------------------------------------------------------------------------
# batches
# ---------------------------------------------------------------------------------------------


def make_batch(seed, sizes, m, d, p_invalid=0.2, low=0.0, high=1.0, quantize=None):
    """Random rewards [N, m, d] in [low, high) (rounded to a 1/quantize grid when given, to create
    ties), a random valid mask (rollouts with no valid answer included), and shuffled,
    non-contiguous int group ids for groups of the given sizes."""
    rng = np.random.default_rng(seed)
    n = sum(sizes)
    r = rng.uniform(low, high, size=(n, m, d))
    if quantize:
        r = np.round(r * quantize) / quantize  # ties on purpose
    valid = rng.random((n, m)) >= p_invalid
    ids = np.repeat(np.arange(len(sizes)) * 7 + 3, sizes)
    rng.shuffle(ids)
    return r, valid, ids.tolist()


def sampler_weights(seed, num_groups, d, k=100, kind="iid", alpha=1.0, dtype=torch.float64):
    w = SimplexSampler(k, alpha, kind, seed=seed).sample(num_groups, d, dtype=dtype)
    return w.to(torch.float64).numpy()


def vpo_result(r, valid, ids, seed=0, **cfg):
    """VPO in float64 (compared with the references to rounding); the float32 default has its
    own test below."""
    cfg.setdefault("compute_dtype", "float64")
    return compute_advantages("vpo", r, valid, group_ids=ids, config=EstimatorConfig(**cfg), seed=seed)


# ---------------------------------------------------------------------------------------------
# each estimator against its reference
# ---------------------------------------------------------------------------------------------


def test_reference_loop_by_hand():
    """The VPO oracle on values worked out by hand: string ids out of order, a NaN answer, a
    rollout with no valid answer (invalid_score -1, still in its group's statistics), a flat group."""
    nan = float("nan")
    rewards = [
        [[1, 0], [0, 1]],  # a: best under (1,0) is 1, under (0,1) is 1 -> 1.0
        [[0.2, 0.4], [nan, 0]],  # b: the NaN answer is invalid -> 0.5*0.2 + 0.5*0.4 = 0.3
        [[0.5, 0.5], [9, 9]],  # a: second slot invalid (never wins the max) -> 0.5
        [[1, 1], [1, 1]],  # b: no valid slot -> invalid_score
        [[1, 1], [0, 0]],  # c: 1 under any weighting
        [[0, 0], [1, 1]],  # c: 1 as well: a flat group
    ]
    valid = [[1, 1], [1, 1], [1, 0], [0, 0], [1, 1], [1, 1]]
    ids = ["a", "b", "a", "b", "c", "c"]
    weights = [[[1, 0], [0, 1]], [[0.5, 0.5]], [[0.3, 0.7]]]  # groups a, b, c (first appearance)
    scores, adv = vpo_advantages_reference(rewards, ids, weights, valid, invalid_score=-1.0, eps=1e-6)
    assert np.allclose(scores, [1.0, 0.3, 0.5, -1.0, 1.0, 1.0], rtol=0, atol=1e-15)
    a, b = 0.25 / (0.25 + 1e-6), 0.65 / (0.65 + 1e-6)  # population stds 0.25 and 0.65
    assert np.allclose(adv, [a, b, -a, -b, 0.0, 0.0], rtol=0, atol=1e-12)
    assert adv[4] == 0.0 and adv[5] == 0.0
    # an int is the contiguous layout: G consecutive rollouts per group
    order = [0, 2, 1, 3]
    r2, v2 = np.asarray(rewards)[order], np.asarray(valid)[order]
    s2, a2 = vpo_advantages_reference(r2, 2, weights[:2], v2, invalid_score=-1.0)
    assert np.allclose(s2, [1.0, 0.5, 0.3, -1.0], rtol=0, atol=1e-15)
    assert np.allclose(a2, [a, -a, b, -b], rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", ["iid", "sobol"])
@pytest.mark.parametrize(
    "seed, sizes, m, d",
    [
        (0, [4, 4, 4], 3, 4),
        (1, [2, 5, 3, 8], 2, 3),
        (2, [6, 3], 4, 1),
        (5, [2, 2, 2, 2, 2, 12], 2, 3),  # so uneven that the estimator skips its padded layout
    ],
)
def test_vpo_matches_per_group_loop(kind, seed, sizes, m, d):
    r, valid, ids = make_batch(seed, sizes, m, d, low=-0.5, high=1.0)
    k = 17
    res = vpo_result(r, valid, ids, seed=seed, num_weightings=k, weight_sampler=kind)
    raw, adv = ref_vpo(r, valid, ids, sampler_weights(seed, len(sizes), d, k, kind))
    torch.testing.assert_close(res.scores, torch.tensor(raw, dtype=torch.float64), **EXACT)
    torch.testing.assert_close(res.advantages, torch.tensor(adv, dtype=torch.float64), **EXACT)
    assert res.advantages.dtype == torch.float64 and res.advantages.shape == (sum(sizes),)


def test_vpo_alpha_and_invalid_score_reach_the_estimate():
    r, valid, ids = make_batch(3, [4, 4], 3, 5, p_invalid=0.5)
    valid[0] = False  # a rollout with no valid answer
    res = vpo_result(r, valid, ids, seed=3, num_weightings=9, weight_alpha=0.3, invalid_score=-1.0)
    raw, adv = ref_vpo(r, valid, ids, sampler_weights(3, 2, 5, 9, alpha=0.3), invalid_score=-1.0)
    assert raw[0] == -1.0
    torch.testing.assert_close(res.scores, torch.tensor(raw, dtype=torch.float64), **EXACT)
    torch.testing.assert_close(res.advantages, torch.tensor(adv, dtype=torch.float64), **EXACT)


def test_caller_sampler_stream_continues_across_steps():
    """A trainer keeps one sampler: step 2 uses the draws after step 1's, per group."""
    r, valid, ids = make_batch(4, [3, 3], 2, 3)
    sampler = SimplexSampler(num_weightings=5, seed=8)
    compute_advantages("vpo", r, valid, group_ids=ids, sampler=sampler)
    second = compute_advantages("vpo", r, valid, group_ids=ids, sampler=sampler)
    replay = SimplexSampler(num_weightings=5, seed=8)
    replay.sample(2, 3, dtype=torch.float32)  # the default compute_dtype draws float32 weights
    raw, adv = ref_vpo(r, valid, ids, replay.sample(2, 3, dtype=torch.float32).double().numpy())
    torch.testing.assert_close(second.advantages, torch.tensor(adv, dtype=torch.float64), **FLOAT32)


@pytest.mark.parametrize("kind", ["iid", "sobol"])
@pytest.mark.parametrize("contiguous", [True, False])
def test_vpo_float32_default_matches_reference(kind, contiguous):
    """The default float32 set score against the float64 loop fed the same (float32) weights.
    Tolerance: set scores in [-0.5, 1] carry float32 rounding (~1e-7 relative per dot product);
    advantages divide by group stds >= 0.05 here, so 1e-5 leaves an order of magnitude of room."""
    sizes = [6] * 5
    r, valid, ids = make_batch(11, sizes, 3, 5, low=-0.5, high=1.0)
    if contiguous:  # the same groups in blocks of 6 rows: the view path instead of the scatter
        first = {g: i for i, g in reversed(list(enumerate(ids)))}
        order = sorted(range(len(ids)), key=lambda n: (first[ids[n]], n))
        r, valid, ids = r[order], valid[order], [ids[n] for n in order]
    cfg = EstimatorConfig(num_weightings=64, weight_sampler=kind)
    assert cfg.compute_dtype == "float32"
    layout = dict(group_size=6) if contiguous else dict(group_ids=ids)
    res = compute_advantages("vpo", r, valid, config=cfg, seed=2, **layout)
    raw, adv = ref_vpo(r, valid, ids, sampler_weights(2, len(sizes), 5, 64, kind, dtype=torch.float32))
    assert min(np.std([raw[n] for n in rows]) for rows in groups_in_order(ids)) > 0.05
    torch.testing.assert_close(res.scores, torch.tensor(raw, dtype=torch.float64), **FLOAT32)
    torch.testing.assert_close(res.advantages, torch.tensor(adv, dtype=torch.float64), **FLOAT32)


BASELINES = {
    "grpo": ref_grpo,
    "multi_rlvr": ref_multi_rlvr,
    "maxrl": ref_maxrl,
    "max_at_k": ref_max_at_k,
    "gdpo": ref_gdpo,
}


@pytest.mark.parametrize("name", sorted(BASELINES))
@pytest.mark.parametrize("seed, sizes", [(10, [8, 8, 8]), (11, [2, 6, 5, 3]), (12, [7, 4])])
def test_deterministic_baselines_match_loops(name, seed, sizes):
    m = 3 if name == "multi_rlvr" else 1
    d = 4
    r, valid, ids = make_batch(seed, sizes, m, d, p_invalid=0.15, quantize=4)  # ties included
    target = np.random.default_rng(seed).dirichlet(np.ones(d))
    res = compute_advantages(name, r, valid, group_ids=ids, target_weights=target)
    s, adv = BASELINES[name](r, valid, ids, target.tolist())
    torch.testing.assert_close(res.scores, torch.tensor(s, dtype=torch.float64), **EXACT)
    torch.testing.assert_close(res.advantages, torch.tensor(adv, dtype=torch.float64), **EXACT)


def test_random_weight_matches_loop_with_sampler_draws():
    r, valid, ids = make_batch(20, [4, 3, 5], 1, 4)
    res = compute_advantages("random_weight", r, valid, group_ids=ids, seed=5)
    w = sampler_weights(5, 3, 4, k=1)[:, 0, :]  # one draw per group, first appearance order
    index = group_index_from(len(ids), group_ids=ids)[0].numpy()
    s, adv = ref_weighted(r, valid, ids, [w[p] for p in index])
    torch.testing.assert_close(res.advantages, torch.tensor(adv, dtype=torch.float64), **EXACT)
    # the weight is shared by the group: two rollouts with equal rewards in one group score equally
    r2 = r.copy()
    rows = groups_in_order(ids)[0]
    r2[rows[1]] = r2[rows[0]]
    valid2 = valid.copy()
    valid2[rows[0]] = valid2[rows[1]] = True
    res2 = compute_advantages("random_weight", r2, valid2, group_ids=ids, seed=5)
    assert res2.scores[rows[0]] == res2.scores[rows[1]]


@pytest.mark.parametrize("name", ["goal_conditioned", "random_weight"])
def test_rollout_weights_baselines_match_loop(name):
    r, valid, ids = make_batch(21, [4, 4, 4], 1, 3)
    w = np.random.default_rng(0).dirichlet(np.ones(3), size=len(ids))
    res = compute_advantages(name, r, valid, group_ids=ids, rollout_weights=w)
    s, adv = ref_weighted(r, valid, ids, w.tolist())
    torch.testing.assert_close(res.scores, torch.tensor(s, dtype=torch.float64), **EXACT)
    torch.testing.assert_close(res.advantages, torch.tensor(adv, dtype=torch.float64), **EXACT)


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_max_at_k_effective_reward_by_enumeration_for_every_k(n):
    rng = np.random.default_rng(n)
    vals = np.round(rng.uniform(-1, 1, size=(2, n)) * 3) / 3  # ties on purpose
    r = vals.reshape(2 * n, 1, 1)
    ids = [0] * n + [1] * n
    for k in range(1, n + 1):
        res = compute_advantages("max_at_k", r, group_ids=ids, config=EstimatorConfig(max_at_k=k))
        s, adv = ref_max_at_k(r, np.ones((2 * n, 1), bool), ids, [1.0], k=k)
        torch.testing.assert_close(res.advantages, torch.tensor(adv, dtype=torch.float64), **EXACT)
        # the effective rewards of a group sum to k * E[max of a random k-subset] (docs/method.md §6)
        for g in range(2):
            v = sorted(vals[g])
            e_max = sum(math.comb(i - 1, k - 1) * v[i - 1] for i in range(k, n + 1)) / math.comb(n, k)
            assert abs(sum(ref_max_at_k_effective(list(vals[g]), k)) - k * e_max) < 1e-12


def test_max_at_k_k_larger_than_group_is_an_error():
    with pytest.raises(ValueError, match="exceeds the group size"):
        compute_advantages("max_at_k", np.zeros((6, 1, 2)), group_size=3, config=EstimatorConfig(max_at_k=4))


def test_gdpo_matches_trl_convention_exactly_with_its_eps():
    """With eps = 1e-4 (TRL's) and reward_weights = w*, ours is TRL's normalize_then_sum."""
    r, valid, ids = make_batch(30, [8, 8, 8, 8], 1, 3, p_invalid=0.0)
    target = [0.5, 0.3, 0.2]
    res = compute_advantages("gdpo", r, valid, group_ids=ids, target_weights=target, config=EstimatorConfig(eps=1e-4))
    s, adv = ref_gdpo(r, valid, ids, target, eps=1e-4)
    torch.testing.assert_close(res.advantages, torch.tensor(adv, dtype=torch.float64), **EXACT)
    # TRL's default reward_weights are all ones (a sum, not a mean): the batch whitening removes the
    # factor d, so ours with uniform w* differs from it only through eps (here < 1e-4 relative)
    res_u = compute_advantages("gdpo", r, valid, group_ids=ids)
    _, adv_ones = ref_gdpo(r, valid, ids, [1.0, 1.0, 1.0], eps=1e-6)
    torch.testing.assert_close(res_u.advantages, torch.tensor(adv_ones, dtype=torch.float64), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_gdpo_reference_uses_trl_nanstd_convention():
    """TRL's own ``nanstd`` (the std of normalize_then_sum) is the Bessel std our reference uses."""
    from trl.trainer.utils import nanstd

    x = torch.tensor([0.1, 0.7, 0.4, 0.9], dtype=torch.float64)
    # 1e-7: TRL computes its count / (count - 1) correction in float32
    assert abs(float(nanstd(x)) - bessel_std(x.tolist())) < 1e-7
    assert abs(float(nanstd(x)) - float(x.std(unbiased=False))) > 0.01  # not the population std


# ---------------------------------------------------------------------------------------------
# invariants of docs/method.md §3
# ---------------------------------------------------------------------------------------------


def test_single_answer_vpo_is_grpo_on_the_uniform_mean():
    """m = 1, alpha = 1: raw_g = wbar^T r_g with wbar the mean of the K draws (exact identity), and
    wbar -> 1/d, so raw -> mean(r) and A_vpo -> A_grpo * sqrt(G / (G-1)) (population vs Bessel std).

    Tolerances: with K = 20_000 and d = 3, each coordinate of wbar - 1/d has sd
    sqrt(Var_Dir(1)/K) = sqrt((2/36)/20000) = 1.7e-3; |(wbar - u)^T r| <= ||wbar - u|| ||r|| stays
    below 0.02 at 5 sd, and the advantages (group std >= 0.25 by construction) move by
    < 0.02 / 0.25 * (1 + max|A|) < 0.25 at 5 sd; measured errors are ~10x smaller."""
    G, P, d, K = 8, 6, 3, 20_000
    rng = np.random.default_rng(0)
    r = rng.integers(0, 2, size=(P * G, 1, d)).astype(float)
    r[::G] = [[1.0, 1.0, 1.0]]  # each group spans 0..1 on the mean: std well above 0
    r[1::G] = [[0.0, 0.0, 0.0]]
    vpo = compute_advantages(
        "vpo", r, group_size=G, config=EstimatorConfig(num_weightings=K, compute_dtype="float64"), seed=1
    )
    grpo = compute_advantages("grpo", r, group_size=G)
    w = SimplexSampler(K, seed=1).sample(P, d).numpy()
    wbar = w.mean(1)  # [P, d]
    exact = np.einsum("nd,nd->n", r[:, 0], np.repeat(wbar, G, axis=0))
    np.testing.assert_allclose(vpo.scores.numpy(), exact, rtol=0, atol=1e-12)
    assert np.abs(wbar - 1 / d).max() < 5 * math.sqrt((2 / 36) / K)
    assert (vpo.scores - grpo.scores).abs().max() < 0.02
    scaled = grpo.advantages * math.sqrt(G / (G - 1))
    assert (vpo.advantages - scaled).abs().max() < 0.25
    assert np.corrcoef(vpo.advantages.numpy(), grpo.advantages.numpy())[0, 1] > 0.999
    # with wbar plugged in exactly, VPO is GRPO with the population std (to rounding)
    adv_exact = ref_grpo_like(exact.tolist(), [n // G for n in range(P * G)])
    np.testing.assert_allclose(
        vpo.advantages.numpy(), np.array(adv_exact) * math.sqrt(G / (G - 1)), rtol=1e-5, atol=1e-5
    )


def test_d1_set_score_is_the_max():
    r, valid, ids = make_batch(40, [5, 5], 4, 1, low=-2, high=3)
    valid[:, 0] = True
    res = vpo_result(r, valid, ids, num_weightings=7)
    best = np.where(valid, r[..., 0], -np.inf).max(1)
    np.testing.assert_allclose(res.scores.numpy(), best, rtol=0, atol=1e-12)


def test_adding_an_answer_never_lowers_the_set_score():
    r, valid, ids = make_batch(41, [4] * 6, 4, 5, p_invalid=0.4, low=-1)
    base = vpo_result(r, valid, ids, seed=2, num_weightings=30).scores
    for slot in range(4):
        more = valid.copy()
        more[:, slot] = True
        grown = vpo_result(r, more, ids, seed=2, num_weightings=30).scores
        had_any = valid.any(1)
        # same weights (same seed, same groups): monotone wherever the rollout had an answer
        assert (grown[had_any] >= base[had_any] - 1e-12).all()
    # and strictly higher somewhere (an answer that wins for some weighting)
    assert (vpo_result(r, np.ones_like(valid), ids, seed=2, num_weightings=30).scores > base + 1e-9).any()


@pytest.mark.parametrize("fill", [0.0, -1e300, 1e300, float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("name", ["vpo", "multi_rlvr"])
def test_padding_never_changes_anything(fill, name):
    r, valid, ids = make_batch(42, [4, 4, 4], 3, 4, p_invalid=0.4, low=-3.0, high=-1.0)  # all negative
    clean = compute_advantages(name, r, valid, group_ids=ids, seed=6)
    junk = r.copy()
    junk[~valid] = fill
    res = compute_advantages(name, junk, valid, group_ids=ids, seed=6)
    assert torch.equal(res.advantages, clean.advantages)
    assert torch.equal(res.scores, clean.scores)
    assert res.diagnostics["nonfinite_answers"] == 0.0  # masked slots are not counted
    # negative rewards: the set score is the best *valid* answer, never the padding's 0
    if name == "vpo":
        assert (res.scores[torch.as_tensor(valid.any(1))] < 0).all()


def test_negative_rewards_padding_never_wins_the_max():
    r = np.array([[[-0.5, -0.5], [0.0, 0.0]], [[-1.0, -1.0], [0.0, 0.0]]])
    valid = np.array([[True, False], [True, False]])
    res = compute_advantages("vpo", r, valid, group_size=2)
    np.testing.assert_allclose(res.scores.numpy(), [-0.5, -1.0], atol=1e-12)
    assert res.advantages[0] > 0 > res.advantages[1]


@pytest.mark.parametrize("name", list_estimators())
def test_zero_std_group_gets_zero_advantage(name):
    G, d = 4, 3
    r = np.tile(np.array([0.1, 0.7, 0.3]), (2 * G, 1, 1))  # identical rollouts: 0.1 etc. are inexact
    r[G:] = np.random.default_rng(0).uniform(size=(G, 1, d))  # second group is not flat
    kw = dict(rollout_weights=np.full((2 * G, d), 1 / d)) if name == "goal_conditioned" else {}
    res = compute_advantages(name, r, group_size=G, **kw)
    if name == "gdpo":  # batch-whitened: a flat group sits at the batch mean, not necessarily 0
        flat = res.advantages[:G]
        assert (flat - flat[0]).abs().max() < 1e-9
    else:  # exactly 0, not a rounding residue (more cases: tests/core/test_reference_conventions.py)
        assert torch.equal(res.advantages[:G], torch.zeros(G, dtype=torch.float64))
        assert res.advantages[G:].abs().max() > 0.1


def test_vpo_all_invalid_group_is_flat_and_counts_in_statistics():
    r, valid, ids = make_batch(43, [3, 3], 2, 2, p_invalid=0.0)
    valid[:3] = False
    res = compute_advantages("vpo", r, valid, group_ids=[0, 0, 0, 1, 1, 1])
    assert torch.equal(res.advantages[:3], torch.zeros(3, dtype=torch.float64))
    # one invalid rollout in a group scores 0 and pulls the group mean down
    valid2 = np.ones((6, 2), bool)
    valid2[3] = False
    res2 = compute_advantages("vpo", np.abs(r) + 0.1, valid2, group_size=3)
    assert res2.scores[3] == 0.0 and res2.advantages[3] < 0


@pytest.mark.parametrize("name", list_estimators())
def test_identical_inputs_and_seed_identical_outputs(name):
    r, valid, ids = make_batch(44, [4, 4, 4], 3 if name in ("vpo", "multi_rlvr") else 1, 3)
    kw = dict(rollout_weights=np.full((12, 3), 1 / 3)) if name == "goal_conditioned" else {}
    a = compute_advantages(name, r, valid, group_ids=ids, seed=9, **kw)
    b = compute_advantages(name, r.copy(), valid.copy(), group_ids=list(ids), seed=9, **kw)
    assert torch.equal(a.advantages, b.advantages) and torch.equal(a.scores, b.scores)
    if name in ("vpo", "random_weight"):
        c = compute_advantages(name, r, valid, group_ids=ids, seed=10, **kw)
        assert not torch.equal(a.advantages, c.advantages)


# ---------------------------------------------------------------------------------------------
# group layouts
# ---------------------------------------------------------------------------------------------


def relabel(ids, kind):
    if kind == "int":
        return [int(g) * 13 + 1000 for g in ids]  # large, non-contiguous, not sorted like the groups
    if kind == "str":
        return [f"uid-{(int(g) * 7919) % 1000:03d}" for g in ids]
    if kind == "tensor":
        return torch.tensor([int(g) * -3 for g in ids])
    raise AssertionError(kind)


@pytest.mark.parametrize("id_kind", ["int", "str", "tensor"])
@pytest.mark.parametrize("name", list_estimators())
def test_group_ids_and_contiguous_layout_agree(name, id_kind):
    """Contiguous groups of G == the same rows labelled with any ids (groups listed in order)."""
    G, P, d = 4, 5, 3
    m = 3 if name in ("vpo", "multi_rlvr") else 1
    rng = np.random.default_rng(50)
    r = rng.uniform(-1, 1, size=(P * G, m, d))
    valid = rng.random((P * G, m)) > 0.2
    kw = dict(rollout_weights=rng.dirichlet(np.ones(d), P * G)) if name == "goal_conditioned" else {}
    contiguous = compute_advantages(name, r, valid, group_size=G, seed=3, **kw)
    labelled = compute_advantages(
        name, r, valid, group_ids=relabel([n // G for n in range(P * G)], id_kind), seed=3, **kw
    )
    torch.testing.assert_close(labelled.advantages, contiguous.advantages, **EXACT)


@pytest.mark.parametrize("id_kind", ["int", "str", "tensor"])
@pytest.mark.parametrize("name", list_estimators())
def test_shuffled_rows_give_the_same_advantages(name, id_kind):
    """Rows shuffled (non-contiguous groups, varying sizes). Deterministic estimators: identical
    advantages row for row. Sampling estimators draw one weight set per group *in order of first
    appearance*, so shuffled rows equal the contiguous layout with its groups listed in the
    shuffled batch's appearance order."""
    sizes = [3, 6, 2, 5]
    m = 3 if name in ("vpo", "multi_rlvr") else 1
    d = 4
    rng = np.random.default_rng(51)
    n = sum(sizes)
    group_of = np.repeat(np.arange(len(sizes)), sizes)
    r = rng.uniform(0, 1, size=(n, m, d))
    valid = rng.random((n, m)) > 0.2
    rw = rng.dirichlet(np.ones(d), n)
    kw = lambda rows: dict(rollout_weights=rw[rows]) if name == "goal_conditioned" else {}  # noqa: E731
    perm = rng.permutation(n)
    shuffled = compute_advantages(
        name, r[perm], valid[perm], group_ids=relabel(group_of[perm], id_kind), seed=4, **kw(perm)
    )
    # the same batch in contiguous order, groups sorted by first appearance in the shuffled batch
    appearance = list(dict.fromkeys(group_of[perm].tolist()))
    rows = np.concatenate([np.nonzero(group_of == g)[0] for g in appearance])
    ordered = compute_advantages(name, r[rows], valid[rows], group_ids=group_of[rows].tolist(), seed=4, **kw(rows))
    by_row = np.empty(n)
    by_row[rows] = ordered.advantages.numpy()
    np.testing.assert_allclose(shuffled.advantages.numpy(), by_row[perm], rtol=0, atol=1e-9)
    if name in ("grpo", "gdpo", "multi_rlvr", "max_at_k", "maxrl", "goal_conditioned"):
        # no sampling: any row order, any group order, identical advantages
        natural = compute_advantages(name, r, valid, group_ids=group_of.tolist(), seed=4, **kw(np.arange(n)))
        np.testing.assert_allclose(shuffled.advantages.numpy(), natural.advantages.numpy()[perm], atol=1e-9)


def test_group_index_is_first_appearance_for_every_id_type():
    for ids in ([9, 9, 2, 5, 2, 5], ["9", "9", "2", "5", "2", "5"], torch.tensor([9, 9, 2, 5, 2, 5])):
        index, counts = group_index_from(6, group_ids=ids)
        assert index.tolist() == [0, 0, 1, 2, 1, 2]
        assert counts.tolist() == [2.0, 2.0, 2.0]


# ---------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------

R = np.random.default_rng(60).uniform(size=(8, 2, 3))


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: compute_advantages("vpo", R[:, 0, :], group_size=4),
            r"rewards must have shape \[N, m, d\].*rewards\[:, None, :\]",
        ),
        (lambda: compute_advantages("vpo", R[None], group_size=4), r"rewards must have shape \[N, m, d\]"),
        (lambda: compute_advantages("vpo", np.zeros((0, 2, 3)), group_size=2), "non-empty"),
        (lambda: compute_advantages("vpo", R, np.ones((8, 3), bool), group_size=4), r"valid must have shape \[N, m\]"),
        (lambda: compute_advantages("vpo", R, np.ones((8, 2)), group_size=4), "valid must be a boolean mask"),
        (lambda: compute_advantages("vpo", R, group_size=4, target_weights=[0.5, 0.5]), r"w\* has 2 entries .* d=3"),
        (lambda: compute_advantages("vpo", R, group_size=4, target_weights=[0.5, 0.6, 0.1]), "sum to 1"),
        (lambda: compute_advantages("vpo", R, group_size=4, target_weights=[1.5, -0.5, 0.0]), "non-negative"),
        (lambda: compute_advantages("vpo", R, group_size=4, target_weights=[np.nan, 0.5, 0.5]), "NaN or inf"),
        (
            lambda: compute_advantages(
                "goal_conditioned", R[:, :1], group_size=4, rollout_weights=np.full((8, 3), 0.5)
            ),
            "rollout_weights must sum to 1",
        ),
        (
            lambda: compute_advantages(
                "goal_conditioned", R[:, :1], group_size=4, rollout_weights=np.full((8, 2), 0.5)
            ),
            r"rollout_weights must have shape \[N, d\]",
        ),
        (lambda: compute_advantages("goal_conditioned", R[:, :1], group_size=4), "needs rollout_weights"),
        (
            lambda: compute_advantages("vpo", R, group_size=4, config=EstimatorConfig(weight_alpha=0.0)),
            "alpha must be a finite number > 0",
        ),
        (
            lambda: compute_advantages("vpo", R, group_size=4, config=EstimatorConfig(weight_alpha=-2.0)),
            "alpha must be a finite number > 0",
        ),
        (
            lambda: compute_advantages("vpo", R, group_size=4, config=EstimatorConfig(num_weightings=0)),
            r"num_weightings \(K\) must be an integer >= 1",
        ),
        (
            lambda: compute_advantages(
                "vpo", R, group_size=4, config=EstimatorConfig(weight_sampler="sobol", weight_alpha=2.0)
            ),
            "Dir\\(1\\) only",
        ),
        (lambda: compute_advantages("vpo", R, group_size=1), r"group_size G must be an integer >= 2"),
        (lambda: compute_advantages("vpo", R, group_size=3), "not a multiple of group_size=3"),
        (lambda: compute_advantages("vpo", R, group_ids=[0] * 7 + [1]), r"at least 2 rollouts \(G >= 2\)"),
        (lambda: compute_advantages("vpo", R, group_ids=[0] * 7), "group_ids has 7 entries but there are N=8"),
        (lambda: compute_advantages("vpo", R), "give exactly one of group_size"),
        (lambda: compute_advantages("vpo", R, group_size=4, group_ids=[0] * 8), "give exactly one of group_size"),
        (lambda: compute_advantages("grpo", R, group_size=4), "scores one answer per rollout but rewards have m=2"),
        (lambda: compute_advantages("ppo", R, group_size=4), "unknown estimator 'ppo'; available: "),
        (lambda: compute_advantages("vpo", R, group_size=4, config=EstimatorConfig(eps=0.0)), "eps must be > 0"),
        (
            lambda: compute_advantages("vpo", R, group_size=4, config=EstimatorConfig(invalid_score=np.nan)),
            "invalid_score must be finite",
        ),
        (lambda: compute_advantages("vpo", [["a"]], group_size=4), "rewards must be a numeric array"),
    ],
)
def test_bad_input_is_a_clear_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_nonfinite_rewards_count_as_invalid_or_raise_in_strict_mode(bad):
    r, valid, ids = make_batch(61, [4, 4], 3, 3, p_invalid=0.0)
    dirty = r.copy()
    dirty[2, 1, 0] = bad
    dirty[5, 0, 2] = bad
    res = compute_advantages("vpo", dirty, valid, group_ids=ids, seed=1)
    assert res.diagnostics["nonfinite_answers"] == 2.0
    assert torch.isfinite(res.advantages).all()
    masked = valid.copy()
    masked[2, 1] = masked[5, 0] = False
    clean = compute_advantages("vpo", r, masked, group_ids=ids, seed=1)  # same as dropping them
    assert torch.equal(res.advantages, clean.advantages)
    with pytest.raises(ValueError, match=r"NaN/inf at rollout 2, answer 1 \(2 answers in all\)"):
        compute_advantages("vpo", dirty, valid, group_ids=ids, config=EstimatorConfig(strict_rewards=True))
    # single-answer estimators: the rollout becomes "no valid answer" (invalid_score)
    g = compute_advantages("grpo", dirty[:, :1], group_ids=ids)
    assert g.scores[5] == 0.0 and g.diagnostics["nonfinite_answers"] == 1.0


# ---------------------------------------------------------------------------------------------
# set_score and properties over random shapes
# ---------------------------------------------------------------------------------------------


def test_set_score_helper_matches_loop_and_shapes():
    rng = np.random.default_rng(70)
    r = rng.uniform(-1, 1, size=(5, 3, 4))
    valid = rng.random((5, 3)) > 0.3
    valid[4] = False
    w = rng.dirichlet(np.ones(4), size=6)
    got = set_score(r, valid, w, invalid_score=-7.0)
    for n in range(5):
        answers = [i for i in range(3) if valid[n, i]]
        want = sum(max(dot(wk, r[n, i]) for i in answers) for wk in w) / 6 if answers else -7.0
        assert abs(float(got[n]) - want) < 1e-12
    per_row = set_score(r, valid, np.broadcast_to(w, (5, 6, 4)).copy(), invalid_score=-7.0)
    torch.testing.assert_close(per_row, got, **EXACT)
    # padding, even NaN/inf, never leaks into a max, for shared and per-row weights
    junk = r.copy()
    junk[~valid] = np.nan
    junk[4, 0] = np.inf
    assert torch.equal(set_score(junk, valid, w, invalid_score=-7.0), got)
    torch.testing.assert_close(
        set_score(junk, valid, np.broadcast_to(w, (5, 6, 4)).copy(), invalid_score=-7.0), got, **EXACT
    )
    assert torch.equal(set_score(r, None, w), set_score(r, np.ones((5, 3), bool), w))
    with pytest.raises(ValueError, match=r"weights must have shape \[K, d\] or \[N, K, d\]"):
        set_score(r, valid, w[:, :3])
    with pytest.raises(ValueError, match=r"weights must have shape"):
        set_score(r, valid, np.ones((4, 6, 4)) / 4)
    with pytest.raises(ValueError, match=r"valid must have shape \[N, m\]"):
        set_score(r, valid[:, :2], w)


@settings(max_examples=50, deadline=None)
@given(
    sizes=st.lists(st.integers(2, 6), min_size=1, max_size=5),
    m=st.integers(1, 4),
    d=st.integers(1, 5),
    k=st.integers(1, 12),
    p_invalid=st.sampled_from([0.0, 0.3, 0.9]),
    seed=st.integers(0, 10_000),
    kind=st.sampled_from(["iid", "sobol"]),
)
def test_vpo_property_random_shapes(sizes, m, d, k, p_invalid, seed, kind):
    r, valid, ids = make_batch(seed, sizes, m, d, p_invalid=p_invalid, low=-1.0, high=1.0, quantize=3)
    res = vpo_result(r, valid, ids, seed=seed, num_weightings=k, weight_sampler=kind)
    raw, adv = ref_vpo(r, valid, ids, sampler_weights(seed, len(sizes), d, k, kind))
    np.testing.assert_allclose(res.scores.numpy(), raw, rtol=0, atol=1e-9)
    np.testing.assert_allclose(res.advantages.numpy(), adv, rtol=0, atol=1e-7)
    a, raw = res.advantages.numpy(), res.scores.numpy()
    for rows in groups_in_order(ids):
        assert abs(a[rows].sum()) < 1e-6  # centred per group
        # population z-score: sum of squares is G * (std / (std + eps))^2, or 0 for a flat group
        std = raw[rows].std()
        want = 0.0 if std < 1e-6 else len(rows) * (std / (std + 1e-6)) ** 2
        assert abs(float((a[rows] ** 2).sum()) - want) < 1e-6 * len(rows)


@settings(max_examples=50, deadline=None)
@given(
    sizes=st.lists(st.integers(2, 7), min_size=1, max_size=4),
    name=st.sampled_from(sorted(BASELINES)),
    seed=st.integers(0, 10_000),
    negative=st.booleans(),
)
def test_baselines_property_random_shapes(sizes, name, seed, negative):
    m = 2 if name == "multi_rlvr" else 1
    d = 1 + seed % 4
    low = -1.0 if negative else 0.0
    r, valid, ids = make_batch(seed, sizes, m, d, p_invalid=0.2, low=low, quantize=5)
    if name == "gdpo" and len(ids) < 2:
        return
    target = np.full(d, 1.0 / d)
    res = compute_advantages(name, r, valid, group_ids=ids)
    s, adv = BASELINES[name](r, valid, ids, target.tolist())
    np.testing.assert_allclose(res.scores.numpy(), s, rtol=0, atol=1e-9)
    # maxrl divides by the group mean (+eps): near-zero means amplify rounding; compare relatively
    np.testing.assert_allclose(res.advantages.numpy(), adv, rtol=1e-6, atol=1e-6)
    assert torch.isfinite(res.advantages).all()
