"""Hard constraints: parsing, admissible masks, best@k / pass@k / E_w[best@k] among
admissible answers in eval (maze pools whose unconstrained best crosses lava, a custom FunctionTask),
the report and CLI, and the training wrapper that scores a violating answer as invalid."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from vpo.search import Pool, evaluate_pool
from vpo.search.constraints import constrained_metrics, markdown_section
from vpo.tasks import FunctionTask
from vpo.tasks.constrained import (
    ConstrainedBatch,
    ConstraintError,
    admissible,
    constrained,
    parse_constraints,
)
from vpo.tasks.maze import OBJECTIVES, Maze, MazeTask, pareto_routes

HERE = Path(__file__).resolve()


def small_and_even(rewards):
    """A predicate on the reward vector (used by reference ``path/to/this_file.py:small_and_even``)."""
    return (rewards[..., 0] <= 0.5) & (rewards[..., 1] >= 1.0)


def not_a_mask(rewards):
    return rewards.sum(-1)  # floats, not booleans


# ---------------------------------------------------------------------------------------------
# parsing and masks
# ---------------------------------------------------------------------------------------------


def test_bounds_parse_and_mask():
    cons = parse_constraints(["avoid_lava>=1", " gold <= 0.5 "], OBJECTIVES)
    assert [(c.objective, c.op, c.value) for c in cons] == [("avoid_lava", ">=", 1.0), ("gold", "<=", 0.5)]
    r = np.array([[1, 0.5, 0, 1.0], [1, 0.6, 0, 1.0], [1, 0.0, 1, 0.5], [0, 0, 0, 0]])
    assert admissible(r, None, cons, OBJECTIVES).tolist() == [True, False, False, False]
    assert admissible(r, np.array([False, True, True, True]), cons[:1], OBJECTIVES).tolist() == [
        False,
        True,
        False,
        False,
    ]
    assert parse_constraints(None, OBJECTIVES) == [] and len(parse_constraints("gold>=1e-1", OBJECTIVES)) == 1


@pytest.mark.parametrize(
    "text,match",
    [
        ("lava>=1", "does not have; its objectives are completion, gold, diamond, avoid_lava"),
        ("avoid_lava>1", "cannot read constraint"),
        ("avoid_lava>=high", "cannot read constraint"),
        ("no_such_module_xyz:f", "not found"),
        (f"{HERE}:missing_function", "has no attribute"),
    ],
)
def test_bad_constraints_say_what_to_write(text, match):
    with pytest.raises(ConstraintError, match=match):
        parse_constraints([text], OBJECTIVES)


def test_predicates_by_reference_and_callable():
    names = ("value", "even")
    r = np.array([[0.4, 1.0], [0.4, 0.0], [0.9, 1.0]])
    for spec in (f"{HERE}:small_and_even", small_and_even):
        (c,) = parse_constraints([spec], names)
        assert admissible(r, None, [c], names).tolist() == [True, False, False]
    (bad,) = parse_constraints([f"{HERE}:not_a_mask"], names)
    with pytest.raises(ConstraintError, match="must return booleans"):
        admissible(r, None, [bad], names)
    (wrong_shape,) = parse_constraints([lambda x: np.ones(5, dtype=bool)], names)
    with pytest.raises(ConstraintError, match="mask of shape"):
        admissible(r, None, [wrong_shape], names)


# ---------------------------------------------------------------------------------------------
# eval on maze pools: the unconstrained best crosses lava
# ---------------------------------------------------------------------------------------------


def tags(answers):
    return "".join(f"<answer_{i}>{a}</answer_{i}>" for i, a in enumerate(answers, start=1))


@pytest.fixture(scope="module")
def maze_pool():
    """Two prompts, 2 rollouts x m = 3 each, scored by the maze itself.

    Prompt 0 (size-7 test maze 0): its best routes (w* 0.667) cross lava, its best lava-free routes
    score 0.625. Prompt 1 (same maze): only lava-crossing routes and a non-route."""
    task = MazeTask(size=7)
    ex = task.load("test", 1)[0]
    routes = pareto_routes(Maze.from_example(ex))
    lava = [r for r in routes if r.reward[3] < 1]
    safe = [r for r in routes if r.reward[3] >= 1]
    assert lava and safe and max(r.target_score for r in lava) > max(r.target_score for r in safe) + 0.03
    comps = [
        tags([lava[0].moves, safe[0].moves, "not a route"]),
        tags([safe[-1].moves]),
        tags([lava[0].moves, "xyz"]),
        tags([lava[-1].moves]),
    ]
    b = task.score_completions([ex] * 4, comps, 3)
    pool = Pool.from_arrays(
        b.rewards, b.valid, prompt_index=[0, 0, 1, 1], objectives=task.objectives, target_weights=task.target_weights
    )
    return pool, max(r.target_score for r in lava), max(r.target_score for r in safe)


def exact_full(res, key="best_at_k_exact"):
    e = res["metrics"][key]
    return dict(zip(e["k"], e["mean"]))


def test_maze_pool_constrained_best_at_k(maze_pool):
    pool, best_lava, best_safe = maze_pool
    kw = dict(ks=(1, 3, 6), bootstrap=0)
    plain = evaluate_pool(pool, **kw)
    c = constrained_metrics(pool, ["avoid_lava>=1"], **kw)
    # unconstrained: both prompts reach the lava route's score at the whole pool (k = 6)
    assert exact_full(plain)[6] == pytest.approx(best_lava, abs=1e-12)
    full = c["metrics"]["best_at_k"]
    # constrained, k = 6 (every slot drawn): prompt 0's best is the safe route, prompt 1 has none
    assert full["mean"][full["k"].index(6)] == pytest.approx((best_safe + 0.0) / 2, abs=1e-12)
    per = c["per_prompt"]["best_at_k"]
    assert per[1] == [0.0, 0.0, 0.0]  # a pool with no admissible answer scores invalid_score
    # valid answers: prompt 0 has 4 (lava, safe, a non-route scored all-zero, safe), prompt 1 has 3
    # (lava, non-route, lava); only the 2 safe routes are admissible: a non-route's avoid_lava is 0 too
    assert int(pool.valid.sum()) == 7
    assert c["num_filtered"] == 5 and c["filtered_frac"] == pytest.approx(5 / 7)
    assert c["no_admissible_frac"] == pytest.approx(0.5)
    assert c["constraints"] == ["avoid_lava>=1"]
    # k = 1 at matched budget (m = 3): one rollout drawn, its first slot; prompt 0's rollouts lead
    # with the lava route (inadmissible) or the last safe route
    k1 = per[0][0]
    assert 0.0 < k1 <= best_safe + 1e-12


def test_ew_best_at_k_is_the_max_over_admissible_answers(maze_pool):
    pool, _, _ = maze_pool
    from vpo.search.metrics import fixed_weights

    c = constrained_metrics(pool, ["avoid_lava>=1"], ks=(6,), bootstrap=0, num_weightings=16)
    W = fixed_weights(pool.d, 16)
    ok = admissible(pool.rewards, pool.valid, parse_constraints(["avoid_lava>=1"], OBJECTIVES), OBJECTIVES)
    expect = []
    for p in range(2):
        rows = pool.rewards[pool.prompt_index == p][ok[pool.prompt_index == p]]  # admissible vectors
        expect.append(float((rows @ W.T).max(0).mean()) if len(rows) else 0.0)
    assert c["per_prompt"]["ew_best_at_k"][0][0] == pytest.approx(expect[0], abs=1e-12)
    assert c["per_prompt"]["ew_best_at_k"][1][0] == 0.0


# ---------------------------------------------------------------------------------------------
# a custom FunctionTask: a budget cap on one objective, pass@k among admissible answers
# ---------------------------------------------------------------------------------------------


def digit_task():
    return FunctionTask(
        "pick_digit",
        objectives={
            "value": lambda ex, a: int(a) / 9 if a.strip().isdigit() else 0.0,
            "even": lambda ex, a: float(a.strip().isdigit() and int(a) % 2 == 0),
        },
        examples=[{"id": 0, "question": "Pick a digit."}],
    )


def test_function_task_constraints_in_eval():
    task = digit_task()
    ex = task.load()[0]
    comps = [tags(["9", "8", "4"]), tags(["3", "2", "7"])]
    b = task.score_completions([ex] * 2, comps, 3)
    pool = Pool.from_arrays(b.rewards, b.valid, group_size=2, objectives=task.objectives)
    kw = dict(ks=(1, 2, 6), bootstrap=0, pass_threshold=0.0)  # threshold 0: every valid answer passes
    plain = evaluate_pool(pool, **kw)
    c = constrained_metrics(pool, ["value<=0.5", f"{HERE}:small_and_even"], **kw)
    # admissible: value <= 0.5 and even -> "4" and "2" (2 of the 6 slots)
    assert c["num_filtered"] == 4 and c["filtered_frac"] == pytest.approx(4 / 6)
    n, cnt = 6, 2
    pak = dict(zip(c["metrics"]["pass_at_k"]["k"], c["metrics"]["pass_at_k"]["mean"]))
    for k in (1, 2, 6):
        assert pak[k] == pytest.approx(1 - math.comb(n - cnt, k) / math.comb(n, k), abs=1e-12)
    assert dict(zip(plain["metrics"]["pass_at_k"]["k"], plain["metrics"]["pass_at_k"]["mean"]))[1] == pytest.approx(1.0)
    # best@6 under w* = (0.5, 0.5): unconstrained "8" (0.944), constrained "4" (4/9/2 + 0.5)
    assert exact_full(plain)[6] == pytest.approx((8 / 9 + 1) / 2)
    best = dict(zip(c["metrics"]["best_at_k"]["k"], c["metrics"]["best_at_k"]["mean"]))
    assert best[6] == pytest.approx((4 / 9 + 1) / 2)
    # report: the section puts both side by side
    res = {**plain, "constrained": c}
    lines = "\n".join(markdown_section({"digits": res}, [1, 2, 6]))
    assert "Under hard constraints" in lines and "`value<=0.5" in lines
    assert f"{(8 / 9 + 1) / 2:.3f} → {(4 / 9 + 1) / 2:.3f}" in lines
    assert markdown_section({"digits": plain}, [1]) == []


# ---------------------------------------------------------------------------------------------
# vpo eval --constraint
# ---------------------------------------------------------------------------------------------


def test_cli_constraint_writes_both_figures(tmp_path, maze_pool, capsys):
    from vpo.cli import main

    pool, best_lava, best_safe = maze_pool
    pool.save(tmp_path / "run" / "pool")
    rc = main(
        [
            "eval",
            "--pool",
            str(tmp_path / "run" / "pool"),
            "--ks",
            "1,6",
            "--bootstrap",
            "0",
            "--no-plots",
            "--constraint",
            "avoid_lava>=1",
            "--constraint",
            "completion>=1",
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert "under avoid_lava>=1, completion>=1: best@1 " in printed and f"best@6 {best_safe / 2:.3f}" in printed
    assert "71.4% of valid answers filtered out" in printed  # 5 of 7
    doc = json.loads((tmp_path / "run" / "report.json").read_text())
    (res,) = doc["results"].values()
    assert res["constrained"]["constraints"] == ["avoid_lava>=1", "completion>=1"]
    assert res["constrained"]["metrics"]["best_at_k"]["mean"][1] == pytest.approx(best_safe / 2)
    assert res["metrics"]["best_at_k"]["mean"][1] == pytest.approx(best_lava)
    md = (tmp_path / "run" / "report.md").read_text()
    assert "## Under hard constraints" in md and f"{best_lava:.3f} → {best_safe / 2:.3f}" in md
    again = ["--out", str(tmp_path / "again")]  # the run's report stays: vpo eval --pool writes elsewhere
    rc = main(["eval", "--pool", str(tmp_path / "run" / "pool"), "--no-plots", "--constraint", "lava>=1", *again])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not have" in err[0] and "avoid_lava" in err[0]


# ---------------------------------------------------------------------------------------------
# training: the wrapper marks violations invalid
# ---------------------------------------------------------------------------------------------


def test_constrained_task_marks_violations_invalid():
    task = MazeTask(size=7)
    ex = task.load("test", 1)[0]
    routes = pareto_routes(Maze.from_example(ex))
    lava = next(r for r in routes if r.reward[3] < 1)
    safe = next(r for r in routes if r.reward[3] >= 1)
    comps = [tags([lava.moves, safe.moves]), tags([lava.moves]), tags([safe.moves, "nonsense"])]
    plain = task.score_completions([ex] * 3, comps, 2)
    ct = constrained(task, ["avoid_lava>=1"])
    b = ct.score_completions([ex] * 3, comps, 2)
    # the lava routes and "nonsense" (a non-route scores all-zero, so its avoid_lava is 0 as well)
    assert plain.valid.tolist() == [[True, True], [True, False], [True, True]]
    assert isinstance(b, ConstrainedBatch) and b.num_violations == 3
    assert b.valid.tolist() == [[False, True], [False, False], [True, False]]
    assert (b.rewards[~b.valid] == 0).all() and np.array_equal(b.rewards[b.valid], plain.rewards[b.valid])
    # everything else is the task's own
    assert ct.objectives == task.objectives and ct.build_prompt(ex, 2) == task.build_prompt(ex, 2)
    assert np.array_equal(ct.score(ex, lava.moves), lava.reward) and ct.config is task.config
    assert constrained(task, []) is task


def test_a_violating_answer_never_wins_the_set_max():
    """Through the VPO estimator: a rollout whose only valid answer breaks the constraint scores as
    a rollout with no valid answer."""
    import torch

    from vpo.core import SimplexSampler, compute_advantages
    from vpo.core.estimators import EstimatorConfig

    task = digit_task()
    ex = task.load()[0]
    comps = [tags(["9"]), tags(["4"]), tags(["2"]), tags(["x"])]
    ct = constrained(task, ["value<=0.5"])
    b = ct.score_completions([ex] * 4, comps, 1)
    assert b.valid[:, 0].tolist() == [False, True, True, True]  # "x" is a valid all-zero answer
    adv = compute_advantages(
        "vpo",
        torch.tensor(b.rewards),
        torch.tensor(b.valid),
        group_size=4,
        config=EstimatorConfig(num_weightings=8),
        sampler=SimplexSampler(8, 1.0, "iid", seed=0),
    ).advantages
    assert float(adv[0]) == pytest.approx(float(adv[3]))  # "9" (best unconstrained) = a worthless answer
    assert float(adv[1]) > float(adv[2]) > float(adv[0])  # "4" (0.72 on average) > "2" (0.61) > refused


def test_vpoconfig_constraints_wrap_the_trainers_task(tmp_path, tiny_model_dir, char_task):
    import torch

    from vpo.tasks.constrained import ConstrainedTask
    from vpo.train import VPOConfig, VPOTrainer

    def args(**kw):
        return VPOConfig(
            output_dir=str(tmp_path / "out"),
            num_generations=4,
            per_device_train_batch_size=8,
            max_completion_length=12,
            max_steps=1,
            learning_rate=1e-3,
            beta=0.0,
            report_to="none",
            save_strategy="no",
            use_cpu=True,
            seed=0,
            num_weightings=8,
            disable_tqdm=True,
            estimator="vpo",
            num_answers=2,
            **kw,
        )

    plain = VPOTrainer(model=tiny_model_dir, args=args(), task=char_task)
    plain.train()
    tr = VPOTrainer(model=tiny_model_dir, args=args(constraints="upper<=0"), task=char_task)
    assert isinstance(tr.vpo_task, ConstrainedTask)
    tr.train()
    r0, v0 = plain.vpo_last["rewards"], plain.vpo_last["valid"]
    r, v = tr.vpo_last["rewards"], tr.vpo_last["valid"]
    upper = list(char_task.objectives).index("upper")
    assert (v0 & (r0[..., upper] > 0)).any(), "the unconstrained batch must hold answers the constraint refuses"
    # same seed, same first generation: exactly those answers became invalid, with zero rewards
    assert torch.equal(v, v0 & ~(r0[..., upper] > 0))
    assert (r[~v] == 0).all()


def test_constraint_table_script_on_saved_pools(tmp_path, maze_pool, capsys):
    """scripts/constraint_table.py (the docs/constraints.md table) reads <method>_s<seed>/pool dirs."""
    import importlib.util

    pool, best_lava, best_safe = maze_pool
    for run in ("vpo_s0", "vpo_s1", "grpo_s0"):
        pool.save(tmp_path / run / "pool")
    spec = importlib.util.spec_from_file_location(
        "constraint_table", HERE.parents[2] / "scripts" / "constraint_table.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--eval-dir", str(tmp_path), "--ks", "1,6", "--eval-seeds", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(out["methods"]) == {"vpo", "grpo"} and out["methods"]["vpo"]["seeds"] == 2
    v = out["methods"]["vpo"]
    assert v["best"][1] == pytest.approx(best_lava) and v["best_c"][1] == pytest.approx(best_safe / 2)
    assert v["filtered_frac"] == pytest.approx(5 / 7) and v["no_admissible_frac"] == pytest.approx(0.5)
    # completed routes (reaching E): 1 lava + 2 safe in prompt 0, 2 lava in prompt 1 -> 3 of 5 refused
    assert v["filtered_completed"] == pytest.approx(3 / 5)


def test_constrained_task_loads_the_wrapped_tasks_own_examples():
    """A constraint changes which answers count, never which problems a split holds: without a
    seed the wrapper loads what the task itself loads (the maze's own default seed, not 0)."""
    from vpo.tasks import get
    from vpo.tasks.constrained import constrained

    task = get("maze", size=5)
    wrapped = constrained(task, ["avoid_lava>=1"])
    for split in ("train", "test"):
        assert wrapped.load(split, n=4) == task.load(split, n=4)
    assert wrapped.load("train", n=4, seed=3) == task.load("train", n=4, seed=3)
    assert wrapped.load("train", n=4, seed=3) != task.load("train", n=4)
