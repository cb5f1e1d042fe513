"""verihub's own wheels, as `pip install verihub` gets them: one per part (the meta-package, the SDK, the
hub, the trainers), each holding every module and file of its folder and nothing of another's, released
at one version; installed from those wheels into a fresh environment, the parts make one `verihub` whose
command has every part's commands, with the extras resolving to the parts.

The suite imports verihub from editable installs, which find any module in the tree; a file a wheel left
out would only fail for users (and in the container image). The templates `verihub init` copies live at the top
(templates/), linked from sdk/verihub/templates: the SDK's wheel, and a wheel built from its sdist as pip builds
one from PyPI's, carry them as files, and `init` from the installed wheel makes the same package as from here."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO
from verihub.spec.scaffold import init_env

# distribution -> (its folder, the folders of the verihub package it ships)
PARTS = {
    "verihub": (REPO, []),
    "verihub-sdk": (REPO / "sdk", [REPO / "sdk" / "verihub"]),
    "verihub-hub": (REPO / "hub", [REPO / "hub" / "verihub"]),
    "verihub-trainers": (REPO / "trainers", [REPO / "trainers" / "verihub"]),
}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("wheels")
    for folder, _ in PARTS.values():
        built = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "--disable-pip-version-check",
                "-w",
                str(out),
                str(folder),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert built.returncode == 0, built.stderr
    found = {}
    for wheel in out.glob("*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            metadata = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
            name = next(
                line.split(": ", 1)[1]
                for line in archive.read(metadata).decode().splitlines()
                if line.startswith("Name: ")
            )
        found[name] = wheel
    assert sorted(found) == sorted(PARTS)
    return found


def files_of(package: Path) -> Iterator[Path]:
    """The files a build ships from ``package``, its links followed (the templates are a link to the top)."""
    for directory, folders, files in os.walk(package, followlinks=True):
        folders[:] = [name for name in folders if name != "__pycache__"]
        yield from (Path(directory) / name for name in files if not name.endswith(".pyc"))


@pytest.mark.slow
def test_the_sdks_sdist_builds_a_wheel_with_the_templates(wheels: dict[str, Path], tmp_path: Path) -> None:
    made = subprocess.run(  # hatchling's PEP 517 hook, as a build frontend calls it
        [sys.executable, "-c", f"import hatchling.build as b; print(b.build_sdist({str(tmp_path)!r}))"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO / "sdk",
    )
    assert made.returncode == 0, made.stderr
    sdist = tmp_path / made.stdout.split()[-1]
    unpacked = tmp_path / "unpacked"
    with tarfile.open(sdist) as archive:
        archive.extractall(unpacked, filter="data")  # as pip does: the links resolved into files
    (root,) = unpacked.iterdir()
    assert not (root / "verihub" / "templates").is_symlink()
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), root],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("verihub_sdk-*.whl")
    templates = {
        f"verihub/templates/{path.relative_to(REPO / 'templates').as_posix()}" for path in files_of(REPO / "templates")
    }
    assert len(templates) > 10
    for built_wheel in (wheel, wheels["verihub-sdk"]):
        with zipfile.ZipFile(built_wheel) as archive:
            lacking = templates - set(archive.namelist())
            assert not lacking, f"{built_wheel.name} lacks {sorted(lacking)}"
            for entry in templates:
                assert archive.read(entry) == (REPO / entry.removeprefix("verihub/")).read_bytes(), entry


@pytest.mark.slow
def test_each_wheel_holds_every_module_and_template_of_its_folder_and_no_other(wheels: dict[str, Path]) -> None:
    shipped: dict[str, str] = {}
    for name, (folder, packages) in PARTS.items():
        in_wheel = {entry for entry in zipfile.ZipFile(wheels[name]).namelist() if ".dist-info/" not in entry}
        expected = {path.relative_to(folder).as_posix() for package in packages for path in files_of(package)}
        assert sorted(expected - in_wheel) == [], f"{name}'s wheel lacks them"
        assert sorted(in_wheel - expected) == [], f"{name}'s wheel holds files from outside its folder"
        for entry in in_wheel:
            assert entry not in shipped, f"{entry} is in the wheels of both {shipped[entry]} and {name}"
            shipped[entry] = name


def test_the_parts_are_released_together_and_pin_each_other() -> None:
    projects = {
        name: tomllib.loads((folder / "pyproject.toml").read_text())["project"] for name, (folder, _) in PARTS.items()
    }
    versions = {name: project["version"] for name, project in projects.items()}
    assert len(set(versions.values())) == 1, f"the parts' versions differ: {versions}"
    import verihub

    assert verihub.__version__ == versions["verihub"]
    for name, project in projects.items():
        requirements = project.get("dependencies", []) + [
            requirement for extra in project.get("optional-dependencies", {}).values() for requirement in extra
        ]
        for requirement in requirements:
            part = requirement.split("[")[0].split("=")[0].strip()
            if part in PARTS and part != name:
                assert requirement.endswith(f"=={versions[part]}"), f"{name} asks for {requirement!r}"


@pytest.mark.slow
def test_the_wheels_install_as_one_verihub_with_every_parts_commands(wheels: dict[str, Path], tmp_path: Path) -> None:
    """A fresh environment that borrows the third-party packages of this one (no index is reached), through
    links to all but its verihub: pip resolves `verihub[hub,train]` to the four wheels."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = Path(next(path for path in sys.path if path.endswith("site-packages")))
    borrowed = tmp_path / "borrowed"
    borrowed.mkdir()
    for entry in ours.iterdir():
        if not entry.name.lower().startswith(("verihub", "_editable_impl_verihub", "__editable__")):
            (borrowed / entry.name).symlink_to(entry)
    (Path(purelib) / "borrowed.pth").write_text(f"{borrowed}\n")  # a plain path: the .pth files there do not run
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PIP_FIND_LINKS", None)
    install = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--find-links",
            str(wheels["verihub"].parent),
            "verihub[hub,train]",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-3000:]
    where = subprocess.run(
        [
            str(python),
            "-c",
            "import verihub, verihub.hub, verihub.trainers, verihub.cli; "
            "print(verihub.__file__, verihub.hub.__file__, verihub.trainers.__file__)",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert where.returncode == 0, where.stderr
    for path in where.stdout.split():
        assert Path(path).is_relative_to(purelib), f"{path} is not the installed wheel's"
    shown = subprocess.run(
        [str(venv / "bin" / "verihub"), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert shown.returncode == 0, shown.stderr
    commands = {
        line.split()[1] for line in shown.stdout.splitlines() if line.startswith("│ ") and len(line.split()) > 2
    }
    assert {"validate", "eval", "serve", "push", "install", "hub", "train", "sft", "models"} <= commands, shown.stdout
    assert "did not load" not in shown.stderr, shown.stderr
    made = subprocess.run(
        [str(venv / "bin" / "verihub"), "init", "from-wheel", "--template", "judge"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert made.returncode == 0, made.stderr
    here = init_env("from-wheel", "judge", tmp_path / "here")
    assert sorted(p.relative_to(here) for p in here.rglob("*")) == sorted(
        p.relative_to(tmp_path / "from-wheel") for p in (tmp_path / "from-wheel").rglob("*")
    )
