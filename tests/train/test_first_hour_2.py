"""A new user's first hour, second pass: a LoRA result that `vpo eval` loads, install lines that
work from a clone, one task / set-objective / --import resolver for every command, a missing model
said in one line at once, the user's own task mistakes as one line (exit 2), an empty split refused,
k checked before generating, flat groups counted, TRL reward-function mistakes named, `vpo train
--help` leading with what a user needs, constraints in the run summary and logs, `vpo eval` taking
the checkpoint's task, dry-run skips reported as skips, the model card, every missing config piece
at once, a fast `vpo --version`, the demo's time estimate and resume hint, and the YAML path rule.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("trl")

from vpo.cli import main  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

USER_CODE = textwrap.dedent(
    """
    import torch
    from vpo.tasks import FunctionTask, register_task
    from vpo.core.set_objectives import SET_OBJECTIVES, register_set_objective

    def make(n=8):
        return FunctionTask(
            "user_task",
            objectives={"length": lambda ex, a: min(1.0, len(a) / 10), "has_e": lambda ex, a: float("e" in a)},
            examples=[{"id": i, "question": f"Say something #{i}."} for i in range(n)],
        )

    class _NeedsData(FunctionTask):
        def load(self, split, n=None, seed=None):
            open(f"missing_{split}.jsonl").read()

    def needs_data():
        return _NeedsData("needs_data", objectives={"x": lambda ex, a: 1.0}, examples=[])

    class _NoTrain(FunctionTask):
        def load(self, split, n=None, seed=None):
            return []

    def empty():
        return _NoTrain("empty_task", objectives={"x": lambda ex, a: 1.0}, examples=[{"question": "q"}])

    def not_a_task():
        return {"objectives": ["x"]}

    def raises():
        raise KeyError("api_key")

    class _Every(FunctionTask):
        def parse(self, completion, m):  # every completion is m answers, all scoring the same
            return [f"{completion or 'x'}#{i}" for i in range(m)]

    def flat():
        return _Every(
            "flat_task",
            objectives={"x": lambda ex, a: 0.5, "y": lambda ex, a: 1.0},
            examples=[{"id": i, "question": f"Q{i}"} for i in range(8)],
        )

    def varied():
        return _Every(
            "varied_task",
            objectives={"len": lambda ex, a: len(a) / 20, "e": lambda ex, a: a.count("e") / 5},
            examples=[{"id": i, "question": f"Q{i}"} for i in range(8)],
        )

    register_task("user_task_registered", make)

    def _my_set_score(rewards, valid, weights, group_index, target_weights):
        return (rewards * valid.unsqueeze(-1)).amax(1).sum(-1)

    if "user_set_score" not in SET_OBJECTIVES:
        register_set_objective("user_set_score", _my_set_score, summary="the sum of per-objective maxima")
    """
)

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

EVAL_FAST = [
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
]


@pytest.fixture()
def user_code(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "my_tasks.py"
    f.write_text(USER_CODE)
    yield f
    from vpo.core.set_objectives import unregister_set_objective

    unregister_set_objective("user_set_score")
    for name in [n for n in sys.modules if n == "my_tasks" or n.startswith("_vpo_user_my_tasks")]:
        del sys.modules[name]


def _lines(text: str) -> list[str]:
    return [ln for ln in text.strip().splitlines() if ln.strip() and "it/s]" not in ln and "s/it]" not in ln]


def _one_error_line(capsys, *needles) -> str:
    err = capsys.readouterr().err
    lines = _lines(err)
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


# ------------------------------------------------------------------------------------------
# a LoRA result evaluates
# ------------------------------------------------------------------------------------------


def _save_adapter(base_dir: str, out: Path) -> Path:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(base_dir)
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft_model = get_peft_model(model, cfg)
    peft_model.save_pretrained(out)
    AutoTokenizer.from_pretrained(base_dir).save_pretrained(out)
    assert (out / "adapter_config.json").exists() and not (out / "config.json").exists()
    return out


def test_an_adapter_folder_loads_as_base_plus_adapter(tiny_model_dir, tmp_path):
    """A folder holding only a LoRA adapter loads as its base model (named in adapter_config.json)
    with the adapter's weights applied: its logits are the PEFT model's, not the base's."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from vpo.search.backends import PoolConfig, TransformersGenerator

    adapter = _save_adapter(tiny_model_dir, tmp_path / "lora")
    gen = TransformersGenerator(str(adapter), cfg=PoolConfig(device="cpu"))
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        want = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model_dir), adapter)(ids).logits
        got = gen.model(ids).logits
        plain = base(ids).logits
    assert torch.allclose(got, want, atol=1e-5)
    assert not torch.allclose(got, plain, atol=1e-3)


def test_vpo_eval_of_an_adapter_folder(user_code, tiny_model_dir, capsys):
    """`vpo eval --model ADAPTER_DIR` (what a LoRA run saves) writes a pool and a report."""
    adapter = _save_adapter(tiny_model_dir, Path("lora_run"))
    rc = main(["eval", "--model", str(adapter), "--task", "my_tasks.py:make", "--out", "ev"] + EVAL_FAST)
    assert rc == 0, capsys.readouterr().err
    assert Path("ev/report.json").exists()


def test_a_lora_run_evaluates_without_naming_its_task(user_code, tiny_model_dir, capsys):
    """`vpo train --use_peft true` then `vpo eval --model OUTPUT_DIR`: the adapter loads on its base
    and the task comes from the run's vpo_args.json."""
    argv = ["train", "--task", "my_tasks:make", "--model_name_or_path", tiny_model_dir, "--output_dir", "lora"]
    peft = ["--use_peft", "true", "--lora_r", "4", "--lora_target_modules", "q_proj", "v_proj"]
    assert main(argv + FAST + peft) == 0, capsys.readouterr().err
    assert Path("lora/adapter_config.json").exists() and not Path("lora/config.json").exists()
    capsys.readouterr()
    assert main(["eval", "--model", "lora", "--out", "ev"] + EVAL_FAST) == 0, capsys.readouterr().err
    assert "task my_tasks:make" in capsys.readouterr().err
    assert Path("ev/report.json").exists()


def test_vllm_backend_on_an_adapter_folder_is_one_line(tiny_model_dir, tmp_path, monkeypatch):
    """vLLM loads merged models only: an adapter folder given to it says how to go on."""
    import types

    from vpo.errors import UserError
    from vpo.search.backends import PoolConfig, VLLMGenerator

    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    adapter = _save_adapter(tiny_model_dir, tmp_path / "lora")
    with pytest.raises(UserError, match="LoRA adapter.*--backend transformers"):
        VLLMGenerator(str(adapter), PoolConfig())


# ------------------------------------------------------------------------------------------
# install lines that work from a clone
# ------------------------------------------------------------------------------------------

INSTALL_FILES = [
    "docs/training.md",
    "docs/gpu.md",
    "docs/eval.md",
    "docs/evolve.md",
    "docs/tasks.md",
    "scripts/gpu_check.py",
    "vpo/search/backends.py",
    "vpo/search/cli.py",
    "vpo/search/embed.py",
    "vpo/search/pools.py",
    "vpo/train/cli.py",
    "vpo/train/trainer.py",
    "vpo/tasks/text.py",
    "vpo/tasks/code.py",
    "vpo/integrations/evolve/cli.py",
]


@pytest.mark.parametrize("rel", INSTALL_FILES)
def test_install_lines_name_the_clone_not_pypi(rel):
    """vpo is not on PyPI: every install line for an extra is the clone's `pip install -e ".[...]"`."""
    text = (REPO / rel).read_text()
    bad = re.findall(r"\bvpo\[[^\s]*", text)  # pip install 'vpo[x]', or an extra named as vpo[x]
    assert not bad, f"{rel}: {bad}"


# ------------------------------------------------------------------------------------------
# one resolver for tasks, set objectives and --import
# ------------------------------------------------------------------------------------------


def _evolve_args(**kw):
    import argparse

    base = dict(problem=[], task=None, task_options="{}", split="train", n=2, imports=[])
    base.update(kw)
    return argparse.Namespace(**base)


@pytest.mark.parametrize("spec", ["my_tasks:make", "my_tasks.py:make", "user_task_registered"])
def test_evolve_takes_every_task_form(user_code, spec):
    """`vpo evolve --task` takes module:factory and file.py:factory for a module in the working
    directory, as every other command does (and a registered name with --import)."""
    from vpo.integrations.evolve import cli as evolve_cli
    from vpo.tasks import import_user_modules

    if spec == "user_task_registered":
        import_user_modules(["my_tasks"])
    problems = evolve_cli._problems({}, _evolve_args(task=spec))
    assert len(problems) == 2 and problems[0].objectives == ["length", "has_e"]


def test_evolve_factory_mistake_is_one_line(user_code, capsys):
    """A bad option for an evolve task is the registry's one-line message, exit 2."""
    rc = main(["evolve", "--task", "my_tasks:make", "--task-options", '{"size": 3}', "--model", "name=a,client=x:y"])
    assert rc == 2
    _one_error_line(capsys, "vpo evolve: error:", "bad options for task 'my_tasks:make'", "size")


def test_evolve_without_openevolve_says_how_to_install(monkeypatch, capsys):
    """Without openevolve, `vpo evolve` prints the install command on one line, exit 2."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "openevolve" else real(name, *a))
    monkeypatch.setitem(sys.modules, "openevolve", None)
    rc = main(["evolve", "--problem", "examples/evolve/poly_fit", "--model", "name=a,client=x:y"])
    assert rc == 2
    _one_error_line(capsys, "vpo evolve: error:", "openevolve", 'pip install -e ".[evolve]"')


def test_tasks_and_estimators_take_import(user_code, capsys):
    """`vpo tasks --import` lists a user's registered task; `vpo estimators --import` its set objective."""
    assert main(["tasks", "--import", "my_tasks"]) == 0
    assert "user_task_registered" in capsys.readouterr().out
    assert main(["estimators", "--import", str(user_code)]) == 0
    assert "user_set_score" in capsys.readouterr().out


def test_eval_pool_and_compare_take_import(user_code, tiny_model_dir, capsys):
    """`vpo eval --pool` and `vpo compare` import --import modules, so a user's set objective scores."""
    rc = main(["eval", "--model", tiny_model_dir, "--task", "my_tasks:make", "--out", "ev"] + EVAL_FAST)
    assert rc == 0, capsys.readouterr().err
    from vpo.core.set_objectives import unregister_set_objective

    unregister_set_objective("user_set_score")  # as in a fresh process: only --import registers it
    sys.modules.pop("my_tasks", None)
    args = ["--set-objectives", "user_set_score", "--bootstrap", "0", "--eval-seeds", "1", "--no-plots"]
    rc = main(["eval", "--pool", "ev/pool", "--import", "my_tasks", "--out", "ev_re"] + args)
    assert rc == 0, capsys.readouterr().err
    assert (
        "user_set_score"
        in json.loads(Path("ev_re/report.json").read_text())["results"]["model"]["set_objectives"]["scores"]
    )
    unregister_set_objective("user_set_score")
    sys.modules.pop("my_tasks", None)
    rc = main(["compare", "ev/pool", "--recompute", "--out", "cmp", "--import", "my_tasks"] + args)
    assert rc == 0, capsys.readouterr().err


# ------------------------------------------------------------------------------------------
# a missing model: one line at once, train and eval alike
# ------------------------------------------------------------------------------------------


def _error_body(line: str) -> str:
    body = line.split("error: ", 1)[1]
    return body.replace("--model_name_or_path", "FLAG").replace("model_name_or_path", "FLAG").replace("--model", "FLAG")


def test_missing_model_path_is_one_line_at_once(tmp_path, monkeypatch, capsys):
    """A path-like model that does not exist: exit 2 within seconds, the same words from train and eval."""
    monkeypatch.chdir(tmp_path)
    Path("runs").mkdir()  # where the user's runs go: runs/nope is a path, not a hub id
    t0 = time.perf_counter()
    assert main(["eval", "--model", "runs/nope", "--task", "maze", "--out", "o"]) == 2
    ev = _one_error_line(capsys, "vpo eval: error:", "'runs/nope'", "does not exist")
    assert main(["train", "--task", "maze", "--model_name_or_path", "runs/nope"] + FAST) == 2
    tr = _one_error_line(capsys, "vpo train: error:", "'runs/nope'", "does not exist")
    assert time.perf_counter() - t0 < 20
    assert _error_body(ev) == _error_body(tr)


def test_unreachable_hub_is_one_line_without_retries(tmp_path, monkeypatch, capsys):
    """A hub id when the hub cannot be reached (and offline mode is off): one line saying so, at once."""
    import huggingface_hub
    from huggingface_hub import constants

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    calls = []

    def unreachable(name, *a, **k):
        calls.append(name)
        raise ConnectionError("[Errno -2] Name or service not known")

    monkeypatch.setattr(huggingface_hub, "model_info", unreachable)
    assert main(["eval", "--model", "someorg/somemodel", "--task", "maze", "--out", "o"]) == 2
    ev = _one_error_line(capsys, "vpo eval: error:", "cannot be reached", "HF_HUB_OFFLINE")
    assert main(["train", "--task", "maze", "--model_name_or_path", "someorg/somemodel"] + FAST) == 2
    tr = _one_error_line(capsys, "vpo train: error:", "cannot be reached")
    assert _error_body(ev) == _error_body(tr)
    assert calls == ["someorg/somemodel"] * 2  # one lookup each, no retries


# ------------------------------------------------------------------------------------------
# the user's own task code: one line naming the task, the split and the cause
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, needles",
    [
        ("my_tasks:needs_data", ["task 'my_tasks:needs_data'", "'train' split", "FileNotFoundError", "--debug"]),
        ("my_tasks:not_a_task", ["task 'my_tasks:not_a_task'", "dict", "not a Task"]),
        ("my_tasks:raises", ["task 'my_tasks:raises'", "KeyError", "api_key", "--debug"]),
    ],
)
def test_user_task_mistakes_in_train_are_one_line(spec, needles, user_code, tiny_model_dir, capsys):
    rc = main(["train", "--task", spec, "--model_name_or_path", tiny_model_dir, "--output_dir", "o"] + FAST)
    assert rc == 2
    _one_error_line(capsys, "vpo train: error:", *needles)


@pytest.mark.parametrize(
    "spec, needles",
    [
        ("my_tasks:needs_data", ["task 'my_tasks:needs_data'", "'test' split", "FileNotFoundError", "--debug"]),
        ("my_tasks:not_a_task", ["task 'my_tasks:not_a_task'", "not a Task"]),
        ("my_tasks:raises", ["task 'my_tasks:raises'", "KeyError"]),
    ],
)
def test_user_task_mistakes_in_eval_are_one_line(spec, needles, user_code, tiny_model_dir, capsys):
    rc = main(["eval", "--model", tiny_model_dir, "--task", spec, "--out", "o"] + EVAL_FAST)
    assert rc == 2
    _one_error_line(capsys, "vpo eval: error:", *needles)


@pytest.mark.parametrize("command", ["train", "eval"])
@pytest.mark.parametrize("form", ["broken_mod:make", "broken_mod.py:make"])
def test_a_task_module_that_fails_to_import_is_one_line(form, command, user_code, tiny_model_dir, capsys):
    """A task module whose own import fails (a missing dependency) is one line naming it, exit 2."""
    Path("broken_mod.py").write_text("import not_installed_pkg_xyz\n\ndef make():\n    pass\n")
    sys.modules.pop("broken_mod", None)
    if command == "eval":
        argv = ["eval", "--model", tiny_model_dir, "--task", form, "--out", "o"] + EVAL_FAST
    else:
        argv = ["train", "--task", form, "--model_name_or_path", tiny_model_dir, "--output_dir", "o"] + FAST
    assert main(argv) == 2
    _one_error_line(capsys, f"vpo {command}: error:", "broken_mod", "ModuleNotFoundError", "not_installed_pkg_xyz")


def test_user_task_mistake_with_debug_has_the_traceback(user_code, tiny_model_dir, capsys):
    rc = main(["eval", "--model", tiny_model_dir, "--task", "my_tasks:raises", "--out", "o", "--debug"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "raise KeyError" in err


def test_prepare_data_without_the_split_is_one_line(user_code, capsys):
    """examples/verl/prepare_data.py on a task whose split cannot load: one line, exit 2."""
    pytest.importorskip("pandas")
    sys.path.insert(0, str(REPO / "examples" / "verl"))
    try:
        import prepare_data
    finally:
        sys.path.pop(0)
    rc = prepare_data.main(["--task", "my_tasks:needs_data", "--out", "data"])
    assert rc == 2
    err = capsys.readouterr().err
    assert len(_lines(err)) == 1 and "'train' split" in err and "FileNotFoundError" in err


# ------------------------------------------------------------------------------------------
# an empty split, k above the pool
# ------------------------------------------------------------------------------------------


def test_an_empty_train_split_is_refused(user_code, tiny_model_dir, capsys):
    rc = main(["train", "--task", "my_tasks:empty", "--model_name_or_path", tiny_model_dir, "--output_dir", "o"] + FAST)
    assert rc == 2
    _one_error_line(capsys, "vpo train: error:", "'my_tasks:empty'", "'train' split", "no examples")
    assert not Path("o/model.safetensors").exists()


def test_k_above_the_pool_is_refused_before_generating(user_code, tiny_model_dir, monkeypatch, capsys):
    import vpo.search.generate as generate

    def never(*a, **k):
        raise AssertionError("generated a pool whose metrics cannot be computed")

    monkeypatch.setattr(generate, "generate_pool", never)
    argv = ["eval", "--model", tiny_model_dir, "--task", "my_tasks:make", "--out", "o", "--ks", "1,5"]
    assert main(argv + EVAL_FAST) == 2  # 2 rollouts x 1 answer = 2 answer slots per prompt
    _one_error_line(capsys, "vpo eval: error:", "k = 5", "2 answer", "--rollouts")


# ------------------------------------------------------------------------------------------
# training runs: flat groups, TRL reward functions, constraints, the model card
# ------------------------------------------------------------------------------------------


def _trainer(tiny_model_dir, out, **kw):
    from vpo.train import VPOConfig, VPOTrainer

    args = VPOConfig(
        output_dir=str(out),
        use_cpu=True,
        bf16=False,
        report_to="none",
        num_generations=2,
        per_device_train_batch_size=4,
        max_completion_length=8,
        num_weightings=4,
        max_steps=kw.pop("max_steps", 1),
        save_strategy="no",
        disable_tqdm=True,
        logging_steps=1,
        **{k: kw.pop(k) for k in list(kw) if k in ("task", "task_options", "constraints", "num_answers")},
    )
    return VPOTrainer(model=tiny_model_dir, args=args, **kw)


def test_flat_groups_are_counted_and_warned(user_code, tiny_model_dir, tmp_path):
    """Every rollout of a group scoring the same (advantage 0): counted and warned about."""
    tr = _trainer(tiny_model_dir, tmp_path / "o", task="my_tasks:flat", max_steps=2)
    with pytest.warns(RuntimeWarning, match="flat"):
        tr.train()
    logs = [h for h in tr.state.log_history if "vpo/flat_group_batches" in h]
    assert logs and logs[-1]["vpo/flat_group_batches"] == 2.0
    assert logs[-1]["vpo/flat_group_frac"] == 1.0


def test_varied_groups_are_not_flat(user_code, tiny_model_dir, tmp_path):
    """The counter stays at 0 when groups differ."""
    tr = _trainer(tiny_model_dir, tmp_path / "o", task="my_tasks:varied")
    tr.train()
    logs = [h for h in tr.state.log_history if "vpo/flat_group_frac" in h]
    assert logs and logs[-1]["vpo/flat_group_frac"] < 1.0 and logs[-1]["vpo/flat_group_batches"] == 0.0


def _prompts_dataset(n=8):
    from datasets import Dataset

    return Dataset.from_list([{"prompt": f"Write something #{i}."} for i in range(n)])


@pytest.mark.parametrize("flattened", [False, True])
def test_a_vector_returning_reward_function_is_named(flattened, tiny_model_dir, tmp_path):
    """One TRL reward function returning a vector per answer (nested or flattened): the error says
    one function per objective."""
    from vpo.errors import UserError

    def scores(completions, **kw):
        rows = [[0.1, 0.2, 0.3] for _ in completions]
        return [x for r in rows for x in r] if flattened else rows

    tr = _trainer(
        tiny_model_dir, tmp_path / "o", num_answers=1, reward_funcs=[scores], train_dataset=_prompts_dataset()
    )
    with pytest.raises(UserError, match=r"'scores' returned .*3 values per answer.*one reward function per objective"):
        tr.train()


def test_string_rewards_are_refused(tiny_model_dir, tmp_path):
    from vpo.errors import UserError

    def as_text(completions, **kw):
        return ["0.5" for _ in completions]

    tr = _trainer(
        tiny_model_dir, tmp_path / "o", num_answers=1, reward_funcs=[as_text], train_dataset=_prompts_dataset()
    )
    with pytest.raises(UserError, match=r"'as_text' returned a str .*'0.5'.*float"):
        tr.train()


def test_trl_and_vpo_objective_logs_are_explained():
    """docs/training.md says why rewards/<f>/mean and vpo/objective/<f> differ in the same step."""
    text = (REPO / "docs/training.md").read_text()
    para = next((p for p in text.split("\n\n") if "rewards/" in p and "vpo/objective/" in p), "")
    assert "valid" in para and "rollout" in para, para


def test_constraints_in_summary_and_logs(user_code, tiny_model_dir, tmp_path, capsys):
    """The start-of-run summary names the constraints; violations are logged every step; the model
    card names the base model and no grpo tag."""
    tr = _trainer(tiny_model_dir, tmp_path / "o", task="my_tasks:varied", constraints=["len>=2"])
    tr.train()
    out = capsys.readouterr().out
    assert "constraints: len>=2" in out
    logs = [h for h in tr.state.log_history if "vpo/constraint_violations" in h]
    assert logs and logs[-1]["vpo/constraint_violations"] > 0  # no answer is that long: every one violates
    tr.save_model()
    tr.create_model_card(model_name="o")
    card = (tmp_path / "o" / "README.md").read_text()
    assert "[None]" not in card and Path(tiny_model_dir).name in card
    tags = re.search(r"tags:\n((?:- .*\n)+)", card).group(1)
    assert "- grpo" not in tags and "- vpo" in tags


# ------------------------------------------------------------------------------------------
# vpo train --help, every missing piece at once, the YAML path rule
# ------------------------------------------------------------------------------------------


def test_train_help_leads_with_what_a_user_needs(capsys):
    try:
        assert main(["train", "--help"]) == 0
    except SystemExit as e:  # TRL's parser exits after printing the fields
        assert e.code in (0, None)
    out = capsys.readouterr().out
    head = "\n".join(out.splitlines()[:40])
    for needle in ("CONFIG", "maze_qwen3_4b", "--smoke", "--import", "--resume", "working directory"):
        assert needle in head, needle
    assert head.index("--smoke") < out.index("--learning_rate")


def test_every_missing_piece_is_reported_at_once(tmp_path, monkeypatch, capsys):
    import importlib.util

    monkeypatch.chdir(tmp_path)
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in ("vllm", "tensorboard") else real(name, *a)
    )
    assert main(["train", "--use_vllm", "true", "--report_to", "tensorboard", "--bf16", "false"]) == 2
    _one_error_line(capsys, "vpo train: error:", "model_name_or_path", "task", "vLLM", "tensorboard")


def test_bf16_on_a_cpu_is_reported_with_the_other_missing_pieces(tmp_path, monkeypatch, capsys):
    """The bf16-without-GPU value error (raised while the config is parsed) comes in the same line as
    the model and task that are missing."""
    import vpo.train.cli as train_cli

    real = train_cli.parse_train_args

    def no_bf16_gpu(argv):  # what TRL's parser raises for bf16: true on a machine without a bf16 GPU
        if "--bf16" not in argv:
            raise ValueError("Your setup doesn't support bf16/gpu. You need to assign use_cpu if you want to train")
        return real(argv)

    monkeypatch.setattr(train_cli, "parse_train_args", no_bf16_gpu)
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--output_dir", "o"]) == 2
    _one_error_line(capsys, "vpo train: error:", "3 problems", "bf16", "model_name_or_path is required", "task")


def test_a_yaml_path_that_exists_only_beside_the_yaml_is_noted(tmp_path, monkeypatch, capsys):
    """Relative paths resolve from the working directory; one that exists only next to the YAML gets a note."""
    from vpo.train.cli import note_yaml_relative_paths

    (tmp_path / "exp" / "data").mkdir(parents=True)
    (tmp_path / "exp" / "data" / "train.jsonl").write_text("{}\n")
    cfg = tmp_path / "exp" / "run.yaml"
    cfg.write_text("task: code\ntask_options:\n  data: data/train.jsonl\noutput_dir: runs/x\n")
    monkeypatch.chdir(tmp_path)
    note_yaml_relative_paths(cfg)
    err = capsys.readouterr().err
    assert "task_options.data: data/train.jsonl" in err and "working directory" in err
    assert str(tmp_path / "exp" / "data" / "train.jsonl") in err and "output_dir" not in err
    monkeypatch.chdir(tmp_path / "exp")  # from the YAML's folder the path resolves: nothing to say
    note_yaml_relative_paths(Path("run.yaml"))
    assert capsys.readouterr().err == ""


def test_a_long_json_value_in_a_yaml_is_no_path(tmp_path, monkeypatch, capsys):
    """A task_options JSON string with dots in it (``"sigma": 0.05``) longer than a file name may be
    was taken for a path, and checking it raised "File name too long" before training started."""
    import json

    from vpo.train.cli import note_yaml_relative_paths

    opts = json.dumps({"task": "maze", "task_options": {"size": 5, "note": "x" * 300}, "sigma": 0.05})
    (tmp_path / "exp").mkdir()
    cfg = tmp_path / "exp" / "run.yaml"
    cfg.write_text(f"task: noisy\ntask_options: '{opts}'\noutput_dir: runs/x\n")
    monkeypatch.chdir(tmp_path)
    note_yaml_relative_paths(cfg)  # raised OSError (ENAMETOOLONG) before the fix
    assert capsys.readouterr().err == ""


def test_yaml_relative_paths_rule_is_documented():
    text = (REPO / "docs/training.md").read_text()
    assert re.search(r"relative paths[^.]*working directory", text, re.I | re.S)


# ------------------------------------------------------------------------------------------
# vpo eval takes the checkpoint's task
# ------------------------------------------------------------------------------------------


def _checkpoint(tiny_model_dir, task) -> Path:
    import shutil

    ck = Path("ck")
    shutil.copytree(tiny_model_dir, ck)
    (ck / "vpo_args.json").write_text(json.dumps({"num_answers": 1, "task": task, "task_options": {"n": 3}}))
    return ck


def test_eval_takes_the_task_from_the_checkpoint(user_code, tiny_model_dir, capsys):
    ck = _checkpoint(tiny_model_dir, "my_tasks:make")
    assert main(["eval", "--model", str(ck), "--out", "ev"] + EVAL_FAST) == 0
    err = capsys.readouterr().err
    assert "task my_tasks:make" in err and "as the checkpoint was trained" in err
    from vpo.search.pools import load_pool

    assert load_pool("ev/pool").num_prompts == 2


def test_eval_on_another_task_notes_it(user_code, tiny_model_dir, capsys):
    ck = _checkpoint(tiny_model_dir, "my_tasks:make")
    assert main(["eval", "--model", str(ck), "--task", "my_tasks.py:make", "--out", "ev"] + EVAL_FAST) == 0
    err = capsys.readouterr().err
    assert "note" in err and "trained on task my_tasks:make" in err


# ------------------------------------------------------------------------------------------
# gpu_check --dry-run, vpo --version, vpo demo
# ------------------------------------------------------------------------------------------


def test_gpu_check_summary_reports_skipped_stages(monkeypatch, tmp_path, capsys):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import gpu_check
    finally:
        sys.path.pop(0)
    results = {"env": {"status": "ok"}, "train_vllm": {"status": "skipped", "reason": "needs CUDA"}}
    monkeypatch.setattr(gpu_check, "run_stage", lambda name, ctx: dict(results[name]))
    rc = gpu_check.main(["--dry-run", "--out", str(tmp_path), "--stages", "env,train_vllm"])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rc == 0
    assert summary["skipped"] == ["train_vllm"] and summary["failed"] == [] and summary["ok"] is False
    assert summary["status"] == "ok, 1 of 2 stages skipped (train_vllm)"
    results["train_vllm"] = {"status": "ok"}
    assert gpu_check.main(["--dry-run", "--out", str(tmp_path), "--stages", "env,train_vllm"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["ok"] is True and summary["skipped"] == []


def test_version_is_fast_and_imports_nothing_heavy():
    code = (
        "import sys\nfrom vpo.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('torch', 'transformers', 'trl', 'numpy') if m in sys.modules]\nprint('HEAVY', heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert "vpo " in out.stdout and "HEAVY []" in out.stdout, out.stdout + out.stderr


def test_demo_estimates_its_time_and_says_how_to_resume(monkeypatch, tmp_path, capsys):
    import vpo.demo.runner as runner

    def interrupted(cfg, workers=True):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_demo", interrupted)
    rc = main(["demo", "--quick", "--out", str(tmp_path / "d")])
    assert rc == 130
    err = capsys.readouterr().err
    assert re.search(r"about \d+(\.\d+)? min", err), err
    assert "rerun" in err and f"--out {tmp_path / 'd'}" in err and "resume" in err
    assert err.count("interrupted") == 1


def test_an_unset_bf16_follows_the_cpu_s_bf16_units_and_trl_s_default_on_a_bf16_gpu(tmp_path, monkeypatch):
    """TRL resolves an unset bf16 to True: on a CPU with use_cpu that autocasts to bf16 (slower than
    float32 where the CPU emulates bf16), and without use_cpu it refuses to start. vpo takes bf16 on
    a CPU with bf16 units (AVX512-BF16 or AMX) under use_cpu, float32 on other CPUs and without
    use_cpu, and keeps bf16 where an accelerator supports it; an explicit value always wins."""
    import vpo.search.fast_decode as fd
    import vpo.train.config as config_mod
    from vpo.train import VPOConfig
    from vpo.train.cli import parse_train_args

    out = str(tmp_path)
    for units in (False, True):
        monkeypatch.setattr(fd, "bf16_cpu", lambda units=units: units)
        assert VPOConfig(output_dir=out, report_to="none").bf16 is False  # TRL: "Your setup doesn't support bf16/gpu"
        assert VPOConfig(output_dir=out, use_cpu=True, report_to="none").bf16 is units  # TRL: bf16 autocast
        assert VPOConfig(output_dir=out, use_cpu=True, bf16=True, report_to="none").bf16 is True
        assert VPOConfig(output_dir=out, use_cpu=True, bf16=False, report_to="none").bf16 is False
        assert VPOConfig(output_dir=out, fp16=True, use_cpu=True, report_to="none").bf16 is False
        training_args = parse_train_args(["--output_dir", out, "--report_to", "none", "--use_cpu", "true"])[0]
        assert training_args.bf16 is units  # the command line leaves it unset the same way
        assert config_mod.default_bf16(use_cpu=True) is units
    monkeypatch.setattr(config_mod, "is_torch_bf16_gpu_available", lambda: True)
    assert config_mod.default_bf16(use_cpu=False) is True
