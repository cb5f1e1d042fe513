"""Installing hub packages with pip from the wheels their release tags hold, never from a package index by name.

``verihub install OWNER/NAME[@SPEC]`` works against any hub that speaks the Hugging Face Hub API, with or
without a pip index (huggingface.co has none):

1. the version: the newest release tag ``v{version}`` the spec admits;
2. the wheel: read from ``dist/`` at the tag's commit and checked against the sha256 recorded at release
   (``.verihub/release.json``, :mod:`verihub.hub.derived`; for a release from before that record, the hub's
   LFS metadata or its index entry);
3. the hub dependencies: the package's dependencies the same hub provides, named by repository id (recorded at
   release), fetched the same way, recursively;
4. every wheel installed by one ``pip install FILE...``: a requirement given as a file is the only candidate pip
   considers for its name, so no index (PyPI's included) can put a project of the same name in its place. Other
   dependencies come from pip's configured indexes as usual. Nothing is written over files another installed
   distribution owns.

Each installed release's tag commit and wheel sha256 are pinned in ``$VERIHUB_HOME/releases.json`` (trust on first
use): a later install that finds the tag moved (a hub that lets tags move, as huggingface.co does; verihub's own
never does) refuses without ``allow_moved_tag``, and warns with it.
"""

from __future__ import annotations

import fcntl
import io
import json
import logging
import os
import subprocess
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as PackagingRequirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from verihub import settings
from verihub.errors import VerihubError
from verihub.hub.errors import CorruptFileError, HubError, MovedTagError, VersionNotFoundError
from verihub.ids import RepoId, dist_name

__all__ = ["FetchedRelease", "Pins", "hub_dependency_candidates", "pip_install_wheels", "resolve_closure"]

logger = logging.getLogger("verihub.hub")
MAX_PACKAGES = 100  # hub packages one install may bring in (a dependency loop or a flood ends here)


@dataclass(frozen=True)
class FetchedRelease:
    """One release, fetched and checked: what pip installs and what the pins record."""

    repo: RepoId
    version: str
    commit: str  # the release tag's commit when it was read
    wheel_name: str
    wheel: bytes
    sha256: str
    hub_dependencies: dict[str, str]  # OWNER/NAME -> specifier


def resolve_closure(
    root: RepoId,
    spec: SpecifierSet | None,
    versions: Callable[[RepoId], list[str]],
    fetch: Callable[[RepoId, str], FetchedRelease],
) -> list[FetchedRelease]:
    """``root`` at the newest version ``spec`` admits (None: the newest release) and its hub dependencies,
    each at the newest version every requirement on it admits. ``versions`` lists a repository's published
    versions; ``fetch`` reads and checks one release."""
    from verihub.hub.ids import VersionSpec

    wanted: dict[RepoId, list[tuple[str, SpecifierSet | None]]] = {root: [("the command", spec)]}
    chosen: dict[RepoId, FetchedRelease] = {}
    while True:
        pending = [repo for repo in wanted if repo not in chosen or not _admits(wanted[repo], chosen[repo].version)]
        if not pending:
            break
        for repo in pending:
            if len(chosen) >= MAX_PACKAGES:
                raise HubError(f"installing {root} brings in more than {MAX_PACKAGES} hub packages; refused")
            published = versions(repo)
            admitted = [v for v in published if _admits(wanted[repo], v)]
            if not admitted:
                asks = "; ".join(f"{who} asks {spec_text or 'any'}" for who, spec_text in _shown(wanted[repo]))
                raise VersionNotFoundError(
                    f"no published version of {repo} satisfies every requirement on it ({asks}); "
                    f"published: {', '.join(published) or 'none'}"
                )
            version = VersionSpec.parse("latest").best(admitted)
            chosen[repo] = release = fetch(repo, version)
            for name, text in release.hub_dependencies.items():
                dependency = RepoId.parse(name)
                asked = (f"{repo}@{version}", SpecifierSet(text) if text else None)
                if asked not in wanted.setdefault(dependency, []):
                    wanted[dependency].append(asked)
    return [chosen[repo] for repo in wanted]


def _admits(asks: list[tuple[str, SpecifierSet | None]], version: str) -> bool:
    return all(spec is None or spec.contains(Version(version), prereleases=True) for _, spec in asks)


def _shown(asks: list[tuple[str, SpecifierSet | None]]) -> list[tuple[str, str]]:
    return [(who, str(spec) if spec is not None else "") for who, spec in asks]


def hub_dependency_candidates(requirement: str) -> tuple[str, list[RepoId]]:
    """A dependency's distribution name and the repositories that would publish it on a hub (``acme-rules``:
    ``acme/rules``; ``a-b-c``: ``a/b-c`` and ``a-b/c``), for a hub to say which it holds."""
    try:
        parsed = PackagingRequirement(requirement)
    except InvalidRequirement:
        return requirement, []
    name = canonicalize_name(parsed.name)
    candidates = []
    for index, char in enumerate(name):
        if char != "-":
            continue
        try:
            repo = RepoId(name[:index], name[index + 1 :])
        except ValueError:
            continue
        if dist_name(repo) == name:
            candidates.append(repo)
    return str(parsed.specifier), candidates


def wheel_requirements(wheel: bytes) -> list[str]:
    """The ``Requires-Dist`` entries of a wheel's METADATA (extras' and markers' requirements left out)."""
    with zipfile.ZipFile(io.BytesIO(wheel)) as archive:
        names = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA") and name.count("/") == 1]
        if not names or archive.getinfo(names[0]).file_size > 1 << 20:
            return []
        metadata = HeaderParser().parsestr(archive.read(names[0]).decode("utf-8", "replace"))
    found = []
    for text in metadata.get_all("Requires-Dist") or []:
        try:
            if PackagingRequirement(text).marker is None:
                found.append(text)
        except InvalidRequirement:
            continue
    return found


def check_sha256(release: str, name: str, data: bytes, recorded: str | None) -> str:
    import hashlib

    actual = hashlib.sha256(data).hexdigest()
    if recorded is None:
        raise CorruptFileError(f"{release}: no sha256 was recorded for {name} at release, so it cannot be checked")
    if actual != recorded:
        raise CorruptFileError(f"{release}: {name} does not match the sha256 recorded at release ({recorded[:16]}...)")
    return actual


# -- pins: the releases installed before, trusted on first use --------------------------------------------


class Pins:
    """``$VERIHUB_HOME/releases.json``: hub -> OWNER/NAME -> version -> {commit, sha256}."""

    def __init__(self, hub: str, path: Path | None = None) -> None:
        self.hub = hub
        self.path = path or settings.verihub_home() / "releases.json"

    def check(self, releases: list[FetchedRelease], *, allow_moved_tag: bool) -> None:
        """Refuse (or, with ``allow_moved_tag``, warn about) every release whose tag moved since it was pinned."""
        known = self._read().get(self.hub, {})
        for release in releases:
            pinned = known.get(str(release.repo), {}).get(release.version)
            if pinned is None or (pinned.get("commit"), pinned.get("sha256")) == (release.commit, release.sha256):
                continue
            message = (
                f"{release.repo}'s tag v{release.version} moved: it pointed at {str(pinned.get('commit'))[:12]} "
                f"(wheel sha256 {str(pinned.get('sha256'))[:16]}...) when it was installed from {self.hub}, and now "
                f"points at {release.commit[:12]} (wheel sha256 {release.sha256[:16]}...)"
            )
            if not allow_moved_tag:
                raise MovedTagError(
                    f"{message}; a release should never change: install it anyway with --allow-moved-tag"
                )
            logger.warning("%s; installing it as --allow-moved-tag asks", message)

    def commit(self, repo: RepoId, version: str) -> str | None:
        """The commit ``repo``'s release ``version`` was installed from, if it was."""
        found = self._read().get(self.hub, {}).get(str(repo), {}).get(version, {}).get("commit")
        return str(found) if found else None

    def record(self, releases: list[FetchedRelease]) -> None:
        with self._locked():
            pins = self._read()
            mine = pins.setdefault(self.hub, {})
            for release in releases:
                mine.setdefault(str(release.repo), {})[release.version] = {
                    "commit": release.commit,
                    "sha256": release.sha256,
                }
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            temporary.write_text(json.dumps(pins, indent=1, sort_keys=True))
            os.replace(temporary, self.path)

    def _read(self) -> dict[str, dict[str, dict[str, dict[str, str]]]]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:
            raise VerihubError(f"{self.path} is unreadable ({error}); move it aside to start the pins afresh") from None
        return data if isinstance(data, dict) else {}

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.with_name(f".{self.path.name}.lock").open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


# -- pip ------------------------------------------------------------------------------------------------

# Runs in the target interpreter: which distributions installed where pip will write own these top-level
# names? (A distribution elsewhere on sys.path, e.g. a parent environment's, is shadowed, not overwritten.)
_OWNERS = """
import json, sys, sysconfig
from importlib.metadata import distributions
from pathlib import Path
from packaging.utils import canonicalize_name
project, names = sys.argv[1], set(sys.argv[2:])
targets = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}
owners = {}
for dist in distributions():
    if canonicalize_name(dist.metadata["Name"] or "") == project:
        continue
    if Path(dist.locate_file("")).resolve() not in targets:
        continue
    for file in dist.files or []:
        if file.parts and file.parts[0] in names:
            owners[file.parts[0]] = dist.metadata["Name"]
print(json.dumps(owners))
"""


def pip_install_wheels(releases: list[FetchedRelease], *, python: str) -> None:
    """``pip install`` the releases' wheels, given as files (so pip takes each from its file, never from an
    index by name); refused first if a wheel would write into files another installed distribution owns."""
    for release in releases:
        _check_owners(release, python)
    with tempfile.TemporaryDirectory(prefix="verihub-install-") as scratch:
        paths = []
        for release in releases:
            path = Path(scratch) / release.wheel_name
            path.write_bytes(release.wheel)
            paths.append(str(path))
        command = [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", *paths]
        result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        shown = ", ".join(f"{release.repo}@{release.version}" for release in releases)
        raise VerihubError(f"pip could not install {shown}:\n{result.stderr.strip()[-1500:]}")


def _check_owners(release: FetchedRelease, python: str) -> None:
    with zipfile.ZipFile(io.BytesIO(release.wheel)) as archive:
        names = sorted(
            {name.split("/")[0] for name in archive.namelist() if ".dist-info/" not in name and ".data/" not in name}
        )
    project = dist_name(release.repo)
    found = subprocess.run([python, "-c", _OWNERS, project, *names], capture_output=True, text=True)
    if found.returncode != 0:
        raise VerihubError(f"cannot check which packages {python} has installed:\n{found.stderr.strip()[-800:]}")
    for name, owner in sorted(json.loads(found.stdout).items()):
        raise VerihubError(
            f"installing {project} would overwrite {name!r}, which {owner} installed; uninstall that first"
        )
