#!/usr/bin/env bash
# SmolLM2-135M-Instruct on this CPU: the GPU recipe's stages at small sizes, timed (docs/gpu.md).
# Needs the checkpoint of `vpo models fetch smollm2` in $VPO_CACHE/models/smollm2 (the slow suite fetches it
# there) or in $SMOLLM2; writes runs/smollm2_cpu/ (times.txt, the logs, the check of the warm start).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
M="${SMOLLM2:-${VPO_CACHE:-$HOME/.cache/vpo}/models/smollm2}"
OUT=runs/smollm2_cpu
rm -rf $OUT; mkdir -p $OUT
t() { local s=$SECONDS; "$@"; echo "TIME $1 $2 $((SECONDS - s)) s" >> $OUT/times.txt; }
t python examples/smollm2/warm_start.py --model $M --out $OUT/warm --steps 30 --batch-size 4 --problems 120 --lr 1e-4 > $OUT/warm.log 2>&1
t vpo check $OUT/warm --task maze --task-options '{"size": 5}' --num-answers 3 --rollouts 2 --num-prompts 8 --max-new-tokens 96 --threads 2 --out $OUT/check_warm > $OUT/check_warm.log 2>&1
C="--config examples/smollm2/maze_vpo_lora.yaml --model_name_or_path $OUT/warm --max_steps 2 --num_generations 4 --per_device_train_batch_size 16 --bf16 false --use_cpu true --zero_signal_patience 0 --train_size 64"
t vpo train $C --output_dir $OUT/vpo > $OUT/vpo.log 2>&1
t vpo train $C --estimator grpo --num_answers 1 --max_completion_length 32 --output_dir $OUT/grpo > $OUT/grpo.log 2>&1
echo done >> $OUT/times.txt
