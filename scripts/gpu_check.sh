#!/usr/bin/env bash
# One short check of every GPU code path of vpo, offline, on one GPU (budget: <= 8 minutes on an H200).
#
#   bash scripts/gpu_check.sh                # on the GPU machine; writes runs/gpu_check/
#   bash scripts/gpu_check.sh --dry-run      # CPU, tiny sizes (also GPU_CHECK_DRY_RUN=1); CI runs this
#   bash scripts/gpu_check.sh --stages env,estimator,train
#
# Stages (scripts/gpu_check.py, each in its own process with its own time limit): env, estimator
# (CUDA vs CPU), train (VPOTrainer, bf16), step_memory (VPO m = 3 vs GRPO: peak memory, step time),
# train_vllm (TRL vLLM colocate), eval (vpo eval with the transformers backend and vLLM), verl (a few
# PPO steps with the vpo plugin, in .venv-verl or $VERL_PYTHON), pretrained (SmolLM2-135M-Instruct
# through docs/gpu.md's recipe: format warm start, LoRA VPO and GRPO steps, eval of the adapter; needs
# the checkpoint of `vpo models fetch smollm2` in $GPU_CHECK_SMOLLM2 or runs/smollm2, and
# GPU_CHECK_TIMEOUT=900), pretrained_study (`vpo demo --domain shop`, the CPU study of docs/demo.md at GPU
# sizes: three replicates of VPO, GRPO 3x and Max@k on SmolLM2; up to 9 more minutes, so run it as
# `--stages pretrained_study` with GPU_CHECK_TIMEOUT=600). A stage whose dependency is missing is
# recorded as skipped with the reason.
# The last line printed is one JSON summary; it is also written to <out>/gpu_check.json.
# Exit status: 0 when no stage failed, 1 otherwise, 124 when the whole check ran past its limit.
# More time: GPU_CHECK_TIMEOUT=900 (whole run, seconds) and GPU_CHECK_LIMIT_SCALE=2 (every stage).
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python}"
LIMIT="${GPU_CHECK_TIMEOUT:-560}"
cd "$REPO"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec timeout --kill-after=10 "$LIMIT" "$PY" scripts/gpu_check.py "$@"
