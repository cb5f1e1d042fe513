"""Releases: a release tag ``v{version}`` is the one source of truth for a published version.

Everything pip sees (the distribution-name claim, the files, their index entries, the static pages) is
derived from the tagged commit's ``dist/`` by :meth:`Releases.complete`, an idempotent step that runs on
every tag (a retried push or tag included) and, at server start, for every release the journal names. The
journal entry is written before the tag and removed after the index is complete, so a crash at any point
leaves either no tag (nothing was published; a retry publishes) or a tag whose files the next retry or
restart publishes, exactly once, with the bytes the tag holds.

A release tag publishes only its own version's files (``dist/`` may still hold older builds) and only under
the repository's own distribution name; published files are written once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename, parse_wheel_filename
from packaging.version import Version

from verihub.hub.archives import check_archive
from verihub.hub.errors import FileConflictError, HubError, InvalidReleaseError, RepoNotFoundError, TagExistsError
from verihub.hub.files import PublishedFiles
from verihub.hub.ids import release_version
from verihub.hub.roles import role_of
from verihub.hub.storage import HubStorage
from verihub.ids import RepoId, dist_name

__all__ = ["Releases"]


class Releases:
    def __init__(self, storage: HubStorage, files: PublishedFiles) -> None:
        self.storage, self.files = storage, files
        self._journal = storage.root / "journal"
        self._journal.mkdir(exist_ok=True)

    def tag(self, repo: RepoId, tag: str, revision: str) -> bool:
        """Point ``tag`` at ``revision``; for a release tag, publish its files. False if the tag was there
        already, in which case publishing is completed (the retry of a push that crashed)."""
        sha = self.storage.resolve(repo, revision)
        version = release_version(tag)
        if version is None:
            return self.storage.tag(repo, tag, sha)
        if self.storage.tag_target(repo, tag) == sha and not self._journal_path(repo, tag).exists():
            return False  # tagged and fully published: nothing to read (or unpack) again
        dists = self._release_files(repo, sha, version)  # refused here, before anything exists
        with self._in_flight(repo, tag):
            existing = self.storage.tag_target(repo, tag)
            if existing is not None and existing != sha:  # what a second publisher of this version hears first
                raise TagExistsError(
                    f"{repo}: tag {tag!r} already exists (at {existing[:12]}) and tags never move", commit=existing
                )
            self._check_earlier_release(repo, version, dists)
            if dists:
                project = dist_name(repo)
                self.files.check_claim(project, repo, shown=self._public)
                for name, data in dists.items():
                    self._check_unpublished_or_same(project, name, data)
                self._journal_add(repo, tag)
            created = self.storage.tag(repo, tag, sha)  # from here on the version exists
            self.complete(repo, tag, (sha, dists))
        return created

    def complete(self, repo: RepoId, tag: str, known: tuple[str, dict[str, bytes]] | None = None) -> None:
        """Publish what the release tag ``tag`` holds, where it is not published yet (idempotent). ``known``:
        the commit the caller just tagged and its release files, so they are not read twice."""
        sha = self.storage.tag_target(repo, tag)
        version = release_version(tag)
        if sha is not None and version is not None:
            dists = known[1] if known is not None and known[0] == sha else self._release_files(repo, sha, version)
            if dists:
                project = dist_name(repo)
                with self.files.locked(project):
                    self.files.claim(project, repo)
                    for name, data in sorted(dists.items()):
                        self.files.put(project, version, name, data)
                    self.files.write_static_index(project)
        self._journal_done(repo, tag)

    def recover(self) -> list[str]:
        """Complete every release the journal names (run at start); returns the problems it could not fix."""
        problems = []
        for path in sorted(self._journal.glob("*.json")):
            try:
                record = json.loads(path.read_bytes())
                repo, tag = RepoId.parse(record["repo"]), record["tag"]
            except (OSError, ValueError, KeyError):  # gone meanwhile, or unreadable: nothing to complete
                continue
            try:
                with self._in_flight(repo, tag, wait=False):
                    self.complete(repo, tag)
            except BlockingIOError:  # a live publisher holds it and completes it itself
                continue
            except RepoNotFoundError:  # deleted since: nothing left to publish
                path.unlink(missing_ok=True)
            except HubError as error:
                problems.append(f"{repo} {tag}: {error}")
        return problems

    def rebuild_legacy_index(self) -> list[str]:
        """A hub directory from before releases were the truth (it has ``dists.json``): keep its name claims,
        then derive the index of every release tag. Runs once; returns the problems it could not fix."""
        legacy = self.storage.root / "dists.json"
        if not legacy.is_file():
            return []
        problems = []
        for project, holder in json.loads(legacy.read_text()).items():
            try:
                self.files.claim(project, RepoId.parse(holder))
            except (HubError, ValueError) as error:
                problems.append(f"claim of {project}: {error}")
        for repo in self.storage.repos():
            for tag in self.storage.refs(repo)["tags"]:
                if release_version(tag) is not None:
                    try:
                        self.complete(repo, tag)
                    except HubError as error:
                        problems.append(f"{repo} {tag}: {error}")
        legacy.rename(legacy.with_name("dists.json.migrated"))
        return problems

    # -- internals ------------------------------------------------------------------------------------

    def _release_files(self, repo: RepoId, sha: str, version: str) -> dict[str, bytes]:
        """The wheel and sdist of ``version`` in the commit's ``dist/``; InvalidReleaseError if ``dist/``
        holds another project's files or an archive :func:`~verihub.hub.archives.check_archive` refuses. Eval
        results (:mod:`verihub.hub.roles`) publish nothing, whatever their ``dist/`` holds; a repository without a
        ``dist/`` (another framework's dataset) has nothing to publish."""
        files = self.storage.files(repo, sha)
        if role_of(entry.path for entry in files) == "results":
            return {}
        project = dist_name(repo)
        wanted = Version(version)
        own: dict[str, bytes] = {}
        for entry in files:
            name = entry.path.removeprefix("dist/")
            if name == entry.path or "/" in name or not name.endswith((".whl", ".tar.gz")):
                continue
            parsed = _project_and_version(name)
            if parsed is None or parsed[0] != project:
                raise InvalidReleaseError(
                    f"{name!r} is not a distribution of {project!r}: {repo} can only publish {project}"
                )
            if parsed[1] == wanted:
                own[name] = self.storage.read(repo, entry.path, sha)
        for name, data in own.items():
            check_archive(name, data)
        return own

    def _check_earlier_release(self, repo: RepoId, version: str, dists: dict[str, bytes]) -> None:
        """A version published before (by this repository before it was deleted and made again) is tagged
        again only on the files it was published with: else the tag and pip's index would disagree."""
        project = dist_name(repo)
        if self.files.holder(project) != repo:
            return
        earlier = [
            entry.filename for entry in self.files.entries(project, "") if Version(entry.version) == Version(version)
        ]
        missing = sorted(set(earlier) - set(dists))
        if missing:
            raise FileConflictError(
                f"{project} {version} was published before with {', '.join(missing)}, which this "
                "commit's dist/ does not hold; a published version never changes: bump the version"
            )

    def _public(self, repo: RepoId) -> bool:
        try:
            return not self.storage.is_private(repo)
        except RepoNotFoundError:
            return False

    def _check_unpublished_or_same(self, project: str, name: str, data: bytes) -> None:
        recorded = self.files.recorded(project, name)
        if recorded is not None and recorded.sha256 != hashlib.sha256(data).hexdigest():
            raise FileConflictError(
                f"{name} was published with sha256 {recorded.sha256}; published files never change: bump the version"
            )

    def _journal_path(self, repo: RepoId, tag: str) -> Path:
        key = hashlib.sha256(f"{repo} {tag}".encode()).hexdigest()[:24]
        return self._journal / f"{key}.json"

    @contextmanager
    def _in_flight(self, repo: RepoId, tag: str, *, wait: bool = True) -> Iterator[None]:
        """Held by a publisher from its journal entry to its completion; a crashed process lets go of it, so
        recovery completes exactly the releases nobody is completing (BlockingIOError without ``wait``)."""
        with (self.storage.root / "locks" / f"release-{self._journal_path(repo, tag).stem}.lock").open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _journal_done(self, repo: RepoId, tag: str) -> None:
        self._journal_path(repo, tag).unlink(missing_ok=True)

    def _journal_add(self, repo: RepoId, tag: str) -> None:
        path = self._journal_path(repo, tag)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        temporary.write_text(json.dumps({"repo": str(repo), "tag": tag}))
        os.replace(temporary, path)


def _project_and_version(name: str) -> tuple[str, Version] | None:
    try:
        if name.endswith(".whl"):
            project, version, _, _ = parse_wheel_filename(name)
        else:
            project, version = parse_sdist_filename(name)
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None
    return str(project), version
