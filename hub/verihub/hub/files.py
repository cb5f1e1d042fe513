"""Published files: the wheels and sdists pip downloads, each written once with the index entry recorded
when it was published. This is derived state: :mod:`verihub.hub.release` writes it from release tags,
and writing it again is harmless, so a retry or a restart completes what a crash left half done.

Layout under the hub's root::

    claims/<project>                  the repository that publishes the distribution <project> (written once)
    files/<project>/<filename>        the file (written once), and <filename>.metadata beside a wheel
    index/<project>/<filename>.json   its index entry: sha256, version, requires-python, upload time
    simple/<project>/index.html|json  its index pages (PEP 503, PEP 691), rewritten whole after each publish
    simple/index.html                 the root page (PEP 503)

A file is listed once its entry exists, and its entry is written after the file: a reader never sees an
entry without its file, and a file whose bytes differ from its entry's sha256 is never served.
"""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Literal

from packaging.utils import canonicalize_name
from packaging.version import Version

from verihub.errors import UsageError
from verihub.hub.errors import CorruptFileError, FileConflictError, NameTakenError, NotFoundError
from verihub.hub.index import IndexFile, describe, project_json, project_page, root_page
from verihub.ids import RepoId

__all__ = ["PublishedFiles"]

_FILENAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,250}$")
_PAGES = {"html": "index.html", "json": "index.json"}  # under simple/<project>/


class PublishedFiles:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        for folder in ("claims", "files", "index", "simple", "locks"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)

    # -- who publishes a distribution name ----------------------------------------------------------

    def holder(self, project: str) -> RepoId | None:
        """The repository that publishes ``project``, if any has."""
        path = self.root / "claims" / project
        return RepoId.parse(path.read_text().strip()) if _valid_project(project) and path.is_file() else None

    def check_claim(self, project: str, repo: RepoId, shown: Callable[[RepoId], bool] = lambda _: False) -> None:
        """Refuse if another repository publishes ``project`` (``a-b/c`` and ``a/b-c`` both normalize to it); the
        message names it only where ``shown`` says the caller may see it (a private one is no one's business)."""
        holder = self.holder(project)
        if holder is not None and holder != repo:
            who = str(holder) if shown(holder) else "another repository"
            raise NameTakenError(f"{repo} would publish as {project!r}, which {who} already uses; rename the package")

    def claim(self, project: str, repo: RepoId) -> None:
        self.check_claim(project, repo)
        try:
            _write_once(self.root / "claims" / project, str(repo).encode())
        except FileConflictError:  # another repository claimed it a moment ago
            self.check_claim(project, repo)

    # -- writing --------------------------------------------------------------------------------------

    def put(self, project: str, version: str, filename: str, data: bytes) -> IndexFile:
        """Publish ``filename`` once: a second put of the same bytes is a no-op, of other bytes a
        FileConflictError (published files never change)."""
        if not _FILENAME.match(filename):
            raise UsageError(f"not a publishable file name: {filename!r}")
        sha256 = hashlib.sha256(data).hexdigest()
        existing = self.recorded(project, filename)
        if existing is not None:
            if existing.sha256 != sha256:
                raise FileConflictError(
                    f"{filename} was published with sha256 {existing.sha256}; published files "
                    "never change: bump the version"
                )
            return existing
        stamp = datetime.datetime.now(datetime.UTC).isoformat()
        entry, metadata = describe(filename, version, data, stamp)
        (self.root / "files" / project).mkdir(exist_ok=True)
        (self.root / "index" / project).mkdir(exist_ok=True)
        _write_once(self.root / "files" / project / filename, data)
        if metadata is not None:
            _write_once(self.root / "files" / project / f"{filename}.metadata", metadata)
        _write_once(self._entry_path(project, filename), json.dumps(asdict(entry), sort_keys=True).encode())
        return entry

    def write_static_index(self, project: str) -> None:
        """Rewrite the project's index pages (PEP 503 HTML, PEP 691 JSON) and the root page from the entries.
        Links are relative (``../../files/…``), so the same bytes serve ``pip install --index-url
        file://…/simple/`` and the server's ``/simple/``, where a request reads one file whatever the
        number of versions."""
        with self._locked("simple-index"):
            entries = self.entries(project, "../../files")
            versions = sorted({entry.version for entry in entries}, key=Version)
            page = self.root / "simple" / project
            page.mkdir(exist_ok=True)
            _write_atomic(page / _PAGES["json"], json.dumps(project_json(project, entries, versions)).encode())
            _write_atomic(page / _PAGES["html"], project_page(project, entries).encode())
            _write_atomic(self.root / "simple" / "index.html", root_page(self.projects()).encode())

    def write_missing_pages(self) -> list[str]:
        """Write the pages of every project that has entries but no pages (a hub directory from before
        pages were written at publish); returns those projects."""
        missing = [
            project
            for project in self.projects()
            if not all((self.root / "simple" / project / name).is_file() for name in _PAGES.values())
        ]
        for project in missing:
            self.write_static_index(project)
        return missing

    @contextmanager
    def locked(self, project: str) -> Iterator[None]:
        """Serialize publishers of one project (across threads and processes)."""
        with self._locked(f"project--{project}"):
            yield

    # -- reading --------------------------------------------------------------------------------------

    def recorded(self, project: str, filename: str) -> IndexFile | None:
        path = self._entry_path(project, filename)
        if not (_valid_project(project) and _FILENAME.match(filename) and path.is_file()):
            return None
        return IndexFile(**json.loads(path.read_bytes()))

    def entries(self, project: str, url_prefix: str) -> list[IndexFile]:
        """The published files of ``project``, with the entries recorded when they were published."""
        folder = self.root / "index" / project
        if not _valid_project(project) or not folder.is_dir():
            return []
        found = []
        for path in sorted(folder.glob("*.json")):
            entry = IndexFile(**json.loads(path.read_bytes()))
            found.append(IndexFile(**{**asdict(entry), "url": f"{url_prefix}/{project}/{entry.filename}"}))
        return found

    def projects(self) -> list[str]:
        return sorted(
            path.name for path in (self.root / "index").iterdir() if path.is_dir() and any(path.glob("*.json"))
        )

    def page(self, project: str, form: Literal["html", "json"]) -> bytes:
        """The index page of ``project`` as written at its last publish; NotFoundError if it has none."""
        if not _valid_project(project):
            raise NotFoundError(f"no project {project}")
        try:
            return (self.root / "simple" / project / _PAGES[form]).read_bytes()
        except FileNotFoundError:
            raise NotFoundError(f"no project {project}") from None

    def read(self, project: str, filename: str) -> bytes:
        """A published file (or a wheel's ``.metadata``), checked against the sha256 recorded at publish."""
        base = filename.removesuffix(".metadata")
        entry = self.recorded(project, base)
        wanted = (
            entry.metadata_sha256
            if entry is not None and filename.endswith(".metadata")
            else entry.sha256
            if entry is not None
            else None
        )
        if wanted is None:
            raise NotFoundError(f"no file {filename!r} for {project}")
        try:
            data = (self.root / "files" / project / filename).read_bytes()
        except FileNotFoundError:
            raise CorruptFileError(f"{project}/{filename} is recorded as published but its bytes are gone") from None
        if hashlib.sha256(data).hexdigest() != wanted:
            raise CorruptFileError(f"{project}/{filename} no longer matches the sha256 recorded when it was pushed")
        return data

    def wheel(self, project: str, version: str) -> bytes | None:
        """The published wheel of ``project`` ``version``, verified; None if there is none."""
        for entry in self.entries(project, ""):
            if entry.version == version and entry.filename.endswith(".whl"):
                return self.read(project, entry.filename)
        return None

    # -- internals ------------------------------------------------------------------------------------

    def _entry_path(self, project: str, filename: str) -> Path:
        return self.root / "index" / project / f"{filename}.json"

    @contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        with (self.root / "locks" / f"{name}.lock").open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _valid_project(project: str) -> bool:
    return bool(_FILENAME.match(project)) and canonicalize_name(project) == project


def _write_once(path: Path, data: bytes) -> None:
    """Create ``path`` holding ``data``, complete or not at all; FileConflictError if it holds other bytes."""
    if path.exists():
        if path.read_bytes() != data:
            raise FileConflictError(f"{path.name} exists with other content; published files are written once")
        return
    temporary = _temporary(path)
    try:
        temporary.write_bytes(data)
        with temporary.open("rb") as handle:
            os.fsync(handle.fileno())
        os.link(temporary, path)  # fails if the name exists: never replaces
    except FileExistsError:
        if path.read_bytes() != data:
            raise FileConflictError(
                f"{path.name} exists with other content; published files are written once"
            ) from None
    finally:
        temporary.unlink(missing_ok=True)


def _write_atomic(path: Path, data: bytes) -> None:
    temporary = _temporary(path)
    temporary.write_bytes(data)
    os.replace(temporary, path)


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
