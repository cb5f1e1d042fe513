"""``verihub regrade``: stored answers graded again under another verifier version, and what flipped.

A hole found today in a verifier paid reward in every eval and training run it graded. Regrading the stored
answers under the fixed version says how much: which rollouts flip (ok → wrong, wrong → ok, to or from a
fault, a reward that changes with the status), the reward paid before and after, per task.

What it reads (:mod:`verihub.eval.stored`): an eval's output directory (``verihub eval --out``, whose
``metadata.json`` names the verifier that graded it, ``graded_by``), or a training run's ``output_dir`` with its
grade log (:mod:`verihub.eval.gradelog`). Nothing there is changed.

How an answer is graded again: an eval's rollout is replayed in a session of the new version on the task of the
same id (in the run's split, else any split): its prompt from the new version, then each of the model's turns as
stored, so the verifier sees what it would have seen, a tool environment's final work dir included (each tool call
runs again; a tool that now answers differently than in the stored conversation means the replay is not that
rollout, and it is not regraded). A training record is graded as the trainer graded it: ``agrade(task,
completion)``. An answer that cannot be graded again is counted with the reason: no answer (the rollout faulted
before the model answered), a task the new version lacks, a replay that diverged, a final state the log does
not hold. Answers whose task changed under the new version (its prompt, or its row in a training log) are
graded, and counted.

The regraded results (``out``) have the eval format (:mod:`verihub.eval._outdir`), with ``status_before`` and
``reward_before`` columns, and metadata naming both verifiers: ``graded_by`` (the new) and ``regraded_from``
(what graded the answers first). An answer not regraded is a fault there (reward None, ``not regraded: why``),
so no rate counts a grade the new version never gave.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from verihub.environment.core import Environment, completion_text
from verihub.errors import EvalResultsError, describe_error, relative_display
from verihub.eval._outdir import METADATA_FILE, RESULTS_FILE, ROLLOUTS_FILE, RunDirectory, RunIdentity, eval_output
from verihub.eval.evaluate import metrics
from verihub.eval.rollout import Rollout, _graded
from verihub.eval.stored import Kind, StoredAnswer, StoredResults, read_results
from verihub.grading.grade import GradeStatus

__all__ = ["FLIPS", "RegradeReport", "Regraded", "aregrade", "regrade"]

Task = Mapping[str, Any]

OK, WRONG, FAULT = "ok", "wrong", "fault"
# Every way a grade can change, in the order a report lists them; "reward changed": same status, other reward.
FLIPS = (
    f"{OK} → {WRONG}",
    f"{WRONG} → {OK}",
    f"{OK} → {FAULT}",
    f"{WRONG} → {FAULT}",
    f"{FAULT} → {OK}",
    f"{FAULT} → {WRONG}",
    "reward changed",
    "unchanged",
)
MAX_CHANGES_SHOWN = 1000  # rollouts listed one by one in the JSON report (the counts are always whole)


@dataclass
class Regraded:
    """One stored answer and its new grade (None: not regraded, ``why_not`` says why)."""

    before: Rollout
    after: Rollout | None
    why_not: str = ""
    task_changed: bool = False  # the new version's task of this id differs (its prompt, or its row)

    @property
    def flip(self) -> str:
        """How the grade changed (one of :data:`FLIPS`); "" when it was not regraded."""
        if self.after is None:
            return ""
        then, now = _kind(self.before.status), _kind(self.after.status)
        if then != now:
            return f"{then} → {now}"
        return "reward changed" if then != FAULT and self.before.reward != self.after.reward else "unchanged"

    @property
    def reward_after(self) -> float:
        return self.after.reward or 0.0 if self.after is not None else 0.0


@dataclass
class RegradeReport:
    """What a regrade found; :meth:`summary` is its JSON form (``verihub regrade --json``)."""

    results: Path
    kind: Kind
    environment: str
    before: dict[str, Any]
    after: dict[str, Any]
    items: list[Regraded]
    k: int | None = None  # an eval's samples per task
    notes: list[str] = field(default_factory=list)
    other_environments: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0

    @property
    def regraded(self) -> list[Regraded]:
        return [item for item in self.items if item.after is not None]

    def flips(self) -> dict[str, dict[str, Any]]:
        """Each kind of change (:data:`FLIPS`) with its rollouts and the reward they were paid before and after."""
        table = {kind: {"rollouts": 0, "reward_before": 0.0, "reward_after": 0.0} for kind in FLIPS}
        for item in self.regraded:
            row = table[item.flip]
            row["rollouts"] += 1
            row["reward_before"] += item.before.reward or 0.0
            row["reward_after"] += item.reward_after
        return {kind: _rounded(row) for kind, row in table.items()}

    def tasks(self) -> dict[str, dict[str, Any]]:
        """Per task with a change: how many rollouts flipped each way, and the reward paid before and after."""
        found: dict[str, dict[str, Any]] = {}
        for item in self.regraded:
            if item.flip == "unchanged":
                continue
            row = found.setdefault(item.before.task_id, {"reward_before": 0.0, "reward_after": 0.0})
            row[item.flip] = row.get(item.flip, 0) + 1
            row["reward_before"] += item.before.reward or 0.0
            row["reward_after"] += item.reward_after
        return {task_id: _rounded(row) for task_id, row in found.items()}

    def not_regraded(self) -> dict[str, int]:
        return dict(Counter(_reason_kind(item.why_not) for item in self.items if item.after is None))

    def rates(self) -> dict[str, dict[str, Any]]:
        """An eval's headline rates before and after (:func:`~verihub.eval.evaluate.metrics`, over the same
        rollouts: one not regraded counts as a fault after), else nothing."""
        if self.kind != "eval" or self.k is None:
            return {}
        task_ids = list(dict.fromkeys(item.before.task_id for item in self.items))
        keys = ("pass@1", f"pass@{self.k}", "mean_reward", "mean_reward_graded", "rollouts_faulted")
        before = metrics(task_ids, self.k, [item.before for item in self.items])
        after = metrics(task_ids, self.k, self.rollouts_after())
        return {"before": {key: before[key] for key in keys}, "after": {key: after[key] for key in keys}}

    def rollouts_after(self) -> list[Rollout]:
        """Every rollout as the regrade leaves it: its new grade, or a fault saying why it was not regraded."""
        return [item.after if item.after is not None else _not_regraded(item) for item in self.items]

    def summary(self) -> dict[str, Any]:
        regraded = self.regraded
        changes = [
            {
                "task_id": item.before.task_id,
                "sample": item.before.sample,
                "flip": item.flip,
                "before": item.before.status,
                "after": now.status,
                "reward_before": item.before.reward,
                "reward_after": now.reward,
                "reason_after": now.reason,
            }
            for item in regraded
            if (now := item.after) is not None and item.flip != "unchanged"
        ]
        before = _sum(item.before.reward or 0.0 for item in regraded)
        after = _sum(item.reward_after for item in regraded)
        withdrawn = _sum(max(0.0, (item.before.reward or 0.0) - item.reward_after) for item in regraded)
        return {
            "results": str(self.results),
            "kind": self.kind,
            "environment": self.environment,
            "graded_by_before": self.before,
            "graded_by_after": self.after,
            "rollouts": len(self.items),
            "regraded": len(regraded),
            "not_regraded": len(self.items) - len(regraded),
            "not_regraded_by_reason": self.not_regraded(),
            "tasks_changed": sum(item.task_changed for item in regraded),
            "flips": self.flips(),
            "changed": len(changes),
            "reward_before": before,
            "reward_after": after,
            "reward_withdrawn": withdrawn,  # paid before, not after: what the holes the new version closes paid
            "reward_added": round(after - before + withdrawn, 9),
            "rates": self.rates(),
            "tasks": self.tasks(),
            "changes": changes[:MAX_CHANGES_SHOWN],
            "other_environments": self.other_environments,
            "notes": self.notes,
            "wall_s": self.wall_s,
        }


def regrade(results: str | Path, env: Environment, **options: Any) -> RegradeReport:
    """:func:`aregrade`, for code that is not async."""
    return asyncio.run(aregrade(results, env, **options))


async def aregrade(
    results: str | Path | StoredResults,
    env: Environment,
    *,
    concurrency: int = 8,
    out: str | Path | None = None,
) -> RegradeReport:
    """Grade the answers stored in ``results`` (an eval's ``--out`` or a training run's ``output_dir``) again with
    ``env`` (another version of their environment) and compare; with ``out``, write the regraded results there
    (a new directory: never the results read, never other results)."""
    stored = results if isinstance(results, StoredResults) else read_results(Path(results), env.id)
    target = _check_out(Path(out), stored.path) if out is not None else None
    start = time.perf_counter()
    tasks = _Tasks(env, stored.split)
    limit = asyncio.Semaphore(max(1, concurrency))

    async def one(answer: StoredAnswer) -> Regraded:
        async with limit:
            return await _regrade_one(env, tasks, answer)

    items = list(await asyncio.gather(*(one(answer) for answer in stored.answers)))
    after = _graded_by(env, stored, tasks)
    notes = list(stored.notes)
    if stored.kind == "eval" and after["digest"] == stored.graded_by.get("digest"):
        notes.append("the same verifier graded these results: what changes is the verifier's own nondeterminism")
    elif stored.kind == "eval" and after["version"] == stored.graded_by.get("version"):
        notes.append(f"{env.id}@{env.version} has other content than the version of that name that graded these")
    report = RegradeReport(
        stored.path,
        stored.kind,
        env.id,
        stored.graded_by,
        after,
        items,
        k=int(stored.metadata["k"]) if stored.kind == "eval" and "k" in stored.metadata else None,
        notes=notes,
        other_environments=stored.other_environments,
        wall_s=time.perf_counter() - start,
    )
    if target is not None:
        _write(target, stored, report)
    return report


# -- grading again -----------------------------------------------------------------------------------------


class _Tasks:
    """The new version's tasks by id: the run's split first, the others when an id is not there."""

    def __init__(self, env: Environment, split: str | None) -> None:
        self.env = env
        self.order = ([split] if split in env.split_names else []) + [s for s in env.split_names if s != split]
        self.by_id: dict[str, Task] = {}
        self.listed: list[Task] = []  # in the order of the splits' rows
        self.read = 0

    def get(self, task_id: str) -> Task | None:
        while task_id not in self.by_id and self.next_split():
            pass
        return self.by_id.get(task_id)

    def next_split(self) -> bool:
        """Read one more split's rows (as the eval and the trainer grade them: the dataset's); False: none left."""
        if self.read >= len(self.order):
            return False
        for task in self.env.dataset(self.order[self.read]):
            if str(task["id"]) not in self.by_id:
                self.by_id[str(task["id"])] = task
                self.listed.append(task)
        self.read += 1
        return True


async def _regrade_one(env: Environment, tasks: _Tasks, answer: StoredAnswer) -> Regraded:
    before = answer.rollout
    if answer.why_not:
        return Regraded(before, None, answer.why_not)
    task = tasks.get(before.task_id)
    if task is None:
        return Regraded(before, None, f"task not in {env.id}@{env.version}: {before.task_id!r}")
    if answer.task is not None:  # a training record: graded as the trainer graded it
        return await _grade_completion(env, task, answer)
    return await _replay(env, task, before)


async def _grade_completion(env: Environment, task: Task, answer: StoredAnswer) -> Regraded:
    before = answer.rollout
    changed = json.loads(json.dumps(dict(task), default=str)) != answer.task
    try:
        completion_text(answer.completion)
    except ValueError as error:  # no assistant message to grade: the record holds no answer
        return Regraded(before, None, f"no answer: {describe_error(error, 200)}")
    began = time.perf_counter()
    try:
        grade = await env.agrade(task, answer.completion)
    except Exception as error:  # noqa: BLE001 - a verifier bug is the environment's fault, as in any grading
        return Regraded(before, _fault(before, f"verifier failed: {describe_error(error, 300)}"), "", changed)
    return Regraded(before, _regraded(before, task, grade, time.perf_counter() - began), "", changed)


async def _replay(env: Environment, task: Task, before: Rollout) -> Regraded:
    """The stored conversation's turns, stepped through a session of ``env``: its new grade, or why not."""
    turns = [index for index, message in enumerate(before.messages) if message.get("role") == "assistant"]
    turns = turns[len(turns) - before.turns :] if 0 < before.turns <= len(turns) else []
    if not turns or before.reason.startswith("generation failed"):
        return Regraded(
            before, None, f"no answer: the rollout faulted before the model answered ({before.reason[:120]})"
        )
    session, changed = None, False
    began = time.perf_counter()
    try:
        session = env.session(task)
        changed = _texts(session.reset()["messages"]) != _texts(before.messages[: turns[0]])
        for number, at in enumerate(turns, 1):
            if session.done:
                return Regraded(
                    before, None, f"replay ended early: the session ended after turn {number - 1} of {len(turns)}"
                )
            shown = len(session.messages) + 1  # what the session answers this turn comes after it
            await session.astep(before.messages[at])
            stored = before.messages[at + 1 : turns[number] if number < len(turns) else len(before.messages)]
            if _texts(session.messages[shown:]) != _texts(stored):
                return Regraded(
                    before, None, f"replay diverged: turn {number}'s tools answered otherwise than when it ran", changed
                )
        if not session.done:
            return Regraded(before, None, "replay ended early: the stored conversation stops before the session does")
        if session.grade is None:
            return Regraded(before, _fault(before, session.fault or "the session ended ungraded"), "", changed)
        return Regraded(before, _regraded(before, task, session.grade, time.perf_counter() - began), "", changed)
    except Exception as error:  # noqa: BLE001 - a stored turn the session refuses, a task it cannot render
        return Regraded(before, None, f"replay failed: {describe_error(error, 200)}", changed)
    finally:
        if session is not None:
            session.close()


def _regraded(before: Rollout, task: Task, grade: Any, seconds: float) -> Rollout:
    """``before`` with ``grade``'s status, reward, reason and layers (the conversation and its costs as stored)."""
    fresh = _graded(task, before.sample, before.messages, before.completion, grade)
    return replace(
        before,
        status=fresh.status,
        reward=fresh.reward,
        reason=fresh.reason,
        layers=fresh.layers,
        layers_passed=fresh.layers_passed,
        answer_fault=fresh.answer_fault,
        judge_injection=fresh.judge_injection,
        grading_s=seconds,
    )


def _fault(before: Rollout, reason: str) -> Rollout:
    return replace(
        before,
        status=str(GradeStatus.ENV_ERROR),
        reward=None,
        reason=reason[:500],
        layers={},
        layers_passed={},
        answer_fault="",
        judge_injection="",
    )


def _not_regraded(item: Regraded) -> Rollout:
    return _fault(item.before, f"not regraded: {item.why_not}")


def _sum(values: Iterable[float]) -> float:
    return round(math.fsum(values), 9)  # sums of many rewards, without float noise in the last digits


def _rounded(row: dict[str, Any]) -> dict[str, Any]:
    return {key: round(value, 9) if isinstance(value, float) else value for key, value in row.items()}


def _kind(status: str) -> str:
    return status if status in (OK, WRONG) else FAULT


def _reason_kind(why: str) -> str:
    return why.split(":", 1)[0][:80]


def _texts(messages: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    return [(str(message.get("role", "")), str(message.get("content") or "")) for message in messages]


# -- what graded, and the regraded results on disk ---------------------------------------------------------


def _graded_by(env: Environment, stored: StoredResults, tasks: _Tasks) -> dict[str, Any]:
    """The new verifier, named the way an eval's metadata names its own: its digest is over the tasks regraded, in
    their split's order, the environment's files but the results (for an eval: what its own run's would be)."""
    from verihub import __version__
    from verihub.environment.digest import content_manifest, manifest_digest

    seen = {answer.rollout.task_id for answer in stored.answers}
    for task_id in seen:
        tasks.get(task_id)
    regraded = [task for task in tasks.listed if str(task["id"]) in seen]  # an eval's: its split's first rows
    return {
        "environment": env.id,
        "version": env.version,
        "digest": manifest_digest(content_manifest(env, regraded, skip=eval_output(stored.path))),
        "source": env.load_report.source if env.load_report is not None else None,
        "verihub_version": __version__,
    }


def _check_out(out: Path, results: Path) -> Path:
    if out.resolve() == results.resolve():
        raise EvalResultsError(out, "--out is the results being regraded: write the regraded ones to a new directory")
    held = [name for name in (METADATA_FILE, ROLLOUTS_FILE, RESULTS_FILE) if (out / name).exists()]
    if held:
        raise EvalResultsError(
            out, f"{relative_display(out)} holds results already ({', '.join(held)}): write to a new --out"
        )
    return out


def _write(out: Path, stored: StoredResults, report: RegradeReport) -> None:
    try:
        identity: RunIdentity | None = RunIdentity.model_validate(stored.metadata) if stored.kind == "eval" else None
    except ValueError:
        identity = None  # metadata of an older verihub: the regrade's own fields still say what it is
    summary = report.summary()
    regraded_from = {
        "results": str(stored.path),
        "kind": stored.kind,
        "graded_by": stored.graded_by,
        "metrics": stored.metadata.get("metrics"),
    }
    stamp = {"graded_by": report.after, "regraded_from": regraded_from}
    run = RunDirectory(out, identity, stamp if identity is not None else {"environment": stored.environment, **stamp})
    rows = []
    try:
        run.start({(item.before.task_id, item.before.sample) for item in report.items}, resume=False)
        for item, after in zip(report.items, report.rollouts_after(), strict=True):
            row = {**after.row(), "status_before": item.before.status, "reward_before": item.before.reward}
            run.append(row)
            rows.append(row)
        task_ids = list(dict.fromkeys(item.before.task_id for item in report.items))
        regrade_fields = {key: summary[key] for key in _KEPT_IN_METADATA}
        extra: dict[str, Any] = {"wall_s": report.wall_s, "regrade": regrade_fields}
        if report.k is not None:
            extra["metrics"] = metrics(task_ids, report.k, report.rollouts_after())
        run.finish(rows, extra)
    finally:
        run.close()


_KEPT_IN_METADATA: Sequence[str] = (
    "rollouts",
    "regraded",
    "not_regraded",
    "not_regraded_by_reason",
    "tasks_changed",
    "flips",
    "reward_before",
    "reward_after",
    "reward_withdrawn",
    "reward_added",
    "notes",
)
