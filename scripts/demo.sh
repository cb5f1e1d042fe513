#!/usr/bin/env bash
# The main job: validate every bundled environment, then grade sample answers through the public API.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
for env in envs/*/; do
  .venv/bin/verihub validate "$env"
done
.venv/bin/python scripts/demo.py
# A tiny local model (built here, nothing downloaded) evaluated on one environment: the eval loop end to end.
.venv/bin/verihub models tiny runs/tiny
exec .venv/bin/verihub eval envs/arithmetic --model hf:runs/tiny -n 8 -k 2 --max-tokens 24 --out runs/eval-tiny
