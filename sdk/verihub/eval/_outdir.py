"""An eval's output directory: which run made it, the rollout log, and the final files.

- ``metadata.json`` names the run (:class:`RunIdentity`) from its first moment on, ``"complete": false``
  until it ends; resuming refuses a directory whose run differs in any field of it.
- ``rollouts.jsonl`` gets a line per finished rollout, flushed as each finishes. A crash can only tear
  the last line: resuming drops it and says so. A bad line anywhere else is corruption, and refused.
- ``results.parquet`` and the final ``metadata.json`` are written under a temporary name, synced and
  renamed into place: a reader sees the old file or the new one, never part of one.
- The directory is locked while a run writes it, so two runs never interleave their lines.
- ``metadata.json``'s ``graded_by`` names the verifier that graded every rollout there (environment, version,
  content digest): the run's own environment for an eval, another version for a regrade
  (:mod:`verihub.eval.regrade`), whose metadata also says what it was ``regraded_from``. Resuming refuses a
  directory whose rollouts another verifier graded, so one directory never mixes two verifiers' grades.

Starting over (no resume) removes the earlier run's metadata first, so no crash can leave one run's
metadata over another run's rollouts.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import secrets
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel, ConfigDict

from verihub.environment.digest import content_changes
from verihub.errors import CorruptResultsError, EvalResultsError, ResumeMismatchError, relative_display
from verihub.eval.rollout import Rollout

__all__ = [
    "METADATA_FILE",
    "RESULTS_FILE",
    "ROLLOUTS_FILE",
    "LogScan",
    "RunDirectory",
    "RunIdentity",
    "eval_output",
    "scan_log",
]

logger = logging.getLogger("verihub.eval")

ROLLOUTS_FILE, RESULTS_FILE, METADATA_FILE = "rollouts.jsonl", "results.parquet", "metadata.json"
_KEPT = ("ok", "wrong")  # what a resumed run keeps; faults (env_error, timeout) and missing rollouts run again
_ABSENT = object()

Key = tuple[str, int]  # task id, sample index


def eval_output(out: Path) -> Callable[[Path], bool]:
    """Whether a path holds eval results, not environment content: ``out`` itself, a directory with a
    rollout log, or a results file beside one (an --out inside the environment's directory)."""
    out = out.resolve()

    def holds_results(path: Path) -> bool:
        if path.is_dir():
            return path.resolve() == out or (path / ROLLOUTS_FILE).is_file()
        return path.name in (ROLLOUTS_FILE, RESULTS_FILE, METADATA_FILE) and (path.parent / ROLLOUTS_FILE).is_file()

    return holds_results


class RunIdentity(BaseModel):
    """Everything that decides a run's rollouts and their grades; a resumed run must match every field."""

    model_config = ConfigDict(frozen=True)

    environment: str
    environment_version: str
    environment_source: str | None = None  # a loader's pinned source (hf://datasets/ORG/NAME@<commit>), if any
    model: str
    split: str
    tasks: int
    k: int
    sampling: dict[str, Any]  # temperature, top_p, max_tokens, n (= k), seed
    judge_model: str | None  # a --judge-model override (the spec's own is in the content)
    verihub_version: str
    environment_digest: str
    environment_content: dict[str, str]  # part -> sha256 (verihub.environment.digest.content_manifest)

    def graded_by(self) -> dict[str, Any]:
        """The verifier that grades this run's rollouts, as ``metadata.json`` names it: its environment, version,
        content digest and source (a regrade names another, :class:`RunDirectory`'s ``stamp``)."""
        return {
            "environment": self.environment,
            "version": self.environment_version,
            "digest": self.environment_digest,
            "source": self.environment_source,
            "verihub_version": self.verihub_version,
        }

    def differences(self, earlier: Mapping[str, Any]) -> dict[str, str]:
        """Each field in which ``earlier`` (an earlier run's metadata) differs from this run, and how; and
        whether another verifier graded its rollouts (a regrade's directory is never resumed as an eval)."""
        found: dict[str, str] = {}
        for name in type(self).model_fields:
            now, then = getattr(self, name), earlier.get(name, _ABSENT)
            if name == "environment_content" or (then is _ABSENT and now is None):
                continue  # (a field an earlier version did not record, and this run has no value for)
            if name == "sampling" and isinstance(then, Mapping):
                for key in sorted((now.keys() | then.keys()) - {"n"}):  # n is k, compared as k
                    if now.get(key, _ABSENT) != then.get(key, _ABSENT):
                        found[f"sampling.{key}"] = _how(then.get(key, _ABSENT), now.get(key, _ABSENT))
            elif name == "environment_digest" and then != now:
                content = earlier.get("environment_content")
                changes = content_changes(content, self.environment_content) if isinstance(content, dict) else []
                shown = "; ".join(changes[:6]) + (f"; and {len(changes) - 6} more" if len(changes) > 6 else "")
                found["environment content"] = shown or _how(then, now)
            elif then != now:
                found[name] = _how(then, now)
        graded = earlier.get("graded_by")
        if earlier.get("regraded_from") is not None:
            found["graded by"] = "earlier a regrade's grades (verihub regrade), now this run's own"
        elif not found and isinstance(graded, Mapping) and dict(graded) != self.graded_by():
            found["graded by"] = _how(dict(graded), self.graded_by())  # the same run's fields, another verifier
        return found


def _how(then: Any, now: Any) -> str:
    return f"earlier {'not recorded' if then is _ABSENT else repr(then)}, now {'none' if now is _ABSENT else repr(now)}"


class RunDirectory:
    """One eval's output directory, held (locked) from :meth:`start` until :meth:`close`. ``identity`` is the
    run that made the rollouts (None: rollouts from no eval, a training run's); ``stamp`` what every version of
    ``metadata.json`` says besides it (default: ``graded_by``, the identity's own verifier)."""

    def __init__(self, path: Path, identity: RunIdentity | None, stamp: Mapping[str, Any] | None = None) -> None:
        self.path, self.identity = path, identity
        self.stamp = dict(stamp) if stamp is not None else {"graded_by": identity.graded_by() if identity else None}
        self.notes: list[str] = []  # what was repaired on the way in (a torn last line dropped)
        self._lock: int | None = None
        self._log: TextIO | None = None

    def start(self, keys: Collection[Key], *, resume: bool) -> dict[Key, Rollout]:
        """Take the directory and open its log. With ``resume``: after checking that the earlier run was
        this same run, its finished rollouts among ``keys`` (the log's last word on each)."""
        self.path.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        for stale in self.path.glob(".*.partial"):  # a crash mid-write leaves one; nobody else writes here
            stale.unlink(missing_ok=True)
        log = self.path / ROLLOUTS_FILE
        kept: dict[Key, Rollout] = {}
        if resume:
            self._check_same_run()
            kept = self._read_log(log, set(keys))
        else:  # metadata first: rollouts without metadata cannot be resumed, rollouts under a wrong one could
            for name in (METADATA_FILE, RESULTS_FILE):
                (self.path / name).unlink(missing_ok=True)
            log.write_bytes(b"")
        self._log = log.open("a", encoding="utf-8")
        self._write_metadata({"complete": False})
        return kept

    def append(self, row: Mapping[str, Any]) -> None:
        """A finished rollout's record (:meth:`Rollout.row`) as the log's next line, flushed (not synced:
        a killed process loses nothing flushed, and a crash tears at most this line)."""
        assert self._log is not None, "start() first"
        self._log.write(json.dumps(row) + "\n")
        self._log.flush()

    def finish(self, rows: list[dict[str, Any]], summary: Mapping[str, Any]) -> None:
        """The final files: ``rows`` to results.parquet, then metadata.json with ``summary`` and complete."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._close_log()
        table = pa.Table.from_pylist(rows) if rows else pa.table({"task_id": pa.array([], pa.string())})
        _replace(self.path / RESULTS_FILE, lambda temporary: pq.write_table(table, temporary))
        self._write_metadata({"complete": True, **summary})

    def close(self) -> None:
        self._close_log()
        if self._lock is not None:
            os.close(self._lock)  # releases the lock
            self._lock = None

    def _take_lock(self) -> None:
        descriptor = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise EvalResultsError(
                self.path,
                f"another verihub eval is writing to {relative_display(self.path)}; "
                "wait for it, or write to a new --out",
            ) from None
        self._lock = descriptor

    def _check_same_run(self) -> None:
        metadata, log = self.path / METADATA_FILE, self.path / ROLLOUTS_FILE
        if not metadata.exists():
            if log.exists() and log.stat().st_size:
                raise EvalResultsError(
                    self.path,
                    f"cannot resume {relative_display(self.path)}: it has {ROLLOUTS_FILE} "
                    f"but no {METADATA_FILE}, so nothing says which run wrote them; move them "
                    "away, or write to a new --out",
                )
            return
        earlier = read_metadata(metadata)
        assert self.identity is not None, "only an eval's run is resumed"
        differences = self.identity.differences(earlier)
        if differences:
            raise ResumeMismatchError(self.path, differences)

    def _read_log(self, log: Path, keys: set[Key]) -> dict[Key, Rollout]:
        if not log.exists():
            return {}
        scan = scan_log(log, keys)
        if scan.torn:  # cut short: the earlier run died while writing it
            os.truncate(log, scan.end)
            self._note(
                f"{relative_display(log)}: dropped its torn last line (line {scan.lines + 1}, {scan.torn} "
                "bytes): the earlier run stopped while writing it, and that rollout runs again"
            )
        elif scan.unterminated:  # whole, but its newline was never written
            with log.open("ab") as handle:
                handle.write(b"\n")
        return {key: rollout for key, rollout in scan.found.items() if rollout.status in _KEPT}

    def _note(self, note: str) -> None:
        self.notes.append(note)
        logger.warning(note)

    def _write_metadata(self, extra: Mapping[str, Any]) -> None:
        identity = self.identity.model_dump() if self.identity is not None else {}
        seed = {"seed": identity["sampling"].get("seed")} if identity else {}
        metadata = {**identity, **seed, **self.stamp, **extra, "notes": self.notes}
        text = json.dumps(metadata, indent=2, default=str)
        _replace(self.path / METADATA_FILE, lambda temporary: Path(temporary).write_text(text, encoding="utf-8"))

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.flush()
            os.fsync(self._log.fileno())
            self._log.close()
            self._log = None


@dataclass(frozen=True)
class LogScan:
    """What a rollout log holds, read without changing it: each key's last record, where its complete lines end,
    and its tail (``torn``: bytes of a line cut short; ``unterminated``: a whole last line without its newline)."""

    found: dict[Key, Rollout]
    lines: int
    end: int
    torn: int = 0
    unterminated: bool = False


def read_metadata(path: Path) -> dict[str, Any]:
    """A run's ``metadata.json``; :class:`~verihub.errors.CorruptResultsError` naming what is wrong with it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise CorruptResultsError(path, error.lineno, f"not JSON ({error.msg})") from None
    except UnicodeDecodeError:
        raise CorruptResultsError(path, 1, "not UTF-8 text") from None
    if not isinstance(data, dict):
        raise CorruptResultsError(path, 1, "not a JSON object")
    return data


def scan_log(log: Path, keys: set[Key] | None = None) -> LogScan:
    """The records of ``log`` (a rollout log), the last word on each ``(task id, sample)``; with ``keys``, a
    record of any other key is corruption. :class:`~verihub.errors.CorruptResultsError` names the bad line."""
    data = log.read_bytes()
    end = data.rfind(b"\n") + 1  # the complete lines end here; after it, a torn line or nothing
    found: dict[Key, Rollout] = {}
    lines = data[:end].split(b"\n")[:-1]
    for number, line in enumerate(lines, 1):
        if line.strip():
            rollout = _parse(log, number, line, keys)
            found[(rollout.task_id, rollout.sample)] = rollout
    tail = data[end:]
    if not tail:
        return LogScan(found, len(lines), end)
    try:
        json.loads(tail)
    except ValueError:
        return LogScan(found, len(lines), end, torn=len(tail))
    rollout = _parse(log, len(lines) + 1, tail, keys)
    found[(rollout.task_id, rollout.sample)] = rollout
    return LogScan(found, len(lines) + 1, len(data), unterminated=True)


def _parse(log: Path, number: int, line: bytes, keys: set[Key] | None) -> Rollout:
    try:
        rollout = Rollout.from_row(json.loads(line))
    except json.JSONDecodeError as error:
        raise CorruptResultsError(log, number, f"not JSON ({error.msg} at column {error.colno})") from None
    except ValueError as error:  # bad UTF-8, or JSON that is not a rollout record
        raise CorruptResultsError(log, number, str(error)) from None
    if keys is not None and (rollout.task_id, rollout.sample) not in keys:
        raise CorruptResultsError(
            log, number, f"task {rollout.task_id!r} sample {rollout.sample} is not part of this run"
        )
    return rollout


def _replace(path: Path, write: Callable[[str], object]) -> None:
    """``write`` a temporary file next to ``path``, sync it, and rename it over ``path``."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.partial")
    try:
        write(str(temporary))
        descriptor = os.open(temporary, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)  # the rename itself survives a power loss
    finally:
        os.close(directory)
