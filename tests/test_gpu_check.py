"""scripts/gpu_check.sh: its CPU dry run exercises every stage and prints one JSON
summary on the last line; the pieces it is built from (the check task, the veRL overrides, the
stage runner's failure handling, the CUDA-vs-CPU estimator stage) are checked directly too."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.py"


def _module():
    spec = importlib.util.spec_from_file_location("vpo_gpu_check_script", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("vpo_gpu_check_script", mod)
    spec.loader.exec_module(mod)
    return mod


def test_check_task_gives_a_random_model_varied_rewards():
    gc = _module()
    task = gc.make_check_task()
    ex = task.load("test")[0]
    b = task.score_completions([ex] * 2, ["aei 123 xyz", "bcdfg"], 3)
    assert b.valid.tolist() == [[True, True, True], [True, True, True]]
    assert b.rewards[0, 0].tolist() == pytest.approx([1.0, 0.0, 0.0]) and b.rewards[0, 1, 1] > 0
    assert len({tuple(r) for r in b.rewards.reshape(-1, 3).round(3)}) >= 3


def test_verl_overrides_use_the_launch_scripts_vpo_settings(tmp_path):
    gc = _module()
    ours = gc.verl_overrides("/m", "/d", steps=2)
    env = dict(os.environ, VPO_PRINT_OVERRIDES="1", DATA_DIR=str(tmp_path))
    theirs = subprocess.run(
        ["bash", str(ROOT / "examples/verl/run_vpo_musique.sh")], capture_output=True, text=True, env=env, check=True
    ).stdout.split()
    vpo_part = [
        o for o in theirs if o.startswith(("algorithm.", "reward.reward_manager", "reward.custom_reward_function."))
    ]
    assert vpo_part and all(o in ours for o in vpo_part)
    assert "trainer.total_training_steps=2" in ours and "trainer.n_gpus_per_node=1" in ours
    assert "actor_rollout_ref.model.path=/m" in ours and "data.train_files=/d/train.parquet" in ours


def test_estimator_stage_and_failures_are_recorded(tmp_path, capsys):
    gc = _module()
    ctx = {"dry": True, "sizes": gc.SIZES["dry"], "out": str(tmp_path)}
    res = gc.stage_estimator(ctx)
    assert res["N"] == gc.SIZES["dry"]["est_groups"] * 8 and res["cpu_ms_median"] > 0
    assert abs(res["advantage_mean"]) < 1e-6  # z-scores within groups
    gc.stage_boom = lambda ctx: 1 / 0
    gc.child("boom", ctx)
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out == {"status": "failed", "reason": "ZeroDivisionError: division by zero"}
    gc.stage_nothing = lambda ctx: {"skipped": "why"}
    gc.child("nothing", ctx)
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == {"status": "skipped", "reason": "why"}


@pytest.mark.slow
def test_dry_run_prints_one_json_summary(tmp_path):
    env = {**os.environ, "GPU_CHECK_DRY_RUN": "1"}
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1500,
        cwd=ROOT,
    )
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 0, (summary, proc.stderr[-2000:])
    assert summary["mode"] == "dry-run (CPU)" and summary["ok"] is False  # the vLLM stages are skipped
    assert "train_vllm" in summary["skipped"] and not summary["failed"]
    st = summary["stages"]
    assert list(st) == [
        "env",
        "estimator",
        "train",
        "step_memory",
        "train_vllm",
        "eval",
        "verl",
        "pretrained",
        "pretrained_study",
    ]
    assert json.loads((tmp_path / "gpu_check.json").read_text())["stages"].keys() == st.keys()
    assert st["env"]["status"] == "ok" and st["env"]["dry_run"] is True
    assert st["estimator"]["status"] == "ok" and np.isfinite(st["estimator"]["cpu_ms_median"])
    train = st["train"]
    assert train["status"] == "ok" and train["param_change_l1"] > 0 and train["bf16"] is False
    mem = st["step_memory"]  # VPO m = 3 against GRPO on the same sizes (GPU memory only on a GPU)
    assert mem["status"] == "ok" and mem["step_time_ratio"] > 0 and "peak_memory_ratio" not in mem
    assert mem["vpo"]["param_change_l1"] > 0 and mem["grpo"]["param_change_l1"] > 0
    assert st["train_vllm"]["status"] == "skipped"
    if importlib.util.find_spec("vllm") is None:
        assert st["train_vllm"]["reason"].startswith("vllm: not installed")
        assert st["eval"]["vllm"].startswith("skipped: vllm: not installed")
    ev = st["eval"]["transformers"]
    assert st["eval"]["status"] == "ok" and ev["answer_slots"] == 2 * 2 * 3 and ev["valid_answer_frac"] > 0
    assert all(0.0 <= v <= 1.0 for v in ev["best_at_k"].values())
    verl = st["verl"]
    if (ROOT / ".venv-verl" / "bin" / "python").exists() or os.environ.get("VERL_PYTHON"):
        assert verl["status"] == "ok", verl
        assert verl["composed"]["estimator"] == "vpo" and verl["composed"]["reward_manager"] == "VPORewardManager"
        assert verl["composed"]["score_keys"] > 1
    else:
        assert verl["status"] == "skipped" and "veRL" in verl["reason"]
    # SmolLM2 runs when its checkpoint is on the machine (tests/integrations/test_pretrained.py runs
    # this stage with one); without it the stage says how to get one
    pre = st["pretrained"]
    assert pre["status"] in ("ok", "skipped") and (pre["status"] == "ok" or "vpo models fetch" in pre["reason"])
    study = st["pretrained_study"]  # the shop demo, --quick on CPU (tests/integrations/test_shop_demo.py)
    assert study["status"] == pre["status"]
    if study["status"] == "ok":
        assert set(study["methods"]) == {"warmstart_m1", "warmstart_m3", "grpo", "vpo"}
