#!/usr/bin/env bash
# The GPU path, with PyPI's CUDA vLLM (uv.lock's `vllm` extra) and models built here (nothing downloaded but
# packages): `vllm:` eval, GRPO with vLLM colocated and with TRL's vLLM server, LoRA, a short asynchronous
# run. Prints one summary line and exits non-zero on any failure; without a GPU it says so and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "gpu_check: no NVIDIA GPU here (nvidia-smi lists none); nothing to check"
  exit 0
fi
bash scripts/setup.sh
# .venv with the vllm extra on top of what setup.sh synced: vLLM then runs in this interpreter
.tools/uv/bin/uv sync -q --locked --no-python-downloads --inexact --extra train --extra hub --extra reasoning-gym \
  --extra vllm --group dev
unset VERIHUB_VLLM_PYTHON
exec .venv/bin/python scripts/gpu_check.py
