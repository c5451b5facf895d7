#!/usr/bin/env bash
# Create a separate virtualenv with veRL 0.9.1 + vpo for the veRL plugin and its CPU tests.
#
# veRL 0.9.1 pins transformers < 5.11, so it cannot share vpo's main environment (transformers 5.x
# for TRL). This script builds its own venv:
#   1. python -m venv               (default: ./.venv-verl, override with VERL_VENV=...)
#   2. torch==2.13.0 FIRST          (a CPU wheel on this machine; installing veRL first would let pip
#                                    pick a multi-GB CUDA build of torch)
#   3. verl==0.9.1                  (with torch already satisfied)
#   4. vpo itself, editable, without re-resolving its dependencies; three modules verl imports but
#      does not declare (cachetools, uvicorn, fastapi); the test tools
#
# Usage:  bash scripts/setup_verl_env.sh            # CPU machine (tests)
#         TORCH_SPEC="torch==2.13.0" bash scripts/setup_verl_env.sh   # GPU nodes: pick the CUDA
#                                                   # build your cluster uses; vLLM/SGLang as veRL docs say
# Then:   .venv-verl/bin/python -m pytest tests/integrations/test_verl.py -m verl -q -p no:cacheprovider
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VERL_VENV:-$REPO/.venv-verl}"
PY="${PYTHON:-python3.11}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
VERL_SPEC="${VERL_SPEC:-verl[verl-core]==0.9.1}"

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup_verl_env] creating $VENV with $PY"
  "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check)

echo "[setup_verl_env] 1/3 $TORCH_SPEC"
"${PIP[@]}" "$TORCH_SPEC"
echo "[setup_verl_env] 2/3 $VERL_SPEC"
"${PIP[@]}" "$VERL_SPEC"
echo "[setup_verl_env] 3/3 vpo (editable, --no-deps) + test tools"
"${PIP[@]}" --no-deps -e "$REPO"
# verl 0.9.1's trainer modules import these without declaring them (vLLM/SGLang bring them on GPU
# nodes); the CPU tests import verl.trainer.ppo.ray_trainer and the reward loop, so add them here.
"${PIP[@]}" cachetools uvicorn fastapi
"${PIP[@]}" pyyaml tqdm matplotlib pytest pytest-timeout hypothesis

"$VENV/bin/python" - <<'PY'
import verl, transformers, torch
from importlib.metadata import entry_points
eps = [e.value for e in entry_points(group="verl.plugins")]
print(f"[setup_verl_env] verl {verl.__version__}, transformers {transformers.__version__}, torch {torch.__version__}")
print(f"[setup_verl_env] verl.plugins entry points: {eps}")
PY
