"""Set objectives as ``vpo eval`` diagnostics (vpo.search.set_scores): each registered objective's
score of every rollout's answer set, checked against hand arithmetic and a plain loop, and the
``--set-objectives`` flag end to end on a saved pool."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vpo.cli import main as vpo_main
from vpo.core.weights import fixed_weights
from vpo.search.pools import Pool
from vpo.search.set_scores import set_objective_scores

# 2 prompts; prompt 0 has 2 rollouts, prompt 1 has 1; m = 2 answers, d = 2 objectives, w* = (0.5, 0.5)
REWARDS = np.array(
    [
        [[1.0, 0.0], [0.0, 1.0]],  # p0 r0: complementary answers
        [[0.5, 0.5], [0.2, 0.2]],  # p0 r1: the second answer is dominated
        [[0.9, 0.1], [7.0, 7.0]],  # p1 r0: the second slot is invalid (its reward must not count)
    ]
)
VALID = np.array([[True, True], [True, True], [True, False]])
INDEX = np.array([0, 0, 1])


def _pool(valid=VALID):
    return Pool.from_arrays(REWARDS, valid, prompt_index=INDEX, prompt_ids=["p0", "p1"], objectives=["a", "b"])


def test_union_coverage_and_multi_rlvr_by_hand():
    out = set_objective_scores(_pool(), ["union_coverage", "multi_rlvr"], bootstrap=0)["scores"]
    # union coverage, sum_j max_i r_ij: r0 1 + 1 = 2, r1 0.5 + 0.5 = 1 -> prompt 0: 1.5; p1 r0: 0.9 + 0.1 = 1
    assert out["union_coverage"]["mean"] == pytest.approx((1.5 + 1.0) / 2)
    # multi_rlvr, sum over valid answers of w*.r: r0 0.5 + 0.5 = 1, r1 0.5 + 0.2 = 0.7 -> 0.85; p1: 0.5
    assert out["multi_rlvr"]["mean"] == pytest.approx((0.85 + 0.5) / 2)


def test_vpo_set_score_is_the_expected_best_under_the_fixed_weightings():
    w = fixed_weights(2, 64).numpy()
    per_rollout = []
    for n in range(len(REWARDS)):  # the plain loop: mean over weightings of the best valid answer
        ans = REWARDS[n][VALID[n]]
        per_rollout.append(np.mean([max(float(a @ wk) for a in ans) for wk in w]))
    want = (np.mean(per_rollout[:2]) + per_rollout[2]) / 2  # prompts weigh equally
    got = set_objective_scores(_pool(), ["vpo"], num_weightings=64, bootstrap=0)["scores"]["vpo"]["mean"]
    assert got == pytest.approx(want, abs=1e-12)


def test_a_rollout_without_a_valid_answer_scores_the_invalid_score():
    valid = VALID.copy()
    valid[2] = False
    out = set_objective_scores(_pool(valid), ["union_coverage"], invalid_score=-1.0, bootstrap=0)["scores"]
    assert out["union_coverage"]["mean"] == pytest.approx((1.5 + -1.0) / 2)


def test_unknown_names_are_refused_with_the_registered_ones():
    with pytest.raises(ValueError, match="unknown set objective.*nosuch.*registered:.*union_coverage"):
        set_objective_scores(_pool(), ["nosuch"])


def test_vpo_eval_reports_set_objectives(tmp_path, capsys):
    _pool().save(tmp_path / "pool")
    code = vpo_main(
        [
            "eval",
            "--pool",
            str(tmp_path / "pool"),
            "--ks",
            "1,2",
            "--bootstrap",
            "50",
            "--set-objectives",
            "union_coverage,vpo",
            "--no-plots",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert code == 0, capsys.readouterr().err
    rep = json.loads(next((tmp_path / "o").rglob("report.json")).read_text())
    res = next(iter(rep["results"].values())) if "results" in rep else rep
    scores = res["set_objectives"]["scores"]
    assert set(scores) == {"union_coverage", "vpo"}
    s = scores["union_coverage"]
    assert s["mean"] == pytest.approx(1.25) and s["ci_low"] <= s["mean"] <= s["ci_high"]
    md = next((tmp_path / "o").rglob("report.md")).read_text()
    assert "## Set objectives" in md and "union_coverage" in md
    capsys.readouterr()
    code = vpo_main(
        [
            "eval",
            "--pool",
            str(tmp_path / "pool"),
            "--ks",
            "1",
            "--set-objectives",
            "nosuch",
            "--no-plots",
            "--out",
            str(tmp_path / "o2"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "unknown set objective" in err and "Traceback" not in err
