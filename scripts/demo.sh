#!/usr/bin/env bash
# The main job: validate every bundled environment, then grade sample answers through the public API.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
for env in envs/*/; do
  .venv/bin/verihub validate "$env"
done
exec .venv/bin/python scripts/demo.py
