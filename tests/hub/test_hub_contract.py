"""One contract for both hubs: the embedded one (a directory) and the server (over HTTP)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import HubServer
from verihub.hub.local import LocalHub, VersionExistsError
from verihub.ids import RepoId
from verihub.spec.scaffold import init_env

pytestmark = pytest.mark.slow


@pytest.fixture(params=["embedded", "server"])
def any_hub(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "embedded":
        return LocalHub(tmp_path / "hub")
    from verihub.hub.remote import RemoteHub

    server: HubServer = request.getfixturevalue("hub_server")
    return RemoteHub(server.url, server.tokens["alice"])


def test_the_hub_contract(any_hub: Any, tmp_path: Path, fresh_python: str) -> None:
    name = f"contract-{type(any_hub).__name__.lower()}"
    package = init_env(name, "single-turn", tmp_path)
    repo = RepoId("alice", name)
    first = any_hub.push(package, owner="alice")
    assert (first.repo, first.version, first.created) == (repo, "0.1.0", True)
    assert any_hub.push(package, owner="alice").created is False
    (package / "README.md").write_text("# changed\n")
    with pytest.raises(VersionExistsError):
        any_hub.push(package, owner="alice")
    assert any_hub.push(package, owner="alice", bump="patch").version == "0.1.1"
    assert any_hub.versions(repo) == ["0.1.0", "0.1.1"]
    assert str(repo) in [found["repo"] for found in any_hub.search(name)]
    info = any_hub.info(repo)
    assert info["latest"] == "0.1.1" and info["distribution"] == f"alice-{name}" and "changed" in info["card"]
    python = fresh_python
    assert any_hub.install(f"alice/{name}@~=0.1.0", python=python) == (repo, "0.1.1")
    loaded = subprocess.run(
        [python, "-c", f"import verihub; print(verihub.load_env('alice/{name}').version)"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert loaded.stdout.strip() == "0.1.1", loaded.stderr
