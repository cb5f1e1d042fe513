"""The embedded hub: a directory (``$VERIHUB_HOME/hub``) that publishes and installs without a server.

Layout: ``repos/`` (git storage, one dataset repository per package, release tags ``v{version}``: the truth),
and the pip index derived from the tags (``claims/``, ``files/``, ``index/`` and a static PEP 503 ``simple/``,
see :mod:`verihub.hub.files`). ``pip install --index-url file://…/simple/ NAME==V`` works as it is. A server
(``verihub hub serve --data DIR``) can serve the same directory.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from verihub import settings
from verihub.hub import cards
from verihub.hub.build import Bump
from verihub.hub.errors import (
    CorruptFileError,
    PrivacyMismatchError,
    RevisionNotFoundError,
    VersionExistsError,
)
from verihub.hub.files import PublishedFiles
from verihub.hub.ids import Requirement, VersionSpec
from verihub.hub.pipeline import Hub, PushResult, blob_id
from verihub.hub.release import Releases
from verihub.hub.roles import PACKAGE_ROLES, Role, role_of
from verihub.hub.storage import HubStorage
from verihub.ids import RepoId, dist_name

__all__ = ["CorruptFileError", "LocalHub", "PushResult", "VersionExistsError", "blob_id", "card_body"]


class LocalHub(Hub):
    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else settings.verihub_home() / "hub"
        self.storage = HubStorage(self.root)
        self.files = PublishedFiles(self.root)
        self.releases = Releases(self.storage, self.files)
        self.location = str(self.root.resolve())

    @property
    def index_url(self) -> str:
        return (self.root / "simple").resolve().as_uri() + "/"

    def push(
        self,
        path: str | Path,
        *,
        owner: str | None = None,
        bump: Bump | None = None,
        validate: bool = True,
        private: bool = False,
    ) -> PushResult:
        self.releases.recover()  # first finish any release a crashed push left half published
        return super().push(path, owner=owner, bump=bump, validate=validate, private=private)

    def install(
        self, requirement: str | Requirement, *, python: str = sys.executable, allow_moved_tag: bool = False
    ) -> tuple[RepoId, str]:
        self.releases.recover()
        return super().install(requirement, python=python, allow_moved_tag=allow_moved_tag)

    # -- reading --------------------------------------------------------------------------------------

    def info(self, repo: RepoId) -> dict[str, Any]:
        versions = self.versions(repo)
        latest = VersionSpec.parse("latest").best(versions) if versions else None
        card = self.storage.read(repo, "README.md", f"v{latest}").decode("utf-8", "replace") if latest else ""
        return {
            "repo": str(repo),
            "kind": self._role(repo, f"v{latest}" if latest else "main"),
            "versions": versions,
            "latest": latest,
            "card": card,
            "distribution": dist_name(repo),
            "install": f"verihub install {repo}@{latest}",
        }

    def search(self, query: str = "", kind: Role | None = None) -> list[dict[str, Any]]:
        """Published packages whose id or card holds every word of ``query``."""
        words = query.lower().split()
        found = []
        for repo in self.storage.repos():
            versions = self.versions(repo)
            if not versions:
                continue
            latest = VersionSpec.parse("latest").best(versions)
            role = self._role(repo, f"v{latest}")
            if role not in PACKAGE_ROLES or (kind and role != kind):
                continue
            card = self.storage.read(repo, "README.md", f"v{latest}").decode("utf-8", "replace")
            haystack = f"{repo} {card}".lower()
            if all(word in haystack for word in words):
                found.append({"repo": str(repo), "kind": role, "latest": latest, "summary": cards.summary(card)})
        return found

    def _datasets_tagged(self, tags: list[str], query: str) -> list[tuple[str, list[str], str]]:
        found = []
        for repo in self.storage.repos():
            try:
                card = self.storage.read(repo, "README.md", "main").decode("utf-8", "replace")
            except (FileNotFoundError, RevisionNotFoundError):
                continue
            own, summary = cards.tags(card), cards.summary(card)
            if set(tags) <= set(own) and query.lower() in f"{repo} {summary}".lower():
                found.append((str(repo), own, summary))
        return found

    def _role(self, repo: RepoId, revision: str) -> Role:
        try:
            return role_of(entry.path for entry in self.storage.files(repo, revision))
        except RevisionNotFoundError:
            return "dataset"

    # -- the backend's primitives ----------------------------------------------------------------------

    def _default_owner(self) -> str:
        return settings.hub_owner()

    def _ensure_repo(self, repo: RepoId, *, private: bool, package: bool) -> None:
        if package:  # a package's distribution name, before building anything
            self.files.check_claim(dist_name(repo), repo, shown=lambda _: True)  # a local hub is all its user's
        created = self.storage.create_repo(repo, private=private, exist_ok=True)
        if not created and private and not self.storage.is_private(repo):
            raise PrivacyMismatchError(f"{repo} exists and is public; --private cannot hide what is published")

    def _tag_target(self, repo: RepoId, tag: str) -> str | None:
        return self.storage.tag_target(repo, tag)

    def _tree(self, repo: RepoId, commit: str) -> dict[str, tuple[str, int]]:
        return {entry.path: (entry.blob, entry.size) for entry in self.storage.files(repo, commit)}

    def _resolve(self, repo: RepoId, revision: str) -> str:
        return self.storage.resolve(repo, revision)

    def _download(self, repo: RepoId, commit: str, paths: list[str], target: Path) -> None:
        for path in paths:
            destination = target / path
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(self.storage.read(repo, path, commit))

    def _upload(self, repo: RepoId, files: dict[str, bytes], message: str) -> str:
        return self.storage.commit(repo, files, message, replace=True)

    def _tag(self, repo: RepoId, tag: str, commit: str) -> None:
        self.releases.tag(repo, tag, commit)

    def _tags(self, repo: RepoId) -> list[str]:
        return list(self.storage.refs(repo)["tags"])

    def _legacy_sha256(self, repo: RepoId, version: str, filename: str, commit: str) -> str | None:
        recorded = self.files.recorded(dist_name(repo), filename)
        return recorded.sha256 if recorded is not None else None

    def _identity(self) -> tuple[str, tuple[str, ...]]:
        owner = settings.hub_owner()
        return owner, (owner,)

    def _is_private(self, repo: RepoId) -> bool:
        return self.storage.is_private(repo)  # RepoNotFoundError when there is none

    def _files_at_main(self, repo: RepoId) -> tuple[str | None, dict[str, str]]:
        try:
            head = self.storage.resolve(repo, "main")
        except RevisionNotFoundError:
            return None, {}
        return head, self._contents(repo, head)

    def _read_file(self, repo: RepoId, path: str, revision: str) -> bytes:
        return self.storage.read(repo, path, revision)

    def _commit_files(self, repo: RepoId, files: dict[str, bytes], message: str, *, parent: str | None) -> str:
        return self.storage.commit(repo, files, message, parent=parent)


card_body = cards.body  # (verihub.hub.cards reads cards; kept here for callers of this name)
