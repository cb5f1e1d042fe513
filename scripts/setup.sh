#!/usr/bin/env bash
# Create or refresh .venv: verihub (editable) with its test tools, and the bundled environments.
# Run as root, it also installs the Debian runtime libraries the sandbox needs.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(libnl-route-3-200 libnl-3-200 python3 tar bash git chromium build-essential)  # nsjail's libraries; the jail's tools; hub storage; the browser test; a C compiler (reasoning-gym builds pycosat from source)
VENV=.venv

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
  for package in "${APT_PACKAGES[@]}"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
  rm -rf "$VENV"
  "$(find_python)" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[dev,train]"
# Environments install as regular packages, as users get them; hatchling is already in the venv.
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation --force-reinstall envs/*/
