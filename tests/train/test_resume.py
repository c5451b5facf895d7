"""Kill a training process with SIGKILL mid-run, resume from its last checkpoint, and reach the same
final parameters as an uninterrupted run with the same seed (the weight sampler's RNG state is part
of the checkpoint)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

pytest.importorskip("trl")

WORKER = Path(__file__).resolve().parents[1] / "helpers" / "resume_worker.py"


def run(*args, timeout=240):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, str(WORKER), *map(str, args)], env=env, timeout=timeout, capture_output=True, text=True)


def test_sigkill_then_resume_matches_uninterrupted(tmp_path, tiny_model_dir):
    full = tmp_path / "full"
    r = run(tiny_model_dir, full, 4)
    assert r.returncode == 0, r.stderr[-3000:]

    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), tiny_model_dir, str(killed), "4", "--slow-after", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    ckpt = killed / "checkpoint-2"
    deadline = time.time() + 240
    while not (ckpt / "vpo_state.pt").exists() or not (ckpt / "trainer_state.json").exists():
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        assert time.time() < deadline, "checkpoint-2 never appeared"
        time.sleep(0.2)
    time.sleep(0.5)  # let the checkpoint's remaining files land; the run now sleeps after each step
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert not (killed / "final_params.pt").exists()  # it really died mid-run

    r = run(tiny_model_dir, killed, 4, "--resume", ckpt)
    assert r.returncode == 0, r.stderr[-3000:]
    a = torch.load(full / "final_params.pt")
    b = torch.load(killed / "final_params.pt")
    assert len(a) == len(b)
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)
    # and the run did learn something (the comparison is not between two untouched models)
    from transformers import AutoModelForCausalLM

    m0 = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert any(not torch.allclose(p0, p1) for p0, p1 in zip(m0.parameters(), a))


def test_resume_refuses_a_checkpoint_without_vpo_state(tmp_path, tiny_model_dir):
    full = tmp_path / "full"
    r = run(tiny_model_dir, full, 2)
    assert r.returncode == 0, r.stderr[-3000:]
    os.remove(full / "checkpoint-2" / "vpo_state.pt")
    r = run(tiny_model_dir, tmp_path / "again", 4, "--resume", full / "checkpoint-2")
    assert r.returncode != 0
    assert "vpo_state.pt is missing" in r.stderr
