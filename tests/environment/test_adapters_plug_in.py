"""Adapters plug in: load_env knows no ecosystem by name, it asks the ``verihub.adapters`` entry points for the
ref's scheme, verihub's own adapters included. A throwaway third-party package, pip-installed into a fresh
venv, registers ``toy:`` and an environment loads through it; a scheme nothing registers is refused naming the
installed ones."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import verihub
from verihub.environment.installed import adapter_schemes, ref_scheme
from verihub.errors import EnvNotFoundError
from verihub.spec.scaffold import init_env

LOADER = '''
from pathlib import Path

import verihub


def load(ref, *, on_missing_judge="error", judge=None, **options):
    """toy:ANYTHING: the package's own environment (it takes no options)."""
    if options:
        raise TypeError(f"toy: environments take no {', '.join(sorted(options))}")
    return verihub.load_env(Path(__file__).parent / "toy-sums", judge=judge, on_missing_judge=on_missing_judge)
'''

PYPROJECT = """
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "toy-adapter"
version = "0.1.0"

[project.entry-points."verihub.adapters"]
toy = "toy_adapter:load"

[tool.hatch.build.targets.wheel]
packages = ["toy_adapter"]
"""


def test_verihubs_own_ecosystems_are_registered_adapters() -> None:
    assert {"reasoning-gym", "openenv", "textarena", "skyrl-gym", "verifiers", "gem", "harbor", "nemo-gym"} <= set(
        adapter_schemes()
    )
    assert [ref_scheme(ref) for ref in ("openenv:http://x", "hf://datasets/a/b", "C:\\envs\\x", "owner/name")] == [
        "openenv",
        "hf",
        None,
        None,
    ]


def test_a_scheme_nothing_registers_names_the_installed_ones() -> None:
    with pytest.raises(EnvNotFoundError, match=r"no installed adapter loads nowhere: refs .*Installed: .*openenv:"):
        verihub.load_env("nowhere:thing")
    with pytest.raises(EnvNotFoundError, match="Did you mean 'openenv:'"):
        verihub.load_env("openenvv:http://127.0.0.1:1")


def test_a_third_party_adapter_loads_an_environment(tmp_path: Path, fresh_python: str) -> None:
    package = tmp_path / "toy-adapter"
    (package / "toy_adapter").mkdir(parents=True)
    (package / "pyproject.toml").write_text(PYPROJECT)
    (package / "toy_adapter" / "__init__.py").write_text(LOADER)
    init_env("toy-sums", "single-turn", package / "toy_adapter")
    installed = subprocess.run(
        [fresh_python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", str(package)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    code = (
        "import verihub\n"
        "env = verihub.load_env('toy:anything')\n"
        "task = env.tasks('train')[0]\n"
        "print(env.id, env.grade(task, env.reference(task)).status)\n"
        "try:\n"
        "    verihub.load_env('toy:anything', size=3)\n"
        "except TypeError as error:\n"
        "    print(error)\n"
    )
    loaded = subprocess.run([fresh_python, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.splitlines() == ["toy-sums ok", "toy: environments take no size"]
    assert "toy" not in adapter_schemes()  # installed into the fresh venv only


def test_a_scheme_two_packages_register_is_refused_not_picked(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import EntryPoint

    from verihub.environment import installed
    from verihub.errors import UsageError

    group = installed.ADAPTER_ENTRY_POINT_GROUP
    taken = [
        EntryPoint("openenv", "verihub.adapters.openenv:load_openenv", group),
        EntryPoint("openenv", "evil_adapter:load", group),  # another package claiming verihub's scheme
    ]
    monkeypatch.setattr(installed, "entry_points", lambda group: taken)
    with pytest.raises(UsageError, match=r"two installed loaders register openenv: refs .*evil_adapter:load"):
        verihub.load_env("openenv:http://127.0.0.1:1")
