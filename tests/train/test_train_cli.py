"""`vpo train CONFIG.yaml [overrides]`: TRL's YAML/CLI conventions, shipped configs, clear errors."""

from __future__ import annotations


import pytest
import torch

pytest.importorskip("trl")

from vpo.cli import main  # noqa: E402
from vpo.tasks import register_task  # noqa: E402
from vpo.train.cli import CONFIG_DIR, parse_train_args, shipped_configs  # noqa: E402


@pytest.fixture()
def registered_char_task(char_task):
    register_task("char_stats_test", lambda: char_task)
    return "char_stats_test"


def test_train_from_yaml_with_overrides(tmp_path, tiny_model_dir, registered_char_task):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(
        f"model_name_or_path: {tiny_model_dir}\n"
        f"task: {registered_char_task}\n"
        "estimator: vpo\nnum_answers: 3\nnum_weightings: 8\nnum_generations: 4\n"
        "per_device_train_batch_size: 8\nmax_completion_length: 12\nlearning_rate: 0.05\nbeta: 0.0\n"
        "max_steps: 5\nreport_to: none\nuse_cpu: true\nsave_strategy: 'no'\nlogging_steps: 1\n"
    )
    out = tmp_path / "out"
    rc = main(["train", str(cfg), "--max_steps", "2", "--output_dir", str(out), "--disable_tqdm", "true"])
    assert rc == 0
    from transformers import AutoModelForCausalLM

    trained = AutoModelForCausalLM.from_pretrained(out)
    init = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert any(not torch.equal(a, b) for a, b in zip(trained.parameters(), init.parameters()))
    args = torch.load(out / "training_args.bin", weights_only=False)
    assert args.max_steps == 2 and args.estimator == "vpo" and args.num_weightings == 8  # override won


def test_every_shipped_config_parses():
    assert {
        "maze_qwen3_4b",
        "musique_qwen3_1.7b",
        "eureqa_qwen3_8b",
        "toolrl_qwen3_1.7b",
        "code_qwen2.5_coder_7b",
    } <= set(shipped_configs())
    for name in shipped_configs():
        a, m = parse_train_args(["--config", str(CONFIG_DIR / f"{name}.yaml"), "--bf16", "false", "--use_cpu", "true"])[
            :2
        ]
        assert a.task and m.model_name_or_path.startswith("Qwen/")
        assert a.learning_rate == 1e-6 or m.use_peft  # paper lr unless the LoRA variant
        assert a.beta == 1e-3 and a.epsilon == 0.2 and a.num_generations == 8 and a.temperature == 1.0


def test_help_lists_vpo_fields(capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--num_weightings" in out and "Dirichlet" in out and "--model_name_or_path" in out


def test_missing_config_and_missing_task_are_clear(tmp_path, capsys, tiny_model_dir):
    assert main(["train", str(tmp_path / "nope.yaml")]) == 2
    assert "not found" in capsys.readouterr().err
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"model_name_or_path: {tiny_model_dir}\nuse_cpu: true\nreport_to: none\nnum_generations: 2\nper_device_train_batch_size: 2\n"
    )
    assert main(["train", str(cfg), "--output_dir", str(tmp_path / "o")]) == 2
    assert "task is required" in capsys.readouterr().err
    cfg.write_text("task: maze\nuse_cpu: true\nnum_generations: 2\nper_device_train_batch_size: 2\n")
    assert (
        main(
            ["train", str(cfg), "--model_name_or_path", str(tmp_path / "no_model"), "--output_dir", str(tmp_path / "o")]
        )
        == 2
    )
    assert "does not exist" in capsys.readouterr().err
    cfg.write_text("estimator: nope\n")
    assert main(["train", str(cfg)]) == 2
    assert "unknown estimator" in capsys.readouterr().err
