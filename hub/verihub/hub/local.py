"""The embedded hub: a directory (``$VERIHUB_HOME/hub``) that publishes and installs without a server.

Layout: ``repos/`` (git storage, one repository per package, release tags ``v{version}``: the truth), and
the pip index derived from the tags (``claims/``, ``files/``, ``index/`` and a static PEP 503 ``simple/``,
see :mod:`verihub.hub.files`). ``pip install --index-url file://…/simple/ NAME==V`` works as it is. A server
(``verihub hub serve --data DIR``) can serve the same directory.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from verihub import settings
from verihub.hub.build import Bump
from verihub.hub.errors import (
    CorruptFileError,
    PrivacyMismatchError,
    RepoNotFoundError,
    RevisionNotFoundError,
    VersionExistsError,
)
from verihub.hub.files import PublishedFiles
from verihub.hub.ids import Requirement, VersionSpec
from verihub.hub.pipeline import Hub, PushResult, blob_id
from verihub.hub.release import Releases
from verihub.hub.storage import HubStorage, RepoKind
from verihub.ids import RepoId, dist_name

__all__ = ["CorruptFileError", "LocalHub", "PushResult", "VersionExistsError", "blob_id", "card_body"]


class LocalHub(Hub):
    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else settings.verihub_home() / "hub"
        self.storage = HubStorage(self.root)
        self.files = PublishedFiles(self.root)
        self.releases = Releases(self.storage, self.files)

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

    def install(self, requirement: str | Requirement, *, python: str = sys.executable) -> tuple[RepoId, str]:
        self.releases.recover()
        return super().install(requirement, python=python)

    # -- reading --------------------------------------------------------------------------------------

    def info(self, repo: RepoId) -> dict[str, Any]:
        kind = self.storage.kind_of(repo)
        versions = self.versions(repo)
        latest = VersionSpec.parse("latest").best(versions) if versions else None
        card = self.storage.read(repo, "README.md", f"v{latest}").decode("utf-8", "replace") if latest else ""
        return {
            "repo": str(repo),
            "kind": kind,
            "versions": versions,
            "latest": latest,
            "card": card,
            "distribution": dist_name(repo),
            "install": f"verihub install {repo}@{latest}",
        }

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
                found.append({"repo": str(repo), "kind": repo_kind, "latest": latest, "summary": summary(card)})
        return found

    # -- the backend's primitives ----------------------------------------------------------------------

    def _default_owner(self) -> str:
        return settings.hub_owner()

    def _ensure_repo(self, repo: RepoId, kind: RepoKind, *, private: bool) -> None:
        if kind != "dataset":  # a package's distribution name, before building anything
            self.files.check_claim(dist_name(repo), repo, shown=lambda _: True)  # a local hub is all its user's
        created = self.storage.create_repo(repo, kind, private=private, exist_ok=True)
        if not created and private and not self.storage.is_private(repo):
            raise PrivacyMismatchError(f"{repo} exists and is public; --private cannot hide what is published")

    def _tag_target(self, repo: RepoId, tag: str) -> str | None:
        return self.storage.tag_target(repo, tag)

    def _contents(self, repo: RepoId, commit: str) -> dict[str, str]:
        return {entry.path: entry.blob for entry in self.storage.files(repo, commit)}

    def _upload(self, repo: RepoId, files: dict[str, bytes], message: str) -> str:
        return self.storage.commit(repo, files, message, replace=True)

    def _tag(self, repo: RepoId, tag: str, commit: str) -> None:
        self.releases.tag(repo, tag, commit)

    def _tags(self, repo: RepoId) -> list[str]:
        return list(self.storage.refs(repo)["tags"])

    def _wheel(self, repo: RepoId, version: str) -> bytes | None:
        return self.files.wheel(dist_name(repo), version)

    def _pip_index_url(self) -> str:
        return self.index_url

    def _identity(self) -> tuple[str, tuple[str, ...]]:
        owner = settings.hub_owner()
        return owner, (owner,)

    def _is_private(self, repo: RepoId, kind: RepoKind) -> bool:
        if self.storage.kind_of(repo) not in ((kind,) if kind == "dataset" else ("env", "verifier")):
            raise RepoNotFoundError(f"no repository {repo}")
        return self.storage.is_private(repo)

    def _files_at_main(self, repo: RepoId, kind: RepoKind) -> tuple[str | None, dict[str, str]]:
        try:
            head = self.storage.resolve(repo, "main")
        except RevisionNotFoundError:
            return None, {}
        return head, self._contents(repo, head)

    def _read_file(self, repo: RepoId, path: str, kind: RepoKind, revision: str) -> bytes:
        return self.storage.read(repo, path, revision)

    def _commit_files(
        self, repo: RepoId, kind: RepoKind, files: dict[str, bytes], message: str, *, parent: str | None
    ) -> str:
        return self.storage.commit(repo, files, message, parent=parent)


def card_body(card: str) -> str:
    """A README card without its YAML front-matter."""
    return re.sub(r"^---\n.*?\n---\n", "", card, flags=re.DOTALL).strip()


def summary(card: str) -> str:
    """The first line of prose of a card: what listings show."""
    for line in card_body(card).splitlines():
        if line.strip() and not line.startswith("#"):
            return line.strip()[:160]
    return ""
