#!/usr/bin/env bash
# VPO on MuSiQue with Qwen3-1.7B in veRL 0.9.1 (multi-GPU / multi-node), docs/method.md §3 hyperparameters.
#
# Prerequisites (docs/verl.md):
#   1. a veRL environment with vpo installed:   bash scripts/setup_verl_env.sh   (GPU nodes: pick your
#      CUDA torch build with TORCH_SPEC=..., and vLLM as veRL's docs say)
#   2. data:  python examples/verl/prepare_data.py --task musique --num-answers 3 --out "$DATA_DIR"
#   3. a Ray cluster spanning the nodes (ray start --head on node 0, ray start --address=... on the
#      others), then run this script on the head node.
#
# Knobs (environment variables): NNODES, GPUS_PER_NODE, MODEL, DATA_DIR, METHOD (vpo | vpo_grpo |
# vpo_multi_rlvr | vpo_max_at_k | vpo_maxrl | vpo_random_weight), M (answers per rollout; 1 for the
# single-answer baselines), SAMPLER (iid | sobol), K, SEED, EXPERIMENT. Extra Hydra overrides are
# passed through ("$@"). VPO_PRINT_OVERRIDES=1 prints the overrides one per line and exits (the
# test suite uses this to check them against veRL's real config).
set -euo pipefail

NNODES="${NNODES:-2}"
GPUS_PER_NODE="${GPUS_PER_NODE:-8}"
MODEL="${MODEL:-Qwen/Qwen3-1.7B}"
DATA_DIR="${DATA_DIR:-$HOME/data/vpo_musique_m3}"
METHOD="${METHOD:-vpo}"
M="${M:-3}"
SAMPLER="${SAMPLER:-iid}"
K="${K:-100}"
SEED="${SEED:-0}"
EXPERIMENT="${EXPERIMENT:-musique_${METHOD}_m${M}}"

OVERRIDES=(
  # --- method: the estimator (vpo plugin) and the score that feeds it -------------------------
  "algorithm.adv_estimator=${METHOD}"
  "algorithm.use_kl_in_reward=False"
  "reward.reward_manager.source=importlib"
  "reward.reward_manager.name=VPORewardManager"
  "reward.reward_manager.module.path=pkg://vpo.integrations.verl_reward"
  "reward.custom_reward_function.path=pkg://vpo.integrations.verl_reward"
  "reward.custom_reward_function.name=compute_score"
  "+reward.custom_reward_function.reward_kwargs.task=musique"
  "+reward.custom_reward_function.reward_kwargs.num_answers=${M}"
  "+reward.custom_reward_function.reward_kwargs.num_weightings=${K}"
  "+reward.custom_reward_function.reward_kwargs.weight_alpha=1.0"
  "+reward.custom_reward_function.reward_kwargs.weight_sampler=${SAMPLER}"
  "+reward.custom_reward_function.reward_kwargs.weight_seed=${SEED}"
  # --- data: 128 prompts x 8 rollouts -----------------------------------------------------
  "data.train_files=${DATA_DIR}/train.parquet"
  "data.val_files=${DATA_DIR}/validation.parquet"
  "data.train_batch_size=128"
  "data.max_prompt_length=4096"
  "data.max_response_length=2048"
  "data.filter_overlong_prompts=True"
  "data.truncation=error"
  "data.seed=${SEED}"
  # --- policy: AdamW lr 1e-6 constant, clip 0.2 / dual-clip 3.0, 1 epoch, token-mean, k3 KL 1e-3 --
  "actor_rollout_ref.model.path=${MODEL}"
  "actor_rollout_ref.model.use_remove_padding=True"
  "actor_rollout_ref.model.enable_gradient_checkpointing=True"
  "actor_rollout_ref.actor.optim.lr=1e-6"
  "actor_rollout_ref.actor.optim.lr_scheduler_type=constant"
  "actor_rollout_ref.actor.ppo_mini_batch_size=128"
  "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4"
  "actor_rollout_ref.actor.ppo_epochs=1"
  "actor_rollout_ref.actor.clip_ratio=0.2"
  "actor_rollout_ref.actor.clip_ratio_c=3.0"
  "actor_rollout_ref.actor.loss_agg_mode=token-mean"
  "actor_rollout_ref.actor.entropy_coeff=0"
  "actor_rollout_ref.actor.use_kl_loss=True"
  "actor_rollout_ref.actor.kl_loss_coef=0.001"
  "actor_rollout_ref.actor.kl_loss_type=low_var_kl"
  "actor_rollout_ref.actor.fsdp_config.param_offload=False"
  "actor_rollout_ref.actor.fsdp_config.optimizer_offload=False"
  "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8"
  # --- rollout: vLLM, temperature 1.0, G = 8 ----------------------------------------------
  "actor_rollout_ref.rollout.name=vllm"
  "actor_rollout_ref.rollout.n=8"
  "actor_rollout_ref.rollout.temperature=1.0"
  "actor_rollout_ref.rollout.tensor_model_parallel_size=1"
  "actor_rollout_ref.rollout.gpu_memory_utilization=0.6"
  "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8"
  # --- cluster and logging ------------------------------------------------------------------
  "trainer.nnodes=${NNODES}"
  "trainer.n_gpus_per_node=${GPUS_PER_NODE}"
  "trainer.project_name=vpo"
  "trainer.experiment_name=${EXPERIMENT}"
  "trainer.logger=[console]"
  "trainer.val_before_train=True"
  "trainer.test_freq=20"
  "trainer.save_freq=50"
  "trainer.total_epochs=1"
)

if [ "${VPO_PRINT_OVERRIDES:-0}" = "1" ]; then
  printf '%s\n' "${OVERRIDES[@]}" "$@"
  exit 0
fi

exec python3 -m verl.trainer.main_ppo "${OVERRIDES[@]}" "$@"
