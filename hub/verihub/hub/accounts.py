"""Users, tokens and the search listing of a hub server, in SQLite. Tokens are stored hashed.

Users and organizations follow the repository naming rule (:func:`~verihub.hub.ids.canonical_name`:
lowercase), and namespaces are compared with ``=``, never with patterns. The ``repos`` rows are a listing
derived from the repositories (which say what exists and who may see it); the server rebuilds missing
rows at start.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from verihub.errors import UsageError
from verihub.ids import RepoId, canonical_name

__all__ = ["Accounts", "Identity", "RepoMeta"]

Role = Literal["read", "write"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (hash TEXT PRIMARY KEY, user TEXT NOT NULL, role TEXT NOT NULL,
    created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS repos (id TEXT PRIMARY KEY, kind TEXT NOT NULL, private INTEGER NOT NULL,
                                  created REAL NOT NULL, downloads INTEGER NOT NULL DEFAULT 0,
                                  modified REAL NOT NULL DEFAULT 0, tags TEXT NOT NULL DEFAULT '[]',
                                  summary TEXT NOT NULL DEFAULT '', owner TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS repos_modified ON repos (modified);
CREATE TABLE IF NOT EXISTS members (org TEXT NOT NULL, user TEXT NOT NULL, PRIMARY KEY (org, user));
"""

# Search: a trigram full-text index over each listing row's id and summary, so a substring query reads the rows
# that contain it instead of every row. It is derived from `repos`: triggers change it in the same transaction
# as the row (whoever writes the row, this version or an older one), and the server rebuilds it at start.
_TEXT_INDEX = """
CREATE VIRTUAL TABLE IF NOT EXISTS repos_text USING fts5(id, summary, content='repos', content_rowid='rowid',
                                                         tokenize='trigram');
CREATE TRIGGER IF NOT EXISTS repos_text_insert AFTER INSERT ON repos BEGIN
    INSERT INTO repos_text (rowid, id, summary) VALUES (new.rowid, new.id, new.summary);
END;
CREATE TRIGGER IF NOT EXISTS repos_text_delete AFTER DELETE ON repos BEGIN
    INSERT INTO repos_text (repos_text, rowid, id, summary) VALUES ('delete', old.rowid, old.id, old.summary);
END;
CREATE TRIGGER IF NOT EXISTS repos_text_update AFTER UPDATE OF id, summary ON repos BEGIN
    INSERT INTO repos_text (repos_text, rowid, id, summary) VALUES ('delete', old.rowid, old.id, old.summary);
    INSERT INTO repos_text (rowid, id, summary) VALUES (new.rowid, new.id, new.summary);
END;
"""
# The listing's format (`PRAGMA user_version`): 1, a row's kind is its role, read off its files
# (verihub.hub.roles); before, the kind it was created as. The server refreshes older rows at start.
LISTING_VERSION = 1
_TRIGRAM = 3  # shorter queries cannot use the index: they scan (a two-letter query matches much anyway)


@dataclass(frozen=True)
class Identity:
    user: str
    role: Role
    orgs: tuple[str, ...] = ()

    @property
    def namespaces(self) -> tuple[str, ...]:
        return (self.user, *self.orgs)

    def owns(self, owner: str) -> bool:
        """The namespace is the user's own or one of their organizations' (exact, canonical names)."""
        return owner in self.namespaces

    def can_write(self, owner: str) -> bool:
        return self.role == "write" and self.owns(owner)


@dataclass(frozen=True)
class RepoMeta:
    repo: RepoId
    kind: str
    private: bool
    created: float
    downloads: int
    modified: float = 0.0
    tags: tuple[str, ...] = ()
    summary: str = ""


class Accounts:
    def __init__(self, path: str | Path) -> None:
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA busy_timeout=10000")
        self._lock = threading.Lock()
        with self._lock:
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(repos)")}
            if columns and "owner" not in columns:  # a listing from before owners were a column
                self._db.execute("ALTER TABLE repos ADD COLUMN owner TEXT NOT NULL DEFAULT ''")
                self._db.execute("UPDATE repos SET owner = substr(id, 1, instr(id, '/') - 1)")
            self._db.executescript(_SCHEMA)
            self._db.execute("CREATE INDEX IF NOT EXISTS repos_owner ON repos (owner)")
            created = self._db.execute("SELECT 1 FROM sqlite_master WHERE name = 'repos_text'").fetchone() is None
            self._db.executescript(f"BEGIN; {_TEXT_INDEX} COMMIT;")
        if created:  # a listing from before search had an index
            self.rebuild_search_index()

    def rebuild_search_index(self) -> None:
        """Derive the search index from the listing rows again (at server start: nothing can have diverged)."""
        with self._lock:
            self._db.execute("INSERT INTO repos_text (repos_text) VALUES ('rebuild')")

    def listing_outdated(self) -> bool:
        with self._lock:
            return int(self._db.execute("PRAGMA user_version").fetchone()[0]) < LISTING_VERSION

    def mark_listing_current(self) -> None:
        with self._lock:
            self._db.execute(f"PRAGMA user_version = {LISTING_VERSION}")

    def create_token(self, user: str, role: Role = "write") -> str:
        """A new token for ``user``; only its hash is kept, so it is shown once."""
        user = canonical_name(user, "owner")  # the same naming rules as owners
        if role not in ("read", "write"):
            raise UsageError(f"role {role!r}: use read or write")
        token = f"vh_{secrets.token_urlsafe(32)}"
        with self._lock:
            self._db.execute("INSERT INTO tokens VALUES (?, ?, ?, ?)", (_hash(token), user, role, time.time()))
        return token

    def identify(self, token: str | None) -> Identity | None:
        if not token:
            return None
        with self._lock:
            row = self._db.execute("SELECT user, role FROM tokens WHERE hash = ?", (_hash(token),)).fetchone()
            if row is None:
                return None
            orgs = tuple(
                r[0] for r in self._db.execute("SELECT org FROM members WHERE user = ? ORDER BY org", (row[0],))
            )
        return Identity(canonical_name(row[0], "owner"), row[1], tuple(canonical_name(org, "owner") for org in orgs))

    def add_member(self, org: str, user: str) -> None:
        """Make ``user`` a member of the organization ``org`` (created on first use): members write to it."""
        org, user = canonical_name(org, "owner"), canonical_name(user, "owner")
        if org == user:
            raise UsageError("an organization cannot be named like its member")
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO members VALUES (?, ?)", (org, user))

    def add_repo(self, repo: RepoId, kind: str, private: bool) -> None:
        """The listing row of a repository just created (called under its storage lock): a fresh row, whatever
        a row of that id said before (one a lost race of an older version left would keep another visibility)."""
        with self._lock:
            # A savepoint, not BEGIN: it nests inside a transaction a caller already holds (a bulk import).
            self._db.execute("SAVEPOINT add_repo")
            try:
                self._db.execute("DELETE FROM repos WHERE id = ?", (str(repo),))
                self._db.execute(
                    "INSERT INTO repos (id, kind, private, created, owner) VALUES (?, ?, ?, ?, ?)",
                    (str(repo), kind, int(private), time.time(), repo.owner),
                )
            except BaseException:
                self._db.execute("ROLLBACK TO add_repo")
                self._db.execute("RELEASE add_repo")
                raise
            self._db.execute("RELEASE add_repo")

    def remove_repo(self, repo: RepoId) -> None:
        with self._lock:
            self._db.execute("DELETE FROM repos WHERE id = ?", (str(repo),))

    def repo(self, repo: RepoId) -> RepoMeta | None:
        with self._lock:
            row = self._db.execute(f"SELECT {_COLUMNS} FROM repos WHERE id = ?", (str(repo),)).fetchone()
        return _meta(row) if row else None

    def update_listing(self, repo: RepoId, *, kind: str, modified: float, tags: list[str], summary: str) -> None:
        """What search shows of a repository (``kind``: its role, :mod:`verihub.hub.roles`), refreshed after each
        commit to its main branch."""
        with self._lock:
            self._db.execute(
                "UPDATE repos SET kind = ?, modified = ?, tags = ?, summary = ? WHERE id = ?",
                (kind, modified, json.dumps(tags), summary[:300], str(repo)),
            )

    def search(
        self,
        *,
        text: str = "",
        author: str | None = None,
        namespaces: tuple[str, ...] = (),
        kinds: tuple[str, ...] = (),
        sort: str | None = None,
        limit: int | None = None,
    ) -> list[RepoMeta]:
        """Repositories whose id or summary contains ``text`` (a plain substring, any case), public or in one
        of ``namespaces`` (compared exactly); ``author`` is one exact owner; ``kinds`` (if any) the kinds."""
        if author is not None:
            try:
                author = canonical_name(author, "owner")
            except ValueError:  # no owner can have that name
                return []
        indexed = len(text) >= _TRIGRAM and "\0" not in text  # a NUL cannot be said in an FTS query
        try:
            return self._search(text, indexed, author, namespaces, kinds, sort, limit)
        except sqlite3.OperationalError:  # whatever else the index's query syntax refuses: scan
            if not indexed:
                raise
            return self._search(text, False, author, namespaces, kinds, sort, limit)

    def _search(
        self,
        text: str,
        indexed: bool,
        author: str | None,
        namespaces: tuple[str, ...],
        kinds: tuple[str, ...],
        sort: str | None,
        limit: int | None,
    ) -> list[RepoMeta]:
        marks = ", ".join("?" * len(namespaces))
        clauses: list[str] = [f"(private = 0 OR owner IN ({marks}))" if namespaces else "private = 0"]
        values: list[str] = list(namespaces)
        rows, order = "repos", "repos.id"
        if indexed:  # matches stream from the index oldest first, so a LIMIT stops early
            rows, order = "repos_text JOIN repos ON repos.rowid = repos_text.rowid", "repos_text.rowid"
            clauses.append("repos_text MATCH ?")
            values.append('"' + text.replace('"', '""') + '"')  # one phrase: the substring as it is
        elif text:
            clauses.append("(instr(lower(repos.id), ?) > 0 OR instr(lower(repos.summary), ?) > 0)")
            values += [text.lower()] * 2
        if kinds:
            clauses.append(f"kind IN ({', '.join('?' * len(kinds))})")
            values += list(kinds)
        if author is not None:
            clauses.append("owner = ?")
            values.append(author)
        order = {"downloads": "downloads DESC", "lastModified": "modified DESC", "createdAt": "created DESC"}.get(
            sort or "", order
        )
        query = f"SELECT {_COLUMNS} FROM {rows} WHERE {' AND '.join(clauses)} ORDER BY {order}"
        if limit:
            query += f" LIMIT {int(limit)}"
        with self._lock:
            return [_meta(row) for row in self._db.execute(query, values).fetchall()]

    def repos(self) -> list[RepoMeta]:
        with self._lock:
            return [_meta(row) for row in self._db.execute(f"SELECT {_COLUMNS} FROM repos ORDER BY id").fetchall()]

    def count_download(self, repo: RepoId) -> None:
        with self._lock:
            self._db.execute("UPDATE repos SET downloads = downloads + 1 WHERE id = ?", (str(repo),))


_COLUMNS = ", ".join(
    f"repos.{column}" for column in ("id", "kind", "private", "created", "downloads", "modified", "tags", "summary")
)


def _meta(row: tuple) -> RepoMeta:
    return RepoMeta(
        RepoId.parse(row[0]), row[1], bool(row[2]), row[3], row[4], row[5], tuple(json.loads(row[6])), row[7]
    )


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
