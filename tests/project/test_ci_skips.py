"""In CI a test that skips did not run: tests/conftest.py fails any skip there whose reason is not one of the
declared few (CI_SKIPS: what CI's machine cannot be), and leaves skips alone elsewhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO

SKIPS = """\
import pytest


def test_an_engine_that_did_not_build():
    pytest.skip("no .venv-gem: scripts/setup.sh --gem builds it")


@pytest.mark.skipif(True, reason="needs a CUDA GPU and vLLM")
def test_a_gpu_check():
    pass
"""


def run(tmp_path: Path, ci: bool) -> str:
    (tmp_path / "test_skips.py").write_text(SKIPS)
    environment = {name: value for name, value in os.environ.items() if name != "CI"}
    environment["PYTHONPATH"] = str(REPO / "tests")  # this suite's conftest, loaded as a plugin
    if ci:
        environment["CI"] = "1"
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "conftest", "-p", "no:cacheprovider", "test_skips.py"]
    return subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120).stdout


def test_in_ci_an_undeclared_skip_fails_and_a_declared_one_still_skips(tmp_path: Path) -> None:
    ran = run(tmp_path, ci=True)
    assert "1 failed, 1 skipped" in ran, ran
    assert "skipped in CI, so it did not run" in ran and "no .venv-gem" in ran, ran


def test_elsewhere_both_skip_saying_why(tmp_path: Path) -> None:
    ran = run(tmp_path, ci=False)
    assert "2 skipped" in ran and "no .venv-gem" in ran and "needs a CUDA GPU" in ran, ran
