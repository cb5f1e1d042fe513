"""What a hub server holds: storage (the truth), what is derived from it (the published files, the search
listing, the leaderboard), the accounts, and the visibility rule over them; plus the start-up step that
completes derived state."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verihub.hub import cards
from verihub.hub.accounts import Accounts
from verihub.hub.errors import RevisionNotFoundError
from verihub.hub.files import PublishedFiles
from verihub.hub.leaderboard import Leaderboard
from verihub.hub.policy import Visibility
from verihub.hub.release import Releases
from verihub.hub.roles import ROLE_TAGS, role_of
from verihub.hub.storage import HubStorage
from verihub.ids import RepoId

__all__ = ["HubState"]

log = logging.getLogger("verihub.hub")


@dataclass
class HubState:
    root: Path
    storage: HubStorage
    files: PublishedFiles
    releases: Releases
    accounts: Accounts
    visibility: Visibility
    leaderboard: Leaderboard

    @classmethod
    def open(cls, root: str | Path) -> HubState:
        root = Path(root)
        storage = HubStorage(root)
        files = PublishedFiles(root)
        return cls(
            root,
            storage,
            files,
            Releases(storage, files),
            Accounts(root / "hub.db"),
            Visibility(storage, files),
            Leaderboard(root / "hub.db", storage),
        )

    def start(self) -> None:
        """Complete what a crash may have left half done: releases the journal names, missing listing rows.
        (Rows never outlive their repository: a deletion removes the row first.)"""
        for problem in [*self.releases.rebuild_legacy_index(), *self.releases.recover()]:
            log.warning("a release could not be completed: %s", problem)
        self.files.write_missing_pages()
        self.accounts.rebuild_search_index()
        rows = {meta.repo: meta for meta in self.accounts.repos()}
        outdated = self.accounts.listing_outdated()
        repos = self.storage.repos()
        for repo in repos:
            if not self.storage.has_settings(repo):  # made before visibility lived in the repository
                self.storage.write_settings(repo, private=rows[repo].private if repo in rows else False)
            if repo not in rows:  # created (or pushed into the directory) without its listing row
                self.accounts.add_repo(repo, "dataset", self.storage.is_private(repo))
                self.refresh_listing(repo)
            elif outdated:  # a row from before roles were read off the files
                self.refresh_listing(repo)
        self.accounts.mark_listing_current()
        self.leaderboard.start(repos)

    def card(self, repo: RepoId, sha: str, paths: set[str] | None = None) -> tuple[str, dict[str, Any]]:
        """The README card at ``sha`` and its YAML front-matter ({} when it has none or it is malformed);
        ``paths``, the commit's files, when the caller has them."""
        if paths is not None and "README.md" not in paths:
            return "", {}
        try:
            text = self.storage.read(repo, "README.md", sha).decode("utf-8", "replace")
        except FileNotFoundError:
            return "", {}
        return text, cards.front_matter(text)

    def refresh_listing(self, repo: RepoId) -> None:
        """What search shows of a repository (its role, tags and summary) and, for eval results, its leaderboard
        rows: derived from its main branch (after each commit to it)."""
        try:
            self.leaderboard.refresh(repo)
        except Exception as error:  # noqa: BLE001 - derived rows: the commit stands, the next refresh or start redoes them
            log.warning("leaderboard rows of %s could not be refreshed: %s", repo, error)
        try:
            sha = self.storage.resolve(repo, "main")
        except RevisionNotFoundError:
            return
        paths = {entry.path for entry in self.storage.files(repo, sha)}
        text, data = self.card(repo, sha, paths)
        role = role_of(paths)
        tags = list(dict.fromkeys([*cards.tags(data), *ROLE_TAGS.get(role, ())]))
        self.accounts.update_listing(
            repo, kind=role, modified=self.storage.commit_time(repo, sha), tags=tags, summary=cards.summary(text)
        )
