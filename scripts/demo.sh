#!/usr/bin/env bash
# The main job: validate every bundled environment, grade sample answers (sandbox included), then the
# training demo: publish to a hub, install back, SFT warm start, GRPO with LoRA, held-out before/after.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python scripts/demo.py  # validates envs/*/ as `verihub validate` does, one row each; exits 1 on a failure
exec .venv/bin/python scripts/train_demo.py --out runs/demo
