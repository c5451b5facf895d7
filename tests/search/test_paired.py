"""vpo compare answers "is this better?": the first run minus each other, paired by prompt id, with
a bootstrap interval over the shared prompts (checked against a plain loop), marked when it
excludes 0; a warning when the pools' answer budgets or m differ."""

from __future__ import annotations

import json

import numpy as np

from vpo.search.metrics import bootstrap_ci
from vpo.search.paired import paired_differences
from vpo.search.pools import Pool, evaluate_pool


def _pool(shift, rollouts=4, m=1, prompts=10, seed=0):
    rng = np.random.default_rng(seed)
    r = np.clip(rng.random((prompts * rollouts, m, 2)) * 0.5 + shift, 0, 1)
    return Pool.from_arrays(r, group_size=rollouts, objectives=["a", "b"])


def test_paired_difference_by_prompt_with_its_interval():
    a, b = (evaluate_pool(_pool(s, seed=i), ks=(1, 4), bootstrap=300) for i, s in ((0, 0.4), (1, 0.0)))
    pd = paired_differences({"A": a, "B": b})
    d = np.asarray(a["per_prompt"]["best_at_k"]) - np.asarray(b["per_prompt"]["best_at_k"])
    got = pd["vs"]["B"]["best_at_k"]
    np.testing.assert_allclose(got["mean"], d.mean(0))
    lo, hi = bootstrap_ci(d.T, 300, 0.95, 0)
    np.testing.assert_allclose(got["ci_low"], lo) and np.testing.assert_allclose(got["ci_high"], hi)
    assert got["ci_low"][0] > 0 and pd["vs"]["B"]["num_prompts"] == 10
    # prompts are matched by id: a pool on other prompts shares none, and is left out
    assert paired_differences({"A": a}) is None


def test_vpo_compare_prints_it_and_warns_on_different_budgets(tmp_path):
    from vpo.cli import main

    _pool(0.4).save(tmp_path / "A" / "pool")
    _pool(0.0, rollouts=2, m=2, seed=1).save(tmp_path / "B" / "pool")
    out = tmp_path / "cmp"
    assert main(["compare", str(tmp_path / "A" / "pool"), str(tmp_path / "B" / "pool"), "--out", str(out),
                 "--ks", "1,4", "--bootstrap", "200", "--no-plots"]) == 0  # fmt: skip
    md = (out / "report.md").read_text()
    assert "## Is it better? A minus each method, paired by prompt" in md
    assert "| B | 10 | +" in md and " *" in md
    assert "**Warning**: the pools differ in m" in md
    doc = json.loads((out / "report.json").read_text())
    assert doc["paired"]["baseline"] == "A" and doc["warnings"]


def test_summary_plot_shows_no_panels_of_zeros_for_continuous_rewards(tmp_path, monkeypatch):
    import vpo.search.plots as plots

    drawn = []
    real_curve, real_bars = plots._curve, plots._bars
    monkeypatch.setattr(plots, "_curve", lambda ax, res, key, *a: drawn.append(key) or real_curve(ax, res, key, *a))
    monkeypatch.setattr(plots, "_bars", lambda ax, res, key, *a: drawn.append(key) or real_bars(ax, res, key, *a))
    cont = {"A": evaluate_pool(_pool(0.2), ks=(1, 4), bootstrap=0)}  # rewards < 1: no answer passes
    plots.plot_summary(cont, tmp_path / "c.png")
    assert "pass_at_k" not in drawn and "pass_at_1" not in drawn and "pareto_front_size" in drawn
    drawn.clear()
    passing = {"A": evaluate_pool(_pool(0.6), ks=(1, 4), bootstrap=0)}  # clipped to 1: some pass
    plots.plot_summary(passing, tmp_path / "p.png")
    assert "pass_at_k" in drawn and "pass_at_1" in drawn


def test_replicates_pair_replicate_with_replicate_and_carry_their_spread():
    """Three replicates per method: the difference is replicate i minus replicate i, per prompt, and
    the interval is replicate_interval's over [replicates, prompts] (checked against it directly).
    When the replicates disagree (one replicate of B far better), the replicate interval is wider
    than the by-prompt bootstrap of one pair of runs, which cannot see that spread."""
    from vpo.search.intervals import replicate_interval
    from vpo.search.paired import paired_replicates

    shifts_a, shifts_b = (0.30, 0.35, 0.25), (0.0, 0.3, 0.05)
    res = {}
    for i, s in enumerate(shifts_a):
        res[f"A{i}"] = evaluate_pool(_pool(s, seed=i), ks=(1, 4), bootstrap=200)
    for i, s in enumerate(shifts_b):
        res[f"B{i}"] = evaluate_pool(_pool(s, seed=10 + i), ks=(1, 4), bootstrap=200)
    groups = {"A": ["A0", "A1", "A2"], "B": ["B0", "B1", "B2"]}
    pr = paired_replicates(res, groups)
    d = np.stack(
        [
            np.asarray(res[f"A{i}"]["per_prompt"]["best_at_k"]) - np.asarray(res[f"B{i}"]["per_prompt"]["best_at_k"])
            for i in range(3)
        ]
    )  # [S, P, K]
    got = pr["vs"]["B"]["best_at_k"]
    for j in range(2):
        want = replicate_interval(d[:, :, j])
        assert (
            got["mean"][j] == want["mean"]
            and got["ci_low"][j] == want["ci_low"]
            and got["ci_high"][j] == want["ci_high"]
        )
    assert pr["num_replicates"] == 3 and pr["vs"]["B"]["num_prompts"] == 10
    one_pair = paired_differences({"A0": res["A0"], "B0": res["B0"]})["vs"]["B0"]["best_at_k"]
    assert got["ci_high"][1] - got["ci_low"][1] > one_pair["ci_high"][1] - one_pair["ci_low"][1]
    import pytest

    from vpo.errors import UserError

    with pytest.raises(UserError, match="pair one to one"):
        paired_replicates(res, {"A": ["A0", "A1"], "B": ["B0"]})


def test_vpo_compare_replicates_from_names(tmp_path):
    from vpo.cli import main

    runs = []
    for i, s in enumerate((0.4, 0.45, 0.35)):
        _pool(s, seed=i).save(tmp_path / f"a{i}" / "pool")
        runs.append(str(tmp_path / f"a{i}" / "pool"))
    for i, s in enumerate((0.0, 0.1, 0.05)):
        _pool(s, seed=10 + i).save(tmp_path / f"b{i}" / "pool")
        runs.append(str(tmp_path / f"b{i}" / "pool"))
    out = tmp_path / "cmp"
    args = ["compare", *runs, "--out", str(out), "--ks", "1,4", "--bootstrap", "100", "--no-plots"]
    assert main([*args, "--names", "vpo,vpo,vpo,grpo,grpo,grpo", "--replicates"]) == 0
    md = (out / "report.md").read_text()
    assert "## Is it better across replicates? vpo minus each method, 3 replicates" in md
    doc = json.loads((out / "report.json").read_text())
    assert len(doc["replicates"]["vpo"]) == len(doc["replicates"]["grpo"]) == 3
    assert doc["paired_replicates"]["vs"]["grpo"]["best_at_k"]["ci_low"][0] > 0
    # --replicates without repeated names is a user error (exit 2)
    assert main([*args, "--replicates"]) == 2
