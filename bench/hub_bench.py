"""Hub costs, side by side in one run.

    python bench/hub_bench.py [--rounds 5] [--repos 10000]

1. Publishing: `verihub push` of a bundled environment to a hub server on loopback (validate, build, upload,
   tag) plus `pip install` of it from the server's index, against `pip install` of the same wheel from a
   local file (the floor), each into a fresh virtual environment.
2. Search: `GET /api/models?search=...&limit=20` on a hub holding --repos repositories, against the same
   query on a hub holding one.
The last line prints the ratios.
"""

from __future__ import annotations

import argparse
import os
import shutil
import site
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

import httpx

from verihub.hub.accounts import Accounts
from verihub.hub.ids import RepoId
from verihub.hub.local import LocalHub

REPO_ROOT = Path(__file__).resolve().parents[1]
VERIHUB = str(Path(sys.executable).with_name("verihub"))


def fresh_venv(path: Path) -> str:
    venv.create(path, with_pip=False)
    purelib = next((path / "lib").glob("python3.*/site-packages"))
    (purelib / "_parent.pth").write_text("\n".join(f"import site; site.addsitedir({p!r})" for p in site.getsitepackages()))
    return str(path / "bin" / "python")


def serve(data: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([VERIHUB, "hub", "serve", "--port", str(port), "--data", str(data)])
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            httpx.get(f"{url}/simple/", timeout=1)
            break
        except httpx.TransportError:
            time.sleep(0.1)
    return process, url


def timed(command: list[str], **options: object) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, **options)  # type: ignore[call-overload]
    return time.perf_counter() - start


def p50_search(url: str, rounds: int = 50) -> float:
    times = []
    with httpx.Client() as client:
        for index in range(rounds):
            start = time.perf_counter()
            client.get(f"{url}/api/models", params={"search": f"env-{index * 37 % 997}", "limit": 20}).raise_for_status()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def populate(data: Path, count: int) -> None:
    accounts = Accounts(data / "hub.db")
    for number in range(count):
        repo = RepoId(f"owner{number % 100}", f"env-{number}")
        accounts.add_repo(repo, "env", private=False)
        accounts.update_listing(repo, modified=time.time(), tags=["bench"], summary=f"benchmark environment {number}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repos", type=int, default=10_000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="verihub-hub-bench-") as scratch:
        root = Path(scratch)
        wheel_dir = root / "wheel"
        LocalHub(root / "local").push(REPO_ROOT / "envs" / "arithmetic", owner="bench", validate=False)
        wheel = next((root / "local" / "files" / "bench-arithmetic").glob("*.whl"))
        wheel_dir.mkdir()
        shutil.copy(wheel, wheel_dir / wheel.name)
        data = root / "server"
        data.mkdir()
        LocalHub(data)
        token = Accounts(data / "hub.db").create_token("bench")
        process, url = serve(data)
        try:
            floor, hub = [], []
            for number in range(options.rounds):
                python = fresh_venv(root / f"floor{number}")
                floor.append(timed([python, "-m", "pip", "install", "--no-deps", "--no-index", str(wheel_dir / wheel.name)]))
                package = root / f"pkg{number}"
                shutil.copytree(REPO_ROOT / "envs" / "arithmetic", package)
                spec = package / "environment.yaml"
                spec.write_text(spec.read_text().replace("version: 1.0.0", f"version: 1.0.{number}"))
                pyproject = package / "pyproject.toml"
                pyproject.write_text(pyproject.read_text().replace('version = "1.0.0"', f'version = "1.0.{number}"'))
                python = fresh_venv(root / f"hub{number}")
                push = timed([VERIHUB, "push", str(package), "--hub", url, "--token", token])
                install = timed([python, "-m", "pip", "install", "--no-deps", "--index-url", f"{url}/simple/",
                                 f"bench-arithmetic==1.0.{number}"])
                hub.append((push, install))
            floor_s = statistics.median(floor)
            push_s = statistics.median(p for p, _ in hub)
            install_s = statistics.median(i for _, i in hub)
            empty_search = p50_search(url)
        finally:
            process.terminate()
            process.wait()
        big = root / "big"
        big.mkdir()
        LocalHub(big)
        populate(big, options.repos)
        process, url = serve(big)
        try:
            big_search = p50_search(url)
        finally:
            process.terminate()
            process.wait()
    print(f"pip install of the wheel from a file (floor): {floor_s * 1000:.0f} ms")
    print(f"verihub push through the server: {push_s * 1000:.0f} ms; pip install from the server: {install_s * 1000:.0f} ms")
    print(f"search p50: {empty_search * 1000:.1f} ms with a handful of repos, {big_search * 1000:.1f} ms with {options.repos}")
    print(f"ratios: install from hub / floor {install_s / floor_s:.2f}x, (push + install) / floor "
          f"{(push_s + install_s) / floor_s:.2f}x, search {options.repos} repos / few {big_search / empty_search:.2f}x")


if __name__ == "__main__":
    os.environ.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    main()
