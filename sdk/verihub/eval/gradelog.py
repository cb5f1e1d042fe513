"""A training run's grade log: each completion its reward functions graded, with its task, one JSON line each in
``output_dir/grades.jsonl``, so that ``verihub regrade`` can grade a run's past answers again under another
verifier version and say how much reward a hole paid.

The log is bounded: once a process's file would pass ``max_bytes`` it says so in a last line and takes no more
(the run goes on). A completion graded on a rollout's final state (a tool environment's work dir) is logged with
``final_state: true``: the log holds its answer, not that state, so it cannot be graded again from the log. With
``accelerate``/``torchrun`` each process other than the first writes ``grades.rank<N>.jsonl``.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

from verihub.errors import CorruptResultsError

__all__ = ["FULL", "GRADE_LOG", "MAX_LOG_BYTES", "GradeLog", "grade_log_files", "read_grade_log"]

GRADE_LOG = "grades.jsonl"
MAX_LOG_BYTES = 64 << 20  # per process: a long run's first hundreds of thousands of short completions
FULL = "log_full"  # the key of the last line a full log gets


class GradeLog:
    """One process's grade log in ``directory``, appended to (a resumed run keeps what it logged before; a line a
    killed run tore is cut off first); :meth:`record` is safe from any thread."""

    def __init__(self, directory: str | Path, *, max_bytes: int = MAX_LOG_BYTES) -> None:
        rank = int(os.environ.get("RANK", "0") or 0)
        name = GRADE_LOG if not rank else GRADE_LOG.replace(".jsonl", f".rank{rank}.jsonl")
        self.path = Path(directory) / name
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.records = 0
        self._written = _whole_lines(self.path)  # the cap counts what earlier runs of this output_dir logged
        self._full = False
        self._lock = threading.Lock()
        self._file: TextIO | None = self.path.open("a", encoding="utf-8")

    def record(
        self,
        environment: str,
        env: Any,
        task: str | Mapping[str, Any],
        completion: Any,
        status: str,
        reward: float | None,
        *,
        reason: str = "",
        answer_fault: str = "",
        final_state: bool = False,
    ) -> None:
        """One graded completion: the run's name for its environment, the environment (its id and version), the
        task (a row, or its JSON text), the completion as it was graded (text or chat messages), its grade."""
        task_text = task if isinstance(task, str) else json.dumps(dict(task), default=str)
        line = json.dumps(
            {
                "environment": environment,
                "env_id": env.id,
                "env_version": env.version,
                "task_id": str(_task_id(task_text)),
                "task": task_text,
                "completion": completion,
                "status": str(status),
                "reward": reward,
                "reason": reason[:500],
                "answer_fault": answer_fault,
                "final_state": final_state,
            },
            default=str,
        )
        with self._lock:
            if self._file is None or self._full:
                return
            if self._written + len(line) + 1 > self.max_bytes:
                self._full = True
                self._file.write(json.dumps({FULL: True, "records": self.records, "max_bytes": self.max_bytes}) + "\n")
                self._file.flush()
                return
            self._file.write(line + "\n")
            self._file.flush()  # a killed run keeps every line flushed; a crash tears at most the last
            self._written += len(line) + 1
            self.records += 1

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def grade_log_files(directory: Path) -> list[Path]:
    """The grade logs a training run's ``directory`` holds: the first process's, then the others' by rank."""
    first = directory / GRADE_LOG
    others = sorted(directory.glob("grades.rank*.jsonl"), key=lambda path: _rank(path.name))
    return ([first] if first.is_file() else []) + others


def read_grade_log(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each record of a grade log with its line number; the marker of a full log is yielded too (key :data:`FULL`).
    A torn last line (the run was killed while writing it) is left out; any other bad line is
    :class:`~verihub.errors.CorruptResultsError`."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    terminated = data.endswith(b"\n")
    last = len(lines) - 1 if terminated else len(lines)
    for number, line in enumerate(lines[:last], 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as error:
            if number == last and not terminated:
                return  # torn: the only line a crash can leave part of
            raise CorruptResultsError(path, number, f"not JSON ({error})") from None
        if not isinstance(record, dict):
            raise CorruptResultsError(path, number, "not a JSON object")
        yield number, record


def _whole_lines(path: Path) -> int:
    """The size of ``path`` once a torn last line (a killed run's) is cut off: 0 when there is no file."""
    try:
        with path.open("r+b") as handle:
            data = handle.read()
            end = data.rfind(b"\n") + 1
            if end < len(data):
                handle.truncate(end)
            return end
    except FileNotFoundError:
        return 0


def _task_id(task_text: str) -> object:
    try:
        row = json.loads(task_text)
    except ValueError:
        return ""
    return row.get("id", "") if isinstance(row, dict) else ""


def _rank(name: str) -> int:
    digits = name.removeprefix("grades.rank").removesuffix(".jsonl")
    return int(digits) if digits.isdigit() else 1 << 30
