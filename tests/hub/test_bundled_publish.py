"""Every bundled environment publishes to the hub, installs back with pip, loads by owner/name and grades."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import REPO
from verihub.hub.local import LocalHub
from verihub.spec.loader import load_spec

pytestmark = pytest.mark.slow

BUNDLED = sorted(path.name for path in (REPO / "envs").iterdir() if (path / "environment.yaml").is_file())

GRADE_FIRST_TASK = """
import sys, verihub
env = verihub.load_env(sys.argv[1], on_missing_judge="skip")
task = env.dataset("train")[0]
print(env.root, env.grade(task, env.reference(task)).status)
"""


@pytest.mark.parametrize("name", BUNDLED)
def test_push_install_load_grade(name: str, tmp_path: Path, fresh_python: str) -> None:
    hub = LocalHub(tmp_path / "hub")
    expected = load_spec(REPO / "envs" / name).spec.version
    published = hub.push(REPO / "envs" / name, owner="ci")
    assert published.created and published.version == expected
    repo, version = hub.install(f"ci/{name}@^1.0", python=fresh_python)
    assert (str(repo), version) == (f"ci/{name}", expected)
    loaded = subprocess.run(
        [fresh_python, "-c", GRADE_FIRST_TASK, f"ci/{name}"], capture_output=True, text=True, timeout=300
    )
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    root, status = loaded.stdout.split()
    assert str(tmp_path) in root  # the installed copy in the fresh venv, not the source tree
    assert status == "ok"
