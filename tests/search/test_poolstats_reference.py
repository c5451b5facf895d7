"""The reference's pool statistics (vpo.search.poolstats.pool_statistics) against slow loop versions
written here from the definitions in docs/eval.md, on hand-built pools (ties, duplicate vectors, no
valid answer) and on random pools whose values are multiples of 1/4 (exact sums: many exact ties)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from vpo.search import poolstats
from vpo.search.poolstats import pool_statistics, subset_draws

# ---------------------------------------------------------------------------------------------
# slow references: one pool at a time, plain Python loops over a list of candidates
# ---------------------------------------------------------------------------------------------


def candidates(rewards, valid, present, convention):
    """[(vector tuple, rollout, position)] of one prompt: rewards [R, m, d], valid [R, m], present [R]."""
    out = []
    R, m, d = rewards.shape
    for r in range(R):
        if not present[r]:
            continue
        pos = 0
        for s in range(m):
            if valid[r, s]:
                out.append((tuple(float(x) for x in rewards[r, s]), r, pos))
                pos += 1
            elif convention == "reference":
                out.append((tuple(0.0 for _ in range(d)), r, pos))
                pos += 1
    return out


def subset_sum(v, mask):
    total = 0.0
    for j in range(len(v)):
        if (mask >> j) & 1:
            total += v[j]
    return total


def slow_gains(cands, d):
    vectors = [c[0] for c in cands]
    distinct = []
    for v in vectors:
        if v not in distinct:
            distinct.append(v)
    won = set()
    for mask in range(1, 2**d if distinct else 1):
        scores = [subset_sum(v, mask) for v in distinct]
        top = max(scores)
        winners = [v for v, s in zip(distinct, scores) if s == top]
        if len(winners) == 1:
            won.add(winners[0])
    return [1.0 / vectors.count(v) if v in won else 0.0 for v in vectors]


def slow_ndcg(cands, gains):
    per_rollout = {}
    for (_v, r, pos), g in zip(cands, gains):
        per_rollout.setdefault(r, []).append((pos, g))
    vals = []
    for items in per_rollout.values():
        items.sort()
        dcg = sum(g / math.log2(t + 2) for t, (_, g) in enumerate(items))
        ideal = sum(1.0 / math.log2(t + 2) for t in range(len(items)))
        vals.append(dcg / ideal)
    return sum(vals) / len(vals) if vals else float("nan")


def slow_subset_share(cands, d, num_draws, seed):
    if not cands:
        return float("nan"), float("nan")
    rng = random.Random(seed)
    rollouts = sorted({r for _, r, _ in cands})
    credit = {r: 0.0 for r in rollouts}
    credit_pos = {r: 0.0 for r in rollouts}
    for _ in range(num_draws):
        mask = rng.randint(1, 2**d - 1)
        scores = [subset_sum(v, mask) for v, _, _ in cands]
        top = max(scores)
        winners = [i for i, s in enumerate(scores) if s >= top - 1e-12]
        won = sorted({cands[i][1] for i in winners})
        for r in won:
            credit[r] += 1.0 / len(won)
            earliest = min(cands[i][2] for i in winners if cands[i][1] == r)
            credit_pos[r] += (1.0 / math.log2(earliest + 2)) / len(won)
    return max(credit.values()) / num_draws, sum(credit_pos.values()) / (len(rollouts) * num_draws)


def slow_pareto_fraction(cands, eps=1e-12):
    vecs = [c[0] for c in cands]
    if not vecs:
        return float("nan")
    front = 0
    for i, a in enumerate(vecs):
        dominated = any(
            all(b[j] >= a[j] - eps for j in range(len(a))) and any(b[j] > a[j] + eps for j in range(len(a)))
            for k, b in enumerate(vecs)
            if k != i
        )
        front += not dominated
    return front / len(vecs)


def slow_pass_at_k(n, c, k):
    if k > n:
        return float("nan")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def slow_stats(rewards, valid, present, w, convention, ks=(1, 2, 3), threshold=1.0, num_draws=100, seed=42):
    R, m, d = rewards.shape
    cands = candidates(rewards, valid, present, convention)
    vecs = [c[0] for c in cands]
    gains = slow_gains(cands, d) if d <= 12 else None
    share, score_pos = slow_subset_share(cands, d, num_draws, seed)
    n_answers = int(present.sum()) * m
    passing = [
        [bool(present[r] and valid[r, s] and all(x >= threshold for x in rewards[r, s])) for s in range(m)]
        for r in range(R)
    ]
    c_answers = sum(map(sum, passing))
    c_rollouts = sum(any(row) for row, p in zip(passing, present) if p)
    nan = float("nan")
    return {
        "union_coverage": sum(max(v[j] for v in vecs) for j in range(d)) if vecs else 0.0,
        "best_individual": max(sum(wj * vj for wj, vj in zip(w, v)) for v in vecs) if vecs else 0.0,
        "best_individual_sum": max(sum(v) for v in vecs) if vecs else 0.0,
        "witness_count": nan if gains is None else float(sum(g > 0 for g in gains)),
        "witness_fraction": nan if gains is None or not vecs else sum(g > 0 for g in gains) / len(vecs),
        "witness_ndcg": nan if gains is None else slow_ndcg(cands, gains),
        "subset_winner_share": share,
        "subset_score_pos": score_pos,
        "pareto_fraction": slow_pareto_fraction(cands),
        "pass_at_k_answer": [slow_pass_at_k(n_answers, c_answers, k) for k in ks],
        "pass_at_k_rollout": [slow_pass_at_k(int(present.sum()), c_rollouts, k) for k in ks],
    }


def assert_matches(rewards, valid, present, w, convention, **kw):
    fast = pool_statistics(rewards, valid, present, weights=w, convention=convention, **kw)
    for p in range(rewards.shape[0]):
        ref = slow_stats(rewards[p], valid[p], present[p], w, convention, **kw)
        for name, want in ref.items():
            got = fast[name][p]
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12, err_msg=f"prompt {p}, {name}, {convention}")


# ---------------------------------------------------------------------------------------------
# hand-built pools
# ---------------------------------------------------------------------------------------------

A, B, E, Z = (1.0, 0.0), (0.0, 1.0), (0.5, 0.5), (0.0, 0.0)


def hand_pool():
    """3 rollouts x m = 2, d = 2: [A, B], [A (duplicate of the first), E], [Z, invalid]."""
    rewards = np.array([[[A, B], [A, E], [Z, Z]]])
    valid = np.array([[[True, True], [True, True], [True, False]]])
    return rewards, valid, np.ones((1, 3), dtype=bool)


def test_hand_pool_worked_by_hand():
    rewards, valid, present = hand_pool()
    s = pool_statistics(rewards, valid, present, weights=[0.5, 0.5])
    # subsets {0}: A wins (its two copies are one class); {1}: B wins; {0, 1}: A, B, E tie (no winner)
    assert s["witness_count"][0] == 3 and s["witness_fraction"][0] == pytest.approx(3 / 5)
    # E is on the Pareto front without winning any subset; Z is dominated
    assert s["pareto_fraction"][0] == pytest.approx(4 / 5)
    # rollout gains by position: [1/2, 1], [1/2, 0], [0]: NDCGs 1, 1/(1 + 1/log2 3) * 1/2 ... sum to 1
    assert s["witness_ndcg"][0] == pytest.approx(1 / 3, abs=1e-12)
    assert s["union_coverage"][0] == 2.0
    assert s["best_individual"][0] == 0.5 and s["best_individual_sum"][0] == 1.0
    # the reference convention adds the invalid slot as a zero vector: a 6th candidate, never a witness
    r = pool_statistics(rewards, valid, present, weights=[0.5, 0.5], convention="reference")
    assert r["witness_count"][0] == 3 and r["witness_fraction"][0] == pytest.approx(3 / 6)
    assert r["pareto_fraction"][0] == pytest.approx(4 / 6)
    assert r["witness_ndcg"][0] == pytest.approx(1 / 3, abs=1e-12)
    # random subsets: {0} -> rollouts 0 and 1 share; {1} -> rollout 0; {0, 1} -> rollouts 0 and 1 share
    masks = subset_draws(2, 100, 42)
    n1, n2, n3 = ((masks == [True, False]).all(1).sum(), (masks == [False, True]).all(1).sum(), masks.all(1).sum())
    assert n1 + n2 + n3 == 100
    assert s["subset_winner_share"][0] == pytest.approx((0.5 * n1 + n2 + 0.5 * n3) / 100)
    # position credit: rollout 0 wins {0} at position 0 and {1} at position 1; rollout 1 wins at 0
    pos = (0.5 * n1 + n2 / math.log2(3) + 0.5 * n3) + (0.5 * n1 + 0.5 * n3)
    assert s["subset_score_pos"][0] == pytest.approx(pos / (3 * 100))
    assert_matches(rewards, valid, present, [0.5, 0.5], "valid")
    assert_matches(rewards, valid, present, [0.5, 0.5], "reference")


def test_subset_draws_are_pythons_random_stream():
    rng = random.Random(7)
    want = [rng.randint(1, 2**3 - 1) for _ in range(50)]
    got = subset_draws(3, 50, 7)
    assert [int(sum(int(b) << j for j, b in enumerate(row))) for row in got] == want
    assert got.any(1).all()  # never the empty subset


def test_pass_at_k_per_answer_and_per_rollout_by_hand():
    rewards = np.zeros((1, 3, 2, 2))
    rewards[0, 0, 1] = rewards[0, 2, 0] = rewards[0, 2, 1] = 1.0
    valid = np.ones((1, 3, 2), dtype=bool)
    s = pool_statistics(rewards, valid, ks=(1, 2, 3, 4))
    # answers: n = 6, c = 3; rollouts: n = 3, c = 2 (rollout 2's two passes count once)
    np.testing.assert_allclose(s["pass_at_k_answer"][0], [0.5, 1 - 3 / 15, 1 - 1 / 20, 1.0], atol=1e-12)
    np.testing.assert_allclose(s["pass_at_k_rollout"][0], [2 / 3, 1.0, 1.0, np.nan], atol=1e-12)
    # an invalid answer never passes, whatever its reward row says
    valid[0, 2] = False
    s = pool_statistics(rewards, valid, ks=(1,))
    assert s["pass_at_k_answer"][0, 0] == pytest.approx(1 / 6) and s["pass_at_k_rollout"][0, 0] == pytest.approx(1 / 3)


def test_no_valid_answer():
    rewards = np.zeros((1, 2, 3, 2))
    valid = np.zeros((1, 2, 3), dtype=bool)
    s = pool_statistics(rewards, valid)
    assert s["union_coverage"][0] == 0 and s["best_individual"][0] == 0 and s["witness_count"][0] == 0
    for name in ("witness_fraction", "witness_ndcg", "subset_winner_share", "subset_score_pos", "pareto_fraction"):
        assert np.isnan(s[name][0]), name
    assert (s["pass_at_k_answer"][0] == 0).all()
    np.testing.assert_array_equal(s["pass_at_k_rollout"][0], [0.0, 0.0, np.nan])  # k = 3 > 2 rollouts
    # the reference pads with zero vectors: one class that wins every subset, so every slot is a witness
    r = pool_statistics(rewards, valid, convention="reference")
    assert r["witness_count"][0] == 6 and r["witness_fraction"][0] == 1.0 and r["pareto_fraction"][0] == 1.0
    assert r["subset_winner_share"][0] == pytest.approx(0.5)  # both rollouts tie in every draw
    assert_matches(rewards, valid, np.ones((1, 2), bool), [0.5, 0.5], "valid")
    assert_matches(rewards, valid, np.ones((1, 2), bool), [0.5, 0.5], "reference")


def test_all_duplicates_and_a_single_answer():
    rewards = np.full((2, 2, 2, 3), 0.5)
    valid = np.ones((2, 2, 2), dtype=bool)
    valid[1] = False
    valid[1, 1, 0] = True  # prompt 1: one valid answer, in the second rollout
    s = pool_statistics(rewards, valid)
    # four copies of one vector: one class, the unique winner of every subset; credit 1/4 each
    assert s["witness_count"][0] == 4 and s["witness_fraction"][0] == 1.0 and s["pareto_fraction"][0] == 1.0
    assert s["witness_ndcg"][0] == pytest.approx(0.25, abs=1e-12)
    assert s["subset_winner_share"][0] == pytest.approx(0.5)
    assert s["witness_fraction"][1] == 1.0 and s["witness_ndcg"][1] == 1.0 and s["subset_winner_share"][1] == 1.0
    assert_matches(rewards, valid, np.ones((2, 2), bool), [0.2, 0.3, 0.5], "valid")
    assert_matches(rewards, valid, np.ones((2, 2), bool), [0.2, 0.3, 0.5], "reference")


def test_near_ties_within_tolerance_share_random_subset_wins():
    # sums that differ by 1e-14 tie for the random-subset winner (tolerance 1e-12) but are different
    # vectors: neither is the unique winner of {0} for the witness statistic... unless strictly larger
    rewards = np.array([[[[0.3, 0.0]], [[0.3 + 1e-14, 0.0]]]])
    valid = np.ones((1, 2, 1), dtype=bool)
    s = pool_statistics(rewards, valid)
    assert s["subset_winner_share"][0] >= 0.5 - 1e-12
    assert_matches(rewards, valid, np.ones((1, 2), bool), [0.5, 0.5], "valid")


def test_more_than_twelve_objectives_gives_nan_witness_statistics():
    rng = np.random.default_rng(0)
    rewards = rng.random((2, 3, 1, 13))
    s = pool_statistics(rewards, np.ones((2, 3, 1), bool))
    assert np.isnan(s["witness_count"]).all() and np.isnan(s["witness_ndcg"]).all()
    assert np.isfinite(s["pareto_fraction"]).all() and np.isfinite(s["subset_winner_share"]).all()


# ---------------------------------------------------------------------------------------------
# random pools against the loops
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 2, 3, 4])
@pytest.mark.parametrize("convention", ["valid", "reference"])
def test_random_pools_match_the_loops(d, convention):
    rng = np.random.default_rng(100 + d)
    P, R, m = 12, 4, 3
    rewards = rng.integers(0, 5, size=(P, R, m, d)) / 4.0  # exact sums: ties and duplicates are common
    valid = rng.random((P, R, m)) < 0.7
    valid[0] = False  # a prompt with no valid answer
    present = np.ones((P, R), dtype=bool)
    present[1, 2:] = False  # a prompt with fewer rollouts
    present[2, 1:] = False
    w = rng.dirichlet(np.ones(d))
    assert_matches(rewards, valid, present, w, convention, ks=(1, 2, 3))


def test_chunking_does_not_change_the_result(monkeypatch):
    rng = np.random.default_rng(5)
    rewards = rng.integers(0, 3, size=(9, 3, 2, 3)) / 2.0
    valid = rng.random((9, 3, 2)) < 0.8
    whole = pool_statistics(rewards, valid)
    monkeypatch.setattr(poolstats, "_CHUNK_ELEMENTS", 1)  # one prompt per chunk
    parts = pool_statistics(rewards, valid)
    for name in whole:
        np.testing.assert_array_equal(whole[name], parts[name], err_msg=name)


def test_witness_needs_a_strict_winner_among_distinct_vectors():
    # every pair of these three vectors ties on some subset, and each still wins one alone
    vecs = [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)]
    rewards = np.array([[[v] for v in vecs]])
    s = pool_statistics(rewards, np.ones((1, 3, 1), bool))
    assert s["witness_count"][0] == 3
    # (1, 1, 0) dominates the first two: only it and (0, 0, 1) can win a subset
    rewards = np.array([[[v] for v in vecs + [(1.0, 1.0, 0.0)]]])
    s = pool_statistics(rewards, np.ones((1, 4, 1), bool))
    assert s["witness_count"][0] == 2 and s["pareto_fraction"][0] == pytest.approx(2 / 4)
