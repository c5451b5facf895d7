"""Sets cannot be padded: a set of answers padded with near-duplicates or junk valid answers scores
no more than the honest set, under every set objective, and VPO's set score never exceeds what its
best member reaches under some weighting.

Near-duplicates are dropped by the dedup key (``Task.dedup_key``: the default key ignores case,
spacing, quotes, emphasis, enclosing brackets and trailing punctuation; shop keys by the product,
maze by the path walked up to the exit, prog by the outputs on the tests, eureqa by the entity
keys). Multi-RLVR sums over the answers the key keeps, so the key is its only defence; VPO and union
coverage take maxima, which a duplicate or a dominated answer cannot raise. Each case says why the
padded set must not score more; the mutation that breaks it is named in each test.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vpo.core.estimators import compute_advantages, set_score
from vpo.core.set_objectives import sum_of_target, union_coverage
from vpo.tasks import FunctionTask
from vpo.tasks.noisy import NoisyTask

OBJECTIVES = ("vpo", "multi_rlvr", "union_coverage")


def _tags(answers):
    return "".join(f"<answer_{i}>{a}</answer_{i}>" for i, a in enumerate(answers, 1))


def _set_scores(task, example, answer_sets, m):
    """Each objective's set score of each answer set (one rollout each), through
    Task.score_completions (parse, dedup, score) as the trainer does."""
    b = task.score_completions([example] * len(answer_sets), [_tags(a) for a in answer_sets], m)
    r, v = torch.as_tensor(b.rewards), torch.as_tensor(b.valid)
    target = torch.as_tensor(np.asarray(task.target_weights, dtype=np.float64))
    w = torch.as_tensor(np.random.default_rng(0).dirichlet(np.ones(task.d), size=64))
    return {
        "vpo": set_score(r, v, w).numpy(),
        "multi_rlvr": sum_of_target(r, v, None, None, target).numpy(),
        "union_coverage": union_coverage(r, v, None, None, target).numpy(),
    }, b


def _assert_padding_does_not_pay(task, example, honest, padded, m=None, why=""):
    m = m or max(len(honest), len(padded))
    scores, b = _set_scores(task, example, [honest, padded], m)
    for name in OBJECTIVES:
        s = scores[name]
        assert s[1] <= s[0] + 1e-12, f"{task.name}: {name} pays for padding {padded!r} over {honest!r} ({why})"
    return b


# -------------------------------------------------------------------------------------------------
# the dedup keys, task by task
# -------------------------------------------------------------------------------------------------


def test_default_key_one_letter_written_five_ways_is_one_answer():
    """A FunctionTask with the default key: "A", "A.", "(A)", "a", " A ", "**A**" are the same choice
    to any checker that reads the answer; the old key (lower-case, spaces) kept four of them and
    Multi-RLVR's set score tripled. Mutation: normalize_text without the decoration stripping."""
    task = FunctionTask(
        "mc",
        objectives={"right": lambda ex, a: float(a.strip(" .()*").upper() == "A")},
        examples=[{"question": "q"}],
    )
    b = _assert_padding_does_not_pay(
        task, {"question": "q"}, ["A"], ["A", "A.", "(A)", " a ", "**A**"], why="one choice written five ways"
    )
    assert b.valid[1].sum() == 1 and b.num_duplicates == 4


def test_shop_letter_and_name_of_one_product_are_one_answer():
    """shop: "A", "(a)", "A." and, in letter mode, the name of product A all pick product A (the
    scorer gives them the same vector). Mutation: shop without dedup_key (text key: three kept)."""
    from vpo.tasks.shop import ShopTask

    task = ShopTask()
    ex = task.load("train", n=1)[0]
    name = ex["items"][0]["name"]
    b = _assert_padding_does_not_pay(task, ex, ["A"], ["A", "(a)", "A.", name], why="one product four ways")
    assert b.valid[1].sum() == 1
    # a genuinely different product is kept
    assert task.score_completions([ex], [_tags(["A", "B"])], 2).valid.sum() == 2


def test_maze_route_with_moves_after_the_exit_or_into_a_wall_is_the_same_route():
    """maze: the scorer stops a route at E and a move into a wall or the edge leaves the route where
    it is, so "DDDLDLLL", the same route with moves after the exit, and with a bump into the edge
    walk one path and score one vector. Every route that misses E scores zeros: one answer.
    Mutation: maze dedup by the move string (canonical): the padded set keeps three answers."""
    from vpo.tasks.maze import MazeTask

    task = MazeTask(size=5)
    ex = task.load("train", n=1)[0]  # S top right, E bottom left, budget 9 (see the grid in the example)
    honest = ["DDDLDLLL"]
    padded = ["DDDLDLLL", "DDDLDLLLU", "RDDDLDLLL", "U", "UU"]  # after the exit; edge bump; two misses
    b = _assert_padding_does_not_pay(task, ex, honest, padded, why="one path, and misses that score 0")
    assert b.valid[1].sum() == 2  # the route, and one miss (all misses are one answer)
    # two different paths to E stay two answers
    assert task.score_completions([ex], [_tags(["DDDLDLLL", "DDDDLLLL"])], 2).valid.sum() == 2


def test_prog_expressions_with_the_same_outputs_are_one_answer():
    """prog: "x", "(x)", "x+0", "x*1" and "((x))" compute the same outputs on every test, so the
    scorer cannot tell them apart. Mutation: prog keyed by its AST text alone ("x+0" != "x")."""
    from vpo.tasks.prog import ProgTask

    task = ProgTask()
    ex = task.load("train", n=1)[0]
    ref = task.reference_answer(ex) if hasattr(task, "reference_answer") else None
    good = ref if ref else "x"
    padded = [good, f"({good})", f"({good})+0", f"({good})*1"]
    b = _assert_padding_does_not_pay(task, ex, [good], padded, why="one function written four ways")
    assert b.valid[1].sum() == 1


def test_eureqa_answers_that_name_the_same_entities_are_one_answer():
    """eureqa: case, markdown, quotes, trailing punctuation and a trailing "(...)" do not change the
    entity an answer names. Mutation: eureqa with the default text key."""
    from vpo.tasks.eureqa import EureqaTask

    task = EureqaTask.__new__(EureqaTask)  # scoring needs no data: the example carries the gold entities
    ex = {"entities": ["Paris", "Rome", "Lisbon", "Oslo", "Bern"], "question": "q"}
    honest = "A: Paris\nB: Rome\nC: Lisbon\nD: Oslo\nE: Bern"
    variants = [
        honest,
        "A: paris\nB: ROME\nC: lisbon\nD: oslo\nE: bern",
        '**A**: Paris.\nB: "Rome"\nC: Lisbon\nD: Oslo (Norway)\nE: Bern',
    ]
    b = _assert_padding_does_not_pay(task, ex, [honest], variants, why="the same five entities")
    assert b.valid[1].sum() == 1


# -------------------------------------------------------------------------------------------------
# the set objectives themselves
# -------------------------------------------------------------------------------------------------


def _random_sets(rng, n=64, m=4, d=3):
    r = rng.random((n, m, d))
    r[rng.random((n, m, d)) < 0.2] = 0.0
    v = rng.random((n, m)) < 0.8
    v[:, 0] |= ~v.any(1)  # at least one valid answer
    return r, v


@pytest.mark.parametrize("seed", range(5))
def test_vpo_set_score_never_exceeds_its_best_member_under_any_weighting(seed):
    """Property (random rewards and valid masks, K random weightings): for each weighting the set's
    value is its best valid member's, so the set score (their mean) lies between the best member's
    mean and the best member-weighting value, and with one weighting it equals the best member's.
    Invalid slots never count whatever they hold. Mutation: a max over all m slots, invalid ones
    included (then junk in an invalid slot raises the score), or a sum over answers."""
    rng = np.random.default_rng(seed)
    r, v = _random_sets(rng)
    w = torch.as_tensor(rng.dirichlet(np.ones(3) * rng.uniform(0.2, 3), size=16))
    s = set_score(r, v, w).numpy()
    member = np.einsum("nmd,kd->nmk", r, w.numpy())  # [N, m, K]
    member = np.where(v[..., None], member, -np.inf)
    assert np.all(s <= member.max(axis=(1, 2)) + 1e-12)
    assert np.all(s >= member.mean(-1).max(1) - 1e-12)
    for k in range(3):
        one = set_score(r, v, w[k : k + 1]).numpy()
        assert np.allclose(one, member[..., k].max(1))
    junk = np.where(v[..., None], r, 1e6)  # huge values in invalid slots
    assert np.allclose(set_score(junk, v, w).numpy(), s)


@pytest.mark.parametrize("seed", range(5))
def test_padding_with_duplicates_dominated_or_invalid_answers_never_raises_vpo_or_union_coverage(seed):
    """Property: appending to every set a copy of one of its valid answers, an answer it dominates
    (componentwise <=) and an invalid slot with large rewards leaves VPO's set score (same
    weightings) and union coverage exactly as they were: both are maxima. Multi-RLVR's sum would
    grow with the copy, which is why the dedup key must catch it (the task tests above).
    Mutation: a set score that averages over answers (padding with dominated ones would lower it)
    or sums them."""
    rng = np.random.default_rng(100 + seed)
    r, v = _random_sets(rng)
    n, m, d = r.shape
    first = v.argmax(1)
    dup = r[np.arange(n), first]
    dominated = dup * rng.random((n, d))
    padded = np.concatenate([r, dup[:, None], dominated[:, None], np.full((n, 1, d), 5.0)], axis=1)
    pv = np.concatenate([v, np.ones((n, 2), bool), np.zeros((n, 1), bool)], axis=1)
    w = torch.as_tensor(rng.dirichlet(np.ones(d), size=32))
    assert np.allclose(set_score(padded, pv, w).numpy(), set_score(r, v, w).numpy())
    t = torch.full((d,), 1 / d, dtype=torch.float64)
    uc = union_coverage(torch.as_tensor(padded), torch.as_tensor(pv), None, None, t)
    assert torch.allclose(uc, union_coverage(torch.as_tensor(r), torch.as_tensor(v), None, None, t))
    # through the estimator, with the same weight draws: the same set scores, hence the same advantages
    a = compute_advantages("vpo", r, v, group_size=4, seed=seed)
    b = compute_advantages("vpo", padded, pv, group_size=4, seed=seed)
    assert torch.allclose(a.scores, b.scores) and torch.allclose(a.advantages, b.advantages)


def test_multi_rlvr_pays_for_a_copy_only_when_the_key_misses_it():
    """What stays open, stated as a test: Multi-RLVR sums over the kept answers (the paper's rule),
    so an exact copy of a valid row adds its value again; through score_completions the key drops
    it (0 added). Junk valid answers score 0 and add 0."""
    task = FunctionTask("one", objectives={"right": lambda ex, a: float("yes" in a.lower())}, examples=[{}])
    scores, b = _set_scores(task, {}, [["yes"], ["yes", "Yes.", "(yes)"], ["yes", "no", "nope"]], 3)
    assert scores["multi_rlvr"].tolist() == [1.0, 1.0, 1.0]
    r = torch.tensor([[[1.0], [1.0]]], dtype=torch.float64)
    assert (
        float(sum_of_target(r, torch.ones(1, 2, dtype=torch.bool), None, None, torch.ones(1, dtype=torch.float64)))
        == 2.0
    )


def test_the_documented_reward_distinct_multi_rlvr_closes_the_copy_hole():
    """docs/estimators.md "Padding a set": Multi-RLVR over distinct reward vectors, registered as a set
    objective, pays nothing for a near-duplicate the key missed (here: a FunctionTask whose scorer
    reads "Answer: yes" like "yes", which the default key tells apart), and still pays for a
    different answer with a different vector. Mutation: the plain sum (the copy pays 1 more)."""
    from vpo.core import register_set_objective, unregister_set_objective
    from vpo.core.answers import dedup_rows

    def distinct_sum(rewards, valid, weights, group_index, target_weights):
        distinct = torch.as_tensor(dedup_rows(rewards.cpu().numpy(), valid.cpu().numpy()), device=valid.device)
        return sum_of_target(rewards, distinct, weights, group_index, target_weights)

    task = FunctionTask(
        "loose",
        objectives={"right": lambda ex, a: float(a.lower().endswith("yes")), "long": lambda ex, a: float(len(a) > 4)},
        examples=[{}],
    )
    sets = [["yes"], ["yes", "Answer: yes"], ["yes", "no, wait"], ["yes", "Answer: yes", "Final: yes"]]
    b = task.score_completions([{}] * 4, [_tags(a) for a in sets], 3)
    register_set_objective("multi_rlvr_distinct_test", distinct_sum, normalization="bessel")
    try:
        res = compute_advantages("multi_rlvr_distinct_test", b.rewards, b.valid, group_size=4)
        plain = compute_advantages("multi_rlvr", b.rewards, b.valid, group_size=4)
    finally:
        unregister_set_objective("multi_rlvr_distinct_test")
    # "Answer: yes" and "Final: yes" score alike ([1, 1]): one of them counts; "no, wait" ([0, 1]) counts too
    assert res.scores.tolist() == [0.5, 1.5, 1.0, 1.5]
    assert plain.scores.tolist() == [0.5, 1.5, 1.0, 2.5]  # the plain sum pays for the second copy


# -------------------------------------------------------------------------------------------------
# noisy: more answers are not more lottery tickets
# -------------------------------------------------------------------------------------------------


def test_noisy_padding_a_set_with_junk_does_not_buy_more_noisy_draws():
    """noisy draws one noise vector per rollout, shared by its answers, and flips the set's value of
    a binary objective: a set padded with junk valid answers (all-zero rewards) has exactly the
    honest set's VPO and union-coverage scores, draw for draw. With independent noise per answer
    (the old rule) the max over 4 answers of noisy draws beat the honest answer's: mean union
    coverage +0.4 at sigma 0.3. Mutation: noise of shape (N, m, d)."""

    def obj(j):
        return lambda ex, a: 0.6 if a == "good" else 0.0

    inner = FunctionTask("two", objectives={"a": obj(0), "b": obj(1), "done": obj(2)}, examples=[{}])
    n = 400
    exs = [{"split": "train"}] * n
    scores = {}
    for name, answers in (("honest", ["good"]), ("padded", ["good", "junk1", "junk2", "junk3"])):
        t = NoisyTask(inner, sigma=0.3, flip=0.3, binary=["done"], seed=7)
        b = t.score_completions(exs, [_tags(answers)] * n, 4)
        r, v = torch.as_tensor(b.rewards), torch.as_tensor(b.valid)
        w = torch.as_tensor(np.random.default_rng(0).dirichlet(np.ones(3), size=32))
        scores[name] = (set_score(r, v, w).numpy(), union_coverage(r, v, None, None, torch.ones(3) / 3).numpy())
    for k in range(2):
        assert np.allclose(scores["padded"][k], scores["honest"][k])
