"""The reference's pool statistics in `vpo eval` / `vpo compare` reports (report.json + report.md)."""

from __future__ import annotations

import json

import numpy as np

from vpo.cli import main as vpo_main
from vpo.search import Pool
from vpo.search.metrics import group_by_prompt
from vpo.search.poolstats import evaluate_pool_stats, pool_statistics
from vpo.search.report import load_report


def _pool(tmp_path, name, seed):
    rng = np.random.default_rng(seed)
    rewards = rng.integers(0, 3, size=(12, 2, 3)) / 2.0  # 3 prompts x 4 rollouts x m = 2, d = 3
    valid = rng.random((12, 2)) < 0.8
    valid[:4] = False  # prompt 0 has no valid answer
    pool = Pool.from_arrays(rewards, valid, group_size=4, objectives=["a", "b", "c"], target_weights=[0.5, 0.3, 0.2])
    pool.save(tmp_path / name)
    return pool


def test_eval_report_holds_the_pool_statistics(tmp_path, capsys):
    pool = _pool(tmp_path, "p", 0)
    code = vpo_main(
        [
            "eval",
            "--pool",
            str(tmp_path / "p"),
            "--ks",
            "1,4",
            "--bootstrap",
            "30",
            "--no-plots",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    assert code == 0, capsys.readouterr().err
    res = load_report(tmp_path / "r")["p"]
    ps = res["pool_stats"]
    assert ps["config"]["convention"] == "valid" and ps["config"]["ks"] == [1, 2, 3]
    # the per-prompt values are pool_statistics on the grouped pool, with the task's w*
    g = group_by_prompt(pool.rewards, pool.valid, pool.prompt_index)
    want = pool_statistics(g.rewards, g.valid, g.present, weights=[0.5, 0.3, 0.2], ks=(1, 2, 3))
    for name in ("witness_fraction", "pareto_fraction", "best_individual", "subset_winner_share"):
        got = np.array([np.nan if x is None else x for x in ps["per_prompt"][name]], dtype=float)
        np.testing.assert_allclose(got, want[name], atol=1e-12, err_msg=name)
        finite = want[name][np.isfinite(want[name])]
        assert ps["metrics"][name]["mean"] == np.float64(finite.mean()).item()
        assert ps["metrics"][name]["num_prompts"] == finite.size
    # prompt 0 has no valid answer: its witness fraction is undefined, so 2 prompts count
    assert ps["metrics"]["witness_fraction"]["num_prompts"] == 2
    np.testing.assert_allclose(ps["metrics"]["pass_at_k_rollout"]["mean"], np.nanmean(want["pass_at_k_rollout"], 0))
    md = (tmp_path / "r" / "report.md").read_text()
    assert "## Pool statistics (the reference implementation's definitions)" in md
    assert "| p | " in md.split("## Pool statistics")[1] and "rollout k=3" in md

    # the reference convention and "off"
    assert (
        vpo_main(
            [
                "eval",
                "--pool",
                str(tmp_path / "p"),
                "--bootstrap",
                "0",
                "--no-plots",
                "--pool-stats",
                "reference",
                "--out",
                str(tmp_path / "ref"),
            ]
        )
        == 0
    )
    ref = load_report(tmp_path / "ref")["p"]["pool_stats"]
    direct = evaluate_pool_stats(
        pool.rewards,
        pool.valid,
        pool.prompt_index,
        target_weights=pool.target_weights,
        convention="reference",
        bootstrap=0,
    )
    assert ref["metrics"] == json.loads(json.dumps(direct["metrics"]))
    assert ref["metrics"]["witness_fraction"]["num_prompts"] == 3  # the padded pool of prompt 0 counts
    assert (
        vpo_main(
            [
                "eval",
                "--pool",
                str(tmp_path / "p"),
                "--bootstrap",
                "0",
                "--no-plots",
                "--pool-stats",
                "off",
                "--out",
                str(tmp_path / "off"),
            ]
        )
        == 0
    )
    assert "pool_stats" not in load_report(tmp_path / "off")["p"]
    assert "## Pool statistics" not in (tmp_path / "off" / "report.md").read_text()


def test_compare_adds_pool_statistics_to_saved_reports_that_lack_them(tmp_path, capsys):
    for name, seed in (("a", 1), ("b", 2)):
        _pool(tmp_path / name, "pool", seed)
        assert (
            vpo_main(
                [
                    "eval",
                    "--pool",
                    str(tmp_path / name / "pool"),
                    "--bootstrap",
                    "0",
                    "--no-plots",
                    "--pool-stats",
                    "off",
                ]
            )
            == 0
        )
        assert "pool_stats" not in load_report(tmp_path / name)[name]
    # run b loses its pool: its row shows "–"
    import shutil

    shutil.rmtree(tmp_path / "b" / "pool")
    code = vpo_main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "cmp"), "--no-plots"])
    assert code == 0, capsys.readouterr().err
    both = load_report(tmp_path / "cmp")
    assert both["a"]["pool_stats"]["config"]["convention"] == "valid"
    assert "pool_stats" not in both["b"]
    md = (tmp_path / "cmp" / "report.md").read_text().split("## Pool statistics")[1]
    assert "| a | " in md and "| b | – | – |" in md
