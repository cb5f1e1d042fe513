#!/usr/bin/env bash
# Lint, then the whole test suite, in a fresh or refreshed .venv (and .venv-vllm: the real vLLM engine's tests run on
# CPU; .venv-verifiers: verifiers' vf-eval plays `verihub serve`; .venv-gem: GEM's games; .venv-nemo-gym:
# NeMo-Gym's resources servers, on a CPython 3.13 built once into ~/.cache/verihub). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --vllm --verifiers --gem --nemo-gym
# Lint and format, by pyproject.toml's [tool.ruff], on the whole tree (separate lines: set -e stops at either).
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Types, by pyproject.toml's [tool.mypy] (sdk, hub, trainers), with .venv's packages. mypy is not in the lock: adding
# it makes uv re-resolve a Python >= 3.15 split that has no solution today; uv fetches this pinned one instead.
.tools/uv/bin/uv run --no-project --with mypy==2.4.1 mypy --python-executable .venv/bin/python
# The 25 slowest tests and every skip with its reason, printed at the end.
exec .venv/bin/python -m pytest -q -rs --durations=25 "$@"
