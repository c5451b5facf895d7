"""benchmarks/train_step.py on a checkpoint (--model, as for SmolLM2): the three trainers train with a
LoRA adapter and the shop prompts, and the generation figures are consistent with their definition
(a token's FLOPs count every non-embedding weight and the LM head once; the fraction is the achieved
rate over the same run's GEMM rate). The tiny model stands in for SmolLM2 here (slow suite)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_train_step_on_a_checkpoint_with_lora_and_generation_fraction(tmp_path):
    from vpo.train.tiny import build_tiny_model

    model = build_tiny_model(tmp_path / "m", hidden_size=32, num_layers=1, num_heads=4)
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")
    argv = [sys.executable, str(ROOT / "benchmarks" / "train_step.py"), "--model", str(model), "--lora", "4"]
    argv += ["--shared-prompt", "--prompts", "shop", "--batch", "8", "--length", "4", "--rounds", "1"]
    argv += ["--warmup", "1", "--threads", "1", "--json"]
    r = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["lora"] == 4 and out["shared_prompt"] is True and out["prompts"] == "shop"
    assert out["model"] == str(model)
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(model)
    body = sum(p.numel() for n, p in m.named_parameters() if "embed_tokens" not in n and "lm_head" not in n)
    head = m.get_output_embeddings().weight.numel()
    assert out["generation_flops_per_token"] == 2 * (body + head)
    rounds = out["generation_rounds"]
    n = len(rounds["gemm_s"])
    assert n == 3 and len(rounds["fast_s"]) == n == len(rounds["prefill_s"])  # max(3, --rounds) paired rounds
    med = statistics.median
    tok_s = out["generation_decode_tokens_per_s"]
    assert tok_s == pytest.approx(8 * 4 / med(rounds["fast_s"]), rel=2e-3)
    assert out["generation_achieved_gflops"] == pytest.approx(tok_s * 2 * (body + head) / 1e9, rel=2e-3)
    # each round's rate against that round's own limit reading, then the median
    assert out["generation_fraction_of_gemm_limit"] == pytest.approx(
        med([4 * g / f for g, f in zip(rounds["gemm_s"], rounds["fast_s"])]), rel=2e-3
    )
    # the decode loop alone: the same tokens over the sampler's time less its prefill's, per round
    assert all(0 < p < f for p, f in zip(rounds["prefill_s"], rounds["fast_s"]))
    assert out["generation_decode_loop_fraction_of_gemm_limit"] == pytest.approx(
        med([4 * g / (f - p) for g, f, p in zip(rounds["gemm_s"], rounds["fast_s"], rounds["prefill_s"])]), rel=2e-3
    )
    lo, hi = out["generation_decode_loop_fraction_iqr"]
    assert lo <= out["generation_decode_loop_fraction_of_gemm_limit"] <= hi
    assert out["generation_rows"] == 8 and out["generation_tokens"] == 4
    assert "shop prompts" in r.stdout and "LoRA r=4" in r.stdout
    # the limit is one decode step's products alone: rows x FLOPs a token over the rounds' median reading
    assert out["generation_gemm_step_s"] == pytest.approx(med(rounds["gemm_s"]), rel=2e-3)
    step_s = out["generation_gemm_step_s"]
    assert out["generation_gemm_gflops"] == pytest.approx(8 * 2 * (body + head) / step_s / 1e9, rel=2e-3)
    # the training pass: its FLOPs over its time, against the faster of the two product readings
    assert out["training_gemm_gflops"] == max(out["training_gemm_gflops_readings"])
    assert out["training_achieved_gflops"] == pytest.approx(
        out["training_pass_flops"] / out["training_pass_s"] / 1e9, rel=2e-3
    )
    assert out["training_fraction_of_gemm_limit"] == pytest.approx(
        out["training_achieved_gflops"] / out["training_gemm_gflops"], rel=2e-3
    )
    shape = out["training_pass_shape"]
    assert shape["rows"] == 8 and shape["completion"] == 4 and 1 <= shape["prompts"] <= 8
    # every phase of the profile is a part of the step: together they make it up
    for kind, phases in out["profile_s"].items():
        assert set(phases) == {
            "generation",
            "scoring",
            "advantages",
            "logprob",
            "forward",
            "backward",
            "optimizer",
            "other",
        }
        assert phases["generation"] > 0 and phases["forward"] > 0 and phases["backward"] > 0, kind
    assert out["fast_generation"] is True and out["precision"] == "defaults"
