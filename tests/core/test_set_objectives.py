"""Set objectives by name: ``register_set_objective`` and the built-in ones.

``vpo`` and ``multi_rlvr`` are set objectives; registered again under new names through the public
function (the generic path, no internal shortcut) they must give the built-ins' numbers and the slow
loops' (the library's readable VPO loop, a Multi-RLVR loop written here) to 1e-12 in float64.
``union_coverage`` is checked on hand-built sets. The docs example under "Adding a set objective"
is executed as written. Fixed seeds; tolerances at each assertion.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from vpo.core import (
    EstimatorConfig,
    SimplexSampler,
    compute_advantages,
    list_estimators,
    list_set_objectives,
    register_set_objective,
    unregister_set_objective,
)
from vpo.core.reference import vpo_advantages_reference
from vpo.core.set_objectives import SET_OBJECTIVES, sum_of_target, union_coverage

TIGHT = dict(rtol=0, atol=1e-12)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "estimators.md"


@pytest.fixture()
def registered():
    """Register objectives for one test and remove them afterwards."""
    names = []

    def add(name, fn, **kw):
        register_set_objective(name, fn, **kw)
        names.append(name)

    yield add
    for n in names:
        unregister_set_objective(n)


def _batch(seed, n_groups=4, G=5, m=3, d=4, p_invalid=0.3):
    rng = np.random.default_rng(seed)
    r = rng.normal(size=(n_groups * G, m, d))
    v = rng.random((n_groups * G, m)) > p_invalid
    v[0] = False  # a rollout without a valid answer
    r[~v] = 1e6  # garbage in invalid slots must never count
    return r, v


def loop_multi_rlvr(r, v, G, target, eps=1e-6):
    s = []
    for n in range(len(r)):
        vals = [float(np.dot(target, r[n][i])) for i in range(len(r[n])) if v[n][i]]
        s.append(sum(vals) if vals else 0.0)
    adv = []
    for start in range(0, len(s), G):
        g = s[start : start + G]
        mean = sum(g) / G
        std = math.sqrt(sum((x - mean) ** 2 for x in g) / (G - 1))
        adv += [(x - mean) / (std + eps) for x in g]
    return s, adv


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("layout", ["contiguous", "ids"])
def test_vpo_through_the_public_registration_matches_builtin_and_loop(registered, seed, layout):
    registered("vpo_again", SET_OBJECTIVES["vpo"].fn, uses_weightings=True, normalization="population")
    r, v = _batch(seed)
    cfg = EstimatorConfig(num_weightings=32, compute_dtype="float64")
    if layout == "contiguous":
        groups, kw = 5, dict(group_size=5)
    else:
        ids = [f"q{(i * 3) % 4}" for i in range(20)]  # interleaved groups
        groups, kw = ids, dict(group_ids=ids)
    again = compute_advantages("vpo_again", r, v, config=cfg, seed=seed, **kw)
    builtin = compute_advantages("vpo", r, v, config=cfg, seed=seed, **kw)
    np.testing.assert_allclose(again.advantages.numpy(), builtin.advantages.numpy(), **TIGHT)
    np.testing.assert_allclose(again.scores.numpy(), builtin.scores.numpy(), **TIGHT)
    w = SimplexSampler(32, seed=seed).sample(4, 4)
    ref_scores, ref_adv = vpo_advantages_reference(r, groups, w, v)
    np.testing.assert_allclose(again.scores.numpy(), ref_scores, **TIGHT)
    np.testing.assert_allclose(again.advantages.numpy(), ref_adv, **TIGHT)


def test_multi_rlvr_through_the_public_registration_matches_builtin_and_loop(registered):
    registered("multi_rlvr_again", sum_of_target, normalization="bessel")
    r, v = _batch(3)
    target = np.array([0.1, 0.2, 0.3, 0.4])
    again = compute_advantages("multi_rlvr_again", r, v, group_size=5, target_weights=target)
    builtin = compute_advantages("multi_rlvr", r, v, group_size=5, target_weights=target)
    assert torch.equal(again.advantages, builtin.advantages)
    s, adv = loop_multi_rlvr(r, v, 5, target)
    np.testing.assert_allclose(again.scores.numpy(), s, **TIGHT)
    np.testing.assert_allclose(again.advantages.numpy(), adv, **TIGHT)


def test_union_coverage_on_hand_built_sets():
    R = np.zeros((6, 3, 3))
    V = np.zeros((6, 3), dtype=bool)
    # group 1 (G = 3)
    R[0] = [[1, 0, 0], [0, 1, 0], [0, 0, 0]]
    V[0] = [1, 1, 1]  # noqa: E702  covers two objectives: 2
    R[1] = [[1, 0, 0], [1, 0, 0], [0, 0, 0]]
    V[1] = [1, 1, 0]  # noqa: E702  duplicate vectors: 1
    R[2] = [[0.5, 0.5, 0.5], [9, 9, 9], [0.5, 0.5, 0.5]]
    V[2] = [1, 0, 1]  # noqa: E702  invalid 9s ignored: 1.5
    # group 2: negative rewards, a tie and no valid answer
    R[3] = [[-1, -2, -3], [-3, 0.5, -3], [0, 0, 0]]
    V[3] = [1, 1, 0]  # noqa: E702  -1 + 0.5 - 3 = -3.5
    R[4] = [[-1, 0.5, -3], [0, 0, 0], [0, 0, 0]]
    V[4] = [1, 0, 0]  # noqa: E702  same coverage: -3.5
    V[5] = False  # no valid answer: invalid_score
    res = compute_advantages("union_coverage", R, V, group_size=3, config=EstimatorConfig(invalid_score=-4.0))
    np.testing.assert_allclose(res.scores.numpy(), [2.0, 1.0, 1.5, -3.5, -3.5, -4.0], **TIGHT)

    def pop_z(s, eps=1e-6):
        s = np.asarray(s)
        return (s - s.mean()) / (s.std() + eps)

    want = np.concatenate([pop_z([2.0, 1.0, 1.5]), pop_z([-3.5, -3.5, -4.0])])
    np.testing.assert_allclose(res.advantages.numpy(), want, **TIGHT)
    assert res.advantages[3] == res.advantages[4]  # equal coverage, equal advantage
    # the raw function, directly: same numbers before the invalid_score fill
    direct = union_coverage(torch.as_tensor(np.where(V[..., None], R, 0.0)), torch.as_tensor(V), None, None, None)
    np.testing.assert_allclose(direct.numpy()[:5], [2.0, 1.0, 1.5, -3.5, -3.5], **TIGHT)


def test_union_coverage_with_one_answer_is_the_sum_of_the_rewards():
    r = np.random.default_rng(0).random((8, 1, 3))
    res = compute_advantages("union_coverage", r, group_size=4)
    np.testing.assert_allclose(res.scores.numpy(), r[:, 0].sum(1), **TIGHT)


def test_weights_reach_the_objective_only_when_asked(registered):
    seen = {}

    def spy(name):
        def fn(rewards, valid, weights, group_index, target_weights):
            seen[name] = (weights, group_index.clone(), target_weights.clone())
            return rewards[:, 0, 0]

        return fn

    registered("spy_weights", spy("spy_weights"), uses_weightings=True)
    registered("spy_none", spy("spy_none"))
    r = np.random.default_rng(0).random((6, 2, 3))
    cfg = EstimatorConfig(num_weightings=5)
    compute_advantages(
        "spy_weights", r, group_ids=[7, 7, 3, 3, 7, 3], config=cfg, seed=4, target_weights=[0.2, 0.3, 0.5]
    )
    w, gi, t = seen["spy_weights"]
    assert w.shape == (2, 5, 3) and w.dtype == torch.float32  # compute_dtype
    assert torch.equal(w, SimplexSampler(5, seed=4).sample(2, 3, dtype=torch.float32))
    assert gi.tolist() == [0, 0, 1, 1, 0, 1]
    assert t.tolist() == [0.2, 0.3, 0.5]
    compute_advantages("spy_none", r, group_size=3, config=cfg)
    assert seen["spy_none"][0] is None


def test_registration_errors(registered):
    with pytest.raises(ValueError, match="already registered"):
        register_set_objective("grpo", union_coverage)
    with pytest.raises(ValueError, match="letters, digits and underscores"):
        register_set_objective("my-objective", union_coverage)
    with pytest.raises(ValueError, match="normalization must be one of population, bessel"):
        register_set_objective("new_one", union_coverage, normalization="l2")
    registered("bad_shape", lambda r, v, w, g, t: r[:, 0, :])
    registered("bad_value", lambda r, v, w, g, t: r[:, 0, 0] / 0.0)
    r = np.random.default_rng(0).random((4, 2, 3))
    with pytest.raises(
        ValueError, match=r"set objective 'bad_shape' must return a tensor of shape \[N\] = \(4,\); got \(4, 3\)"
    ):
        compute_advantages("bad_shape", r, group_size=2)
    with pytest.raises(ValueError, match="'bad_value' returned a NaN/inf score"):
        compute_advantages("bad_value", r, group_size=2)
    unregister_set_objective("bad_shape")
    assert "bad_shape" not in list_estimators()
    unregister_set_objective("grpo")  # not a set objective: nothing happens
    assert "grpo" in list_estimators()


def test_builtins_are_listed_everywhere(capsys):
    assert {"vpo", "multi_rlvr", "union_coverage"} <= set(list_set_objectives())
    assert (
        SET_OBJECTIVES["vpo"].normalization == "population" and SET_OBJECTIVES["multi_rlvr"].normalization == "bessel"
    )
    from vpo.cli import main

    assert main(["estimators"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^union_coverage\s+m answers\s+set objective:", out, flags=re.MULTILINE)


def test_set_objective_by_name_in_vpoconfig(registered):
    from vpo.train import VPOConfig

    registered("my_cover", union_coverage)
    args = VPOConfig(output_dir="/tmp/unused", estimator="my_cover", report_to="none", use_cpu=True)
    assert args.num_answers == 3 and args.is_multi_answer_estimator
    args = VPOConfig(output_dir="/tmp/unused", estimator="union_coverage", report_to="none", use_cpu=True)
    assert args.is_multi_answer_estimator


def test_set_objective_by_name_in_the_verl_plugin(registered):
    """veRL pass-through (no veRL needed): ``vpo_<name>`` resolves to the objective; the score
    function computes its score, the veRL estimator applies its group normalisation."""
    from vpo.integrations.verl_plugin import make_estimator
    from vpo.integrations.verl_reward import VERL_METHODS, core_method, verl_methods

    assert VERL_METHODS["vpo_union_coverage"] == "union_coverage"
    registered("my_bessel_cover", union_coverage, normalization="bessel")
    assert core_method("vpo_my_bessel_cover") == "my_bessel_cover"
    assert "vpo_my_bessel_cover" in verl_methods() and "vpo_my_bessel_cover" not in VERL_METHODS
    rng = np.random.default_rng(0)
    scores = rng.random(8)
    uids = np.array(["a", "a", "a", "a", "b", "b", "b", "b"], dtype=object)
    tlr = torch.zeros(8, 3)
    tlr[:, -1] = torch.as_tensor(scores, dtype=torch.float32)
    mask = torch.ones(8, 3)
    adv, _ = make_estimator("vpo_my_bessel_cover")(tlr, mask, uids)
    s = tlr[:, -1].double().view(2, 4)
    want = ((s - s.mean(1, keepdim=True)) / (s.std(1, keepdim=True) + 1e-6)).view(-1)  # Bessel
    torch.testing.assert_close(adv[:, 0].double(), want, atol=1e-6, rtol=0)
    adv_pop, _ = make_estimator("vpo_union_coverage")(tlr, mask, uids)
    want_pop = ((s - s.mean(1, keepdim=True)) / (s.std(1, unbiased=False, keepdim=True) + 1e-6)).view(-1)
    torch.testing.assert_close(adv_pop[:, 0].double(), want_pop, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="unknown vpo veRL estimator 'vpo_nothing'"):
        make_estimator("vpo_nothing")


def _docs_example() -> str:
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("### Adding a set objective", 1)[1]
    return re.search(r"```python\n(.*?)```", section, flags=re.DOTALL).group(1)


def test_docs_example_runs_and_is_the_worst_case_set_score():
    code = _docs_example()
    assert len([ln for ln in code.splitlines() if ln.strip()]) <= 12
    torch.manual_seed(0)
    ns: dict = {}
    try:
        exec(compile(code, str(DOCS), "exec"), ns)
        res = ns["res"]
        r = ns["rewards"].double()
        w = SimplexSampler(16, seed=0).sample(2, 4, dtype=torch.float32).double()
        want = [min(max(float(w[n // 4, k] @ r[n, i]) for i in range(3)) for k in range(16)) for n in range(8)]
        np.testing.assert_allclose(res.scores.numpy(), want, rtol=0, atol=1e-6)  # float32 weights
        assert "worst_case" in list_estimators()
    finally:
        unregister_set_objective("worst_case")
