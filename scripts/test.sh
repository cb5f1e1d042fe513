#!/usr/bin/env bash
# The whole test suite, in a fresh or refreshed .venv. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
