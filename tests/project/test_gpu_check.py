"""scripts/gpu_check.sh on a machine without a GPU says so and exits 0 (its GPU path needs a GPU to run)."""

from __future__ import annotations

import os
import py_compile
import shutil
import subprocess

import pytest

from conftest import REPO


@pytest.mark.skipif(
    shutil.which("nvidia-smi") is not None or os.path.exists("/usr/bin/nvidia-smi"),
    reason="a GPU machine runs the check itself",
)
def test_without_a_gpu_the_check_says_so_and_passes() -> None:
    environment = {**os.environ, "PATH": "/usr/bin:/bin"}
    ran = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_check.sh")], capture_output=True, text=True, timeout=60, env=environment
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "gpu_check: no NVIDIA GPU here (nvidia-smi lists none); nothing to check"
    py_compile.compile(str(REPO / "scripts" / "gpu_check.py"), doraise=True)  # the GPU path at least compiles
