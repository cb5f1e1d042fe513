"""Fresh-machine set-up, side by side in one run: the pip path verihub had before uv.lock against
scripts/setup.sh (uv from the lock), each in a fresh clone under /tmp with cold caches.

    python3.12 bench/setup_bench.py [--paths pip,uv,uv-copy,pip-pypi] [--source REPO] [--keep]

Paths:
- pip: the former scripts/setup.sh (venv, pip upgrade, `pip install -e .[dev,train]`, the bundled environments),
  PIP_NO_CACHE_DIR=1, under this machine's pip configuration as it is (local wheel folders and caps included).
- pip-pypi: the same with no pip configuration file and no PIP_* settings: PyPI only, as uv has it.
- uv: `bash scripts/setup.sh` with UV_CACHE_DIR a new empty folder (and PIP_NO_CACHE_DIR=1 for uv itself).
- uv-copy: the same with UV_LINK_MODE=copy (files copied out of uv's cache instead of hardlinked).

For each: the cold set-up, a second run on the finished clone (a refresh), the first `import torch,
transformers, trl, verihub` after it (uv writes no bytecode at install: the first import pays for it), and
the sizes of .venv and of the cache. The last line prints the ratios against uv. Clones of HEAD of --source
(default: this repository), so commit what you measure.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PATHS = ("pip", "pip-pypi", "uv", "uv-copy")
IMPORTS = "import torch, transformers, trl, verihub"

# The former scripts/setup.sh, its Debian step aside (run once for both, it is no part of the comparison).
PIP_SETUP = """set -euo pipefail
if [ ! -x .venv/bin/python ]; then "$PYTHON" -m venv .venv; .venv/bin/python -m pip install -q --upgrade pip; fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev,train]"
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation --force-reinstall envs/*/
"""


@dataclass
class Result:
    path: str
    setup_s: float
    refresh_s: float
    import_s: float
    venv_bytes: int
    cache_bytes: int  # what the cache holds beyond .venv's files (hardlinks are counted once, in .venv)


def disk_usage(*paths: Path) -> list[int]:
    """Bytes per path as one `du` sees them: a file hardlinked into several counts for the first only."""
    out = subprocess.run(["du", "-s", "-B1", *map(str, paths)], capture_output=True, text=True, check=True).stdout
    return [int(line.split()[0]) for line in out.splitlines()]


def run_logged(command: list[str], cwd: Path, env: dict[str, str], log: Path) -> float:
    start = time.perf_counter()
    with log.open("a") as out:
        done = subprocess.run(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(
            f"{' '.join(command)} failed in {cwd} (exit {done.returncode}); the end of {log}:\n"
            + "\n".join(log.read_text().splitlines()[-30:])
        )
    return elapsed


def measure(path: str, source: Path, python: str, root: Path) -> Result:
    clone, cache, log = root / path, root / f"{path}-cache", root / f"{path}.log"
    cache.mkdir()
    subprocess.run(["git", "clone", "-q", str(source), str(clone)], check=True)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("UV_", "VIRTUAL_ENV"))}
    env.update(PYTHON=python, PIP_NO_CACHE_DIR="1")
    if path.startswith("pip"):
        if path == "pip-pypi":
            env = {key: value for key, value in env.items() if not key.startswith("PIP_")}
            env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_CACHE_DIR="1")
        command = ["bash", "-c", PIP_SETUP]
    else:
        env.update(UV_CACHE_DIR=str(cache))
        if path == "uv-copy":
            env["UV_LINK_MODE"] = "copy"
        command = ["bash", "scripts/setup.sh"]
    setup_s = run_logged(command, clone, env, log)
    refresh_s = run_logged(command, clone, env, log)
    import_s = run_logged([str(clone / ".venv/bin/python"), "-c", IMPORTS], clone, env, log)
    venv_bytes, cache_bytes = disk_usage(clone / ".venv", cache)
    return Result(path, setup_s, refresh_s, import_s, venv_bytes, cache_bytes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paths", default="pip,uv", help=f"comma-separated, run in this order: {', '.join(PATHS)}")
    parser.add_argument("--source", type=Path, default=REPO_ROOT, help="the repository to clone (its HEAD)")
    parser.add_argument(
        "--python",
        default=getattr(sys, "_base_executable", sys.executable),
        help="the interpreter both paths build .venv with (default: this one's base)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the clones and caches (several GB each)")
    args = parser.parse_args()
    paths = args.paths.split(",")
    if unknown := set(paths) - set(PATHS):
        parser.error(f"unknown path(s) {', '.join(sorted(unknown))}; choose from {', '.join(PATHS)}")
    if "uv" not in paths:
        parser.error("--paths needs uv: the ratios are against it")
    if subprocess.run([args.python, "-c", "import sys; sys.exit(sys.version_info < (3, 12))"]).returncode:
        parser.error(f"{args.python} is not Python >= 3.12 (pass --python)")

    root = Path(tempfile.mkdtemp(prefix="setup-bench-"))
    results: dict[str, Result] = {}
    try:
        for path in paths:
            print(f"{path}: fresh clone of {args.source} in {root / path} ...", flush=True)
            results[path] = result = measure(path, args.source, args.python, root)
            print(f"{path}: set-up {result.setup_s:.0f} s, refresh {result.refresh_s:.1f} s", flush=True)
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            subprocess.run(["rm", "-rf", str(root)], check=False)  # faster than shutil.rmtree on 20 GB

    print(f"\n{'path':<9} {'set-up':>8} {'refresh':>8} {'1st import':>11} {'.venv':>8} {'cache':>8}")
    for r in results.values():
        print(
            f"{r.path:<9} {r.setup_s:>7.0f}s {r.refresh_s:>7.1f}s {r.import_s:>10.1f}s "
            f"{r.venv_bytes / 2**30:>6.1f}G {r.cache_bytes / 2**30:>6.2f}G"
        )
    uv = results["uv"]
    print(
        "ratios (x / uv): "
        + ", ".join(
            f"{r.path} set-up {r.setup_s / uv.setup_s:.1f}x, set-up + 1st import "
            f"{(r.setup_s + r.import_s) / (uv.setup_s + uv.import_s):.1f}x"
            for r in results.values()
            if r is not uv
        )
    )


if __name__ == "__main__":
    main()
