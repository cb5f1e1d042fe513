"""Hub costs, side by side in one run.

    python bench/hub_bench.py [--rounds 5] [--repos 10000] [--versions 1000]

1. Publishing: `verihub push` of a bundled environment to a hub server on loopback (validate, build, derive the
   card and the tasks' parquet, upload, tag) plus `pip install` of it from the server's index and `verihub
   install` of it through the Hub API alone (the wheel at the release tag, its sha256 checked, no index: as from
   huggingface.co), against `pip install` of the same wheel from a local file (the floor), each into a fresh
   virtual environment. One more push, in this process, is timed
   by stage (validation, build, upload and tag). Beside them: a process that only imports the libraries a
   push cannot go without (its CLI framework, pydantic for the spec, the huggingface_hub client), which
   bounds how close to the floor any push through that client can come.
2. Search: `GET /api/datasets?search=...&limit=20` on a hub holding --repos repositories, against the same
   query on a hub holding a handful, both servers up and the requests alternated; a selective query (env-N)
   and a broad one (every repository matches).
3. The pip index: `GET /simple/PROJECT/` (PEP 691 JSON and HTML) of a project with --versions versions,
   against one with a single version, on one server, alternated.
The last line prints the ratios.
"""

from __future__ import annotations

import argparse
import io
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
import zipfile
from pathlib import Path
from typing import Any

import httpx

from verihub.hub.accounts import Accounts
from verihub.hub.local import LocalHub
from verihub.ids import RepoId

REPO_ROOT = Path(__file__).resolve().parents[1]
JSON_INDEX = "application/vnd.pypi.simple.v1+json"
VERIHUB = str(Path(sys.executable).with_name("verihub"))
PUSH_LIBRARIES = "import typer, pydantic, huggingface_hub.hf_api"


def fresh_venv(path: Path) -> str:
    venv.create(path, with_pip=False)
    purelib = next((path / "lib").glob("python3.*/site-packages"))
    (purelib / "_parent.pth").write_text(
        "\n".join(f"import site; site.addsitedir({p!r})" for p in site.getsitepackages())
    )
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
    subprocess.run(command, check=True, capture_output=True, **options)
    return time.perf_counter() - start


def p50_pair(
    first: tuple[str, dict[str, Any]], second: tuple[str, dict[str, Any]], rounds: int = 60
) -> tuple[float, float]:
    """Median latency of two GETs (url, httpx options), alternated so both see the same machine load."""
    times: tuple[list[float], list[float]] = ([], [])
    with httpx.Client() as client:
        for index in range(rounds):
            for side, (url, options) in enumerate((first, second)):
                params = {
                    key: value(index) if callable(value) else value for key, value in options.get("params", {}).items()
                }
                start = time.perf_counter()
                client.get(url, **{**options, "params": params}).raise_for_status()
                times[side].append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def search(url: str, query: Any) -> tuple[str, dict[str, Any]]:
    return f"{url}/api/datasets", {"params": {"search": query, "limit": 20}}


def fake_wheel(project: str, version: str) -> tuple[str, bytes]:
    buffer = io.BytesIO()
    stem = f"{project.replace('-', '_')}-{version}"
    with zipfile.ZipFile(buffer, "w") as wheel:
        wheel.writestr(
            f"{stem}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\nRequires-Python: >=3.12\n",
        )
    return f"{stem}-py3-none-any.whl", buffer.getvalue()


def publish_versions(data: Path, repo: RepoId, versions: int) -> str:
    """A project with ``versions`` published wheels, through the publish step's own writers."""
    from verihub.hub.files import PublishedFiles
    from verihub.hub.storage import HubStorage

    HubStorage(data).create_repo(repo)
    files, project = PublishedFiles(data), f"{repo.owner}-{repo.name}"
    files.claim(project, repo)
    for number in range(versions):
        version = f"1.0.{number}"
        filename, content = fake_wheel(project, version)
        files.put(project, version, filename, content)
    files.write_static_index(project)
    return project


def stages() -> dict[str, float]:
    """One push in this process, by stage (its CLI start-up is the difference to the push above)."""
    import verihub.hub.build as build

    timings: dict[str, float] = {}
    real_prepare, real_build = build.prepare, build.PackageSource.build

    def timed_prepare(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return real_prepare(*args, **kwargs)
        finally:
            timings["validate"] = time.perf_counter() - start

    def timed_build(self: Any, repo: RepoId) -> Any:
        start = time.perf_counter()
        try:
            return real_build(self, repo)
        finally:
            timings["build"] = time.perf_counter() - start

    import verihub.hub.pipeline as pipeline

    pipeline.prepare, build.PackageSource.build = timed_prepare, timed_build
    try:
        with tempfile.TemporaryDirectory(prefix="verihub-hub-stages-") as scratch:
            data = Path(scratch) / "hub"
            data.mkdir()
            LocalHub(data)
            token = Accounts(data / "hub.db").create_token("stages")
            process, url = serve(data)
            try:
                from verihub.hub.remote import RemoteHub

                start = time.perf_counter()
                RemoteHub(url, token).push(REPO_ROOT / "envs" / "arithmetic", owner="stages")
                timings["total"] = time.perf_counter() - start
            finally:
                process.terminate()
                process.wait()
    finally:
        pipeline.prepare, build.PackageSource.build = real_prepare, real_build
    timings["upload and tag"] = timings["total"] - timings["validate"] - timings["build"]
    return timings


def populate(data: Path, count: int) -> None:
    accounts = Accounts(data / "hub.db")
    for number in range(count):
        repo = RepoId(f"owner{number % 100}", f"env-{number}")
        accounts.add_repo(repo, "env", private=False)
        accounts.update_listing(
            repo, kind="env", modified=time.time(), tags=["bench"], summary=f"benchmark environment {number}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repos", type=int, default=10_000)
    parser.add_argument("--versions", type=int, default=1000)
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
                floor.append(
                    timed([python, "-m", "pip", "install", "--no-deps", "--no-index", str(wheel_dir / wheel.name)])
                )
                package = root / f"pkg{number}"
                shutil.copytree(REPO_ROOT / "envs" / "arithmetic", package)
                spec = package / "environment.yaml"
                spec.write_text(spec.read_text().replace("version: 1.0.0", f"version: 1.0.{number}"))
                pyproject = package / "pyproject.toml"
                pyproject.write_text(pyproject.read_text().replace('version = "1.0.0"', f'version = "1.0.{number}"'))
                python = fresh_venv(root / f"hub{number}")
                push = timed([VERIHUB, "push", str(package), "--hub", url, "--token", token])
                install = timed(
                    [
                        python,
                        "-m",
                        "pip",
                        "install",
                        "--no-deps",
                        "--index-url",
                        f"{url}/simple/",
                        f"bench-arithmetic==1.0.{number}",
                    ]
                )
                python = fresh_venv(root / f"api{number}")
                by_api = timed(
                    [python, "-m", "verihub.cli", "install", f"bench/arithmetic@1.0.{number}", "--hub", url],
                    env={**os.environ, "VERIHUB_HOME": str(root / "home")},
                )
                hub.append((push, install, by_api))
            floor_s = statistics.median(floor)
            push_s = statistics.median(p for p, _, _ in hub)
            install_s = statistics.median(i for _, i, _ in hub)
            api_s = statistics.median(a for _, _, a in hub)
            big = root / "big"
            big.mkdir()
            LocalHub(big)
            populate(big, options.repos)
            big_process, big_url = serve(big)
            try:
                selective = lambda index: f"env-{index * 37 % 997}"  # noqa: E731 - env-N matches about 11 of 10,000
                few_search, big_search = p50_pair(search(url, selective), search(big_url, selective))
                few_broad, big_broad = p50_pair(search(url, "arithmetic"), search(big_url, "benchmark"))
            finally:
                big_process.terminate()
                big_process.wait()
        finally:
            process.terminate()
            process.wait()
        pages = root / "pages"
        pages.mkdir()
        LocalHub(pages)
        one = publish_versions(pages, RepoId("bench", "one"), 1)
        many = publish_versions(pages, RepoId("bench", "many"), options.versions)
        process, url = serve(pages)
        try:
            as_json = {"headers": {"Accept": JSON_INDEX}}
            json_one, json_many = p50_pair((f"{url}/simple/{one}/", as_json), (f"{url}/simple/{many}/", as_json))
            html_one, html_many = p50_pair((f"{url}/simple/{one}/", {}), (f"{url}/simple/{many}/", {}))
        finally:
            process.terminate()
            process.wait()
        help_s = statistics.median(timed([VERIHUB, "--help"]) for _ in range(3))
        imports_s = statistics.median(timed([sys.executable, "-c", PUSH_LIBRARIES]) for _ in range(5))
    timings = stages()
    print(f"pip install of the wheel from a file (floor): {floor_s * 1000:.0f} ms")
    print(
        f"verihub push through the server: {push_s * 1000:.0f} ms; pip install from the server: "
        f"{install_s * 1000:.0f} ms; verihub install through the Hub API (no index): {api_s * 1000:.0f} ms; "
        f"`verihub --help` (start-up alone): {help_s * 1000:.0f} ms"
    )
    print(
        f"`python -c '{PUSH_LIBRARIES}'`: {imports_s * 1000:.0f} ms; with the install from the server that alone is "
        f"{(imports_s + install_s) / floor_s:.2f}x the floor"
    )
    print(
        "one push in-process, by stage: "
        + ", ".join(f"{name} {value * 1000:.0f} ms" for name, value in timings.items())
    )
    print(
        f"search p50: {few_search * 1000:.1f} ms with a handful of repos, {big_search * 1000:.1f} ms with "
        f"{options.repos}; a query every repo matches: {few_broad * 1000:.1f} ms / {big_broad * 1000:.1f} ms"
    )
    print(
        f"simple-index page p50, 1 version / {options.versions}: JSON {json_one * 1000:.1f} / "
        f"{json_many * 1000:.1f} ms, "
        f"HTML {html_one * 1000:.1f} / {html_many * 1000:.1f} ms"
    )
    print(
        f"ratios: install from hub / floor {install_s / floor_s:.2f}x, verihub install (no index) / floor "
        f"{api_s / floor_s:.2f}x, (push + install) / floor "
        f"{(push_s + install_s) / floor_s:.2f}x, search {options.repos} repos / few {big_search / few_search:.2f}x "
        f"(broad {big_broad / few_broad:.2f}x), index page {options.versions} versions / 1: JSON "
        f"{json_many / json_one:.2f}x, HTML {html_many / html_one:.2f}x"
    )


if __name__ == "__main__":
    os.environ.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    main()
