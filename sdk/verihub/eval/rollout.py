"""Rollouts: K samples per task, single- or multi-turn with tools, graded as soon as each finishes.

Generation requests are bounded by ``concurrency``; grading of a finished rollout starts at once and
overlaps with the generation of the others. A backend that fails after its retries, a tool whose
sandbox fails, or a verifier fault ends a rollout as ``env_error`` with the reason; a model mistake
(bad tool arguments, a wrong answer) is ``wrong``. A multi-turn rollout with sandboxed tools starts from
the task's ``files`` column and is graded on its terminal state: the verifier gets the task with the final
work dir under ``verihub.sandbox.tools.WORKDIR``. Each rollout drives one :class:`verihub.environment.session.Session`:
the
tool loop and the terminal-state grading are the session's, shared with the trainer and ``verihub serve``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from verihub.environment.core import Environment
from verihub.environment.session import Session
from verihub.errors import DataError, describe_error
from verihub.generation import Backend, Generation, GenerationError, Sampling
from verihub.grading.grade import Grade, GradeStatus, LayerStatus
from verihub.grading.injection import injection_flag

__all__ = ["Rollout", "RolloutEngine"]

Task = Mapping[str, Any]
Message = dict[str, Any]


@dataclass
class Rollout:
    """One sampled attempt at one task, and its grade."""

    task_id: str
    sample: int
    messages: list[Message]  # the whole conversation, prompt included
    completion: str  # the final assistant text, which was graded
    status: str  # ok | wrong | env_error | timeout
    reward: float | None
    reason: str = ""
    layers: dict[str, float | None] = field(default_factory=dict)  # layer -> score (None: did not score)
    layers_passed: dict[str, bool | None] = field(default_factory=dict)  # layer -> passed (None: skipped)
    turns: int = 1
    prompt_tokens: int = 0
    completion_tokens: int = 0
    generation_s: float = 0.0
    grading_s: float = 0.0
    finish_reason: str = ""  # the last turn's: stop, length, tool_calls
    logprobs: list[list[float]] | None = None  # per assistant turn, each token's, when asked (Sampling.logprobs)
    answer_fault: str = ""  # the layer this answer made fault (graded wrong at the floor), if any
    judge_injection: str = ""  # how the answer addressed its judge ("verdict, instruction"), if a judge layer saw it

    def row(self) -> dict[str, Any]:
        """A flat record for parquet/jsonl (conversation and layer maps as JSON text)."""
        return {
            "task_id": self.task_id,
            "sample": self.sample,
            "completion": self.completion,
            "status": self.status,
            "reward": self.reward,
            "reason": self.reason,
            "turns": self.turns,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "generation_s": self.generation_s,
            "grading_s": self.grading_s,
            "layers": json.dumps(self.layers),
            "layers_passed": json.dumps(self.layers_passed),
            "messages": json.dumps(self.messages),
            "finish_reason": self.finish_reason,
            "logprobs": json.dumps(self.logprobs),
            "answer_fault": self.answer_fault,
            "judge_injection": self.judge_injection,
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Rollout:
        """The rollout that :meth:`row` gave; ValueError saying what is wrong with anything else."""
        try:
            values = dict(row)
            for key in ("layers", "layers_passed", "messages", "logprobs"):
                if key in values:  # logprobs: absent from the results of verihub 0.1
                    values[key] = json.loads(values[key])
            rollout: Rollout = _RECORD.validate_python(values)
        except ValidationError as error:
            first = error.errors()[0]
            raise DataError(f"not a rollout record: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
        except (KeyError, TypeError, ValueError) as error:
            raise DataError(f"not a rollout record ({describe_error(error, 200)})") from None
        if rollout.status not in _STATUSES:
            raise DataError(f"not a rollout record: status {rollout.status!r} is none of {', '.join(_STATUSES)}")
        if (rollout.reward is None) is (rollout.status in _GRADED):  # a fault has no reward, a grade has one
            raise DataError(f"not a rollout record: status {rollout.status!r} with reward {rollout.reward!r}")
        return rollout


_RECORD = TypeAdapter(Rollout)
_STATUSES = tuple(status.value for status in GradeStatus)
_GRADED = (GradeStatus.OK.value, GradeStatus.WRONG.value)


class RolloutEngine:
    """Runs rollouts of one environment against one backend."""

    def __init__(
        self,
        env: Environment,
        backend: Backend,
        sampling: Sampling,
        *,
        concurrency: int = 32,
        sandbox: Any = None,
        grader: Any = None,
    ) -> None:
        self.env, self.backend, self.sampling = env, backend, sampling
        self.concurrency = concurrency
        self.sandbox = sandbox  # for tool runs; None: the default sandbox
        # whose sessions grade: the environment in this process, or a verihub.serve.graders.RemoteGrader
        self.grader = grader if grader is not None else env
        self.multi_turn = (
            env.spec.interaction.kind == "multi_turn"
        )  # each rollout drives a verihub.environment.session.Session

    async def run(
        self,
        tasks: Iterable[Task],
        samples: Iterable[tuple[Task, int]] | None = None,
        on_rollout: Callable[[Rollout], Awaitable[None] | None] | None = None,
        *,
        k: int = 1,
    ) -> list[Rollout]:
        """Rollouts for each task (``k`` samples each), or for the given ``(task, sample)`` pairs."""
        limit = asyncio.Semaphore(self.concurrency)
        wanted = list(samples) if samples is not None else [(task, index) for task in tasks for index in range(k)]
        by_task: dict[str, tuple[Task, list[int]]] = {}
        for task, index in wanted:
            by_task.setdefault(str(task["id"]), (task, []))[1].append(index)
        results: list[Rollout] = []

        async def finish(rollout: Rollout) -> None:
            results.append(rollout)
            if on_rollout is not None:
                outcome = on_rollout(rollout)
                if outcome is not None:
                    await outcome

        jobs = []
        for task, indexes in by_task.values():
            if self.multi_turn:
                jobs += [self._multi_turn(task, index, limit, finish) for index in indexes]
            else:
                jobs.append(self._single_turn(task, indexes, limit, finish))
        await asyncio.gather(*jobs)
        return sorted(results, key=lambda r: (r.task_id, r.sample))

    async def _single_turn(
        self, task: Task, indexes: list[int], limit: asyncio.Semaphore, finish: Callable[[Rollout], Awaitable[None]]
    ) -> None:
        prompt = self.env.render(task)
        start = time.perf_counter()
        async with limit:  # the k samples of one task go out as one request (n=k)
            try:
                generations = await self.backend.generate(prompt, self.sampling.model_copy(update={"n": len(indexes)}))
            except GenerationError as error:
                for index in indexes:
                    await finish(_fault(task, index, prompt, f"generation failed: {error}"))
                return
        seconds = time.perf_counter() - start
        short = f"generation failed: the backend returned {len(generations)} of the {len(indexes)} samples asked for"

        async def grade(index: int, generation: Generation) -> None:
            session = self.grader.session(task)  # a session of one step: the completion
            session.reset()
            began = time.perf_counter()
            await session.astep(generation.message())
            await finish(_rollout(session, index, [generation], seconds, time.perf_counter() - began))

        await asyncio.gather(
            *(grade(index, generation) for index, generation in zip(indexes, generations, strict=False)),
            *(finish(_fault(task, index, prompt, short)) for index in indexes[len(generations) :]),
        )

    async def _multi_turn(
        self, task: Task, index: int, limit: asyncio.Semaphore, finish: Callable[[Rollout], Awaitable[None]]
    ) -> None:
        session = self.grader.session(task, sandbox=self.sandbox)
        schemas = session.reset()["tools"] or None
        single = self.sampling.model_copy(update={"n": 1})
        turns: list[Generation] = []
        seconds = grading_s = 0.0
        while not session.done:  # the session ends on an answer, the last turn allowed, or a fault
            start = time.perf_counter()
            async with limit:
                try:
                    turns.append((await self.backend.generate(session.messages, single, schemas))[0])
                except GenerationError as error:
                    session.close()
                    await finish(_fault(task, index, session.messages, f"generation failed: {error}", session.turns))
                    return
            seconds += time.perf_counter() - start
            began = time.perf_counter()
            await session.astep(turns[-1].message())
            grading_s = time.perf_counter() - began  # the last step's: the one that graded
        session.close()
        await finish(_rollout(session, index, turns, seconds, grading_s))


def _rollout(session: Session, index: int, turns: list[Generation], generation_s: float, grading_s: float) -> Rollout:
    """The rollout a finished session makes of the model's ``turns``: its grade, or its fault (reward None)."""
    if session.grade is None:
        return _fault(
            session.task, index, session.messages, session.fault or "the session ended ungraded", session.turns
        )
    rollout = _graded(session.task, index, session.messages, turns[-1].text if turns else "", session.grade)
    rollout.turns, rollout.generation_s, rollout.grading_s = session.turns, generation_s, grading_s
    rollout.prompt_tokens = sum(turn.prompt_tokens for turn in turns)
    rollout.completion_tokens = sum(turn.completion_tokens for turn in turns)
    rollout.finish_reason = turns[-1].finish_reason if turns else ""
    if any(turn.logprobs is not None for turn in turns):
        rollout.logprobs = [list(turn.logprobs or ()) for turn in turns]
    return rollout


def _graded(task: Task, index: int, messages: list[Message], completion: str, grade: Grade) -> Rollout:
    return Rollout(
        task_id=str(task["id"]),
        sample=index,
        messages=messages,
        completion=completion,
        status=str(grade.status),
        reward=grade.reward,
        reason=grade.reason or _first_failure(grade),
        layers={layer.name: layer.score for layer in grade.layers},
        layers_passed={
            layer.name: None if layer.status is LayerStatus.SKIPPED else layer.status is LayerStatus.PASSED
            for layer in grade.layers
        },
        answer_fault=fault.name if (fault := grade.answer_fault) is not None else "",
        judge_injection=injection_flag(grade),
    )


def _first_failure(grade: Grade) -> str:
    for layer in grade.layers:
        if layer.status is LayerStatus.FAILED:
            return f"{layer.name}: {layer.detail}" if layer.detail else layer.name
    return ""


def _fault(task: Task, index: int, messages: list[Message], reason: str, turns: int = 0) -> Rollout:
    return Rollout(
        task_id=str(task["id"]),
        sample=index,
        messages=messages,
        completion="",
        status=str(GradeStatus.ENV_ERROR),
        reward=None,
        reason=reason[:500],
        turns=turns,
    )
