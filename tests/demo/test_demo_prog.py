"""`vpo demo --domain prog`: the program task in the demo pipeline.

Fast tests check the domain switch without training: the maze's jobs, configs and warm-start pairs are
bit-for-bit what they were before the switch existed (pinned digests), the prog domain's train/eval
jobs name the prog task, the other domain's settings are refused, and the prog statistics (pass@k,
answers passing at least one test, distinct programs) on hand-built pools. The end-to-end run at a
tiny size is marked slow.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("trl")

from vpo.demo.config import DemoConfig  # noqa: E402
from vpo.demo.jobs import settings_hash  # noqa: E402
from vpo.demo.stages import build_jobs, make_task, warm_pairs  # noqa: E402
from vpo.errors import UserError  # noqa: E402

MAZE_DEFAULT_DIGEST = "58b75afeb78fe88d"
MAZE_QUICK_DIGEST = "f3a320910ff17a30"
MAZE_PAIRS_DIGEST = "a7472bf1b7c374f6"
"""Digests of the maze demo's jobs (names, settings hashes, argv, dependencies, costs, outputs), its
`vpo train` YAMLs and its warm-start pairs (5 training mazes, 2 routes each), computed with the code
as it was before the domain setting existed (commit 8fa4af9): the default `vpo demo` must keep
producing identical jobs, configs and resume hashes. `vpo eval`'s answers-per-rollout flag was
renamed from `--m` to `--num-answers` after they were pinned: the digest reads it under its old name
(:data:`EVAL_FLAG_RENAMES`)."""

EVAL_FLAG_RENAMES = {"--num-answers": "--m"}
"""`vpo eval` flags renamed since the digests were pinned, and the names the digests hold."""


def _unpinned(obj):
    """``obj`` without the two additions that pin the tiny model's generation to generate (#48)."""
    if isinstance(obj, dict):
        return {k: _unpinned(v) for k, v in obj.items() if not (k == "fast_generation" and v is False)}
    if isinstance(obj, list):
        return [_unpinned(v) for v in obj if v != "--plain-generate"]
    return obj


def _jobs_digest(cfg: DemoConfig, out: Path) -> str:
    jobs = build_jobs(cfg, out)
    rel = lambda x: str(x).replace(str(out), "<OUT>")  # noqa: E731
    # the tiny model's jobs name generate explicitly since vpo's CPU sampler became the default
    # elsewhere (#48): the same generation as when the digests were pinned, so those two additions
    # are checked here and left out of the digest
    evals = [j for j in jobs if j.name.startswith("eval")]
    assert evals and all("--plain-generate" in j.argv for j in evals)
    confs_text = [p.read_text() for p in (out / "configs").glob("*.yaml")]
    assert confs_text and all("fast_generation: false" in t for t in confs_text)
    rows = [
        [
            j.name,
            settings_hash(_unpinned(j.settings)),
            [EVAL_FLAG_RENAMES.get(a, rel(a)) for a in j.argv[1:] if a != "--plain-generate"],
            list(j.after),
            j.cost,
            rel(j.done_marker),
            rel(j.log),
        ]
        for j in jobs
    ]
    confs = sorted(
        (p.name, rel(p.read_text().replace("fast_generation: false\n", ""))) for p in (out / "configs").glob("*.yaml")
    )
    blob = json.dumps(
        [rows, confs, settings_hash(cfg.warm_settings()), settings_hash(cfg.eval_settings())], sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def test_maze_jobs_and_configs_are_unchanged_by_the_domain_switch(tmp_path):
    """With the shared warm start (the only kind before per-replicate warm starts) the maze demo's
    jobs are the pinned ones."""
    assert DemoConfig().domain == "maze"
    shared = {"warm_start": "shared"}
    assert _jobs_digest(DemoConfig(out=str(tmp_path / "a"), **shared), tmp_path / "a") == MAZE_DEFAULT_DIGEST
    assert _jobs_digest(DemoConfig.quick(out=str(tmp_path / "b"), **shared), tmp_path / "b") == MAZE_QUICK_DIGEST
    # the explicit domain is the same run
    cfg = DemoConfig(out=str(tmp_path / "c"), domain="maze", **shared)
    assert _jobs_digest(cfg, tmp_path / "c") == MAZE_DEFAULT_DIGEST


def test_maze_warm_start_pairs_are_unchanged():
    cfg = DemoConfig(warm_answers_per_problem=2)
    task = make_task(cfg)
    pairs = warm_pairs(cfg, task, task.load("train", n=5))
    assert hashlib.sha256(json.dumps(pairs).encode()).hexdigest()[:16] == MAZE_PAIRS_DIGEST


def test_prog_jobs_name_the_prog_task(tmp_path):
    from vpo.tasks.prog import ProgTask

    cfg = DemoConfig.quick(out=str(tmp_path), domain="prog", split="validation")
    task = make_task(cfg)
    assert isinstance(task, ProgTask) and task.compact and task.d == 8
    jobs = build_jobs(cfg, tmp_path)
    trains = [j for j in jobs if j.name.startswith("train")]
    evals = [j for j in jobs if j.name.startswith("eval")]
    assert {j.name for j in trains} == {"train grpo s0", "train vpo s0"} and len(evals) == 4
    import yaml

    for conf in (tmp_path / "configs").glob("*.yaml"):
        tc = yaml.safe_load(conf.read_text())
        assert tc["task"] == "prog" and json.loads(tc["task_options"]) == cfg.task_options()
    for j in evals:
        assert j.argv[j.argv.index("--task") + 1] == "prog"
        assert json.loads(j.argv[j.argv.index("--task-options") + 1])["tests"] == 8
        assert j.argv[j.argv.index("--split") + 1] == "validation"
    # the records that resume relies on say which domain produced them
    assert cfg.warm_settings()["domain"] == "prog" and cfg.eval_settings()["domain"] == "prog"
    assert "warm_waypoints" not in cfg.warm_settings()


def test_prog_settings_change_the_resume_hashes(tmp_path):
    base = DemoConfig(out=str(tmp_path), domain="prog", seeds=(0,), methods=("vpo",))
    h = lambda cfg: {j.name: settings_hash(j.settings) for j in build_jobs(cfg, tmp_path)}  # noqa: E731
    prog, maze, tests12 = h(base), h(replace(base, domain="maze")), h(replace(base, prog_tests=12, prog_min_piece=4))
    assert set(prog) == set(maze) and all(prog[k] != maze[k] for k in prog)
    assert all(prog[k] != tests12[k] for k in prog)
    assert h(replace(base, rl_lr=4e-4))["eval warmstart_m1_s0"] == prog["eval warmstart_m1_s0"]


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(domain="code"), "domain must be one of maze, prog"),
        (dict(domain="prog", maze_size=7), r"maze_size apply to --domain maze only"),
        (dict(domain="prog", warm_wander=0.5, lava=(0, 1)), r"lava, warm_wander apply to --domain maze only"),
        (dict(prog_tests=12), r"prog_tests apply to --domain prog only"),
        (dict(domain="prog", prog_pieces=4), "prog settings: .*pieces must be 2 or 3"),
        (dict(domain="prog", prog_cases="parity", prog_pieces=3), "prog settings: .*needs pieces=2"),
        (dict(domain="prog", prog_tests=5), "prog settings: .*cannot give 2 pieces 3 tests each"),
        (dict(domain="prog", prog_slope=(3, 1)), r"prog settings: .*slope must be an int or a \(lo, hi\) pair"),
        (dict(prog_slope=(0, 3)), r"prog_slope apply to --domain prog only"),
    ],
)
def test_other_domains_settings_are_refused(kw, match):
    with pytest.raises(UserError, match=match):
        DemoConfig(**kw)


def test_maze_tuples_from_json_are_not_mistaken_for_changes():
    assert DemoConfig(domain="prog", items_per_zone=[3, 5], lava=[1, 1]).domain == "prog"


def test_cli_domain_flag_and_reproduce_command(tmp_path, capsys):
    from vpo.cli import main as cli_main
    from vpo.demo.cli import add_parser, config_from_args
    from vpo.demo.report import reproduce_command

    import argparse

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["demo", "--domain", "prog", "--quick", "--set", "prog_cases=mixed"])
    cfg = config_from_args(args)
    assert (cfg.domain, cfg.prog_cases, cfg.methods) == ("prog", "mixed", ("grpo", "vpo"))
    cmd = reproduce_command(cfg.as_dict())
    assert "--domain prog" in cmd and "--set prog_cases=mixed" in cmd and "domain=" not in cmd
    assert "--domain" not in reproduce_command(DemoConfig().as_dict())
    out = tmp_path / "x"
    assert cli_main(["demo", "--out", str(out), "--domain", "prog", "--set", "maze_size=7"]) == 2
    assert "maze_size apply to --domain maze only" in capsys.readouterr().err and not out.exists()


def test_prog_default_is_the_constant_regime_and_its_warm_start_writes_constants():
    """The demo's prog default is piecewise-constant targets (docs/demo.md, "Second domain"): the task
    gets slope 0 and the warm start's fallback lines are shown outputs, not lines of slope 1-3."""
    from vpo.tasks.prog_lang import run_program

    cfg = DemoConfig(domain="prog")
    assert cfg.task_options()["slope"] == [0, 0]
    task = make_task(cfg)
    assert all(a == 0 for ex in task.load("validation", 20) for a, _ in ex["lines"])
    pairs = warm_pairs(cfg, task, task.load("train", n=30))
    singles = [c.split("<answer>")[1].split("</answer>")[0] for _, c in pairs[::2]]
    consts = [s for s in singles if "x" not in s]
    assert len(consts) > len(singles) / 3  # a slope-0 line through a shown pair is that output
    for ex, prog in zip(task.load("train", n=30), singles):
        if "x" not in prog:  # a constant, or min/max of two: its value is one of the shown outputs
            assert run_program(prog, [0]).outputs[0] in ex["outputs"], prog


def test_prog_warm_start_pairs_are_valid_programs_in_both_formats():
    from vpo.core.answers import parse_answers
    from vpo.tasks.prog_lang import parse_program

    cfg = DemoConfig(domain="prog")
    task = make_task(cfg)
    train = task.load("train", n=20)
    pairs = warm_pairs(cfg, task, train)
    assert len(pairs) == 40
    assert pairs == warm_pairs(cfg, task, train)  # seeded
    for i, (prompt, completion) in enumerate(pairs):
        ex, m = train[i // 2], (1, 3)[i % 2]
        assert prompt == task.build_prompt(ex, m)
        answers = parse_answers(completion, m, task.answer_format)
        assert len(answers) == m
        for a in answers:
            parse_program(a)  # raises if it does not parse
            assert len(a) <= ex["max_chars"]
    # mediocre by design: some pass a piece, few pass everything
    scores = [
        task.score(train[i // 2], a).mean()
        for i, (_, c) in enumerate(pairs)
        for a in parse_answers(c, (1, 3)[i % 2], task.answer_format)
    ]
    assert 0.2 < np.mean(scores) < 0.6


# ---------------------------------------------------------------------------------------------
# statistics
# ---------------------------------------------------------------------------------------------


def _prog_pool(answers_per_problem: list[list[list[str]]]):
    """A pool of the given answers (per problem, per rollout, m answers) on validation problems."""
    from vpo.search.metrics import evaluate
    from vpo.search.pools import Pool

    task = make_task(DemoConfig(domain="prog"))
    exs = task.load("validation", n=len(answers_per_problem))
    rewards, answers, index = [], [], []
    for p, (ex, rollouts) in enumerate(zip(exs, answers_per_problem)):
        for roll in rollouts:
            answers.append(roll)
            rewards.append([task.score(ex, a) for a in roll])
            index.append(p)
    rewards = np.array(rewards)
    pool = Pool(
        rewards,
        np.ones(rewards.shape[:2], bool),
        index,
        [e["id"] for e in exs],
        task.objectives,
        task.target_weights,
        answers=answers,
    )
    return (
        task,
        exs,
        pool,
        evaluate(pool.rewards, pool.valid, pool.prompt_index, ks=[1, 2, 4], prompt_ids=pool.prompt_ids, bootstrap=0),
    )


def _pieces(ex: dict) -> tuple[str, str]:
    from vpo.tasks.prog import linear_text

    return tuple(linear_text(a, b) for a, b in ex["lines"])


def test_run_stats_on_a_hand_built_prog_pool():
    """Problem 0: the reference, the same reference with spaces (one distinct program), a line
    passing its own piece, and a program passing nothing; problem 1: two different single lines and
    two unparsable texts. Pass@k, answers passing >= 1 test and distinct programs are known."""
    from vpo.demo.analysis import run_stats
    from vpo.demo.domains import DOMAINS

    task = make_task(DemoConfig(domain="prog"))
    e0, e1 = task.load("validation", n=2)
    ref = e0["reference"]
    a0, b0 = _pieces(e0)
    a1, b1 = _pieces(e1)
    rolls = [[[ref], [" ".join(ref)], [a0], ["-999999"]], [[a1], [b1], ["x+"], ["???"]]]
    task, exs, pool, rep = _prog_pool(rolls)
    fronts = DOMAINS["prog"].fronts(exs)
    assert [f.tolist() for f in fronts] == [[[1.0] * 8]] * 2
    st = run_stats(rep, pool, exs, fronts, {"w*": np.full(8, 1 / 8)}, [1, 2, 4], 5, domain="prog")
    assert st["completion_rate"].tolist() == [0.75, 0.5]  # answers passing at least one test
    assert st["distinct_routes"].tolist() == [2.0, 2.0]  # the spaced reference is the reference
    # pass@4 sees every answer; pass@1 draws one of 4 rollouts, 2 of which pass on problem 0
    assert st["pass_at_k"][:, 2].tolist() == [1.0, 0.0]
    assert st["pass_at_k"][1].tolist() == [0.0, 0.0, 0.0]
    assert np.all(st["pass_at_k"] <= st["best_at_k"] + 1e-12)
    # the all-pass vector is the whole front: Pareto coverage is pass@k, draw for draw
    np.testing.assert_allclose(st["pass_at_k"], st["pareto_coverage"])
    # the exact expectation of one draw's pass@1 at problem 0 is 2/4 (5 draws: near it)
    assert abs(st["pass_at_k"][0, 0] - 0.5) <= 0.5
    # problem 1: one piece each, so the union of the two lines covers every test
    assert st["union_coverage"][1] == 8.0 and st["best_at_k"][1, 2] < 1.0


def test_aggregate_keeps_pass_at_k_for_prog_only():
    from vpo.demo.analysis import aggregate_runs, run_stats
    from vpo.demo.domains import DOMAINS

    cfg = DemoConfig(domain="prog", seeds=(0,), methods=("vpo",), ks=(1, 2, 4), eval_budget=4, bootstrap=100)
    task = make_task(cfg)
    e0, e1 = task.load("validation", n=2)
    runs = {}
    for key, rolls in (
        ("warmstart_m1", [[[_pieces(e0)[0]]] * 4, [["x"]] * 4]),
        ("vpo", [[[e0["reference"]]] * 4, [[e1["reference"]]] + [["1"]] * 3]),
    ):
        _, exs, pool, rep = _prog_pool(rolls)
        runs[key] = [
            run_stats(
                rep, pool, exs, DOMAINS["prog"].fronts(exs), {"w*": np.full(8, 1 / 8)}, [1, 2, 4], 3, domain="prog"
            )
        ]
    agg = aggregate_runs(cfg, runs, {"warmstart_m1": "Warm", "vpo": "VPO"}, {"warmstart_m1": 1, "vpo": 1}, ["w*"])
    assert agg["methods"]["vpo"]["pass_at_k"][4]["mean"] == pytest.approx(1.0)
    assert agg["methods"]["warmstart_m1"]["pass_at_k"][4]["mean"] == pytest.approx(0.0)
    assert agg["paired_vs_vpo"]["warmstart_m1"]["pass_at_k"][4]["mean"] == pytest.approx(1.0)
    from vpo.demo.report import markdown

    text = markdown(json.loads(json.dumps({**agg, "ceilings": {"w*": 1.0}, "num_mazes": 2})))
    assert "pass@4" in text and "| VPO | " in text and "Δpass@4" in text and "distinct programs" in text


# ---------------------------------------------------------------------------------------------
# end to end (slow)
# ---------------------------------------------------------------------------------------------

TINY = dict(
    split="validation",
    warm_steps=4,
    warm_threads=1,
    train_problems=40,
    rl_steps=2,
    prompts_per_step=2,
    num_generations=4,
    eval_problems=6,
    eval_budget=6,
    ks=(1, 3, 6),
    bootstrap=50,
)
"""The pipeline's plumbing at the smallest size (a model this little trained this briefly learns nothing:
the test checks that every stage runs on the prog task and reports in range, not what RL achieves)."""


def _check_evolve_study(demo: Path) -> None:
    """scripts/prog_evolve_study.py, run as a user would, on the tiny run's checkpoints: real evolve
    runs (two checkpoints at a time, each in its own process), a report in range."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "scripts" / "prog_evolve_study.py"
    out = demo / "evolve"
    proc = subprocess.run(
        [
            sys.executable,
            str(script),
            "--demo",
            str(demo),
            "--out",
            str(out),
            "--methods",
            "grpo,vpo",
            "--problems",
            "2",
            "--calls",
            "3",
            "--probe-calls",
            "1",
            "--jobs",
            "2",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["problems"] == 2
    study = json.loads((out / "study.json").read_text())
    assert study["problems"] == 2 and study["calls"] == 3 and len(study["pools_solving"]) == 2
    for key in ("grpo", "vpo"):
        assert 0 <= study[f"solved_at_candidates_{key}"] <= study[f"solved_at_calls_{key}"] <= 2
        assert len(study["curves"][key]) == 4  # calls 0..3
    # the measurement behind "these models cannot read OpenEvolve's prompt"
    assert study["probe_tokens_vpo"] > study["probe_context"] == 1024
    assert (out / "solved_over_calls.png").stat().st_size > 0 and "| vpo | 3 |" in (out / "study.md").read_text()


@pytest.mark.slow
def test_prog_demo_end_to_end_and_resume(tmp_path, capsys):
    from vpo.demo import run_demo

    cfg = DemoConfig.quick(out=str(tmp_path), domain="prog", **TINY)
    run_demo(cfg)
    _check_evolve_study(tmp_path)
    for name in ("report.md", "demo.json", "best_at_k.png", "pass_at_k.png", "diversity.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    data = json.loads((tmp_path / "demo.json").read_text())
    assert data["config"]["domain"] == "prog" and data["ceilings"]["w*"] == 1.0
    assert set(data["methods"]) == {"warmstart_m1", "warmstart_m3", "grpo", "vpo"}
    report = (tmp_path / "report.md").read_text()
    assert "--domain prog" in report and "pass@6" in report
    for key, row in data["methods"].items():
        best = [row["best_at_k"][str(k)]["mean"] for k in cfg.ks]
        pas = [row["pass_at_k"][str(k)]["mean"] for k in cfg.ks]
        assert all(0.0 <= p <= b + 1e-9 <= 1.0 + 1e-9 for p, b in zip(pas, best)), (key, pas, best)
        assert all(b2 >= b1 - 1e-9 for b1, b2 in zip(best, best[1:])) and all(
            p2 >= p1 - 1e-9 for p1, p2 in zip(pas, pas[1:])
        )
        assert 0.0 <= row["pass_at_1"]["mean"] <= 1.0 and 0.0 <= row["completion_rate"]["mean"] <= 1.0
        assert 0.0 <= row["completed_diversity"]["mean"] <= 8.0 and 0.0 <= row["union_coverage"]["mean"] <= 8.0
        assert f"| {row['label']} |" in report
    # resume: the same settings skip every stage; another prog setting reruns the warm start
    capsys.readouterr()
    run_demo(cfg)
    text = capsys.readouterr().out
    assert "already done with the same settings, skipped" in text and "] start " not in text
    run_demo(replace(cfg, prog_cases="mixed", rl_steps=1, eval_problems=4, eval_budget=3, ks=(1, 3)))
    text = capsys.readouterr().out
    # one-thread warm starts are jobs ("warm start s0: settings changed, running it again (task.cases: ...)");
    # trained in process they say "warm start: settings changed"
    assert re.search(r"warm start( s\d+)?: settings changed", text) and "cases" in text, text[-2000:]


# ---------------------------------------------------------------------------------------------
# the CI setting (`vpo demo --domain prog --quick`, slow): what RL does, with stated margins
# ---------------------------------------------------------------------------------------------

DISTINCT_MARGIN = 1.5
"""GRPO's distinct programs per problem must fall below the warm start's by this much. Measured at the
quick settings (24 test problems, 12 answers, seed 0): GRPO 1.71 vs the warm start's 4.62."""
DIVERSITY_MARGIN = 1.0
"""VPO's reward-space diversity among answers passing a test must exceed GRPO's by this much
(measured: 3.136 vs 1.155)."""
BEST_MARGIN = 0.05
"""VPO's best@12 must exceed GRPO's by this much (measured: 0.766 vs 0.615)."""


@pytest.mark.slow
def test_prog_quick_grpo_collapses_and_vpo_keeps_searching(tmp_path):
    """The default prog regime at the CI size (`vpo demo --domain prog --quick`: GRPO and VPO, seed 0,
    24 test problems, 12 answers; about 3 minutes here): GRPO collapses onto few programs per
    problem, VPO's pool stays diverse and reaches a higher best@12, and its pass@12 is above GRPO's
    (measured 0.125 vs 0.000: three problems, too few for a margin, but a VPO that also solved none
    fails it; "at least" could not fail while GRPO sits at 0). The margins
    leave room for another machine's float rounding, which can move RL trajectories apart."""
    from vpo.demo import run_demo

    cfg = DemoConfig.quick(out=str(tmp_path), domain="prog")
    agg = run_demo(cfg)
    m = agg["methods"]
    kmax = max(cfg.ks)
    distinct = {k: v["distinct_routes"]["mean"] for k, v in m.items()}
    div = {k: v["completed_diversity"]["mean"] for k, v in m.items()}
    at = lambda entry: (entry[str(kmax)] if str(kmax) in entry else entry[kmax])["mean"]  # noqa: E731 (JSON keys or ints)
    best = {k: at(v["best_at_k"]) for k, v in m.items()}
    passk = {k: at(v["pass_at_k"]) for k, v in m.items()}
    assert distinct["grpo"] < distinct["warmstart_m1"] - DISTINCT_MARGIN, distinct
    assert div["vpo"] > div["grpo"] + DIVERSITY_MARGIN, div
    assert best["vpo"] > best["grpo"] + BEST_MARGIN, best
    assert passk["vpo"] > passk["grpo"], passk


def test_reports_link_training_curves_only_when_a_method_trained():
    """A --warm-only report has no training_curves.png; it must not link one (shipped reports of both kinds)."""
    from vpo.demo.report import markdown

    root = Path(__file__).resolve().parents[2] / "docs" / "demo"
    warm_only = json.loads((root / "validation" / "prog_probes" / "slope01_warm600" / "demo.json").read_text())
    trained = json.loads((root / "prog" / "demo.json").read_text())
    assert not warm_only["training_curves"] and "training_curves.png" not in markdown(warm_only)
    assert "![training](training_curves.png)" in markdown(trained) and (root / "prog" / "training_curves.png").exists()


def test_the_evolve_study_searches_the_problems_the_pools_ran_on(tmp_path):
    """A run on a fresh test split (``test_seed``) is evaluated on that split's problems; the evolve
    study ranks problems by those pools' prompt indices, so it must load the same problems (it once
    loaded the default split's, whose index i is another problem)."""
    import importlib.util

    from vpo.demo.stages import make_task

    spec = importlib.util.spec_from_file_location(
        "prog_evolve_study", Path(__file__).resolve().parents[2] / "scripts" / "prog_evolve_study.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cfg = DemoConfig(out=str(tmp_path), domain="prog", test_seed=20261201, eval_problems=5)
    opts, problems = mod.study_problems(cfg)
    pooled = make_task(cfg, evaluation=True).load("test", n=5)  # what the evaluation jobs ran on
    assert opts["test_seed"] == 20261201
    assert [p.example for p in problems] == [json.loads(json.dumps(ex, default=str)) for ex in pooled]
    default = make_task(DemoConfig(out=str(tmp_path), domain="prog", eval_problems=5), evaluation=True).load(
        "test", n=5
    )
    assert [p.example for p in problems] != [json.loads(json.dumps(ex, default=str)) for ex in default]
