"""The leaderboard: one row per eval run in the hub's results datasets, in SQLite, for the environment pages.

Derived state: the rows of a results repository are computed from its main branch (the card's link to an
environment, each ``runs/<run>/metadata.json``) after every commit to it and, at server start, for every
results repository whose main moved since (or that has none yet); a repository's rows are replaced in one
transaction, and removed before the repository is deleted. A run's date is when the hub received it: the
time of the commit that added its metadata (written by the server's git, not by whoever pushed).

Rows carry who pushed (the results repository's owner, authenticated by the write), never who the card
claims; whether a viewer sees a row is decided by the visibility rule on that repository at read time. A row's
``version`` is the one whose verifier graded the run (``graded_by``); a run regraded under another version
(``verihub regrade``) also names the version its answers were made under (``answered``).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verihub.hub.errors import RevisionNotFoundError
from verihub.hub.results import CARD, MAX_METADATA_BYTES, RunRecord, linked_environment, run_of
from verihub.hub.storage import HubStorage
from verihub.ids import RepoId

__all__ = ["LeaderboardRow", "Leaderboard"]

log = logging.getLogger("verihub.hub")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (dataset TEXT NOT NULL, run TEXT NOT NULL, environment TEXT NOT NULL,
                                    version TEXT NOT NULL, answered TEXT, model TEXT NOT NULL, k INTEGER NOT NULL,
                                    tasks INTEGER NOT NULL, rollouts INTEGER NOT NULL, pass1 REAL NOT NULL,
                                    passk REAL, faulted INTEGER NOT NULL, tasks_lost INTEGER NOT NULL,
                                    sampling TEXT NOT NULL, pushed REAL NOT NULL, blob TEXT NOT NULL,
                                    PRIMARY KEY (dataset, run));
CREATE INDEX IF NOT EXISTS results_environment ON results (environment);
CREATE TABLE IF NOT EXISTS results_heads (dataset TEXT PRIMARY KEY, environment TEXT, head TEXT NOT NULL,
                                          skipped INTEGER NOT NULL DEFAULT 0);
"""
_FIELDS = (
    "dataset",
    "run",
    "environment",
    "version",
    "answered",
    "model",
    "k",
    "tasks",
    "rollouts",
    "pass1",
    "passk",
    "faulted",
    "tasks_lost",
    "sampling",
    "pushed",
    "blob",
)
MAX_ROWS = 500  # shown per environment, best pass@1 first
MAX_RUNS = 5000  # indexed per results repository


@dataclass(frozen=True)
class LeaderboardRow:
    dataset: RepoId  # the results repository: its owner pushed the run
    run: str
    environment: RepoId
    version: str  # whose verifier graded the run
    answered: str | None  # a regraded run's: the version its answers were made under
    model: str
    k: int
    tasks: int
    rollouts: int
    pass1: float
    passk: float | None
    faulted: int
    tasks_lost: int
    sampling: str
    pushed: float
    blob: str

    @property
    def pusher(self) -> str:
        return self.dataset.owner


class Leaderboard:
    def __init__(self, path: str | Path, storage: HubStorage) -> None:
        self.storage = storage
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA busy_timeout=10000")
        self._lock = threading.Lock()
        with self._lock:
            self._db.executescript(_SCHEMA)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(results)")}
            if "answered" not in columns:  # an index from before regrades: its rows are evals' own grades
                self._db.execute("ALTER TABLE results ADD COLUMN answered TEXT")

    def refresh(self, dataset: RepoId) -> None:
        """Recompute the rows of the results repository ``dataset`` from its main branch (a no-op when main
        has not moved since)."""
        try:
            head = self.storage.resolve(dataset, "main")
        except RevisionNotFoundError:
            return self.forget(dataset)
        with self._lock:
            known = self._db.execute(
                "SELECT head, environment FROM results_heads WHERE dataset = ?", (str(dataset),)
            ).fetchone()
            earlier = {
                row[1]: row
                for row in self._db.execute(
                    f"SELECT {', '.join(_FIELDS)} FROM results WHERE dataset = ?", (str(dataset),)
                )
            }
        if known is not None and known[0] == head:
            return None
        rows, skipped, environment = self._rows(dataset, head, earlier, known[1] if known else None)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("DELETE FROM results WHERE dataset = ?", (str(dataset),))
                self._db.executemany(
                    f"INSERT INTO results ({', '.join(_FIELDS)}) VALUES ({', '.join('?' * len(_FIELDS))})", rows
                )
                self._db.execute(
                    "INSERT OR REPLACE INTO results_heads VALUES (?, ?, ?, ?)",
                    (str(dataset), str(environment) if environment else None, head, skipped),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        if self.storage.resolve(dataset, "main") != head:  # a later commit's refresh may have written first
            self.refresh(dataset)
        return None

    def forget(self, dataset: RepoId) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("DELETE FROM results WHERE dataset = ?", (str(dataset),))
            self._db.execute("DELETE FROM results_heads WHERE dataset = ?", (str(dataset),))
            self._db.execute("COMMIT")

    def start(self, datasets: list[RepoId]) -> None:
        """At server start: rows for exactly the results repositories there are, each as of its main."""
        with self._lock:
            known = {row[0] for row in self._db.execute("SELECT dataset FROM results_heads")}
        for gone in known - {str(dataset) for dataset in datasets}:
            self.forget(RepoId.parse(gone))
        for dataset in datasets:
            try:
                self.refresh(dataset)
            except Exception as error:  # noqa: BLE001 - one unreadable repository must not stop the server
                log.warning("results of %s could not be indexed: %s", dataset, error)

    def for_environment(self, environment: RepoId) -> list[LeaderboardRow]:
        """Every indexed run linked to ``environment``, best pass@1 first (the caller applies visibility)."""
        with self._lock:
            found = self._db.execute(
                f"SELECT {', '.join(_FIELDS)} FROM results WHERE environment = ? "
                "ORDER BY pass1 DESC, pushed DESC LIMIT ?",
                (str(environment), MAX_ROWS),
            ).fetchall()
        return [_row(values) for values in found]

    def for_dataset(self, dataset: RepoId) -> tuple[list[LeaderboardRow], int]:
        """The runs of one results repository, newest first, and how many of its runs could not be shown."""
        with self._lock:
            found = self._db.execute(
                f"SELECT {', '.join(_FIELDS)} FROM results WHERE dataset = ? ORDER BY pushed DESC", (str(dataset),)
            ).fetchall()
            head = self._db.execute("SELECT skipped FROM results_heads WHERE dataset = ?", (str(dataset),)).fetchone()
        return [_row(values) for values in found], head[0] if head else 0

    # -- internals ------------------------------------------------------------------------------------

    def _rows(
        self, dataset: RepoId, head: str, earlier: dict[str, tuple[object, ...]], linked_before: str | None
    ) -> tuple[list[tuple[object, ...]], int, RepoId | None]:
        """The rows of ``dataset`` at ``head``, how many runs were not shown, and the environment it links.
        A run whose metadata did not change keeps its row (nothing is read again), unless the link changed."""
        files = {entry.path: entry for entry in self.storage.files(dataset, head)}
        card = files.get(CARD)
        environment = None
        if card is not None and card.size <= MAX_METADATA_BYTES:
            environment = linked_environment(self.storage.read(dataset, CARD, head).decode("utf-8", "replace"))
        if str(environment) != linked_before:
            earlier = {}
        rows: list[Any] = []
        skipped = 0
        for path, entry in sorted(files.items()):
            run = run_of(path)
            if run is None:
                continue
            if environment is None or entry.size > MAX_METADATA_BYTES or len(rows) >= MAX_RUNS:
                skipped += 1
                continue
            kept = earlier.get(run)
            if kept is not None and kept[-1] == entry.blob:
                rows.append(kept)
                continue
            try:
                record = RunRecord.parse(self.storage.read(dataset, path, head))
            except ValueError as error:
                log.info("%s %s is not shown: %s", dataset, path, error)
                skipped += 1
                continue
            if record.environment != environment.name:  # the metadata names the environment it evaluated
                skipped += 1
                continue
            pushed = float(self.storage.added_at(dataset, path, head) or 0)
            metrics = record.metrics
            rows.append(
                (
                    str(dataset),
                    run,
                    str(environment),
                    record.graded_version,
                    record.answers_version,
                    record.model,
                    record.k,
                    metrics.tasks,
                    metrics.rollouts,
                    metrics.pass_at_1,
                    record.pass_at_k,
                    metrics.rollouts_faulted,
                    metrics.tasks_lost,
                    record.sampling_text(),
                    pushed,
                    entry.blob,
                )
            )
        return rows, skipped, environment


def _row(values: tuple[object, ...]) -> LeaderboardRow:
    fields = dict(zip(_FIELDS, values, strict=True))
    fields["dataset"] = RepoId.parse(str(fields["dataset"]))
    fields["environment"] = RepoId.parse(str(fields["environment"]))
    return LeaderboardRow(**fields)  # type: ignore[arg-type]  # the row's fields, as the table stores them
