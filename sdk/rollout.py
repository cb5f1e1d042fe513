"""Rollouts: K samples per task, single- or multi-turn with tools, graded as soon as each finishes.

Generation requests are bounded by ``concurrency``; grading of a finished rollout starts at once and
overlaps with the generation of the others. A backend that fails after its retries, a tool whose
sandbox fails, or a verifier fault ends a rollout as ``env_error`` with the reason; a model mistake
(bad tool arguments, a wrong answer) is ``wrong``. A multi-turn rollout with sandboxed tools starts from
the task's ``files`` column and is graded on its terminal state: the verifier gets the task with the final
work dir under ``verihub.tools.WORKDIR``.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from verihub.environment import Environment
from verihub.errors import SandboxInfraError
from verihub.generation import Backend, Generation, GenerationError, Sampling
from verihub.grade import Grade, GradeStatus, LayerStatus
from verihub.spec import SANDBOX_TOOLS
from verihub.toolschema import function_schema

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

    def row(self) -> dict[str, Any]:
        """A flat record for parquet/jsonl (conversation and layer maps as JSON text)."""
        return {
            "task_id": self.task_id, "sample": self.sample, "completion": self.completion, "status": self.status,
            "reward": self.reward, "reason": self.reason, "turns": self.turns, "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens, "generation_s": self.generation_s,
            "grading_s": self.grading_s, "layers": json.dumps(self.layers),
            "layers_passed": json.dumps(self.layers_passed), "messages": json.dumps(self.messages),
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Rollout:
        """The rollout that :meth:`row` gave; ValueError saying what is wrong with anything else."""
        try:
            values = dict(row)
            for key in ("layers", "layers_passed", "messages"):
                values[key] = json.loads(values[key])
            rollout: Rollout = _RECORD.validate_python(values)
        except ValidationError as error:
            first = error.errors()[0]
            raise ValueError(f"not a rollout record: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a rollout record ({type(error).__name__}: {str(error)[:200]})") from None
        if rollout.status not in _STATUSES:
            raise ValueError(f"not a rollout record: status {rollout.status!r} is none of {', '.join(_STATUSES)}")
        if (rollout.reward is None) is (rollout.status in _GRADED):  # a fault has no reward, a grade has one
            raise ValueError(f"not a rollout record: status {rollout.status!r} with reward {rollout.reward!r}")
        return rollout


_RECORD = TypeAdapter(Rollout)
_STATUSES = tuple(status.value for status in GradeStatus)
_GRADED = (GradeStatus.OK.value, GradeStatus.WRONG.value)


class RolloutEngine:
    """Runs rollouts of one environment against one backend."""

    def __init__(self, env: Environment, backend: Backend, sampling: Sampling, *, concurrency: int = 32,
                 sandbox: Any = None) -> None:
        self.env, self.backend, self.sampling = env, backend, sampling
        self.concurrency = concurrency
        self.sandbox = sandbox  # for tool runs; None: the default sandbox
        interaction = env.spec.interaction
        self.multi_turn = interaction.kind == "multi_turn"
        self.max_turns = interaction.max_turns
        self.tool_names = list(interaction.tools)
        self.sandboxed = interaction.sandboxed
        self._schemas: list[dict[str, Any]] | None = None  # the tools' JSON schemas, the same for every rollout

    async def run(
        self, tasks: Iterable[Task], samples: Iterable[tuple[Task, int]] | None = None,
        on_rollout: Callable[[Rollout], Awaitable[None] | None] | None = None, *, k: int = 1,
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

    async def _single_turn(self, task: Task, indexes: list[int], limit: asyncio.Semaphore,
                           finish: Callable[[Rollout], Awaitable[None]]) -> None:
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
        await asyncio.gather(*(
            self._grade(task, index, [*prompt, generation.message()], generation.text, 1,
                        generation.prompt_tokens, generation.completion_tokens, seconds, finish)
            for index, generation in zip(indexes, generations, strict=False)
        ), *(finish(_fault(task, index, prompt, short)) for index in indexes[len(generations):]))

    async def _multi_turn(self, task: Task, index: int, limit: asyncio.Semaphore,
                          finish: Callable[[Rollout], Awaitable[None]]) -> None:
        from verihub.tools import SandboxTools, task_files, with_workdir

        messages: list[Message] = self.env.render(task)
        try:  # the task's `files` column seeds the work dir
            tools = (SandboxTools(files=task_files(task), limits=self.env.spec.sandbox, sandbox=self.sandbox)
                     if self.sandboxed else None)
        except ValueError as error:
            await finish(_fault(task, index, messages, f"cannot seed the work dir: {error}"))
            return
        functions = self._functions(tools)
        if self._schemas is None:  # from the signatures: built once (about a millisecond a tool), not per rollout
            self._schemas = [function_schema(function, name) for name, function in functions.items()]
        schemas = self._schemas
        single = self.sampling.model_copy(update={"n": 1})
        prompt_tokens = completion_tokens = 0
        seconds = 0.0
        last: Generation | None = None
        turns = 0
        try:
            while turns < self.max_turns:
                turns += 1
                start = time.perf_counter()
                async with limit:
                    last = (await self.backend.generate(messages, single, schemas or None))[0]
                seconds += time.perf_counter() - start
                prompt_tokens += last.prompt_tokens
                completion_tokens += last.completion_tokens
                messages.append(last.message())
                if not last.tool_calls:
                    break  # the model answered: terminal state
                for call in last.tool_calls:
                    messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name,
                                     "content": await _call_tool(functions, call.name, call.arguments)})
        except GenerationError as error:
            await finish(_fault(task, index, messages, f"generation failed: {error}", turns))
            return
        except SandboxInfraError as error:
            await finish(_fault(task, index, messages, f"tool failed: {error}", turns))
            return
        # Terminal state: with a sandbox, the verifier also sees the final work dir (task[WORKDIR]).
        graded = with_workdir(task, tools.session.snapshot()) if tools is not None else task
        await self._grade(graded, index, messages, last.text if last else "", turns, prompt_tokens,
                          completion_tokens, seconds, finish)

    def _functions(self, tools: Any) -> dict[str, Callable[..., Any]]:
        functions: dict[str, Callable[..., Any]] = {}
        for name in self.tool_names:
            if name in SANDBOX_TOOLS:
                functions[name] = getattr(tools, name)
            else:
                module, _, attribute = name.partition(":")
                function = getattr(importlib.import_module(module), attribute)
                functions[attribute] = function
        return functions

    async def _grade(self, task: Task, index: int, messages: list[Message], completion: str, turns: int,
                     prompt_tokens: int, completion_tokens: int, generation_s: float,
                     finish: Callable[[Rollout], Awaitable[None]]) -> None:
        start = time.perf_counter()
        grade = await self.env.agrade(task, messages)
        rollout = _graded(task, index, messages, completion, grade)
        rollout.turns, rollout.generation_s, rollout.grading_s = turns, generation_s, time.perf_counter() - start
        rollout.prompt_tokens, rollout.completion_tokens = prompt_tokens, completion_tokens
        await finish(rollout)


async def _call_tool(functions: Mapping[str, Callable[..., Any]], name: str, arguments: dict[str, Any] | None) -> str:
    """The tool's output, or an error message for the model (its own mistakes stay in the transcript)."""
    function = functions.get(name)
    if function is None:
        return f"error: no tool named {name!r}; tools: {', '.join(functions)}"
    if arguments is None:
        return "error: the arguments must be a JSON object"
    try:
        output = await asyncio.to_thread(function, **arguments)
    except TypeError as error:
        return f"error: bad arguments for {name}: {error}"
    except SandboxInfraError:
        raise
    except Exception as error:  # noqa: BLE001 - a tool's failure is reported to the model
        return f"error: {type(error).__name__}: {error}"
    return output if isinstance(output, str) else json.dumps(output, default=str)


def _graded(task: Task, index: int, messages: list[Message], completion: str, grade: Grade) -> Rollout:
    return Rollout(
        task_id=str(task["id"]), sample=index, messages=messages, completion=completion, status=str(grade.status),
        reward=grade.reward, reason=grade.reason or _first_failure(grade),
        layers={layer.name: layer.score for layer in grade.layers},
        layers_passed={layer.name: None if layer.status is LayerStatus.SKIPPED else layer.status is LayerStatus.PASSED
                       for layer in grade.layers},
    )


def _first_failure(grade: Grade) -> str:
    for layer in grade.layers:
        if layer.status is LayerStatus.FAILED:
            return f"{layer.name}: {layer.detail}" if layer.detail else layer.name
    return ""


def _fault(task: Task, index: int, messages: list[Message], reason: str, turns: int = 0) -> Rollout:
    return Rollout(task_id=str(task["id"]), sample=index, messages=messages, completion="",
                   status=str(GradeStatus.ENV_ERROR), reward=None, reason=reason[:500], turns=turns)
