"""The suite runs in what uv.lock pins (scripts/setup.sh), so CI tests the versions every fresh machine gets:
the lock is the one pyproject.toml asks for, .venv holds exactly its versions, and the bundled environments
sit beside them as regular (not editable) installs of the tree's current sources."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from importlib.metadata import distribution
from pathlib import Path

import pytest

from conftest import REPO as ROOT

UV = Path(sys.executable).with_name("uv")  # the dev group's, at the locked version


def uv(*args: str) -> subprocess.CompletedProcess[str]:
    """uv on this tree, offline, about the interpreter and environment the tests run in."""
    return subprocess.run(
        [str(UV), *args, "--offline", "--python", sys.executable],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "UV_PROJECT_ENVIRONMENT": sys.prefix},
    )


def test_the_lock_is_the_one_pyproject_asks_for() -> None:
    checked = uv("lock", "--check")
    assert checked.returncode == 0, checked.stderr


def test_the_venv_holds_exactly_the_locked_versions() -> None:
    (line,) = [line for line in (ROOT / "scripts/setup.sh").read_text().splitlines() if line.startswith("SYNC_WHAT=")]
    synced = line.partition("=")[2].partition("#")[0].strip().strip('"').split()  # what setup.sh syncs
    # --inexact: the bundled environments are in .venv on purpose, beside the lock's packages
    checked = uv("sync", "--check", "--locked", "--inexact", *synced)
    assert checked.returncode == 0, f"run scripts/setup.sh: .venv is not uv.lock's\n{checked.stderr}"


ENV_PROJECTS = sorted(path.parent for path in ROOT.glob("envs/*/pyproject.toml"))


@pytest.mark.parametrize("project", ENV_PROJECTS, ids=[path.name for path in ENV_PROJECTS])
def test_bundled_environments_are_regular_installs_of_this_tree(project: Path) -> None:
    declared = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    installed = distribution(declared["name"])
    assert installed.version == declared["version"], "run scripts/setup.sh: the installed version is stale"
    origin = json.loads(installed.read_text("direct_url.json") or "{}")
    assert not origin.get("dir_info", {}).get("editable"), f"{declared['name']} is installed editable"
    # imported by name in a fresh interpreter outside the tree (this one's sys.path has seen envs/*)
    for entry in installed.entry_points.select(group="verihub.environments"):
        module = entry.value.split(":")[0]
        found = subprocess.run(
            [sys.executable, "-c", f"import {module}; print({module}.__file__)"],
            cwd="/",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert found.returncode == 0, found.stderr
        assert not Path(found.stdout.strip()).resolve().is_relative_to(project.resolve()), f"{module} is editable"
