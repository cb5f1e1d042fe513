"""verihub's own wheel, as `pip install verihub` gets it: every module and file of the source folders is in it.

The suite imports verihub from an editable install, which finds any module in the tree; a package left out
of pyproject.toml's list would only fail for users (and in the container image)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_wheel_holds_every_module_and_template_of_the_tree(tmp_path: Path) -> None:
    folders = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    tree = tmp_path / "tree"  # a copy: setuptools reuses a build/ folder it finds in the tree
    tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    for folder in folders.values():
        shutil.copytree(ROOT / folder, tree / folder, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "--disable-pip-version-check", "-w", str(tmp_path), str(tree)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("verihub-*.whl")
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    expected = set()
    for package, folder in folders.items():
        for path in (tree / folder).rglob("*"):
            if path.is_file() and (package == "verihub.templates" or path.suffix == ".py"):
                expected.add("/".join((*package.split("."), *path.relative_to(tree / folder).parts)))
    missing = sorted(expected - in_wheel)
    assert not missing, f"not in the wheel (add their packages to pyproject.toml's list): {missing}"
