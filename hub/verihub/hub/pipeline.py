"""One publishing pipeline for both hubs, over a small backend seam.

:class:`Hub` validates, builds, publishes and installs a package the same way whether the hub is a
directory (:class:`~verihub.hub.local.LocalHub`) or a server (:class:`~verihub.hub.remote.RemoteHub`).
A backend supplies the primitives below and translates its own failures into :mod:`verihub.hub.errors`
at the seam, so ``push`` and ``install`` see one set of exceptions.

A push that finds its version already tagged tags it again: that is a no-op for a complete release and
completes one that a crash left half published (see :mod:`verihub.hub.release`).
"""

from __future__ import annotations

import hashlib
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from verihub.hub.build import Bump, prepare
from verihub.hub.errors import HubError, TagExistsError, VersionExistsError
from verihub.hub.ids import Requirement, release_versions
from verihub.hub.install import pip_install
from verihub.hub.storage import RepoKind
from verihub.ids import RepoId

if TYPE_CHECKING:
    from verihub.hub.results_push import ResultsPushed

__all__ = ["Hub", "Published", "PushResult", "blob_id"]

COMMIT_ATTEMPTS = 5  # commits tried while concurrent pushes move the branch


@dataclass(frozen=True)
class PushResult:
    repo: RepoId
    version: str
    commit: str
    created: bool  # False: identical content was already published (a no-op)
    files: tuple[str, ...]


@dataclass(frozen=True)
class Published:
    """A release tag as a hub holds it: its commit and the git blob ids of its files outside ``dist/``."""

    commit: str
    source: dict[str, str]


class Hub(ABC):
    """A hub a command talks to: ``push``, ``versions``, ``resolve`` and ``install`` over the primitives."""

    # -- the pipeline ---------------------------------------------------------------------------------

    def push(
        self,
        path: str | Path,
        *,
        owner: str | None = None,
        bump: Bump | None = None,
        validate: bool = True,
        private: bool = False,
    ) -> PushResult:
        """Validate, build and publish the package at ``path`` as ``owner/<its name>``, tagged ``v{version}``.
        The same content again is a no-op; other content under a published version is refused."""
        prepared = prepare(path, owner or self._default_owner(), bump=bump, validate=validate)
        repo, version, tag = prepared.repo, prepared.version, f"v{prepared.version}"
        self._ensure_repo(repo, prepared.source.kind, private=private)
        published = self._published(repo, tag)
        if published is None:
            built = prepared.source.build(repo)
            if prepared.source.kind == "env":
                built.check_environment()
            uploads = {**prepared.files, **{f"dist/{name}": data for name, data in built.files.items()}}
            commit = self._commit_exactly(repo, uploads, f"{repo} {version}")
            try:
                self._tag(repo, tag, commit)
                return PushResult(repo, version, commit, True, tuple(built.files))
            except TagExistsError:  # a concurrent push of this version tagged first
                published = self._published(repo, tag)
                if published is None:
                    raise
        if published.source != {name: blob_id(content) for name, content in prepared.files.items()}:
            raise VersionExistsError(
                f"{repo} {version} is already published with different content; versions never "
                "change: bump it (verihub push --bump patch|minor|major)"
            )
        self._tag(repo, tag, published.commit)
        return PushResult(repo, version, published.commit, False, ())

    def _commit_exactly(self, repo: RepoId, files: dict[str, bytes], message: str) -> str:
        """A commit holding exactly ``files``, checked: a hub may answer an upload that changes nothing with
        its branch head, which a concurrent push may have moved to other content (never tag that)."""
        wanted = {name: blob_id(content) for name, content in files.items()}
        for _ in range(COMMIT_ATTEMPTS):
            commit = self._upload(repo, files, message)
            if self._contents(repo, commit) == wanted:
                return commit
        raise HubError(f"could not commit {repo}: concurrent pushes kept moving its main branch; try again")

    def _published(self, repo: RepoId, tag: str) -> Published | None:
        commit = self._tag_target(repo, tag)
        if commit is None:
            return None
        source = {path: blob for path, blob in self._contents(repo, commit).items() if not path.startswith("dist/")}
        return Published(commit, source)

    def versions(self, repo: RepoId) -> list[str]:
        """The published versions of ``repo``, oldest first."""
        return release_versions(self._tags(repo))

    def resolve(self, requirement: Requirement) -> str:
        return requirement.spec.best(self.versions(requirement.repo))

    def install(self, requirement: str | Requirement, *, python: str = sys.executable) -> tuple[RepoId, str]:
        """pip-install ``owner/name[@spec]`` from this hub's index (pip checks every file's sha256)."""
        wanted = Requirement.parse(requirement) if isinstance(requirement, str) else requirement
        version = self.resolve(wanted)
        pip_install(self._pip_index_url(), wanted.repo, version, python=python, wheel=self._wheel(wanted.repo, version))
        return wanted.repo, version

    def push_results(self, out: str | Path, environment: RepoId | None = None) -> ResultsPushed:
        """Push the eval results in ``out`` (what ``verihub eval --out`` wrote) to a results dataset linked to
        ``environment`` (default: the pusher's environment of that id; see :mod:`verihub.hub.results_push`)."""
        from verihub.hub.results_push import push_results

        return push_results(self, Path(out), environment)

    # -- the backend's primitives ----------------------------------------------------------------------

    @abstractmethod
    def _default_owner(self) -> str: ...

    @abstractmethod
    def _ensure_repo(self, repo: RepoId, kind: RepoKind, *, private: bool) -> None:
        """Create ``repo`` if needed; PrivacyMismatchError if ``private`` is asked of a public one."""

    @abstractmethod
    def _tag_target(self, repo: RepoId, tag: str) -> str | None:
        """The commit ``tag`` points at (None: no such tag)."""

    @abstractmethod
    def _contents(self, repo: RepoId, commit: str) -> dict[str, str]:
        """Every file of ``commit``: path -> git blob id."""

    @abstractmethod
    def _upload(self, repo: RepoId, files: dict[str, bytes], message: str) -> str:
        """Commit exactly ``files`` to the main branch; the resulting commit's id."""

    @abstractmethod
    def _tag(self, repo: RepoId, tag: str, commit: str) -> None:
        """Tag ``commit`` (publishing a release tag's files); TagExistsError if the tag is elsewhere."""

    @abstractmethod
    def _tags(self, repo: RepoId) -> list[str]: ...

    @abstractmethod
    def _wheel(self, repo: RepoId, version: str) -> bytes | None:
        """The published wheel of ``version``, checked against its recorded sha256 (None if there is none)."""

    @abstractmethod
    def _pip_index_url(self) -> str:
        """The index URL pip installs from, with the credentials it needs."""

    # results datasets (verihub eval --push)

    @abstractmethod
    def _identity(self) -> tuple[str, tuple[str, ...]]:
        """Who pushes: their user name and the namespaces they may write to."""

    @abstractmethod
    def _is_private(self, repo: RepoId, kind: RepoKind) -> bool:
        """Whether ``repo`` is private; RepoNotFoundError if there is none of ``kind`` that the caller can see."""

    @abstractmethod
    def _files_at_main(self, repo: RepoId, kind: RepoKind) -> tuple[str | None, dict[str, str]]:
        """The main branch's commit (None before the first) and its files: path -> git blob id."""

    @abstractmethod
    def _read_file(self, repo: RepoId, path: str, kind: RepoKind, revision: str) -> bytes: ...

    @abstractmethod
    def _commit_files(
        self, repo: RepoId, kind: RepoKind, files: dict[str, bytes], message: str, *, parent: str | None
    ) -> str:
        """Add ``files`` to main in one commit on top of ``parent``; CommitConflictError if main moved."""


def blob_id(content: bytes) -> str:
    """The git blob id of ``content``: how both hubs tell whether a published file changed."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()
