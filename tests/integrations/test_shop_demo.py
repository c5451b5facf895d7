"""`vpo demo --domain shop` end to end on the real SmolLM2 at --quick sizes (2 warm-start steps, 2 LoRA
RL steps of GRPO and VPO, a 4-request evaluation), as scripts/gpu_check.py's pretrained_study stage
runs it in a dry run: the warm start is a full checkpoint of the pretrained model, each RL run is a
LoRA adapter on the warm start's absolute path, the report holds every method, and a second run of the
same command trains and evaluates nothing again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def smollm2():
    from tests.helpers.smollm2 import smollm2_checkpoint

    return smollm2_checkpoint()


def test_the_quick_shop_study_runs_end_to_end_and_resumes(smollm2, tmp_path):
    env = dict(os.environ, GPU_CHECK_SMOLLM2=str(smollm2))
    cmd = [sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--dry-run", "--stages", "pretrained_study"]
    proc = subprocess.run(cmd + ["--out", str(tmp_path)], capture_output=True, text=True, env=env, cwd=ROOT)
    st = json.loads(proc.stdout.strip().splitlines()[-1])["stages"]["pretrained_study"]
    assert proc.returncode == 0 and st["status"] == "ok", st.get("reason", proc.stderr[-2000:])
    out = tmp_path / "shop_study"
    assert set(st["methods"]) == {"warmstart_m1", "warmstart_m3", "grpo", "vpo"}
    assert all(0.0 <= v <= 1.0 for row in st["methods"].values() for v in row["best_at_k"].values())
    warm = out / "warmstart_s0"  # the replicate's own warm start
    assert (warm / "model.safetensors").exists() and json.loads((warm / "config.json").read_text())[
        "num_hidden_layers"
    ] == 30
    for method in ("grpo", "vpo"):
        run = out / "runs" / f"{method}_s0"
        adapter = json.loads((run / "adapter_config.json").read_text())
        assert adapter["base_model_name_or_path"] == str(warm.resolve()) and adapter["r"] == 16
        assert not (run / "model.safetensors").exists()  # an adapter, not a merged model
        pool = out / "eval" / f"{method}_s0" / "pool" / "meta.json"
        assert json.loads(pool.read_text())["m"] == (3 if method == "vpo" else 1)
    demo = json.loads((out / "demo.json").read_text())
    assert demo["config"]["domain"] == "shop" and demo["config"]["shop_model"] == str(smollm2)
    report = (out / "report.md").read_text()
    assert "pretrained chat model" in report and "VPO (m=3)" in report and "--domain shop" in report
    # the same command again: every stage is done, nothing trains or evaluates
    again = [sys.executable, "-m", "vpo.cli", "demo", "--domain", "shop", "--model", str(smollm2), "--out", str(out)]
    proc = subprocess.run(again + ["--quick", "--set", "shop_device=cpu"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = proc.stdout + proc.stderr
    assert "warm start exists with the same settings" in log and "already done with the same settings, skipped" in log
    assert "start train" not in log and "start eval" not in log, log[-2000:]
