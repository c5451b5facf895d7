"""`vpo demo`'s configuration layer, without running it (the end-to-end run is tests/demo/test_demo.py,
marked slow): what each method's `vpo train` config says, the prompts the demo's task renders,
and the errors for bad settings, which must come before the two-minute warm start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

pytest.importorskip("trl")

from vpo.cli import main as cli_main  # noqa: E402
from vpo.demo.config import ALL_METHODS, METHODS, DemoConfig, method_spec  # noqa: E402
from vpo.demo.stages import make_task, train_config  # noqa: E402
from vpo.errors import UserError  # noqa: E402
from vpo.train.cli import parse_train_args  # noqa: E402
from vpo.train.config import VPOConfig  # noqa: E402


@pytest.mark.parametrize("method", list(METHODS))
def test_train_config_is_a_valid_vpo_config_with_the_methods_setting(method, tmp_path):
    cfg = DemoConfig(out=str(tmp_path))
    conf = train_config(cfg, method, seed=1, init=tmp_path / "ws", out_dir=tmp_path / "run")
    _, estimator, m, mult = METHODS[method]
    path = tmp_path / "conf.yaml"
    path.write_text(yaml.safe_dump(conf))
    args, model_args = parse_train_args(["--config", str(path)])[:2]  # what `vpo train CONFIG` parses
    assert isinstance(args, VPOConfig) and model_args.model_name_or_path == str(tmp_path / "ws")
    assert (args.estimator, args.num_answers) == (estimator, m)
    assert args.num_generations == cfg.num_generations * mult
    assert args.per_device_train_batch_size == cfg.prompts_per_step * args.num_generations
    assert args.max_completion_length == (cfg.max_tokens_single if m == 1 else cfg.max_tokens_multi)
    assert (args.learning_rate, args.beta, args.max_steps, args.seed) == (cfg.rl_lr, cfg.beta, cfg.rl_steps, 1)
    # the CPU speed settings (docs/demo.md): fp32, no recomputation, preallocated KV cache, each prompt once
    assert not args.bf16 and not args.gradient_checkpointing and args.cache_implementation == "static"
    assert args.shared_prompt_forward
    opts = args.task_options if isinstance(args.task_options, dict) else json.loads(args.task_options)
    assert opts["instruction"] == cfg.instruction


def test_demo_task_renders_the_configured_instruction():
    ex = make_task(DemoConfig()).load("test", 1)[0]
    short, tags = make_task(DemoConfig()), make_task(DemoConfig(instruction="tags"))
    assert short.build_prompt(ex, 3).endswith("3 different routes in <answer_1>..<answer_3>.")
    assert tags.build_prompt(ex, 3).endswith("\n\n<answer_1>..<answer_3>")
    assert len(tags.build_prompt(ex, 3)) < len(short.build_prompt(ex, 3)) - 20


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(methods=("grpo", "ppo")), "unknown demo method"),
        (dict(methods=()), "at least one demo method"),
        (dict(methods=("vpo", "vpo")), "methods repeat"),
        (dict(split="dev"), "split must be"),
        (dict(lava=(2, 1)), "inclusive range"),
        (dict(warm_wander=1.5), "warm_wander must be in"),
        (dict(maze_size=6), "maze settings"),
        (dict(seeds=()), "at least one seed"),
        (dict(instruction="terse"), "instruction must be"),
        (dict(weight_sampler="halton"), "weight_sampler must be one of"),
        (dict(rl_steps=0), "rl_steps must be an integer >= 1"),
        (dict(num_generations=1), "num_generations must be >= 2"),
        (dict(eval_budget=10), "exceed eval_budget"),
    ],
)
def test_bad_settings_fail_at_construction(kw, match):
    with pytest.raises(UserError, match=match):
        DemoConfig(**kw)


def test_cli_set_errors_exit_2_before_any_work(tmp_path, capsys):
    out = tmp_path / "demo"
    for argv, msg in [
        (["--set", "rl_steps=abc"], "--set rl_steps=abc: expected int"),
        (["--set", "weight_sampler=foo"], "weight_sampler must be one of"),
        (["--set", "nonsense=1"], "unknown demo setting 'nonsense'"),
        (["--methods", "grpo,foo"], "unknown demo method"),
    ]:
        assert cli_main(["demo", "--out", str(out), *argv]) == 2
        assert msg in capsys.readouterr().err
    assert not Path(out).exists()  # nothing was started


def test_cli_set_parses_tuples_and_method_lists():
    from vpo.demo.cli import _parse_setting

    assert _parse_setting("methods", "grpo,vpo", ("grpo",)) == ("grpo", "vpo")
    assert _parse_setting("ks", "1,5,10", (1,)) == (1, 5, 10)
    assert _parse_setting("rl_lr", "0.0004", 3e-4) == 4e-4
    assert _parse_setting("instruction", "tags", "short") == "tags"
    assert _parse_setting("methods", "default,maxrl", ("grpo",))[-1] == "maxrl"
    assert _parse_setting("methods", "all", ("grpo",)) == ALL_METHODS


def test_any_registered_estimator_runs_by_name(tmp_path):
    """A method outside the demo's table is any registered estimator: m from its kind."""
    from vpo.core.estimators import ESTIMATORS

    for name, spec in ESTIMATORS.items():
        label, estimator, m, mult = method_spec(name)
        assert estimator == name and m == (3 if spec.multi_answer else 1) and mult == 1
    with pytest.raises(UserError, match="unknown demo method 'ppo'"):
        method_spec("ppo")


def test_demo_evaluates_the_split_it_is_given(tmp_path):
    """Settings are chosen on validation mazes, the report uses test mazes: eval jobs say which."""
    from vpo.demo.stages import build_jobs

    for split in ("validation", "test"):
        cfg = DemoConfig(out=str(tmp_path / split), split=split, seeds=(0,), methods=("vpo",))
        jobs = build_jobs(cfg, tmp_path / split)
        evals = [j for j in jobs if j.name.startswith("eval")]
        assert evals and all(j.argv[j.argv.index("--split") + 1] == split for j in evals)
    val = make_task(DemoConfig()).load("validation", 100)
    test = make_task(DemoConfig()).load("test", 100)
    train = make_task(DemoConfig()).load("train", 1000)
    key = lambda e: (tuple(e["grid"]), e["budget"])  # noqa: E731
    assert not {key(e) for e in val} & ({key(e) for e in test} | {key(e) for e in train})


def test_every_stage_records_the_settings_it_depends_on(tmp_path):
    """A changed RL setting changes the train and eval jobs' settings, not the warm start's; a changed
    warm-start setting changes all of them."""
    from dataclasses import replace

    from vpo.demo.jobs import settings_hash
    from vpo.demo.stages import build_jobs

    base = DemoConfig(out=str(tmp_path), seeds=(0,), methods=("vpo",))
    h = lambda cfg: {j.name: settings_hash(j.settings) for j in build_jobs(cfg, tmp_path)}  # noqa: E731
    a, lr, warm, ev = (
        h(base),
        h(replace(base, rl_lr=4e-4)),
        h(replace(base, warm_steps=601)),
        h(replace(base, eval_temperature=1.0)),
    )
    assert a["train vpo s0"] != lr["train vpo s0"] and a["eval vpo_s0"] != lr["eval vpo_s0"]
    assert a["eval warmstart_m1_s0"] == lr["eval warmstart_m1_s0"]
    assert all(a[k] != warm[k] for k in a)
    assert a["train vpo s0"] == ev["train vpo s0"] and a["eval vpo_s0"] != ev["eval vpo_s0"]
    assert base.warm_settings() == replace(base, rl_lr=4e-4).warm_settings()
    # a fresh test split: only the evaluations depend on it (the warm starts and models are reused)
    ts = h(replace(base, test_seed=7331))
    assert ts["train vpo s0"] == a["train vpo s0"]
    assert ts["eval vpo_s0"] != a["eval vpo_s0"] and ts["eval warmstart_m1_s0"] != a["eval warmstart_m1_s0"]


def test_a_moved_demo_directory_still_resumes(tmp_path):
    """Stage settings hold no paths: the same settings in another directory hash the same."""
    from vpo.demo.jobs import settings_hash
    from vpo.demo.stages import build_jobs

    def hashes(out):
        cfg = DemoConfig(out=str(out), seeds=(0,), methods=("vpo",))
        return {j.name: settings_hash(j.settings) for j in build_jobs(cfg, out)}

    assert hashes(tmp_path / "a") == hashes(tmp_path / "b")


def test_a_recorded_config_loads_back_equal(tmp_path):
    """runner.py records cfg.as_dict() in demo_config.json; DemoConfig.load reads it back (tuples and
    all), as the scripts that post-process a run (demo_pool_runs.py, prog_evolve_study.py) do."""
    import json

    from vpo.demo.config import DemoConfig

    for cfg in (
        DemoConfig(out=str(tmp_path)),
        DemoConfig(out=str(tmp_path), domain="prog", seeds=(0, 4), prog_slope=(0, 1), ks=(1, 5)),
    ):
        (tmp_path / "demo_config.json").write_text(json.dumps(cfg.as_dict()))
        again = DemoConfig.load(tmp_path)
        assert again == cfg and isinstance(again.prog_slope, tuple) and isinstance(again.seeds, tuple)


def test_the_time_estimate_matches_the_measured_three_replicate_default():
    """`vpo demo` prints an estimate from per-job costs; for the default it must land within 10 % of
    the shipped measurement (docs/demo/default3_validation: the 3-replicate default on the idle
    machine), and it grows with what costs time: seeds, warm-start steps, RL steps, methods."""
    import json
    from pathlib import Path

    from vpo.demo.cli import estimate_minutes

    inv = json.loads(
        (Path(__file__).resolve().parents[2] / "docs/demo/default3_validation/invocations.json").read_text()
    )
    measured = inv[-1]["seconds"] / 60
    est = estimate_minutes(DemoConfig())
    assert abs(est - measured) / measured < 0.10, (est, measured)
    ten = estimate_minutes(DemoConfig(seeds=tuple(range(10))))
    assert 3.0 < ten / est < 3.5  # ten warm starts and ten sets of jobs, the fixed start once
    assert estimate_minutes(DemoConfig(warm_steps=1200)) > est + 1.5
    assert estimate_minutes(DemoConfig(rl_steps=120)) > est + 2.5
    assert estimate_minutes(DemoConfig(methods=("grpo", "vpo"))) < est - 2
    assert estimate_minutes(DemoConfig.quick()) < est / 3


def test_the_estimate_says_what_a_busy_machine_does_to_it():
    from vpo.demo.cli import load_note

    assert load_note(0.1, 2, 2) == "" and load_note(0.9, 2, 2) == ""
    note = load_note(5.5, 2, 2)
    assert "load 5.5 on 2 cores" in note and "3.8x" in note  # (5.5 + 2) / 2: the maze replay's 36 min vs 10
    assert load_note(3.0, 16, 2) == ""  # plenty of idle cores: no slowdown to speak of


def test_the_estimate_line_states_the_memory_a_run_expects():
    """The shop demo's line names the memory it expects (its measured largest job per slot plus the
    demo's own process) and, where the machine has less available, the way out; the tiny-model
    domains have no measurement, so their line says nothing of memory."""
    from vpo.demo.cli import estimate_memory_gib, memory_note
    from vpo.demo.shop import ShopDomain

    shop = DemoConfig.for_domain("shop", quick=False)
    per_job = max(ShopDomain.job_memory_gib.values())
    assert estimate_memory_gib(shop) == pytest.approx(0.3 + shop.jobs * per_job)
    note = memory_note(shop, available_gib=64.0)
    assert f"about {estimate_memory_gib(shop):.0f} GiB of memory" in note and "--jobs 1" not in note
    tight = memory_note(shop, available_gib=estimate_memory_gib(shop) - 1)
    assert f"run it with --jobs 1 (about {estimate_memory_gib(shop, 1):.0f} GiB" in tight
    assert estimate_memory_gib(shop) <= 16  # the shop default fits a 16 GiB machine
    assert memory_note(DemoConfig(), available_gib=1.0) == "" and estimate_memory_gib(DemoConfig()) is None
