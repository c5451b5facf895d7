#!/usr/bin/env bash
# veRL's real main_ppo with the vpo plugin on CPU (2 FSDP2 ranks on gloo, the vpo_hf rollout), in the
# veRL environment: examples/verl/run_cpu.py with .venv-verl's python (VERL_PYTHON=... to override).
#
#   bash scripts/setup_verl_env.sh                                   # once
#   bash scripts/verl_cpu_run.sh --method vpo  --steps 4 --out runs/verl_cpu/vpo
#   bash scripts/verl_cpu_run.sh --method grpo --steps 4 --out runs/verl_cpu/grpo
#   bash scripts/verl_cpu_run.sh --method vpo --steps 4 --out runs/verl_cpu/vpo -- trainer.save_freq=2
#
# Ray is started by main_ppo and stopped when it exits (run_cpu.py stops any leftover of the run's
# Ray session by pid). One torch thread per process unless OMP_NUM_THREADS says otherwise.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${VERL_PYTHON:-$REPO/.venv-verl/bin/python}"
if [ ! -x "$PY" ]; then
  echo "verl_cpu_run: no veRL environment at $PY; run: bash scripts/setup_verl_env.sh" >&2
  exit 2
fi
export HF_HUB_OFFLINE=1 OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
exec "$PY" "$REPO/examples/verl/run_cpu.py" "$@"
