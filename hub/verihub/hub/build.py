"""Preparing a package for the hub: its source files, its version, a reproducible wheel and sdist."""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as PackagingRequirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from verihub.errors import VerihubError, describe_error
from verihub.ids import RepoId, dist_name
from verihub.spec.wrapped import WrappedSpec, read_wrapped

if TYPE_CHECKING:
    from verihub.environment.core import Environment
    from verihub.spec.loader import LoadedSpec

__all__ = ["Built", "PackageSource", "Prepared", "bump_version", "prepare"]

Bump = Literal["patch", "minor", "major"]
_SKIP_DIRS = {".git", ".venv", "venv", "__pycache__", "dist", "build", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
_MAX_BYTES = 256 << 20
_EPOCH = "315532800"  # 1980-01-01: the same source always builds the same bytes


@dataclass(frozen=True)
class Built:
    files: dict[str, bytes]  # file name -> content (one wheel, one sdist)

    def check_environment(self) -> None:
        """Load the spec from the built wheel, as an installed copy would: a file the spec names but the
        wheel lacks (data, rubric, schema, calibration) fails here, before anything is published."""
        import io
        import zipfile

        from verihub.errors import SpecError
        from verihub.spec.loader import SPEC_FILE, load_spec

        wheel = next(data for name, data in self.files.items() if name.endswith(".whl"))
        with tempfile.TemporaryDirectory(prefix="verihub-wheel-") as scratch:
            with zipfile.ZipFile(io.BytesIO(wheel)) as archive:
                archive.extractall(scratch)
            specs = sorted(Path(scratch).glob(f"*/{SPEC_FILE}"))
            if not specs:
                raise VerihubError(
                    f"the built wheel has no {SPEC_FILE} inside a package; list it under "
                    "[tool.hatch.build.targets.wheel.force-include] in pyproject.toml"
                )
            wrapped = read_wrapped(specs[0])
            if wrapped is not None:  # the files its options name must be in the wheel beside it
                missing = [name for name in wrapped.named_files() if not (specs[0].parent / name).exists()]
                if missing:
                    raise VerihubError(
                        f"the built wheel is missing files the spec's options name ({', '.join(missing)}); "
                        "list them under [tool.hatch.build.targets.wheel.force-include] in pyproject.toml"
                    )
                return
            saved_path = list(sys.path)
            try:
                load_spec(specs[0])
            except SpecError as error:
                problems = "; ".join(problem.message for problem in error.problems)
                raise VerihubError(
                    f"the built wheel is missing files the spec names ({problems}); list them under "
                    "[tool.hatch.build.targets.wheel.force-include] in pyproject.toml"
                ) from None
            finally:
                sys.path[:] = saved_path


class PackageSource:
    """A package directory to push: an environment (environment.yaml) or a verifier package."""

    def __init__(self, path: str | Path) -> None:
        self.root = Path(path).resolve()
        pyproject = self.root / "pyproject.toml"
        if not pyproject.is_file():
            raise VerihubError(f"{self.root} has no pyproject.toml: a hub package is a pip-installable project")
        self.pyproject = tomllib.loads(pyproject.read_text())
        project = self.pyproject.get("project") or {}
        self.project_version = str(project.get("version", ""))
        entry_points = project.get("entry-points") or {}
        self.kind: Literal["env", "verifier"] = "env" if (self.root / "environment.yaml").is_file() else "verifier"
        if self.kind == "verifier" and "verihub.checks" not in entry_points:
            raise VerihubError(
                f"{self.root}: neither an environment (environment.yaml) nor a verifier package "
                '(entry points in [project.entry-points."verihub.checks"])'
            )
        self.hub_dependencies = self._hub_dependencies()

    @functools.cached_property
    def spec(self) -> LoadedSpec | WrappedSpec:
        """The environment's spec (an environment package only), read once: declared, or wrapping another
        ecosystem's environment (:mod:`verihub.spec.wrapped`)."""
        from verihub.spec.loader import load_spec

        return read_wrapped(self.root / "environment.yaml") or load_spec(self.root)

    @property
    def env_id(self) -> str:
        spec = self.spec
        return spec.id if isinstance(spec, WrappedSpec) else spec.spec.id

    @property
    def version(self) -> str:
        if self.kind == "env":
            spec = self.spec
            spec_version = spec.version if isinstance(spec, WrappedSpec) else spec.spec.version
            if spec_version != self.project_version:
                raise VerihubError(
                    f"{self.root}: environment.yaml says version {spec_version} but pyproject.toml "
                    f"says {self.project_version!r}; make them equal"
                )
            return spec_version
        return self.project_version

    @property
    def dependencies(self) -> list[str]:
        """``[project] dependencies``, as written."""
        return [str(item) for item in (self.pyproject.get("project") or {}).get("dependencies") or []]

    def _hub_dependencies(self) -> dict[RepoId, str]:
        """The dependencies a hub provides, by repository id (``[tool.verihub] hub-dependencies = ["acme/rules"]``),
        each with the version specifier ``[project] dependencies`` gives its distribution (``acme-rules>=1.0``):
        ``verihub install`` fetches these from the hub the package comes from, never from an index by name."""
        declared = ((self.pyproject.get("tool") or {}).get("verihub") or {}).get("hub-dependencies") or []
        where = f"{self.root / 'pyproject.toml'}: [tool.verihub] hub-dependencies"
        if not isinstance(declared, list) or not all(isinstance(item, str) for item in declared):
            raise VerihubError(f'{where} must be a list of repository ids ("OWNER/NAME")')
        specifiers: dict[str, str] = {}
        for text in self.dependencies:
            try:
                parsed = PackagingRequirement(text)
            except InvalidRequirement:
                continue
            specifiers[str(canonicalize_name(parsed.name))] = str(parsed.specifier)
        found: dict[RepoId, str] = {}
        for item in declared:
            try:
                repo = RepoId.parse(item)
            except ValueError as error:
                raise VerihubError(f"{where}: {item!r}: {error}") from None
            if dist_name(repo) not in specifiers:
                raise VerihubError(
                    f"{where} names {repo}, whose distribution {dist_name(repo)!r} is not in [project] dependencies; "
                    "add it there (with the versions you need)"
                )
            found[repo] = specifiers[dist_name(repo)]
        return found

    def files(self) -> dict[str, bytes]:
        """The source files, relative path -> content (build outputs, caches and VCS data left out)."""
        found: dict[str, bytes] = {}
        total = 0
        for directory, subdirs, names in os.walk(self.root):
            subdirs[:] = sorted(d for d in subdirs if d not in _SKIP_DIRS and not d.endswith(".egg-info"))
            for name in sorted(names):
                path = Path(directory) / name
                if path.is_symlink() or name.endswith((".pyc", ".pyo")):
                    continue
                content = path.read_bytes()
                total += len(content)
                if total > _MAX_BYTES:
                    raise VerihubError(
                        f"{self.root} holds more than {_MAX_BYTES >> 20} MiB of files; the hub refuses it"
                    )
                found[path.relative_to(self.root).as_posix()] = content
        return found

    def build(self, repo: RepoId) -> Built:
        """Wheel and sdist, named ``owner-name`` on the hub, built reproducibly from a copy of the source."""
        with tempfile.TemporaryDirectory(prefix="verihub-build-") as scratch:
            copy = Path(scratch) / "src"
            copy.mkdir()
            for relative, content in self.files().items():
                target = copy / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
            pyproject = copy / "pyproject.toml"
            pyproject.write_text(_set_project_name(pyproject.read_text(), dist_name(repo)))
            out = Path(scratch) / "dist"
            out.mkdir()
            if _hatchling_in_process(self.pyproject):
                _build_with_hatchling(copy, out, self.root.name)
            else:
                _build_in_subprocess(copy, out, self.root.name)
            return Built({path.name: path.read_bytes() for path in sorted(out.iterdir())})


def _hatchling_in_process(pyproject: dict[str, Any]) -> bool:
    """Whether the package builds with the hatchling installed here and runs none of its own code while
    building (no build or metadata hooks, no plugins): then building in this process gives the same bytes
    as ``python -m build``, without its two interpreter start-ups."""
    system = pyproject.get("build-system") or {}
    if system.get("build-backend") != "hatchling.build" or importlib.util.find_spec("hatchling") is None:
        return False
    try:
        requires = [PackagingRequirement(text) for text in system.get("requires") or []]
        installed = Version(importlib.metadata.version("hatchling"))
    except (InvalidRequirement, InvalidVersion, importlib.metadata.PackageNotFoundError, TypeError):
        return False
    if any(
        req.name != "hatchling" or req.marker is not None or not req.specifier.contains(installed, prereleases=True)
        for req in requires
    ):
        return False
    return not _has_key((pyproject.get("tool") or {}).get("hatch") or {}, "hooks")


def _has_key(table: Any, key: str) -> bool:
    if isinstance(table, dict):
        return key in table or any(_has_key(value, key) for value in table.values())
    return isinstance(table, list) and any(_has_key(value, key) for value in table)


def _build_with_hatchling(source: Path, out: Path, name: str) -> None:
    from hatchling.builders.sdist import SdistBuilder
    from hatchling.builders.wheel import WheelBuilder

    saved = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = _EPOCH  # hatchling reads it while it writes
    try:
        for builder in (SdistBuilder(str(source)), WheelBuilder(str(source))):
            for _ in builder.build(directory=str(out), versions=["standard"]):
                pass
    except Exception as error:  # noqa: BLE001 - a package's build failure, whatever hatchling raised
        raise VerihubError(f"building {name} failed: {describe_error(error)}") from None
    finally:
        if saved is None:
            os.environ.pop("SOURCE_DATE_EPOCH", None)
        else:
            os.environ["SOURCE_DATE_EPOCH"] = saved


def _build_in_subprocess(source: Path, out: Path, name: str) -> None:
    command = [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(source)]
    if importlib.util.find_spec("hatchling") is not None:  # else `build` fetches it into an isolated env
        command.insert(3, "--no-isolation")
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "SOURCE_DATE_EPOCH": _EPOCH})
    if result.returncode != 0:
        raise VerihubError(f"building {name} failed:\n{(result.stderr or result.stdout)[-1500:]}")


def _set_project_name(text: str, name: str) -> str:
    """``[project] name = "..."`` replaced, keeping the rest of the file as written."""
    section = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.MULTILINE | re.DOTALL)
    if section is None:
        raise VerihubError("pyproject.toml has no [project] table")
    body = re.sub(r'^name\s*=\s*["\'][^"\']*["\']', f'name = "{name}"', section.group(1), count=1, flags=re.MULTILINE)
    return text[: section.start(1)] + body + text[section.end(1) :]


def bump_version(root: Path, part: Bump) -> str:
    """Raise the version in environment.yaml (if any) and pyproject.toml; returns the new version."""
    source = PackageSource(root)
    current = Version(source.version)
    major, minor, patch = (list(current.release) + [0, 0])[:3]
    new = {"major": f"{major + 1}.0.0", "minor": f"{major}.{minor + 1}.0", "patch": f"{major}.{minor}.{patch + 1}"}[
        part
    ]
    pyproject = source.root / "pyproject.toml"
    pyproject.write_text(
        re.sub(
            r'^(version\s*=\s*["\'])[^"\']*(["\'])',
            rf"\g<1>{new}\g<2>",
            pyproject.read_text(),
            count=1,
            flags=re.MULTILINE,
        )
    )
    spec = source.root / "environment.yaml"
    if spec.is_file():
        spec.write_text(re.sub(r"^(version:\s*)\S+", rf"\g<1>{new}", spec.read_text(), count=1, flags=re.MULTILINE))
    return new


@dataclass(frozen=True)
class Prepared:
    """A package ready to publish: what it is, where it goes, and its files."""

    source: PackageSource
    repo: RepoId
    version: str
    files: dict[str, bytes]
    env: Environment | None  # an environment package's environment, as loaded from the source


def prepare(path: str | Path, owner: str, *, bump: Bump | None = None, validate: bool = True) -> Prepared:
    """The common first steps of a push: bump, read the package, validate an environment."""
    if bump is not None:
        bump_version(Path(path), bump)
    source = PackageSource(path)
    if source.kind == "env":
        name = source.env_id
    else:
        name = str((source.pyproject.get("project") or {}).get("name", source.root.name))
    repo = RepoId.parse(f"{owner}/{name}")
    env = None
    if source.kind == "env":
        from verihub.environment.core import load_env

        env = load_env(source.root, on_missing_judge="skip")
    if validate and env is not None:
        from verihub.validation.validate import validate_env

        report = validate_env(env)
        if not report.ok:
            problems = "; ".join(report.failures[:3]) or f"references {report.references_passed}/{report.references}"
            raise VerihubError(f"{source.root.name} does not pass `verihub validate`: {problems}")
    return Prepared(source, repo, publishable_version(source.version, source.root), source.files(), env)


def publishable_version(version: str, root: Path) -> str:
    """``version`` as its release tag and pip name it (``1.0.0-rc1`` -> ``1.0.0rc1``); refused, before anything is
    written, if pip cannot order it or it carries build metadata."""
    try:
        parsed = Version(version)
    except InvalidVersion:
        raise VerihubError(
            f"{root}: version {version!r} is not one pip can order (PEP 440): use MAJOR.MINOR.PATCH, "
            "optionally with -rcN, -aN or -bN"
        ) from None
    if parsed.local is not None:
        raise VerihubError(
            f"{root}: version {version!r} carries build metadata (+{parsed.local}), which pip reads as a "
            f"local version that `=={parsed.public}` prefers to {parsed.public} itself; publish "
            f"{parsed.public}"
        )
    return str(parsed)
