"""`vpo demo`'s configuration layer, without running it (the end-to-end run is tests/test_demo.py,
marked slow): what each method's `vpo train` config says, the prompts the demo's task renders,
and the errors for bad settings, which must come before the two-minute warm start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

pytest.importorskip("trl")

from vpo.cli import main as cli_main  # noqa: E402
from vpo.demo import METHODS, DemoConfig, make_task, train_config  # noqa: E402
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
    assert args.max_completion_length == (24 if m == 1 else 64)
    assert (args.learning_rate, args.beta, args.max_steps, args.seed) == (cfg.rl_lr, cfg.beta, cfg.rl_steps, 1)
    # the CPU speed settings (docs/demo.md): fp32, no recomputation, preallocated KV cache
    assert not args.bf16 and not args.gradient_checkpointing and args.cache_implementation == "static"
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
        (dict(methods=()), "unknown demo method"),
        (dict(seeds=()), "at least one seed"),
        (dict(instruction="terse"), "instruction must be"),
        (dict(weight_sampler="halton"), "weight_sampler must be one of"),
        (dict(rl_steps=0), "rl_steps must be >= 1"),
        (dict(num_generations=1), "num_generations must be >= 2"),
        (dict(eval_budget=10), "exceed eval_budget"),
    ],
)
def test_bad_settings_fail_at_construction(kw, match):
    with pytest.raises(ValueError, match=match):
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
    from vpo.demo import _parse_setting

    assert _parse_setting("methods", "grpo,vpo", ("grpo",)) == ("grpo", "vpo")
    assert _parse_setting("ks", "1,5,10", (1,)) == (1, 5, 10)
    assert _parse_setting("rl_lr", "0.0004", 3e-4) == 4e-4
    assert _parse_setting("instruction", "tags", "short") == "tags"
