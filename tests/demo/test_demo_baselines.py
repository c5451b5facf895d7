"""The rows no RL trains (issue #49): the uniform random answerer, the start at a hotter temperature,
and the share of a pool that is a fixed menu."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vpo.demo.analysis import menu_share
from vpo.demo.baselines import random_pool, run
from vpo.demo.cli import _parse_setting
from vpo.demo.config import DemoConfig
from vpo.demo.stages import build_jobs, eval_entries
from vpo.errors import UserError
from vpo.search.pools import Pool


def _animals(tmp_path, **kw) -> DemoConfig:
    base = dict(out=str(tmp_path), seeds=(0, 1), eval_problems=6, eval_budget=12, ks=(1, 3, 12), eval_seeds=2)
    return DemoConfig.for_domain("animals", **{**base, **kw})


def test_the_random_answerer_names_only_listed_animals_uniformly_and_scores_them_as_the_task_does(tmp_path):
    from vpo.tasks.animals import AnimalsTask

    cfg = _animals(tmp_path, animals_list_size=5, eval_budget=30)
    pool = random_pool(cfg, seed=0)
    task = AnimalsTask(list_size=5)
    examples = task.load(cfg.split, n=cfg.eval_problems)
    assert pool.m == 1 and pool.num_prompts == len(examples) and pool.num_rollouts == 30 * len(examples)
    assert pool.valid.all()
    for i, (p, ans) in enumerate(zip(pool.prompt_index, pool.answers)):
        ex = examples[p]
        assert ans[0] in ex["animals"]
        assert np.array_equal(pool.rewards[i, 0], task.score(ex, ans[0]))
    # uniform: every animal of a 5-animal list shows up in 30 draws (probability of a miss < 0.01 per list)
    for p, ex in enumerate(examples):
        named = {a[0] for a, q in zip(pool.answers, pool.prompt_index) if q == p}
        assert named == set(ex["animals"])
    # a replicate's own draws: seed 1 differs, seed 0 again is the same
    assert [a[0] for a in random_pool(cfg, seed=1).answers] != [a[0] for a in pool.answers]
    assert [a[0] for a in random_pool(cfg, seed=0).answers] == [a[0] for a in pool.answers]


def test_the_random_answerer_job_writes_a_report_the_demo_reads_like_any_run(tmp_path):
    from vpo.demo.analysis import StatsContext

    cfg = _animals(tmp_path)
    (tmp_path / "demo_config.json").write_text(json.dumps(cfg.as_dict()))
    ev = run(tmp_path, 1)
    rep = json.loads((ev / "report.json").read_text())
    assert list(rep["results"]) == ["random_s1"]
    st, m = StatsContext(DemoConfig.load(tmp_path)).stats(tmp_path, "random_s1")
    assert m == 1 and st["best_at_k"].shape == (cfg.eval_problems, len(cfg.ks))
    assert np.all(st["completion_rate"] == 1.0)  # every answer names a listed animal
    assert np.all(st["tokens_per_rollout"] == 0.0)


def test_rows_and_jobs_of_the_random_answerer_and_the_hotter_start(tmp_path):
    cfg = _animals(tmp_path, start_temperature=1.3, methods=("vpo",))
    keys = [k for k, _, _ in eval_entries(cfg)]
    assert keys == ["warmstart_m1", "warmstart_m3", "warmstart_hot_m1", "warmstart_hot_m3", "random", "vpo"]
    labels = dict((k, lab) for k, lab, _ in eval_entries(cfg))
    assert labels["warmstart_hot_m1"] == "Warm start (m=1, T=1.3)"
    jobs = {j.name: j for j in build_jobs(cfg, tmp_path, ws={0: tmp_path / "w0", 1: tmp_path / "w1"})}
    hot = jobs["eval warmstart_hot_m3_s1"]
    assert hot.argv[hot.argv.index("--temperature") + 1] == "1.3"
    assert jobs["eval warmstart_m3_s1"].argv[jobs["eval warmstart_m3_s1"].argv.index("--temperature") + 1] == "0.7"
    assert hot.settings["eval"]["eval_temperature"] == 1.3
    assert jobs["eval random_s1"].argv[-3:] == ["vpo.demo.baselines", str(tmp_path), "1"]
    # off: no such rows or jobs (the shop and maze domains' shipped runs are unchanged)
    plain = _animals(tmp_path, random_answerer=False, start_temperature=0.0, methods=("vpo",))
    assert [k for k, _, _ in eval_entries(plain)] == ["warmstart_m1", "warmstart_m3", "vpo"]
    assert not any(
        "random" in j.name or "hot" in j.name for j in build_jobs(plain, tmp_path, ws={0: tmp_path, 1: tmp_path})
    )


def test_settings_are_checked():
    with pytest.raises(UserError, match="defines no uniform random answerer"):
        DemoConfig.for_domain("maze", random_answerer=True)
    with pytest.raises(UserError, match="start_temperature"):
        DemoConfig.for_domain("animals", start_temperature=-1.0)
    with pytest.raises(UserError, match="true or false"):
        _parse_setting("random_answerer", "maybe", False)
    assert _parse_setting("random_answerer", "no", True) is False


def _pool(answer_sets: list[list[str]], prompt_index: list[int]) -> Pool:
    n, m = len(answer_sets), len(answer_sets[0])
    pool = Pool.from_arrays(np.zeros((n, m, 2)), prompt_index=prompt_index)
    pool.answers = answer_sets
    return pool


def test_menu_share_counts_rollouts_that_repeat_the_runs_most_common_set_in_any_order():
    # problem 0: two rollouts say {a, b} (in either order, any case), one {a, c}; problem 1: {b, a} and {d, e}
    pool = _pool([["a", "b"], ["B ", "a"], ["a", "c"], ["b", "a"], ["d", "e"]], [0, 0, 0, 1, 1])
    assert np.allclose(menu_share(pool, 2), [2 / 3, 1 / 2])
    # a pool that depends on the request: each problem its own answers, each set once
    pool = _pool([["a"], ["b"], ["c"], ["d"]], [0, 0, 1, 1])
    assert np.allclose(menu_share(pool, 2), [0.5, 0.0])  # the modal set (a tie broken by text) is one rollout
    pool.answers = None
    assert np.isnan(menu_share(pool, 2)).all()


def test_the_time_estimate_counts_the_hotter_starts_evaluations():
    from vpo.demo.cli import estimate_minutes

    plain = DemoConfig.for_domain("animals", methods=("vpo",), start_temperature=0.0)
    hot = DemoConfig.for_domain("animals", methods=("vpo",), start_temperature=1.3)
    assert estimate_minutes(hot) > estimate_minutes(plain)


def test_the_animals_report_counts_per_replicate_how_often_each_method_broke():
    from vpo.demo.animals import breakage_lines

    def row(label, r1, div, useful):
        seeds = lambda xs: {"per_seed": xs, "mean": sum(xs) / len(xs)}  # noqa: E731
        return {
            "label": label,
            "reward_at_1": seeds(r1),
            "completed_diversity": seeds(div),
            "completion_rate": seeds(useful),
        }

    agg = {
        "methods": {
            "warmstart_m1": row("start", [0.40, 0.50, 0.45], [0.4, 0.4, 0.4], [0.7, 0.7, 0.7]),
            "random": row("random", [0.1, 0.1, 0.1], [0.8, 0.8, 0.8], [1.0, 1.0, 1.0]),
            # collapsed in replicates 1 and 3; learned in 1 and 2 (replicate 3: +0.04 over its own start)
            "grpo_3x": row("GRPO 3x", [0.70, 0.56, 0.49], [0.01, 0.30, 0.049], [0.98, 0.98, 0.40]),
        }
    }
    text = "\n".join(breakage_lines(agg))
    assert "| GRPO 3x | 2 of 3 | 1 of 3 | 2 of 3 |" in text
    assert "random" not in text and "| start |" not in text  # only trained methods
    assert breakage_lines({"methods": {"warmstart_m1": agg["methods"]["warmstart_m1"]}}) == []


def test_the_animals_tables_show_best_at_3_where_the_random_answerer_and_the_models_trade_places():
    """On the shipped validation probe: the README table of the animals domain has best@3 beside
    best@1/10/30, pairs VPO with the random answerer but not with the m = 3 starts, and its cells are
    the demo.json's."""
    from pathlib import Path

    from vpo.demo.domains import domain_named
    from vpo.demo.fmt import fmt

    agg = json.loads((Path(__file__).parents[2] / "docs/demo/animals/validation/L20_probes/demo.json").read_text())
    text = domain_named("animals").readme_table(agg)
    head = next(line for line in text.splitlines() if line.startswith("| method |"))
    assert "| best@1 | best@3 | best@10 | best@30 |" in head
    rnd = agg["methods"]["random"]
    assert (
        f"| Uniform random answerer | {fmt(rnd['best_at_k']['1']['mean'])} | {fmt(rnd['best_at_k']['3']['mean'])} |"
        in text
    )
    pairs = text.split("VPO minus each method")[1]
    assert "| Uniform random answerer |" in pairs and "Warm start (m=3)" not in pairs


def test_the_training_reward_line_averages_windows_over_replicates():
    from vpo.demo.animals import curve_lines

    agg = {
        "methods": {"vpo": {"label": "VPO"}},
        # two replicates of 5 steps, windows of 2: [1, 2] & [3, 4] -> 2.5; [3, 4] & [5, 6] -> 4.5 (step 5 dropped)
        "training_curves": {"vpo": {"reward": [[1, 2, 3, 4, 9], [3, 4, 5, 6, 9]]}, "gone": {"reward": [[1, 2]]}},
    }
    (line, _) = curve_lines(agg, window=2)
    assert "VPO 2.50 → 4.50." in line and "gone" not in line
    assert curve_lines({"methods": {}}) == []
