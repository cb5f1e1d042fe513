"""``verihub serve``'s HTTP routes: what is served, the task API, OpenEnv's stateless forms, ``POST /grade``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError

from verihub.environment.core import Environment
from verihub.environment.digest import environment_digest
from verihub.environment.session import SessionError, StepResult
from verihub.errors import describe_error
from verihub.grading.grade import Grade, GradeStatus, grades_json
from verihub.serve.body import BodyTooLarge, describe, read_body
from verihub.serve.state import ServeState, TaskNotFound, listed
from verihub.serve.wire import (
    MAX_BODY,
    MAX_LISTED,
    ActionSchema,
    ObservationSchema,
    RangeBody,
    ResetParams,
    SplitBody,
    StepBody,
    TaskBody,
    action_of,
    grade_items,
    step_body,
)

__all__ = ["Refused", "problem", "router"]

router = APIRouter()
_CHUNK = 64  # pairs POST /grade grades at a time: inline checks run as a plain loop, which yields between chunks


class Refused(Exception):
    """A request answered with ``response`` (a 4xx with an error code) before it reaches its route."""

    def __init__(self, response: JSONResponse) -> None:
        self.response = response


def problem(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": code, "message": message[:2000]}, status_code=status)


def _state(request: Request) -> ServeState:
    state: ServeState = request.app.state.serve
    return state


async def _body[M: BaseModel](request: Request, model: type[M]) -> M:
    """The body as ``model``: at most MAX_BODY bytes, else 413; invalid, 422 naming the field."""
    return await _parsed(request, model.model_validate_json)


async def _parsed[T](request: Request, parse: Callable[[bytes], T]) -> T:
    """The body read by ``parse``: at most MAX_BODY bytes, else 413; a ValidationError, 422 naming the field."""
    try:
        return parse(await read_body(request, MAX_BODY) or b"{}")
    except BodyTooLarge as error:
        raise Refused(problem(413, "BODY_TOO_LARGE", str(error))) from None
    except ValidationError as error:
        raise Refused(problem(422, "VALIDATION_ERROR", f"invalid request body: {describe(error)}")) from None


# -- what is served -----------------------------------------------------------------------------------


@router.get("/health")
async def health(request: Request) -> dict[str, Any]:
    state = _state(request)
    return {"status": "healthy", "active_sessions": len(state.sessions), "max_sessions": state.max_sessions}


@router.get("/metadata")
async def metadata(request: Request) -> dict[str, Any]:
    served = list(_state(request).catalog.envs.values())
    one = served[0] if len(served) == 1 else None
    return {
        "name": one.id if one else "verihub: " + ", ".join(env.id for env in served),
        "description": one.spec.description if one else "verihub environments",
        "version": one.version if one else None,
        "environments": [
            {
                "name": env.id,
                "version": env.version,
                "digest": environment_digest(env),
                "domain": env.domain,
                "description": env.spec.description,
                "splits": env.split_names,
                "multi_turn": env.spec.interaction.kind == "multi_turn",
            }
            for env in served
        ],
    }


@router.get("/schema")
async def schema() -> dict[str, Any]:
    return {
        "action": ActionSchema.model_json_schema(),
        "observation": ObservationSchema.model_json_schema(),
        "state": {
            "type": "object",
            "properties": {"episode_id": {"type": "string"}, "step_count": {"type": "integer"}},
        },
    }


@router.get("/list_environments")
async def list_environments(request: Request) -> list[str]:
    return list(_state(request).catalog.envs)


@router.get("/{name}/splits")
async def splits(name: str, request: Request) -> list[dict[str, Any]]:
    env = _state(request).catalog.env(name)
    return [
        {
            "name": split,
            "type": split if split in ("train", "validation", "test") else "validation",
            "num_tasks": len(env.tasks(split)),
        }
        for split in env.split_names
    ]


async def _env_split(request: Request, name: str, model: type[SplitBody]) -> tuple[Environment, str, Any]:
    catalog = _state(request).catalog
    env = catalog.env(name)
    params = await _body(request, model)
    return env, catalog.split(env, params.split), params


@router.post("/{name}/num_tasks")
async def num_tasks(name: str, request: Request) -> dict[str, Any]:
    env, split, _ = await _env_split(request, name, SplitBody)
    return {"num_tasks": len(env.tasks(split))}


@router.post("/{name}/tasks")
async def tasks(name: str, request: Request) -> Any:
    env, split, _ = await _env_split(request, name, SplitBody)
    rows = env.tasks(split)
    if len(rows) > MAX_LISTED:
        return problem(413, "TOO_MANY_TASKS", f"{env.id}/{split} has {len(rows)} tasks: page with /{name}/task_range")
    return {"tasks": [listed(env, row, index) for index, row in enumerate(rows)], "env_name": env.id}


@router.post("/{name}/task")
async def task(name: str, request: Request) -> Any:
    env, split, params = await _env_split(request, name, TaskBody)
    rows = env.tasks(split)
    if params.index >= len(rows):
        return problem(400, "INVALID_INDEX", f"{env.id}/{split} has {len(rows)} tasks")
    return {"task": listed(env, rows[params.index], params.index)}


@router.post("/{name}/task_range")
async def task_range(name: str, request: Request) -> Any:
    env, split, params = await _env_split(request, name, RangeBody)
    rows = env.tasks(split)
    indexes = range(len(rows))[params.start : params.stop]
    if len(indexes) > MAX_LISTED:
        return problem(413, "TOO_MANY_TASKS", f"at most {MAX_LISTED} tasks a range")
    return {"tasks": [listed(env, rows[index], index) for index in indexes]}


# -- OpenEnv's stateless forms, and batch grading ----------------------------------------------------------


@router.post("/reset")
async def reset(request: Request) -> dict[str, Any]:
    env, row = _state(request).catalog.task(await _body(request, ResetParams))
    session = env.session(row)
    observation = session.reset()
    return step_body(StepResult(observation, None, session.done, session.info()))


@router.post("/step")
async def step(request: Request) -> Any:
    state = _state(request)
    params = await _body(request, StepBody)
    env, row = state.catalog.task(ResetParams(env=params.env, split=params.split, task_id=params.task_id))
    if env.spec.interaction.kind == "multi_turn":
        return problem(409, "NEEDS_SESSION", f"{env.id} is multi-turn: hold a session on WS /ws")
    session = env.session(row)
    session.reset()
    try:
        async with state.grading:
            return step_body(await session.astep(action_of(params.action)))
    except SessionError as error:
        return problem(422, "VALIDATION_ERROR", str(error))


@router.post("/grade")
async def grade(request: Request) -> Any:
    """Many text grades in one request, in order, each with its layers (for a multi-turn environment, the
    plain text grade of ``env.grade``: no rollout, no work dir)."""
    state = _state(request)
    items = await _parsed(request, grade_items)
    batches: dict[tuple[str | None, str | None], _Batch] = {}  # by (env, split) as asked: one lookup each
    for number, item in enumerate(items):
        name, split = item.get("env"), item.get("split")
        batch = batches.get((name, split))
        try:
            if batch is None:
                env = state.catalog.env(name)  # a multi-turn one too: a plain text grade, as env.grade
                batch = batches[(name, split)] = _Batch(env, state.catalog.ids(env, split))
            row = batch.tasks.get(item["task_id"])
            if row is None:
                row = state.catalog.by_id(batch.env, item["task_id"], split)  # raises, naming what is missing
        except TaskNotFound as error:
            return problem(404, "NOT_FOUND", f"items[{number}]: {error}")
        batch.numbers.append(number)
        batch.rows.append(row)
        batch.completions.append(item["completion"])
    grades: list[Grade] = [_UNGRADED] * len(items)
    for batch in batches.values():
        for start in range(0, len(batch.rows), _CHUNK):
            chunk = slice(start, start + _CHUNK)
            async with state.grading:
                graded = await _grade_many(batch.env, batch.rows[chunk], batch.completions[chunk])
            for number, one in zip(batch.numbers[chunk], graded, strict=True):
                grades[number] = one
    return Response(grades_json(grades), media_type="application/json")


class _Batch:
    """One environment's and split's pairs of a request, with their places in it."""

    def __init__(self, env: Environment, tasks: Mapping[str, Mapping[str, Any]]) -> None:
        self.env, self.tasks = env, tasks  # tasks: the split's (or every split's) tasks by id
        self.numbers: list[int] = []
        self.rows: list[Mapping[str, Any]] = []
        self.completions: list[str] = []


_UNGRADED = Grade(GradeStatus.ENV_ERROR, None, (), "not graded")  # never sent: every item has a batch


async def _grade_many(env: Environment, rows: Sequence[Mapping[str, Any]], completions: Sequence[str]) -> list[Grade]:
    """Grades of one environment's pairs: the verifier's batch path (a plain loop for inline checks), and
    pair by pair if that raises, so a verifier bug costs only its own pairs their reward."""
    try:
        return await env.verifier.agrade_many(rows, completions)
    except Exception:  # noqa: BLE001 - find the pairs that fault
        pass
    grades = []
    for row, completion in zip(rows, completions, strict=True):
        try:
            grades.append(await env.agrade(row, completion))
        except Exception as error:  # noqa: BLE001 - a verifier bug is the environment's fault: no reward
            grades.append(Grade(GradeStatus.ENV_ERROR, None, (), f"{describe_error(error)}"[:500]))
        await asyncio.sleep(0)
    return grades
