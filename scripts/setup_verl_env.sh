#!/usr/bin/env bash
# Create a separate virtualenv with veRL 0.9.1 + vpo for the veRL plugin, its tests and its CPU recipe.
#
# veRL 0.9.1 pins transformers < 5.11, so it cannot share vpo's main environment (transformers 5.x
# for TRL). This script builds its own venv:
#   1. python -m venv               (default: ./.venv-verl, override with VERL_VENV=...)
#   2. torch==2.13.0 FIRST          (a CPU wheel on this machine; installing veRL first would let pip
#                                    pick a multi-GB CUDA build of torch)
#   3. verl[verl-core]==0.9.1       main_ppo needs veRL's core extra (TransferQueue, tensordict, Ray with
#                                    its dashboard deps, hydra, torchdata, pyzmq, msgspec, datasets, ...);
#                                    bare verl==0.9.1 imports but main_ppo does not start. The versions
#                                    main_ppo was run with are pinned below (constraints), so a release
#                                    of any of them cannot change what CI runs.
#   4. vpo itself, editable, without re-resolving its dependencies (its verl.plugins entry points:
#      the estimators, and the CPU platform + rollout that register only where VERL_PLATFORM=cpu);
#      the test tools
#
# Usage:  bash scripts/setup_verl_env.sh            # CPU machine (tests, scripts/verl_cpu_run.sh)
#         TORCH_SPEC="torch==2.13.0" bash scripts/setup_verl_env.sh   # GPU nodes: pick the CUDA
#                                                   # build your cluster uses; vLLM/SGLang as veRL docs say
#         VERL_CONSTRAINTS=none ...                 # no pins beyond verl's own (e.g. with vLLM, which
#                                                   # brings its own transformers/torch)
# Then:   .venv-verl/bin/python -m pytest tests/integrations/test_verl.py tests/integrations/test_verl_main_ppo.py -m verl -q -p no:cacheprovider
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

# What `verl[verl-core]==0.9.1` resolved to when main_ppo trained on CPU here (pip check clean).
# virtualenv (Ray's dependency): unpinned, pip backtracked through ~25 releases (21.15.13 down to
# 21.14.5, 5.6 MB each) before one fit; pinned to where it lands.
CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
if [ "${VERL_CONSTRAINTS:-}" != "none" ]; then
  cat > "$CONSTRAINTS" <<'PINS'
transformers==5.10.4
tokenizers==0.22.2
ray==2.60.0
TransferQueue==0.1.11
tensordict==0.10.0
torchdata==0.11.0
hydra-core==1.3.8
omegaconf==2.3.1
pyzmq==27.3.0
msgspec==0.23.0
codetiming==1.4.0
accelerate==1.15.0
datasets==5.2.0
peft==0.21.2
pandas==3.1.1
pyarrow==26.0.1
numpy==2.4.6
cachetools==8.0.2
fastapi==0.165.0
uvicorn==0.54.0
virtualenv==21.14.5
PINS
fi

echo "[setup_verl_env] 1/3 $TORCH_SPEC"
"${PIP[@]}" "$TORCH_SPEC"
echo "[setup_verl_env] 2/3 $VERL_SPEC"
"${PIP[@]}" -c "$CONSTRAINTS" "$VERL_SPEC"
echo "[setup_verl_env] 3/3 vpo (editable, --no-deps) + test tools"
"${PIP[@]}" --no-deps -e "$REPO"
"${PIP[@]}" -c "$CONSTRAINTS" pyyaml tqdm matplotlib pytest pytest-timeout hypothesis
"$VENV/bin/python" -m pip check

"$VENV/bin/python" - <<'PY'
import verl, transformers, torch, ray, transfer_queue, tensordict
from importlib.metadata import entry_points
eps = [e.value for e in entry_points(group="verl.plugins")]
print(f"[setup_verl_env] verl {verl.__version__}, transformers {transformers.__version__}, torch {torch.__version__}, "
      f"ray {ray.__version__}, tensordict {tensordict.__version__}")
print(f"[setup_verl_env] verl.plugins entry points: {eps}")
PY
