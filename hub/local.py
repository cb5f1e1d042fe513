"""The embedded hub: a directory (``$VERIHUB_HOME/hub``) that publishes and installs without a server.

Layout: ``repos/`` (git storage, one repository per package, tags ``v{version}``), ``files/`` (the
wheels and sdists pip downloads) and ``simple/`` (a static PEP 503 index over them, regenerated on
every push). ``pip install --index-url file://…/simple/ NAME==V`` works as it is.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from verihub import settings
from verihub.errors import VerihubError
from verihub.hub.build import Bump, dist_name, prepare
from verihub.hub.ids import RepoId, Requirement, VersionSpec
from verihub.hub.index import IndexFile, index_file, project_page, root_page
from verihub.hub.install import pip_install
from verihub.hub.storage import HubStorage, RepoKind

__all__ = ["CorruptFileError", "LocalHub", "PushResult", "VersionExistsError"]


class CorruptFileError(VerihubError, RuntimeError):
    """A stored file's bytes no longer match the hash recorded at push."""


class VersionExistsError(VerihubError, ValueError):
    """A published version is immutable; the message says to bump."""


@dataclass(frozen=True)
class PushResult:
    repo: RepoId
    version: str
    commit: str
    created: bool  # False: identical content was already published (a no-op)
    files: tuple[str, ...]


class LocalHub:
    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else settings.verihub_home() / "hub"
        self.storage = HubStorage(self.root)
        (self.root / "files").mkdir(exist_ok=True)
        (self.root / "simple").mkdir(exist_ok=True)

    @property
    def index_url(self) -> str:
        return (self.root / "simple").resolve().as_uri() + "/"

    # -- publishing -----------------------------------------------------------------------------------

    def push(self, path: str | Path, *, owner: str | None = None, bump: Bump | None = None,
             validate: bool = True) -> PushResult:
        """Validate, build and publish the package at ``path`` as ``owner/<its name>`` version ``v{version}``."""
        prepared = prepare(path, owner or settings.hub_owner(), bump=bump, validate=validate)
        source, repo, version, files = prepared.source, prepared.repo, prepared.version, prepared.files
        tag = f"v{version}"
        self.storage.create_repo(repo, source.kind, exist_ok=True)
        if tag in self.storage.refs(repo)["tags"]:
            published = {entry.path: entry.blob for entry in self.storage.files(repo, tag) if not entry.path.startswith("dist/")}
            if published == {name: blob_id(content) for name, content in files.items()}:
                return PushResult(repo, version, self.storage.resolve(repo, tag), False, ())
            raise VersionExistsError(f"{repo} {version} is already published with different content; versions never "
                                     "change: bump it (verihub push --bump patch|minor|major)")
        self._claim(repo)
        built = source.build(repo)
        if source.kind == "env":
            built.check_environment()
        commit = self.storage.commit(repo, {**files, **{f"dist/{name}": data for name, data in built.files.items()}},
                                     f"{repo} {version}", replace=True)
        self.storage.tag(repo, tag, commit)
        self.publish(repo, built.files)
        return PushResult(repo, version, commit, True, tuple(built.files))

    @staticmethod
    def check_dists(repo: RepoId, dists: dict[str, bytes]) -> None:
        """Refuse files that are not wheels or sdists of the repository's own distribution."""
        project = dist_name(repo)
        for name, data in dists.items():
            if not name.endswith((".whl", ".tar.gz")) or canonicalize_name(name.split("-")[0]) != project:
                raise VerihubError(f"{name!r} is not a distribution of {project!r}: {repo} can only publish {project}")
            unsafe = _unsafe_member(name, data)
            if unsafe is not None:
                raise VerihubError(f"{name} is refused: {unsafe}")

    def publish(self, repo: RepoId, dists: dict[str, bytes]) -> None:
        """Put a version's wheel and sdist in the pip index. Their names must be the repository's
        distribution (``owner-name``): nobody publishes someone else's package name."""
        self.check_dists(repo, dists)
        project = dist_name(repo)
        self._claim(repo)
        folder = self.root / "files" / project
        folder.mkdir(exist_ok=True)
        for name, data in dists.items():
            (folder / name).write_bytes(data)
            (folder / f"{name}.sha256").write_text(hashlib.sha256(data).hexdigest())  # the hash at upload
        self._write_index(project)

    def _claim(self, repo: RepoId) -> None:
        """One distribution name per repository: owner-name normalizes, so a-b/c and a/b-c would collide."""
        claims_path = self.root / "dists.json"
        claims = json.loads(claims_path.read_text()) if claims_path.exists() else {}
        project = dist_name(repo)
        holder = claims.setdefault(project, str(repo))
        if holder != str(repo):
            raise VerihubError(f"{repo} would publish as {project!r}, which {holder} already uses; rename the package")
        claims_path.write_text(json.dumps(claims, indent=2, sort_keys=True))

    def index_entries(self, project: str, url_prefix: str = "../../files") -> list[IndexFile]:
        """The files of ``project`` with the hashes recorded when they were pushed."""
        folder = self.root / "files" / project
        entries = []
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            if path.suffix in (".metadata", ".sha256"):
                continue
            stamp = datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.UTC).isoformat()
            recorded = (folder / f"{path.name}.sha256").read_text().strip()
            entries.append(index_file(path.name, path.read_bytes(), f"{url_prefix}/{project}/{path.name}", stamp, recorded))
        return entries

    def verified_file(self, project: str, filename: str) -> bytes:
        """A stored file, checked against the hash recorded at push: corruption is an error, never served."""
        folder = self.root / "files" / canonicalize_name(project)
        path = folder / filename
        if "/" in filename or filename.startswith(".") or not path.is_file() or filename.endswith(".sha256"):
            raise FileNotFoundError(f"no file {filename!r} for {project}")
        data = path.read_bytes()
        if filename.endswith(".metadata"):
            return data
        if hashlib.sha256(data).hexdigest() != (folder / f"{filename}.sha256").read_text().strip():
            raise CorruptFileError(f"{project}/{filename} no longer matches the sha256 recorded when it was pushed")
        return data

    def _write_index(self, project: str) -> None:
        folder = self.root / "files" / project
        entries = self.index_entries(project)
        for entry in entries:
            if entry.metadata is not None:
                (folder / f"{entry.filename}.metadata").write_bytes(entry.metadata)
        page = self.root / "simple" / project
        page.mkdir(exist_ok=True)
        (page / "index.html").write_text(project_page(project, entries))
        projects = [p.name for p in (self.root / "simple").iterdir() if p.is_dir()]
        (self.root / "simple" / "index.html").write_text(root_page(projects))

    # -- reading --------------------------------------------------------------------------------------

    def versions(self, repo: RepoId) -> list[str]:
        tags = self.storage.refs(repo)["tags"]
        return sorted((tag[1:] for tag in tags if tag.startswith("v")), key=_version_key)

    def resolve(self, requirement: Requirement) -> str:
        return requirement.spec.best(self.versions(requirement.repo))

    def info(self, repo: RepoId) -> dict[str, Any]:
        kind = self.storage.kind_of(repo)
        versions = self.versions(repo)
        latest = VersionSpec.parse("latest").best(versions) if versions else None
        card = self.storage.read(repo, "README.md", f"v{latest}").decode("utf-8", "replace") if latest else ""
        return {"repo": str(repo), "kind": kind, "versions": versions, "latest": latest, "card": card,
                "distribution": dist_name(repo), "install": f"verihub install {repo}@{latest}"}

    def search(self, query: str = "", kind: RepoKind | None = None) -> list[dict[str, Any]]:
        words = query.lower().split()
        found = []
        for repo, repo_kind in self.storage.repos(kind):
            versions = self.versions(repo)
            if not versions:
                continue
            latest = VersionSpec.parse("latest").best(versions)
            card = self.storage.read(repo, "README.md", f"v{latest}").decode("utf-8", "replace") if latest else ""
            haystack = f"{repo} {card}".lower()
            if all(word in haystack for word in words):
                found.append({"repo": str(repo), "kind": repo_kind, "latest": latest, "summary": _summary(card)})
        return found

    # -- installing -----------------------------------------------------------------------------------

    def install(self, requirement: str | Requirement, *, python: str = sys.executable) -> tuple[RepoId, str]:
        """pip-install ``owner/name[@spec]`` from this hub's index (pip checks every file's sha256)."""
        wanted = Requirement.parse(requirement) if isinstance(requirement, str) else requirement
        version = self.resolve(wanted)
        project = dist_name(wanted.repo)
        wheels = sorted((self.root / "files" / project).glob(f"{project.replace('-', '_')}-{version}-*.whl"))
        wheel = self.verified_file(project, wheels[0].name) if wheels else None
        pip_install(self.index_url, wanted.repo, version, python=python, wheel=wheel)
        return wanted.repo, version


def _unsafe_member(name: str, data: bytes) -> str | None:
    """Why an archive is unsafe to unpack (absolute paths, '..', links out of it), or None."""
    import io
    import tarfile

    try:
        if name.endswith(".whl"):
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                members = archive.namelist()
                links: list[str] = []
        else:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
                entries = archive.getmembers()
                members = [entry.name for entry in entries]
                links = [entry.linkname for entry in entries if entry.issym() or entry.islnk()]
    except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError):
        return "it is not a valid archive"
    for member in [*members, *links]:
        parts = member.replace("\\", "/").split("/")
        if member.startswith("/") or ".." in parts or (len(member) > 1 and member[1] == ":"):
            return f"it holds the path {member!r}, which points outside the archive"
    return None


def blob_id(content: bytes) -> str:
    """The git blob id of ``content``: how both hubs tell whether a published file changed."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def _version_key(version: str) -> Any:
    from packaging.version import Version

    return Version(version)


def card_body(card: str) -> str:
    """A README card without its YAML front-matter."""
    return re.sub(r"^---\n.*?\n---\n", "", card, flags=re.DOTALL).strip()


def _summary(card: str) -> str:
    for line in card_body(card).splitlines():
        if line.strip() and not line.startswith("#"):
            return line.strip()[:160]
    return ""
