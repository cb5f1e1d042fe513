"""Hub costs that must not grow: a build spawns no interpreter, an index page is one file written at publish
(the same whatever the number of versions), search reads an index (not every row) and stays exact. The
figures are bench/hub_bench.py's; these tests pin the mechanisms."""

from __future__ import annotations

import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import JSON_INDEX
from verihub.hub.accounts import Accounts
from verihub.hub.build import PackageSource
from verihub.hub.local import LocalHub
from verihub.ids import RepoId, dist_name
from verihub.spec.scaffold import init_env


def test_a_build_runs_no_interpreter_and_gives_python_m_builds_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = init_env("quick", "single-turn", tmp_path)
    repo = RepoId("alice", "quick")
    reference = tmp_path / "reference"  # what `python -m build` makes of the same source, under the hub's name
    shutil.copytree(package, reference)
    pyproject = reference / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('name = "quick"', f'name = "{dist_name(repo)}"'))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--no-isolation",
            "--sdist",
            "--wheel",
            "--outdir",
            str(tmp_path / "out"),
            str(reference),
        ],
        check=True,
        capture_output=True,
        env={**os.environ, "SOURCE_DATE_EPOCH": "315532800"},
    )
    expected = {path.name: path.read_bytes() for path in (tmp_path / "out").iterdir()}

    def no_interpreter(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"a build started a process: {args[0]}")

    before = os.environ.get("SOURCE_DATE_EPOCH")
    with monkeypatch.context() as patch:
        patch.setattr(subprocess, "run", no_interpreter)
        patch.setattr(subprocess, "Popen", no_interpreter)
        built = PackageSource(package).build(repo).files
    assert built == expected and len(built) == 2
    assert os.environ.get("SOURCE_DATE_EPOCH") == before  # the build's setting does not outlive it


def test_a_package_with_build_hooks_builds_in_its_own_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hooks are the package's own code: they run in `python -m build`, never inside verihub."""
    package = init_env("hooked", "single-turn", tmp_path)
    (package / "hatch_build.py").write_text(
        "from hatchling.builders.hooks.plugin.interface import BuildHookInterface\n"
        "class Hook(BuildHookInterface):\n"
        "    def initialize(self, version, build_data):\n"
        "        build_data['force_include'][__file__] = 'hooked_env/ran_in.txt'\n"
    )
    pyproject = package / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "\n[tool.hatch.build.targets.wheel.hooks.custom]\n")
    started = []
    real = subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: started.append(a[0]) or real(*a, **k))
    built = PackageSource(package).build(RepoId("alice", "hooked")).files
    assert any("build" in command for command in started) and len(built) == 2


def test_an_index_page_is_written_at_publish_and_served_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient

    from verihub.hub.files import PublishedFiles
    from verihub.hub.server import create_app

    hub = LocalHub(tmp_path / "hub")
    hub.push(init_env("paged", "single-turn", tmp_path), owner="alice", validate=False)
    pages = tmp_path / "hub" / "simple" / "alice-paged"
    written = {"json": (pages / "index.json").read_bytes(), "html": (pages / "index.html").read_bytes()}
    (pages / "index.json").unlink()  # a hub directory from before pages were written at publish
    with TestClient(create_app(tmp_path / "hub")) as client:
        assert (pages / "index.json").read_bytes() == written["json"]  # the start wrote it again
        with monkeypatch.context() as patch:  # serving never lists what was published: it reads the page
            patch.setattr(PublishedFiles, "entries", lambda *a: pytest.fail("a request enumerated the published files"))
            patch.setattr(PublishedFiles, "recorded", lambda *a: pytest.fail("a request read an index entry"))
            assert client.get("/simple/alice-paged/", headers=JSON_INDEX).content == written["json"]
            assert client.get("/simple/alice-paged/").content == written["html"]
            assert client.get("/simple/alice-other/").status_code == 404


def listing(path: Path, count: int) -> Accounts:
    accounts = Accounts(path)
    with accounts._lock:  # one transaction: filling 20,000 rows one commit each would take a while
        accounts._db.execute("BEGIN")
    for number in range(count):
        repo = RepoId(f"owner{number % 100}", f"env-{number}")
        accounts.add_repo(repo, "env", private=number % 7 == 0)
        accounts.update_listing(repo, kind="env", modified=number, tags=[], summary=f"benchmark environment {number}")
    with accounts._lock:
        accounts._db.execute("COMMIT")
    return accounts


def test_search_reads_an_index_not_every_row(tmp_path: Path) -> None:
    """A query's cost does not follow the number of repositories (on main: 10,000x from 20 to 20,000)."""
    small, big = listing(tmp_path / "small.db", 20), listing(tmp_path / "big.db", 20_000)

    def p50(accounts: Accounts) -> float:
        times = []
        for number in range(60):
            start = time.perf_counter()
            accounts.search(text=f"env-{number * 37 % 997}", limit=20)
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    p50(small), p50(big)  # warm
    assert p50(big) < 20 * p50(small)
    public = [f"env-{number}" for number in (1999, *range(19_990, 20_000)) if number % 7]
    assert [meta.repo.name for meta in big.search(text="ENV-1999", limit=20)] == public


TEXTS = [
    ("alice/quiz", "Short quiz questions"),
    ("alice/a_c", "under_score"),
    ("bob/abc", "100% sure"),
    ("bob/quote", 'say "hi" twice'),
    ("carol/dots.x-y", "ünïcode ünïverse"),
    ("carol/lower", "MiXeD CaSe words"),
]
QUERIES = [
    "",
    "q",
    "qu",
    "quiz",
    "QUIZ",
    "_",
    "a_c",
    "%",
    "100%",
    '"hi"',
    'say "',
    "y.x",
    "dots.x",
    "ünï",
    "mixed case",
    "s q",
    "nothing like it",
    "*",
    "a OR b",
    "NEAR(quiz)",
    "alice/",
    "e/q",
    "\0quiz",
    "qu\0iz",
    "^qui",
    "x" * 5000,
]


def test_search_finds_exactly_the_substrings(tmp_path: Path) -> None:
    accounts = Accounts(tmp_path / "hub.db")
    for id_, text in TEXTS:
        repo = RepoId.parse(id_)
        accounts.add_repo(repo, "env", private=False)
        accounts.update_listing(repo, kind="env", modified=0, tags=[], summary=text)

    def expected(query: str) -> list[str]:
        return sorted(id_ for id_, text in TEXTS if query.lower() in id_ or query.lower() in text.lower())

    for query in QUERIES:
        assert sorted(str(m.repo) for m in accounts.search(text=query)) == expected(query), query
    accounts.update_listing(RepoId("alice", "quiz"), kind="env", modified=1, tags=[], summary="renamed entirely")
    assert [str(m.repo) for m in accounts.search(text="short quiz")] == []
    assert [str(m.repo) for m in accounts.search(text="entirely")] == ["alice/quiz"]
    accounts.remove_repo(RepoId("alice", "quiz"))
    assert accounts.search(text="entirely") == [] and accounts.search(text="alice/quiz") == []


def test_a_listing_from_before_the_index_is_indexed(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    with sqlite3.connect(path) as db:  # the listing as an earlier verihub wrote it
        db.executescript(
            "CREATE TABLE repos (id TEXT PRIMARY KEY, kind TEXT NOT NULL, private INTEGER NOT NULL, "
            "created REAL NOT NULL, downloads INTEGER NOT NULL DEFAULT 0, modified REAL NOT NULL DEFAULT 0, "
            "tags TEXT NOT NULL DEFAULT '[]', summary TEXT NOT NULL DEFAULT '', owner TEXT NOT NULL DEFAULT '');"
            "INSERT INTO repos VALUES ('alice/old', 'env', 0, 0, 0, 0, '[]', 'from long ago', 'alice');"
        )
    assert [str(m.repo) for m in Accounts(path).search(text="long ago")] == ["alice/old"]


def test_a_push_through_the_server_reads_the_refs_once_and_runs_few_git_processes(tmp_path: Path) -> None:
    """The git processes the server starts for one push of a new version (commit, its checks, the release
    tag), counted through a `git` on its PATH that logs each call; and the client asks for the refs once."""
    from conftest import free_port, wait_until_serving
    from verihub.hub.remote import RemoteHub

    real_git = shutil.which("git")
    assert real_git is not None
    calls = tmp_path / "git-calls.txt"
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "$1" >> {calls}\nexec {real_git} "$@"\n')
    wrapper.chmod(0o755)
    data = tmp_path / "hub"
    LocalHub(data)
    token = Accounts(data / "hub.db").create_token("alice")
    port = free_port()
    verihub = str(Path(sys.executable).with_name("verihub"))
    server = subprocess.Popen(
        [verihub, "hub", "serve", "--port", str(port), "--data", str(data)],
        env={**os.environ, "PATH": f"{wrapper.parent}:{os.environ['PATH']}"},
    )
    try:
        wait_until_serving(f"http://127.0.0.1:{port}/simple/", timeout_s=60)
        package = init_env("counted", "single-turn", tmp_path)
        hub = RemoteHub(f"http://127.0.0.1:{port}", token)
        hub.push(package, owner="alice", validate=False)
        (package / "README.md").write_text("# counted\n\nA second version.\n")
        for name in ("environment.yaml", "pyproject.toml"):
            text = (package / name).read_text()
            (package / name).write_text(text.replace("0.1.0", "0.1.1", 1))
        read_refs = hub.api.list_repo_refs
        refs_reads: list[str] = []
        hub.api.list_repo_refs = lambda *args, **kwargs: refs_reads.append(args[0]) or read_refs(*args, **kwargs)
        calls.write_text("")
        result = hub.push(package, owner="alice", validate=False)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert result.created and result.version == "0.1.1"
    assert refs_reads == ["alice/counted"]
    processes = calls.read_text().split()
    assert len(processes) <= 26, processes
