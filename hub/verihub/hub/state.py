"""What a hub server holds: storage (the truth), what is derived from it (the published files, the search
listing, the leaderboard), the accounts, and the visibility rule over them; plus the start-up step that
completes derived state."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from verihub.hub.accounts import Accounts
from verihub.hub.errors import RevisionNotFoundError
from verihub.hub.files import PublishedFiles
from verihub.hub.leaderboard import Leaderboard
from verihub.hub.local import summary
from verihub.hub.policy import Visibility
from verihub.hub.release import Releases
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
        for repo, kind in self.storage.repos():
            if not self.storage.has_settings(repo):  # made before visibility lived in the repository
                self.storage.write_settings(repo, private=rows[repo].private if repo in rows else False)
            if repo not in rows:  # created (or pushed into the directory) without its listing row
                self.accounts.add_repo(repo, kind, self.storage.is_private(repo))
                self.refresh_listing(repo)
        self.leaderboard.start([repo for repo, kind in self.storage.repos("dataset")])

    def card(self, repo: RepoId, sha: str, paths: set[str] | None = None) -> tuple[str, dict[str, Any]]:
        """The README card at ``sha`` and its YAML front-matter ({} when it has none or it is malformed);
        ``paths``, the commit's files, when the caller has them."""
        if paths is not None and "README.md" not in paths:
            return "", {}
        try:
            text = self.storage.read(repo, "README.md", sha).decode("utf-8", "replace")
        except FileNotFoundError:
            return "", {}
        data: Any = {}
        if text.startswith("---"):
            try:
                data = yaml.safe_load(text.split("---", 2)[1]) or {}
            except (yaml.YAMLError, RecursionError):  # RecursionError: nested past what the parser follows
                data = {}
        return text, data if isinstance(data, dict) else {}

    def refresh_listing(self, repo: RepoId) -> None:
        """What search shows of a repository and, for a results dataset, its leaderboard rows: derived from
        its main branch (after each commit to it)."""
        if self.storage.kind_of(repo) == "dataset":
            try:
                self.leaderboard.refresh(repo)
            except Exception as error:  # noqa: BLE001 - derived rows: the commit stands, the next refresh or start redoes them
                log.warning("leaderboard rows of %s could not be refreshed: %s", repo, error)
        try:
            sha = self.storage.resolve(repo, "main")
        except RevisionNotFoundError:
            return
        text, data = self.card(repo, sha)
        tags = (
            [str(tag) for tag in data.get("tags", []) if isinstance(tag, str)]
            if isinstance(data.get("tags"), list)
            else []
        )
        self.accounts.update_listing(
            repo, modified=self.storage.commit_time(repo, sha), tags=tags, summary=summary(text)
        )
