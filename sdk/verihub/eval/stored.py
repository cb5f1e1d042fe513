"""Stored answers, read to be graded again (:mod:`verihub.eval.regrade`): an eval's output directory or a
training run's grade log, and what graded them.

- An eval's directory (``verihub eval --out``, :mod:`verihub.eval._outdir`): ``metadata.json`` names the run
  and the verifier that graded it (``graded_by``; results from before it was recorded: the run's own
  environment); the rollouts come from ``results.parquet`` once the run finished, else from ``rollouts.jsonl``
  (the last word on each rollout, a torn last line left out). Nothing there is changed.
- A training run's ``output_dir``: its grade log (:mod:`verihub.eval.gradelog`), the records of one environment
  id (the others are counted). A record graded on a tool rollout's final state is marked as one the log
  cannot grade again.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from verihub.environment.core import completion_text
from verihub.errors import CorruptResultsError, DataError, EvalResultsError, describe_error, relative_display
from verihub.eval._outdir import METADATA_FILE, RESULTS_FILE, ROLLOUTS_FILE, read_metadata, scan_log
from verihub.eval.gradelog import FULL, grade_log_files, read_grade_log
from verihub.eval.rollout import Rollout
from verihub.grading.grade import GradeStatus

__all__ = ["Kind", "StoredAnswer", "StoredResults", "read_results"]

Kind = Literal["eval", "training"]
Task = Mapping[str, Any]
_GRADED = (GradeStatus.OK.value, GradeStatus.WRONG.value)


@dataclass
class StoredAnswer:
    """One stored answer and its grade. An eval's rollout is replayed from its messages; a training record
    holds its ``task`` and the ``completion`` the trainer graded. ``why_not``: known to be ungradable."""

    rollout: Rollout
    task: Task | None = None
    completion: Any = None
    version: str = ""  # the version that graded it
    why_not: str = ""


@dataclass
class StoredResults:
    """Stored answers of one environment, and what graded them."""

    path: Path
    kind: Kind
    environment: str
    answers: list[StoredAnswer]
    graded_by: dict[str, Any]  # eval: metadata's graded_by; training: {"environment", "versions"}
    metadata: dict[str, Any] = field(default_factory=dict)  # an eval's metadata.json
    split: str | None = None
    other_environments: dict[str, int] = field(default_factory=dict)  # training: records of other environments
    notes: list[str] = field(default_factory=list)


# -- reading stored results --------------------------------------------------------------------------------


def read_results(path: Path, environment: str) -> StoredResults:
    """The answers stored in ``path`` for ``environment`` (an id): an eval's output directory, or a training
    run's directory with a grade log. :class:`~verihub.errors.EvalResultsError` says what it is not."""
    if (path / METADATA_FILE).is_file():
        return _read_eval(path, environment)
    if grade_log_files(path):
        return _read_training(path, environment)
    raise EvalResultsError(
        path,
        f"{relative_display(path)} holds neither an eval's results ({METADATA_FILE}, from verihub eval --out) nor "
        "a training run's grade log (grades.jsonl, which runs write to their output_dir)",
    )


def _read_eval(path: Path, environment: str) -> StoredResults:
    metadata = read_metadata(path / METADATA_FILE)
    named = metadata.get("environment")
    if named != environment:
        raise EvalResultsError(path, f"{relative_display(path)} holds results of {named!r}, not of {environment!r}")
    notes: list[str] = []
    parquet = path / RESULTS_FILE
    if metadata.get("complete") and parquet.is_file():
        rollouts = _read_parquet(parquet)
    elif (path / ROLLOUTS_FILE).is_file():
        scan = scan_log(path / ROLLOUTS_FILE)
        rollouts = sorted(scan.found.values(), key=lambda rollout: (rollout.task_id, rollout.sample))
        notes.append(f"the run did not finish: its {len(rollouts)} logged rollouts are regraded")
        if scan.torn:
            notes.append(f"{ROLLOUTS_FILE}: its torn last line ({scan.torn} bytes) was left out")
    else:
        raise EvalResultsError(path, f"{relative_display(path)} has {METADATA_FILE} but no rollouts")
    graded_by = metadata.get("graded_by")
    if not isinstance(graded_by, dict):  # results from before metadata named it: the run's own environment
        graded_by = {
            "environment": named,
            "version": metadata.get("environment_version"),
            "digest": metadata.get("environment_digest"),
            "source": metadata.get("environment_source"),
            "verihub_version": metadata.get("verihub_version"),
        }
    version = str(graded_by.get("version"))
    answers = [StoredAnswer(rollout, version=version) for rollout in rollouts]
    split = metadata.get("split") if isinstance(metadata.get("split"), str) else None
    return StoredResults(path, "eval", environment, answers, graded_by, metadata, split, notes=notes)


def _read_parquet(path: Path) -> list[Rollout]:
    import pyarrow.parquet as pq

    rollouts = []
    for number, row in enumerate(pq.read_table(path).to_pylist(), 1):
        try:
            rollouts.append(Rollout.from_row(row))
        except ValueError as error:
            raise CorruptResultsError(path, number, f"row {number}: {error}") from None
    return rollouts


def _read_training(path: Path, environment: str) -> StoredResults:
    answers: list[StoredAnswer] = []
    others: Counter[str] = Counter()
    versions: list[str] = []
    notes: list[str] = []
    for log in grade_log_files(path):
        for number, record in read_grade_log(log):
            if record.get(FULL):
                notes.append(
                    f"{log.name} stopped after {record.get('records')} records ({record.get('max_bytes')} bytes): "
                    "later completions of the run were not logged"
                )
                continue
            env_id = str(record.get("env_id", ""))
            if env_id != environment:
                others[env_id] += 1
                continue
            answer = _training_answer(log, number, record, len(answers))
            if answer.version not in versions:
                versions.append(answer.version)
            answers.append(answer)
    if not answers:
        found = ", ".join(sorted(others)) or "none"
        raise EvalResultsError(
            path, f"the grade log of {relative_display(path)} holds no {environment!r} (it holds: {found})"
        )
    graded_by = {
        "environment": environment,
        "version": versions[0] if len(versions) == 1 else None,
        "versions": versions,
    }
    return StoredResults(
        path, "training", environment, answers, graded_by, other_environments=dict(others), notes=notes
    )


def _training_answer(log: Path, number: int, record: Mapping[str, Any], index: int) -> StoredAnswer:
    try:
        task = json.loads(record["task"])
        completion = record["completion"]
        status, reward = str(record["status"]), record["reward"]
        if not isinstance(task, dict):
            raise DataError("its task is not a JSON object")
        if status not in _STATUSES or (reward is None) is (status in _GRADED):
            raise DataError(f"status {status!r} with reward {reward!r}")
        messages = (
            [dict(message) for message in completion]
            if isinstance(completion, list)
            else [{"role": "assistant", "content": str(completion)}]
        )
        text = _text(completion)
        rollout = Rollout(
            task_id=str(task.get("id", record.get("task_id", ""))),
            sample=index,
            messages=messages,
            completion=text,
            status=status,
            reward=None if reward is None else float(reward),
            reason=str(record.get("reason", "")),
            answer_fault=str(record.get("answer_fault", "")),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise CorruptResultsError(log, number, f"not a grade record ({describe_error(error, 200)})") from None
    why_not = (
        "final state not logged: graded on a tool rollout's work dir, which the log does not hold"
        if record.get("final_state")
        else ""
    )
    return StoredAnswer(rollout, task, completion, str(record.get("env_version", "")), why_not)


_STATUSES = tuple(status.value for status in GradeStatus)


def _text(completion: Any) -> str:
    try:
        return completion_text(completion)
    except ValueError:
        return ""
