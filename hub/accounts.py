"""Users, tokens and repository metadata of a hub server, in SQLite. Tokens are stored hashed."""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from verihub.hub.ids import RepoId

__all__ = ["Accounts", "Identity", "RepoMeta"]

Role = Literal["read", "write"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (hash TEXT PRIMARY KEY, user TEXT NOT NULL, role TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS repos (id TEXT PRIMARY KEY, kind TEXT NOT NULL, private INTEGER NOT NULL,
                                  created REAL NOT NULL, downloads INTEGER NOT NULL DEFAULT 0);
"""


@dataclass(frozen=True)
class Identity:
    user: str
    role: Role

    def can_write(self, owner: str) -> bool:
        return self.role == "write" and self.user == owner


@dataclass(frozen=True)
class RepoMeta:
    repo: RepoId
    kind: str
    private: bool
    created: float
    downloads: int


class Accounts:
    def __init__(self, path: str | Path) -> None:
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()

    def create_token(self, user: str, role: Role = "write") -> str:
        """A new token for ``user``; only its hash is kept, so it is shown once."""
        RepoId.parse(f"{user}/x")  # the same naming rules as owners
        if role not in ("read", "write"):
            raise ValueError(f"role {role!r}: use read or write")
        token = f"vh_{secrets.token_urlsafe(32)}"
        with self._lock:
            self._db.execute("INSERT INTO tokens VALUES (?, ?, ?, ?)", (_hash(token), user, role, time.time()))
        return token

    def identify(self, token: str | None) -> Identity | None:
        if not token:
            return None
        with self._lock:
            row = self._db.execute("SELECT user, role FROM tokens WHERE hash = ?", (_hash(token),)).fetchone()
        return Identity(row[0], row[1]) if row else None

    def add_repo(self, repo: RepoId, kind: str, private: bool) -> None:
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO repos (id, kind, private, created) VALUES (?, ?, ?, ?)",
                             (str(repo), kind, int(private), time.time()))

    def remove_repo(self, repo: RepoId) -> None:
        with self._lock:
            self._db.execute("DELETE FROM repos WHERE id = ?", (str(repo),))

    def repo(self, repo: RepoId) -> RepoMeta | None:
        with self._lock:
            row = self._db.execute("SELECT id, kind, private, created, downloads FROM repos WHERE id = ?",
                                   (str(repo),)).fetchone()
        return RepoMeta(RepoId.parse(row[0]), row[1], bool(row[2]), row[3], row[4]) if row else None

    def repos(self) -> list[RepoMeta]:
        with self._lock:
            rows = self._db.execute("SELECT id, kind, private, created, downloads FROM repos ORDER BY id").fetchall()
        return [RepoMeta(RepoId.parse(r[0]), r[1], bool(r[2]), r[3], r[4]) for r in rows]

    def count_download(self, repo: RepoId) -> None:
        with self._lock:
            self._db.execute("UPDATE repos SET downloads = downloads + 1 WHERE id = ?", (str(repo),))


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
