"""Rewards for TRL from the environments' verifiers: one async reward function per environment.

Each function grades the rows of its own environment and returns ``None`` for the others, so TRL logs
``rewards/<env>/mean`` per domain and leaves off-domain rows out. An environment fault (``env_error``,
``timeout``) is ``None`` too: TRL drops a row that every function left unscored from the group baseline
and gives it no advantage, so a crashed check never teaches the model that its answer was wrong. What
each grade was (status, which kinds of layers passed, length) goes to a :class:`GradeLedger` that the
curriculum and the monitors read once the batch is scored. A row with a rollout session (a run with tool
environments) is graded by that session on its terminal state: its answer as the last step, and with
sandboxed tools the final work dir (the task's initial ``files`` when the rollout never ran a tool). With
a ``grader`` (:class:`verihub.serve.graders.RemoteGrader`) that grading, and the sessions, run on ``verihub
serve`` processes.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from verihub.environment.core import Completion, completion_text
from verihub.errors import describe_error
from verihub.eval.gradelog import GradeLog
from verihub.grading.grade import Grade, GradeStatus, LayerStatus
from verihub.grading.injection import injection_flag
from verihub.trainers.mixture import MixedEnv
from verihub.validation.calibration import DriftMonitor

__all__ = ["EnvReward", "GradeLedger", "Outcome"]

_SCORED = (GradeStatus.OK, GradeStatus.WRONG)


@dataclass(frozen=True)
class Outcome:
    """What one completion's grade says, reduced to what the curriculum and the monitors use."""

    env: str
    difficulty: str
    status: str  # ok | wrong | env_error | timeout
    reward: float | None
    rules_passed: bool | None  # every rule layer passed (None: the verifier has none, or a fault)
    checks_passed: bool | None  # every check/judge layer that ran passed (None: none ran)
    length: int  # characters of the graded answer
    text: str  # the graded answer (collapse detection compares them within a group)
    reason: str = ""
    answer_fault: str = ""  # the layer this answer made fault (graded wrong at the floor), if any
    judge_injection: str = ""  # how the answer addressed its judge ("verdict, instruction"), if a judge layer saw it

    @property
    def passed(self) -> bool:
        return self.status == GradeStatus.OK

    @property
    def fault(self) -> bool:
        return self.status not in _SCORED


class GradeLedger:
    """The outcomes of the batch being scored, by row; :meth:`take` hands them over and starts afresh."""

    def __init__(self) -> None:
        self._rows: dict[int, Outcome] = {}
        self._agreements: dict[str, float] = {}  # env -> latest judge agreement with its calibration labels
        self._lock = threading.Lock()

    def record(self, row: int, outcome: Outcome) -> None:
        with self._lock:
            self._rows[row] = outcome

    def take(self, rows: int) -> list[Outcome | None]:
        with self._lock:
            taken = [self._rows.get(row) for row in range(rows)]
            self._rows = {}
        return taken

    def record_agreement(self, env: str, agreement: float) -> None:
        with self._lock:
            self._agreements[env] = agreement

    def take_agreements(self) -> dict[str, float]:
        with self._lock:
            taken, self._agreements = self._agreements, {}
        return taken


class EnvReward:
    """A TRL reward function for one environment of the mix (async; TRL awaits it on its own loop)."""

    def __init__(self, item: MixedEnv, ledger: GradeLedger, grader: Any = None, log: GradeLog | None = None) -> None:
        self.item = item
        self.ledger = ledger
        self.log = log  # every graded completion with its task (output_dir/grades.jsonl): what `verihub regrade` reads
        # grades rows without a rollout session: the environment here, or a verihub.serve.graders.RemoteGrader
        self.grader = grader if grader is not None else item.env
        self.__name__ = item.name  # TRL names the reward column, and its logs, after this
        self.drift = DriftMonitor(item.env)  # re-grades the judge's calibration items now and then

    async def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Completion],
        environment: Sequence[str],
        task: Sequence[str],
        difficulty: Sequence[str],
        environments: Sequence[Any] | None = None,
        **_: Any,
    ) -> list[float | None]:
        mine = [row for row, name in enumerate(environment) if name == self.item.name]
        outcomes = await self.grade_rows(
            [task[row] for row in mine],
            [difficulty[row] for row in mine],
            [completions[row] for row in mine],
            [environments[row] for row in mine] if environments else None,
        )
        rewards: list[float | None] = [None] * len(prompts)
        for row, outcome in zip(mine, outcomes, strict=True):
            self.ledger.record(row, outcome)
            rewards[row] = outcome.reward if not outcome.fault else None
        return rewards

    async def grade_rows(
        self,
        tasks: Sequence[str],
        difficulties: Sequence[str],
        completions: Sequence[Completion],
        instances: Sequence[Any] | None = None,
    ) -> list[Outcome]:
        """The outcome of each completion of this environment (a rollout's ``instances`` grade their final
        state); the judge's drift is checked as the grades go by. ``__call__`` reports these to TRL and to the
        ledger by row; the asynchronous trainer's worker takes them as they are (its groups grade at the
        same time, and would mix up each other's rows)."""
        outcomes = await asyncio.gather(
            *(
                self._grade(task, difficulty, completion, instance)
                for task, difficulty, completion, instance in zip(
                    tasks, difficulties, completions, instances or [None] * len(tasks), strict=True
                )
            )
        )
        if self.drift.active:
            for _ in outcomes:
                report = await self.drift.after_grade()
                if report is not None:
                    self.ledger.record_agreement(self.item.name, report.agreement)
        if self.log is not None:
            for task, completion, instance, outcome in zip(
                tasks, completions, instances or [None] * len(tasks), outcomes, strict=True
            ):
                self.log.record(
                    self.item.name,
                    self.item.env,
                    task,
                    completion,
                    outcome.status,
                    outcome.reward,
                    reason=outcome.reason,
                    answer_fault=outcome.answer_fault,
                    # graded on a rollout's final state (its session's), which the log does not hold
                    final_state=getattr(instance, "session", None) is not None
                    or getattr(instance, "fault", None) is not None,
                )
        return list(outcomes)

    async def _grade(self, task_json: str, difficulty: str, completion: Completion, instance: Any) -> Outcome:
        text = _answer_text(completion)
        fault = getattr(instance, "fault", None)
        if fault is not None:  # the rollout's sandbox failed: nothing to grade
            return Outcome(self.item.name, difficulty, GradeStatus.ENV_ERROR, None, None, None, len(text), text, fault)
        session = getattr(instance, "session", None)
        try:
            if session is not None:  # the rollout's session grades its final state (the work dir, where there is one)
                completion_text(completion)  # a rollout without an answer is a fault, as below
                if not session.done:
                    await session.astep({"content": text})
                await session.aend_rollout()  # a remote's episode still going when the rollout is over ends here
                grade = session.grade
            else:
                grade = await self.grader.agrade(json.loads(task_json), completion)
        except Exception as error:  # noqa: BLE001 - a verifier bug is this environment's fault, not a wrong answer
            if session is not None:
                session.close()  # whatever it holds (a sandbox, a remote's connection) goes now
            return Outcome(
                self.item.name,
                difficulty,
                GradeStatus.ENV_ERROR,
                None,
                None,
                None,
                len(text),
                text,
                f"{describe_error(error)}",
            )
        if grade is None:  # the session ended in a fault (a sandbox or a grader that failed)
            return Outcome(
                self.item.name,
                difficulty,
                GradeStatus.ENV_ERROR,
                None,
                None,
                None,
                len(text),
                text,
                getattr(session, "fault", None) or "the rollout ended ungraded",
            )
        return self._outcome(grade, difficulty, text)

    def _outcome(self, grade: Grade, difficulty: str, text: str) -> Outcome:
        ran = [
            layer
            for layer in grade.layers
            if layer.status in (LayerStatus.PASSED, LayerStatus.FAILED, LayerStatus.ANSWER_FAULT)
        ]
        rules = [layer.status == LayerStatus.PASSED for layer in ran if layer.layer == "rule"]
        checks = [layer.status == LayerStatus.PASSED for layer in ran if layer.layer != "rule"]
        fault = grade.answer_fault
        return Outcome(
            self.item.name,
            difficulty,
            str(grade.status),
            grade.reward,
            all(rules) if rules else None,
            all(checks) if checks else None,
            len(text),
            text,
            grade.reason,
            fault.name if fault is not None else "",
            injection_flag(grade),
        )


def _answer_text(completion: Completion) -> str:
    try:
        return completion_text(completion)
    except ValueError:  # a rollout that ended without an assistant message
        return ""
