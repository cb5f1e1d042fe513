"""Who may see what: the one visibility rule, for every route that can reveal a repository or its files.

A repository is visible when it exists and is public, or when the viewer owns its namespace (their user or
one of their organizations, compared exactly). Every repository is a dataset; the model routes that served
environments and verifier packages before they were datasets still do for one release, and show nothing else
(never eval results). A distribution in the pip index is visible when the
repository that publishes it is. Whatever is not visible does not exist, as far as the viewer can tell:
the same 404 as for a name nobody uses.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from verihub.hub.accounts import Identity, RepoMeta
from verihub.hub.errors import NotFoundError, RepoNotFoundError, RevisionNotFoundError
from verihub.hub.files import PublishedFiles
from verihub.hub.roles import role_of
from verihub.hub.storage import HubStorage
from verihub.ids import RepoId

__all__ = ["RepoType", "Visibility", "can_see"]

RepoType = Literal["dataset", "model"]  # the Hugging Face API's repository type a route serves ("model": legacy)


def can_see(viewer: Identity | None, owner: str, private: bool) -> bool:
    """The rule itself."""
    return not private or (viewer is not None and viewer.owns(owner))


class Visibility:
    def __init__(self, storage: HubStorage, files: PublishedFiles) -> None:
        self.storage, self.files = storage, files

    def repo(self, viewer: Identity | None, owner: str, name: str, repo_type: RepoType = "dataset") -> RepoId:
        """The repository ``owner/name`` if ``viewer`` may see it as ``repo_type`` (the route's: a legacy model
        route never shows eval results); RepoNotFoundError otherwise."""
        try:
            repo = RepoId(owner, name)
        except ValueError as error:
            raise RepoNotFoundError(str(error)) from None
        if not self.storage.exists(repo) or not can_see(viewer, repo.owner, self.storage.is_private(repo)):
            raise RepoNotFoundError(f"Repository {repo} not found")
        if repo_type == "model" and self._holds_results(repo):
            raise RepoNotFoundError(f"Repository {repo} not found")
        return repo

    def _holds_results(self, repo: RepoId) -> bool:
        try:
            return role_of(entry.path for entry in self.storage.files(repo, "main")) == "results"
        except RevisionNotFoundError:  # no commit yet
            return False
        except RepoNotFoundError:  # deleted meanwhile: it is not there to show
            return True

    def project(self, viewer: Identity | None, project: str) -> RepoId:
        """The repository publishing the distribution ``project`` if ``viewer`` may see it; NotFoundError otherwise."""
        repo = self.files.holder(project)
        if (
            repo is None
            or not self.storage.exists(repo)
            or not can_see(viewer, repo.owner, self.storage.is_private(repo))
        ):
            raise NotFoundError(f"no project {project}")
        return repo

    def projects(self, viewer: Identity | None) -> list[str]:
        """The distributions in the index that ``viewer`` may see."""
        visible = []
        for project in self.files.projects():
            try:
                self.project(viewer, project)
            except NotFoundError:
                continue
            visible.append(project)
        return visible

    @staticmethod
    def listing(viewer: Identity | None, rows: Iterable[RepoMeta]) -> list[RepoMeta]:
        """Listing rows ``viewer`` may see (the search query already asks for these; this is the rule's word)."""
        return [row for row in rows if can_see(viewer, row.repo.owner, row.private)]

    @staticmethod
    def namespaces(viewer: Identity | None) -> tuple[str, ...]:
        """The namespaces whose private repositories ``viewer`` may see."""
        return viewer.namespaces if viewer is not None else ()
