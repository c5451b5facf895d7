"""The demo's arithmetic on small synthetic inputs with hand-computed answers: pool statistics,
two-level intervals, paired differences, the maze-order check and the settings-checked resume."""

from __future__ import annotations

import json
from dataclasses import replace
import sys
from pathlib import Path

import numpy as np
import pytest

from vpo.demo.analysis import (
    SCALARS,
    DemoDataError,
    aggregate_runs,
    paired,
    run_stats,
    summarize,
    two_level_interval,
)
from vpo.demo.config import DemoConfig
from vpo.demo.jobs import Job, changed_settings, mark_done, run_jobs, stage_state
from vpo.search.poolstats import (
    completed_diversity,
    completed_mask,
    distinct_count,
    matched_prefix,
    pareto_coverage,
    pool_union_coverage,
)

# ---------------------------------------------------------------------------------------------
# pool statistics
# ---------------------------------------------------------------------------------------------


def test_failing_cannot_win_completed_diversity():
    """The issue's example: one route finishing 9 times in 30 (the rest all-zero failures) scores high
    on all-answer diversity but 0 among completed answers; 30 complementary finished routes score > 0."""
    from vpo.search.metrics import reward_space_diversity

    one = np.array([1.0, 1.0, 0.0, 1.0])
    lazy = np.zeros((1, 30, 4))
    lazy[0, :9] = one
    lazy_done = completed_mask(lazy, np.ones((1, 30), bool), completion_index=0)
    assert lazy_done.sum() == 9
    assert reward_space_diversity(lazy, np.ones((1, 30), bool))[0] > 1.0  # failure inflates it
    assert completed_diversity(lazy, lazy_done)[0] == 0.0

    rng = np.random.default_rng(0)
    good = np.ones((1, 30, 4))
    good[0, :, 1] = rng.integers(0, 2, 30)
    good[0, :, 2] = 1 - good[0, :, 1]
    good_done = completed_mask(good, np.ones((1, 30), bool), completion_index=0)
    assert completed_diversity(good, good_done)[0] > 0.5


def test_completed_mask_without_completion_component():
    r = np.array([[[0, 0, 0], [0, 0.5, 0], [1, 1, 1]]], dtype=float)
    v = np.array([[True, True, False]])
    assert completed_mask(r, v).tolist() == [[False, True, False]]


def test_union_coverage_hand_computed():
    pts = np.array([[[1, 0.5, 0], [1, 0, 1], [0, 0, 0]]], dtype=float)
    assert pool_union_coverage(pts, np.array([[True, True, True]]))[0] == pytest.approx(2.5)
    assert pool_union_coverage(pts, np.array([[False, True, False]]))[0] == pytest.approx(2.0)
    assert pool_union_coverage(pts, np.array([[False, False, False]]))[0] == 0.0


def test_pareto_coverage_hand_computed():
    fronts = [np.array([[1, 1, 0, 1], [1, 0, 1, 1], [1, 0.5, 0.5, 0]]), np.zeros((0, 4))]
    pts = np.array(
        [
            [[1, 1, 0, 1], [1, 1, 0, 1], [0, 0, 0, 0]],  # hits 1 of 3 (twice)
            [[1, 1, 0, 1], [0, 0, 0, 0], [0, 0, 0, 0]],  # empty front: NaN
        ],
        dtype=float,
    )
    cov = pareto_coverage(pts, np.ones((2, 3), bool), fronts)
    assert cov[0] == pytest.approx(1 / 3)
    assert np.isnan(cov[1])
    pts[0, 2] = [1, 0.5, 0.5, 0]
    assert pareto_coverage(pts, np.ones((2, 3), bool), fronts)[0] == pytest.approx(2 / 3)
    masked = np.ones((2, 3), bool)
    masked[0, 2] = False  # a masked answer does not count
    assert pareto_coverage(pts, masked, fronts)[0] == pytest.approx(1 / 3)


def test_distinct_count():
    keys = [["UR", "UR", "RU", None], ["DD", None, None, None]]
    mask = np.array([[True, True, True, False], [True, False, False, False]])
    assert distinct_count(keys, mask).tolist() == [2.0, 1.0]


def test_matched_prefix_takes_ceil_k_over_m_rollouts_first_k_answers():
    """m = 3, k = 4: the first two rollouts in draw order, first 4 of their 6 answers."""
    present = np.ones((1, 4), bool)
    seen = {}

    def stat(keep):
        seen[int(keep.sum())] = keep.copy()
        return keep.sum((1, 2)).astype(float)

    out = matched_prefix(stat, present, m=3, ks=[1, 4, 12], seeds=[0])
    assert out.tolist() == [[1.0, 4.0, 12.0]]
    keep4 = seen[4][0]  # [R, m]
    rows = np.flatnonzero(keep4.any(1))
    assert len(rows) == 2 and sorted(keep4.sum(1)[rows].tolist()) == [1, 3]
    partial = rows[keep4.sum(1)[rows] == 1][0]
    assert keep4[partial].tolist() == [True, False, False]  # the first answer of the last rollout
    # absent rollouts are never drawn
    present[0, 3] = False
    out = matched_prefix(lambda keep: keep[:, 3].sum(1).astype(float), present, m=3, ks=[9], seeds=[0, 1, 2])
    assert out.tolist() == [[0.0]]


# ---------------------------------------------------------------------------------------------
# intervals and paired differences
# ---------------------------------------------------------------------------------------------


def test_two_level_interval_sees_seed_variance():
    """Constant within a seed, 0 vs 1 across two seeds: a maze-only bootstrap would give a zero-width
    interval; resampling seeds gives means 0, 0.5, 1 (prob. 1/4, 1/2, 1/4), so the 95 % interval is [0, 1]."""
    v = np.array([[0.0] * 20, [1.0] * 20])
    lo, hi = two_level_interval(v, 4000, seed=1)
    assert (lo, hi) == (0.0, 1.0)
    s = summarize(v, 4000)
    assert s["mean"] == 0.5 and s["per_seed"] == [0.0, 1.0]
    assert s["se_seeds"] == pytest.approx(0.5)  # std([0, 1], ddof=1) / sqrt(2)
    assert s["se_mazes_given_models"] == 0.0  # every maze's seed mean is 0.5


def test_two_level_interval_constant_and_no_resamples():
    assert two_level_interval(np.full((3, 5), 0.25), 100) == (0.25, 0.25)
    lo, hi = two_level_interval(np.full((3, 5), 0.25), 0)
    assert np.isnan(lo) and np.isnan(hi)
    with pytest.raises(ValueError):
        two_level_interval(np.zeros(4), 10)


def test_paired_difference_broadcasts_a_one_seed_baseline_and_refuses_mismatches():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert paired(a, np.array([[1.0, 1.0]])).tolist() == [[0.0, 1.0], [2.0, 3.0]]
    with pytest.raises(DemoDataError):
        paired(a, np.zeros((2, 3)))
    with pytest.raises(DemoDataError):
        paired(a, np.zeros((3, 2)))


def _fake_run(best: list[float], rng, ks=(1, 3)):
    P = len(best)
    run = {name: rng.random(P) for name in SCALARS}  # every scalar the aggregation reads
    b = np.asarray(best, dtype=float)
    for name in ("best_at_k", "ew_best_at_k", "pareto_coverage", "pref_w*"):
        run[name] = np.stack([b * (i + 1) for i in range(len(ks))], 1)
    return run


def test_aggregate_runs_hand_computed_differences():
    """VPO vs GRPO over 2 seeds x 3 mazes: per-seed differences 0.2 and 0.4 (k = 1), so the paired mean is
    0.3, the SE over seeds 0.1 and every per-seed value is listed; k = 3 doubles each (the fake curve)."""
    rng = np.random.default_rng(0)
    cfg = DemoConfig(
        seeds=(0, 1), methods=("grpo", "vpo"), ks=(1, 3), eval_budget=3, bootstrap=500, interval="two_level_bootstrap"
    )
    runs = {
        "warmstart_m1": [_fake_run([0.1, 0.1, 0.1], rng)],
        "grpo": [_fake_run([0.3, 0.3, 0.3], rng), _fake_run([0.2, 0.2, 0.2], rng)],
        "vpo": [_fake_run([0.5, 0.5, 0.5], rng), _fake_run([0.6, 0.6, 0.6], rng)],
    }
    labels = {"warmstart_m1": "Warm start", "grpo": "GRPO", "vpo": "VPO"}
    agg = aggregate_runs(cfg, runs, labels, {"warmstart_m1": 1, "grpo": 1, "vpo": 3}, ["w*"])
    d = agg["paired_vs_vpo"]["grpo"]["best_at_k"]
    assert d[1]["mean"] == pytest.approx(0.3)
    assert d[1]["per_seed"] == pytest.approx([0.2, 0.4])
    assert d[1]["se_seeds"] == pytest.approx(0.1)
    assert d[3]["mean"] == pytest.approx(0.6)
    assert d[1]["ci_low"] == pytest.approx(0.2) and d[1]["ci_high"] == pytest.approx(0.4)
    w = agg["paired_vs_vpo"]["warmstart_m1"]["best_at_k"][1]  # a one-seed baseline is broadcast
    assert w["per_seed"] == pytest.approx([0.4, 0.5])
    assert agg["methods"]["vpo"]["best_at_k"][1]["mean"] == pytest.approx(0.55)
    assert agg["methods"]["vpo"]["m"] == 3
    json.dumps(agg)  # the report is JSON
    # the replicate t interval of the same data: two replicates, t with 1 degree of freedom, and no
    # maze-to-maze spread (every maze has the seed's value): 0.3 +- 12.706 * sd([0.2, 0.4]) / sqrt(2)
    t = aggregate_runs(
        replace(cfg, interval="replicate_t"), runs, labels, {"warmstart_m1": 1, "grpo": 1, "vpo": 3}, ["w*"]
    )
    d = t["paired_vs_vpo"]["grpo"]["best_at_k"][1]
    assert d["mean"] == pytest.approx(0.3)
    assert d["ci_low"] == pytest.approx(0.3 - 12.7062047 * 0.1) and d["ci_high"] == pytest.approx(
        0.3 + 12.7062047 * 0.1
    )


def test_aggregate_runs_refuses_different_maze_counts():
    rng = np.random.default_rng(0)
    cfg = DemoConfig(seeds=(0,), methods=("vpo",), ks=(1, 3), eval_budget=3)
    runs = {"warmstart_m1": [_fake_run([0.1, 0.1], rng)], "vpo": [_fake_run([0.5, 0.5, 0.5], rng)]}
    with pytest.raises(DemoDataError, match="differ in shape"):
        aggregate_runs(cfg, runs, {"warmstart_m1": "w", "vpo": "v"}, {"warmstart_m1": 1, "vpo": 3}, ["w*"])


def test_run_stats_refuses_mazes_in_another_order():
    """Two evaluations must list the mazes in the same order as the split, or paired differences
    would compare different mazes."""
    from vpo.search.pools import Pool
    from vpo.tasks.maze import MazeTask

    task = MazeTask(size=5, compact=True, budget_slack=0)
    exs = task.load("validation", n=3)
    ids = [e["id"] for e in exs]
    pool = Pool(
        np.zeros((3, 1, 4)),
        np.ones((3, 1), bool),
        [0, 1, 2],
        ids[::-1],
        task.objectives,
        task.target_weights,
        answers=[["U"], ["U"], ["U"]],
    )
    report = {"per_prompt": {"prompt_ids": ids[::-1]}, "metrics": {"best_at_k": {"k": [1]}}}
    with pytest.raises(DemoDataError, match="another order"):
        run_stats(report, pool, exs, [np.ones((1, 4))] * 3, {}, [1], 1)


def test_run_stats_on_a_hand_built_maze_pool():
    """Completed routes, distinct executed routes and Pareto coverage of a pool written by hand from
    the solver's own routes (so the expected values are known)."""
    from vpo.search.metrics import evaluate
    from vpo.search.pools import Pool
    from vpo.tasks.maze import Maze, MazeTask, pareto_routes

    task = MazeTask(size=5, compact=True, budget_slack=0)
    exs = task.load("validation", n=2)
    fronts, answers, rewards = [], [], []
    for ex in exs:
        routes = pareto_routes(Maze.from_example(ex))
        fronts.append(np.stack([r.reward for r in routes]))
        best = routes[0]
        # 4 rollouts of m = 1: the best route twice (once with a trailing move after E), a failure, garbage
        for text in (best.moves, best.moves + "U", "L", "hello"):
            answers.append([text])
            rewards.append([task.score(ex, text)])
    pool = Pool(
        np.array(rewards),
        np.ones((8, 1), bool),
        [0, 0, 0, 0, 1, 1, 1, 1],
        [e["id"] for e in exs],
        task.objectives,
        task.target_weights,
        answers=answers,
    )
    rep = evaluate(pool.rewards, pool.valid, pool.prompt_index, ks=[1, 4], prompt_ids=pool.prompt_ids, bootstrap=0)
    prefs = {"w*": np.full(4, 0.25)}
    st = run_stats(rep, pool, exs, fronts, prefs, [1, 4], 5)
    assert st["completion_rate"].tolist() == [0.5, 0.5]
    assert st["distinct_routes"].tolist() == [1.0, 1.0]  # the trailing move after E is the same route
    assert st["completed_diversity"].tolist() == [0.0, 0.0]
    np.testing.assert_allclose(st["pareto_coverage"][:, 1], [1 / len(f) for f in fronts])
    # best@k under w* computed here equals the eval report's (same seeds, same draws)
    np.testing.assert_allclose(st["pref_w*"], st["best_at_k"])


# ---------------------------------------------------------------------------------------------
# resume safety
# ---------------------------------------------------------------------------------------------


def test_changed_settings_names_what_changed():
    old = {"train": {"learning_rate": 3e-4, "seed": 0}, "x": 1}
    new = {"train": {"learning_rate": 4e-4, "seed": 0}, "x": 1}
    assert changed_settings(old, new) == ["train.learning_rate: 0.0003 -> 0.0004"]
    # a record read back from JSON has lists where the config has tuples: not a change (the resume log
    # called eval.ks changed on every rerun)
    assert (
        changed_settings(
            {"eval": {"ks": [1, 10, 30], "pairs": [[1, 2]]}}, {"eval": {"ks": (1, 10, 30), "pairs": ((1, 2),)}}
        )
        == []
    )
    assert changed_settings({"eval": {"ks": [1, 10]}}, {"eval": {"ks": (1, 30)}}) == ["eval.ks: [1, 10] -> [1, 30]"]


def test_stage_state(tmp_path):
    marker = tmp_path / "out.json"
    assert stage_state(marker, {"a": 1}) == (False, [])
    marker.write_text("{}")
    done, why = stage_state(marker, {"a": 1})
    assert not done and "no settings record" in why[0]
    mark_done(marker, {"a": 1})
    assert stage_state(marker, {"a": 1}) == (True, [])
    assert stage_state(marker, {"a": 2}) == (False, ["a: 1 -> 2"])


def _job(tmp_path: Path, name: str, value: int, after=()) -> Job:
    out = tmp_path / f"{name}.txt"
    code = f"import pathlib; p = pathlib.Path({str(out)!r}); p.write_text(str({value}))"
    return Job(
        name, [sys.executable, "-c", code], tmp_path / f"{name}.log", out, settings={"value": value}, after=list(after)
    )


@pytest.mark.parametrize("workers", [True, False], ids=["workers", "processes"])
def test_run_jobs_resumes_and_reruns_changed_stages_and_their_dependants(tmp_path, capsys, workers):
    ran = run_jobs([_job(tmp_path, "a", 1), _job(tmp_path, "b", 1, ["a"])], 2, workers=workers)
    assert set(ran) == {"a", "b"}
    assert (
        run_jobs([_job(tmp_path, "a", 1), _job(tmp_path, "b", 1, ["a"])], 2, workers=workers) == {}
    )  # all done: skipped
    capsys.readouterr()
    # a changed setting of "a" reruns a, and b because it depends on a
    ran = run_jobs([_job(tmp_path, "a", 2), _job(tmp_path, "b", 1, ["a"])], 2, workers=workers)
    assert set(ran) == {"a", "b"}
    assert (tmp_path / "a.txt").read_text() == "2"
    assert "a: settings changed" in capsys.readouterr().out


def _code_job(tmp_path: Path, name: str, code: str, cost: float = 0.0, after=()) -> Job:
    return Job(
        name,
        [sys.executable, "-c", code],
        tmp_path / f"{name}.log",
        tmp_path / f"{name}.txt",
        settings={"code": code},
        after=list(after),
        cost=cost,
    )


def test_worker_runs_jobs_in_one_process_longest_first_with_logs_and_exit_codes(tmp_path):
    """One worker slot: jobs share its process (state left by one job is visible to the next, which
    is the point: imports and generated mazes are paid once), run longest-expected first, write
    their own logs, and a failing job stops the run with its traceback."""
    out = lambda n: str(tmp_path / f"{n}.txt")  # noqa: E731
    jobs = [
        _code_job(
            tmp_path,
            "short",
            f"import builtins, os; print('short ran'); open({out('short')!r}, 'w').write(str(builtins.__dict__.get('_vpo_pid')) + ' ' + str(os.getpid()))",
            cost=1,
        ),
        _code_job(
            tmp_path,
            "long",
            f"import builtins, os; builtins._vpo_pid = os.getpid(); print('long ran'); open({out('long')!r}, 'w').write('x')",
            cost=9,
        ),
    ]
    assert set(run_jobs(jobs, 1, workers=True)) == {"short", "long"}
    seen_pid, own_pid = (tmp_path / "short.txt").read_text().split()
    assert seen_pid == own_pid  # "long" ran first, in the same process
    assert (tmp_path / "short.log").read_text().strip() == "short ran"
    assert (tmp_path / "long.log").read_text().strip() == "long ran"
    bad = _code_job(tmp_path, "bad", "raise ValueError('boom in job')")
    with pytest.raises(RuntimeError, match="job bad failed") as err:
        run_jobs([bad], 1, workers=True)
    assert "ValueError: boom in job" in str(err.value)
    exits = _code_job(tmp_path, "exits", "import sys; sys.exit(3)")
    with pytest.raises(RuntimeError, match=r"exit 3"):
        run_jobs([exits], 1, workers=True)


def test_worker_runs_module_jobs_like_python_dash_m(tmp_path):
    """``-m vpo.cli ...`` in a worker behaves as the command does: a user error is one line, exit 2."""
    job = Job(
        "cli",
        [sys.executable, "-m", "vpo.cli", "eval", "--model", str(tmp_path / "missing")],
        tmp_path / "cli.log",
        tmp_path / "never.json",
    )
    with pytest.raises(RuntimeError, match=r"exit 2"):
        run_jobs([job], 1, workers=True)
    log = (tmp_path / "cli.log").read_text()
    assert "vpo eval: error:" in log and "Traceback" not in log


def test_a_statistic_undefined_for_a_whole_run_is_nan_without_a_numpy_warning_and_says_how_many_are_defined():
    import warnings

    from vpo.demo.analysis import summarize
    from vpo.demo.domain_base import rho_cell

    v = np.array([[0.2, np.nan, 0.4], [np.nan, np.nan, np.nan]])  # replicate 2: a collapsed pool, ρ̄ nowhere defined
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = summarize(v, 0, interval="replicate_t")
        none = summarize(np.full((2, 3), np.nan), 0, interval="replicate_t")
    assert s["defined"] == [2, 6] and s["mean"] == pytest.approx(0.3) and np.isnan(s["per_seed"][1])
    assert rho_cell({"collinearity": s}) == "0.30 (2/6)" and rho_cell({"collinearity": none}) == "n/a (0/6)"
    full = summarize(np.ones((2, 3)), 0, interval="replicate_t")
    assert "defined" not in full and rho_cell({"collinearity": full}) == "1.00"  # the shipped reports' cells


def test_the_report_says_how_often_training_groups_were_flat():
    from vpo.demo.report import flat_group_lines

    agg = {
        "methods": {"grpo": {"label": "GRPO"}, "vpo": {"label": "VPO (m=3)"}},
        "training_curves": {
            "grpo": {"flat_group_frac": [[0.0, 0.5, 1.0], [1.0, 1.0, 1.0]]},
            "vpo": {"flat_group_frac": [[0.0, 0.0, 0.25], [0.0, float("nan"), 0.0]]},
        },
    }
    (line, blank) = flat_group_lines(agg)
    assert "GRPO 0.75 (max 1.00); VPO (m=3) 0.05 (max 0.25)." in line and blank == ""
    # a run recorded before the curves held it: no line, so its shipped report renders as it did
    assert flat_group_lines({"methods": {}, "training_curves": {"grpo": {"diversity": [[1.0]]}}}) == []


def test_intervals_of_a_non_negative_statistic_stop_at_zero_and_differences_keep_their_sign():
    from vpo.demo.analysis import summarize

    v = np.array([[0.0, 0.0, 0.3], [0.0, 0.0, 0.0], [0.1, 0.0, 0.0]])  # a diversity near 0
    raw = summarize(v, 0, interval="replicate_t")
    cut = summarize(v, 0, interval="replicate_t", lower=0.0)
    assert (
        raw["ci_low"] < 0 and cut["ci_low"] == 0.0 and cut["ci_high"] == raw["ci_high"] and cut["mean"] == raw["mean"]
    )
    diff = summarize(v - 0.2, 0, interval="replicate_t")  # a paired difference: negative bounds stay
    assert diff["ci_low"] < -0.2  # not cut: a difference may be negative
