"""A TRL user's first hour with the CLI: a task of one's own reached from `vpo train` and
`vpo eval` (module:factory, file.py:factory, --import), `vpo train` from flags alone, one-line errors
(exit 2, --debug for the traceback), `vpo train NAME.yaml`, `--smoke` for shipped configs, `vpo eval`
taking m from the checkpoint, the VPO model card, the start-of-run summary, "interrupted" said once.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("trl")

from vpo.cli import main  # noqa: E402
from vpo.tasks import get as get_task  # noqa: E402
from vpo.train.cli import CONFIG_DIR, resolve_config, shipped_configs  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

USER_TASK = textwrap.dedent(
    """
    from vpo.tasks import FunctionTask, register_task

    def make(n=8):
        return FunctionTask(
            "user_task",
            objectives={"length": lambda ex, a: min(1.0, len(a) / 10), "has_e": lambda ex, a: float("e" in a)},
            examples=[{"id": i, "question": f"Say something #{i}."} for i in range(n)],
        )

    class _EveryCompletionAnswers(FunctionTask):
        def parse(self, completion, m):  # every completion is m answers, so the scorer always runs
            return [f"{completion or 'x'}#{i}" for i in range(m)]

    def nan_task():
        return _EveryCompletionAnswers(
            "nan_task",
            objectives={"x": lambda ex, a: float("nan"), "y": lambda ex, a: 1.0},
            examples=[{"id": i, "question": f"Q{i}"} for i in range(8)],
        )

    register_task("user_task_registered", make)
    """
)

# a 1-step CPU run of the tiny model, by flags alone
FAST = [
    "--use_cpu",
    "true",
    "--bf16",
    "false",
    "--report_to",
    "none",
    "--num_generations",
    "2",
    "--per_device_train_batch_size",
    "4",
    "--max_completion_length",
    "8",
    "--num_weightings",
    "4",
    "--max_steps",
    "1",
    "--save_strategy",
    "no",
    "--disable_tqdm",
    "true",
]


@pytest.fixture()
def user_task_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "my_tasks.py"
    f.write_text(USER_TASK)
    return f


def _one_error_line(capsys, *needles):
    err = capsys.readouterr().err
    # progress bars (transformers' "Loading weights") are not messages
    lines = [ln for ln in err.strip().splitlines() if ln.strip() and "it/s]" not in ln]
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


# ------------------------------------------------------------------------------------------
# a user task from the CLI, both ways; train from flags alone, m from the checkpoint
# ------------------------------------------------------------------------------------------


def test_get_takes_module_and_file_references(user_task_file):
    t = get_task(f"{user_task_file}:make", n=3)  # path/to/file.py:factory
    assert t.name == "user_task" and len(t.load("train")) == 3
    t = get_task("my_tasks:make")  # module:factory, the module found from the working directory
    assert list(t.objectives) == ["length", "has_e"]
    with pytest.raises(ValueError, match="no attribute 'nope'"):
        get_task("my_tasks:nope")
    with pytest.raises(ValueError, match="module:factory"):
        get_task("not_a_task")
    with pytest.raises(ValueError, match="bad options for task .*'size'"):
        get_task("my_tasks:make", size=3)


def test_user_task_from_train_and_eval_both_ways(user_task_file, tiny_model_dir, capsys):
    # by file reference, flags only (no config file)
    out = Path("run1")
    rc = main(
        [
            "train",
            "--task",
            f"{user_task_file.name}:make",
            "--model_name_or_path",
            tiny_model_dir,
            "--output_dir",
            str(out),
        ]
        + FAST
    )
    assert rc == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "estimator vpo, m = 3" in printed and "K = 4" in printed and "d = 2 objectives" in printed
    assert "w* = length 0.5, has_e 0.5" in printed and "prompts per optimizer step" in printed
    card = (out / "README.md").read_text()
    assert "trained with GRPO" not in card and "VPO" in card and "m = 3" in card
    assert json.loads((out / "vpo_args.json").read_text())["num_answers"] == 3

    # by registered name, from a config, with --import of the user's module (a .py path)
    cfg = Path("run.yaml")
    cfg.write_text(f"task: user_task_registered\nmodel_name_or_path: {tiny_model_dir}\noutput_dir: run2\n")
    assert main(["train", str(cfg), "--import", str(user_task_file)] + FAST) == 0

    # vpo eval of the checkpoint: m from vpo_args.json, the task by --import + name
    rc = main(
        [
            "eval",
            "--model",
            str(out),
            "--import",
            "my_tasks",
            "--task",
            "user_task_registered",
            "--rollouts",
            "2",
            "--num-prompts",
            "2",
            "--max-new-tokens",
            "8",
            "--bootstrap",
            "0",
            "--eval-seeds",
            "1",
            "--no-plots",
            "--quiet",
            "--out",
            "ev1",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    assert "num_answers = 3 answers per rollout, as the checkpoint was trained" in capsys.readouterr().err
    assert json.loads(Path("ev1/pool/meta.json").read_text())["m"] == 3
    # and by file reference, with --task-options (the one spelling); --num-answers still overrides
    rc = main(
        [
            "eval",
            "--model",
            str(out),
            "--task",
            f"{user_task_file}:make",
            "--task-options",
            '{"n": 2}',
            "--num-answers",
            "2",
            "--rollouts",
            "2",
            "--max-new-tokens",
            "8",
            "--bootstrap",
            "0",
            "--eval-seeds",
            "1",
            "--no-plots",
            "--quiet",
            "--out",
            "ev2",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    assert json.loads(Path("ev2/pool/meta.json").read_text())["m"] == 2


def test_eval_reads_m_from_training_args_bin(tmp_path):
    """A checkpoint without vpo_args.json (an older run): num_answers from training_args.bin."""
    import torch

    from vpo.search.evalsetup import checkpoint_settings
    from vpo.train.config import VPOConfig

    torch.save(
        VPOConfig(output_dir=str(tmp_path), num_answers=4, use_cpu=True, bf16=False, report_to="none"),
        tmp_path / "training_args.bin",
    )
    settings, source = checkpoint_settings(str(tmp_path))
    assert settings["num_answers"] == 4 and source.endswith("training_args.bin")
    assert checkpoint_settings(str(tmp_path / "nothing")) == ({}, None)


# ------------------------------------------------------------------------------------------
# every user mistake (strict_rewards included) is one line and exit code 2
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "case",
    [
        "yaml",
        "unknown_task",
        "task_options",
        "runs_x",
        "hub_typo",
        "dataset_offline",
        "reward_weights",
        "no_config",
        "num_answers_three",
        "estimator",
        "vllm_missing",
        "tensorboard_missing",
    ],
)
def test_each_mistake_is_one_line_and_exit_2(case, tmp_path, monkeypatch, tiny_model_dir, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    base = ["--model_name_or_path", tiny_model_dir, "--output_dir", "o"] + FAST
    argv, needles = {
        "yaml": (["bad.yaml"], ["bad.yaml, line 3", "not valid YAML"]),
        "unknown_task": (["--task", "mazee"] + base, ["unknown task 'mazee'", "module:factory"]),
        "task_options": (
            ["--task", "maze", "--task_options", '{"sise": 7}'] + base,
            ["bad options for task 'maze'", "sise"],
        ),
        "runs_x": (
            ["--task", "maze"] + base + ["--model_name_or_path", "runs/x"],
            ["'runs/x'", "no such model directory"],
        ),
        "hub_typo": (
            ["--task", "maze"] + base + ["--model_name_or_path", "Qwen/Qwen3-4B-typo"],
            ["not in the Hugging Face cache", "HF_HUB_OFFLINE"],
        ),
        "dataset_offline": (["--task", "musique"] + base, ["task 'musique'", "path="]),
        "reward_weights": (
            ["--task", "maze", "--reward_weights", "1", "2"] + base,
            ["reward_weights has 2 entries", "d=4"],
        ),
        "no_config": ([], ["nothing to train", "--model_name_or_path"]),
        "num_answers_three": (["--task", "maze", "--num_answers", "three"] + base, ["--num_answers", "'three'"]),
        "estimator": (["--task", "maze", "--estimator", "vpoo"] + base, ["unknown estimator 'vpoo'"]),
        "vllm_missing": (
            ["--task", "maze", "--use_vllm", "true"] + base,
            ["use_vllm: true needs vLLM", "--use_vllm false"],
        ),
        "tensorboard_missing": (
            ["--task", "maze"] + base + ["--report_to", "tensorboard"],
            ["report_to: tensorboard", "--report_to none"],
        ),
    }[case]
    import importlib.util

    real_find_spec = importlib.util.find_spec
    hidden = {"vllm_missing": "vllm", "tensorboard_missing": "tensorboard"}.get(case)
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == hidden else real_find_spec(name, *a)
    )
    (tmp_path / "bad.yaml").write_text("task: maze\nmodel_name_or_path: x\n  oops: [\n")
    assert main(["train"] + argv) == 2
    _one_error_line(capsys, "vpo train: error:", *needles)


def test_eval_mistakes_are_one_line(tmp_path, capsys):
    assert main(["eval", "--model", "m", "--task", "maze", "--num-answers", "three", "--out", str(tmp_path)]) == 2
    _one_error_line(capsys, "vpo eval: error:", "--num-answers", "'three'")
    assert main(["eval", "--model", "m", "--task", "nope:make", "--out", str(tmp_path)]) == 2
    _one_error_line(capsys, "module 'nope' not found")


def test_debug_shows_the_traceback(tmp_path, capsys):
    (tmp_path / "bad.yaml").write_text("a: [\n")
    assert main(["train", str(tmp_path / "bad.yaml"), "--debug"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("vpo train: error:")


def test_strict_rewards_failure_is_one_line(user_task_file, tiny_model_dir, capsys):
    rc = main(
        [
            "train",
            "--task",
            f"{user_task_file}:nan_task",
            "--model_name_or_path",
            tiny_model_dir,
            "--output_dir",
            "o",
            "--strict_rewards",
            "true",
        ]
        + FAST
    )
    assert rc == 2
    line = _one_error_line(capsys, "strict_rewards: true", "NaN/inf", "strict_rewards: false")
    assert "strict=False" not in line


def test_eval_says_interrupted_once(tmp_path, monkeypatch, tiny_model_dir, capsys):
    import vpo.search.generate as gen

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(gen, "generate_pool", interrupted)
    rc = main(["eval", "--model", tiny_model_dir, "--task", "maze", "--num-prompts", "1", "--out", str(tmp_path)])
    assert rc == 130
    assert capsys.readouterr().err.count("vpo eval: interrupted") == 1


def test_task_options_json_reaches_generation(tmp_path, monkeypatch):
    import vpo.search.cli as scli

    seen = {}

    def fake_generate(args, out, name):
        seen["options"] = scli._task_options(args)
        raise KeyboardInterrupt

    monkeypatch.setattr(scli, "_generate", fake_generate)
    main(["eval", "--model", "m", "--task", "maze", "--task-options", '{"size": 7}', "--out", str(tmp_path)])
    assert seen["options"] == {"size": 7}


# ------------------------------------------------------------------------------------------
# shipped configs by name.yaml, and --smoke
# ------------------------------------------------------------------------------------------


def test_shipped_config_found_with_its_extension():
    assert resolve_config("maze_qwen3_4b.yaml") == CONFIG_DIR / "maze_qwen3_4b.yaml"
    assert resolve_config("maze_qwen3_4b") == CONFIG_DIR / "maze_qwen3_4b.yaml"


@pytest.fixture()
def smoke_env(tmp_path, monkeypatch, tmp_path_factory):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VPO_CACHE", str(tmp_path_factory.getbasetemp() / "vpo_cache"))
    return tmp_path


def test_smoke_runs_the_maze_config_for_one_step(smoke_env, capsys):
    assert main(["train", "maze_qwen3_4b.yaml", "--smoke", "--disable_tqdm", "true"]) == 0
    out = capsys.readouterr().out
    assert "max_steps 1, vLLM off" in out
    assert (smoke_env / "runs/smoke/maze_qwen3_4b/model.safetensors").exists()


# options that point each data-needing task at the repo's small fixtures
_FIXTURE_OPTIONS = {
    "musique": {"path": str(FIXTURES / "musique")},
    "eureqa": {"path": str(FIXTURES / "eureqa")},
    "toolrl": {"path": str(FIXTURES / "toolrl")},
    "code": {"data": str(FIXTURES / "code" / "problems.jsonl")},
}


@pytest.mark.parametrize("name", [n for n in shipped_configs() if not n.startswith("maze")])
def test_smoke_without_data_says_so(name, smoke_env, capsys):
    assert main(["train", name, "--smoke"]) == 2
    _one_error_line(capsys, "vpo train: error: task '")


@pytest.mark.parametrize("name", [n for n in shipped_configs() if not n.startswith("maze")])
def test_smoke_with_fixture_data_finishes_a_step(name, smoke_env):
    """Every shipped config starts and finishes one --smoke step when its task has data (~5 s each)."""
    import yaml

    task = yaml.safe_load((CONFIG_DIR / f"{name}.yaml").read_text())["task"]
    opts = json.dumps(_FIXTURE_OPTIONS[task])
    assert main(["train", name, "--smoke", "--task_options", opts, "--disable_tqdm", "true"]) == 0
    assert (smoke_env / "runs" / "smoke" / name).is_dir()


def test_no_gradient_checkpointing_future_warnings(recwarn, tiny_model_dir, tmp_path):
    """transformers' four `gradient_checkpointing` renames are silenced (TRL 1.16 uses the old names)."""
    from vpo.train import VPOConfig, VPOTrainer

    args = VPOConfig(
        output_dir=str(tmp_path),
        gradient_checkpointing=True,
        use_cpu=True,
        bf16=False,
        report_to="none",
        num_generations=2,
        per_device_train_batch_size=4,
        max_completion_length=8,
        num_weightings=4,
        max_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        task="maze",
        train_size=4,
    )
    VPOTrainer(tiny_model_dir, args).train()
    assert not [w for w in recwarn if "gradient_checkpointing" in str(w.message)]


def test_a_single_reward_function_is_accepted(tiny_model_dir, tmp_path):
    """TRL's GRPOTrainer takes one callable as reward_funcs; so does VPOTrainer."""
    from datasets import Dataset

    from vpo.train import VPOConfig, VPOTrainer

    def has_e(prompts, completions, **kw):
        return [float("e" in c) for c in completions]

    args = VPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        report_to="none",
        num_generations=2,
        per_device_train_batch_size=4,
        max_completion_length=8,
        num_answers=1,
        estimator="grpo",
    )
    ds = Dataset.from_list([{"prompt": f"Say {i}"} for i in range(4)])
    tr = VPOTrainer(tiny_model_dir, args, reward_funcs=has_e, train_dataset=ds)
    assert tr.vpo_objectives == ["has_e"]
