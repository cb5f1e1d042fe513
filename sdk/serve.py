"""``verihub serve``: environments as an OpenEnv-compatible HTTP/WebSocket service.

``WS /ws`` holds one :class:`~verihub.session.Session` per connection (reset picks the task, step takes a
turn, state, close); ``POST /reset`` and ``POST /step`` are OpenEnv's stateless forms (single-turn only);
``GET /health``, ``/metadata``, ``/schema`` and the task API (``/list_environments``, ``/{env}/splits``,
``/{env}/tasks``, ...) describe what is served; ``POST /grade`` grades many task+completion pairs at once.

Every frame and body is bounded, bad input gets an error frame or a 4xx with a code (never a crash or a
500), sessions past ``max_sessions`` are refused with ``CAPACITY_REACHED``, an idle session is closed, and a
session's work dir is dropped when its connection ends. A fault is ``reward: null`` with the reason in
``metadata``; never 0. Task listings carry ids and rendered prompts, never the reference columns.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import random
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from verihub._serve_wire import (MAX_BODY, MAX_FRAME, MAX_LISTED, ActionSchema, ErrorCode, GradeRequest,
                                 ObservationSchema, RangeBody, ResetParams, SplitBody, StepBody, TaskBody, error_frame,
                                 observation_frame, step_body)
from verihub.environment import Environment
from verihub.errors import VerihubError
from verihub.session import Session, SessionError, StepResult, grade_detail

__all__ = ["ListenError", "TaskNotFound", "create_app", "run"]

GRADES_IN_FLIGHT = 8  # chunks of POST /grade graded at once, over all requests
_CHUNK = 64  # pairs per chunk: inline checks run as a plain loop, so the loop yields between chunks


class TaskNotFound(LookupError):
    pass


class ListenError(VerihubError, OSError):
    """The address is taken or not ours to bind."""


class _Catalog:
    """The served environments by name, and their tasks by id (indexed on first use)."""

    def __init__(self, envs: Sequence[Environment]) -> None:
        self.envs: dict[str, Environment] = {}
        for env in envs:
            if env.id in self.envs:
                raise ValueError(f"two environments are named {env.id!r}: serve one of them")
            self.envs[env.id] = env
        self._rows: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}

    def env(self, name: str | None) -> Environment:
        if name is None:
            if len(self.envs) == 1:
                return next(iter(self.envs.values()))
            raise TaskNotFound(f"several environments are served ({', '.join(self.envs)}): name one with 'env'")
        try:
            return self.envs[name]
        except KeyError:
            raise TaskNotFound(f"no environment {name!r} here; served: {', '.join(self.envs)}") from None

    def split(self, env: Environment, split: str | None) -> str:
        if split is None:
            return "train" if "train" in env.split_names else env.split_names[0]
        if split not in env.split_names:
            raise TaskNotFound(f"{env.id} has no split {split!r}; splits: {', '.join(env.split_names)}")
        return split

    def task(self, params: ResetParams) -> tuple[Environment, dict[str, Any]]:
        env = self.env(params.env)
        if params.task_id is not None:
            return env, self.by_id(env, params.task_id, params.split)
        split = self.split(env, params.split)
        rows = env.dataset(split)
        index = params.index if params.index is not None else random.Random(params.seed).randrange(len(rows))
        if index >= len(rows):
            raise TaskNotFound(f"{env.id}/{split} has {len(rows)} tasks; index {index} is past the end")
        return env, rows[index]

    def by_id(self, env: Environment, task_id: str, split: str | None) -> dict[str, Any]:
        for name in [self.split(env, split)] if split is not None else env.split_names:
            rows = self._rows.get((env.id, name))
            if rows is None:  # rows read out of Arrow once: a row lookup there costs more than a cheap grade
                rows = self._rows[(env.id, name)] = {str(row["id"]): row for row in env.dataset(name)}
            if task_id in rows:
                return rows[task_id]
        raise TaskNotFound(f"{env.id} has no task {task_id!r}" + (f" in split {split!r}" if split else ""))


def create_app(envs: Sequence[Environment], *, max_sessions: int = 64, idle_timeout_s: float = 300.0,
               token: str | None = None) -> FastAPI:
    """The service for ``envs``; at most ``max_sessions`` WebSocket sessions, each closed after
    ``idle_timeout_s`` without a frame. With ``token``, every route but ``/health`` wants
    ``Authorization: Bearer <token>``, checked before anything is parsed."""
    if max_sessions < 1:
        raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
    catalog = _Catalog(envs)
    app = FastAPI(title="verihub serve", docs_url=None, redoc_url=None)
    sessions: set[Session] = set()
    grading = asyncio.Semaphore(GRADES_IN_FLIGHT)
    app.state.sessions = sessions
    if token:
        app.add_middleware(_BearerToken, token=token)

    def problem(status: int, code: str, message: str) -> JSONResponse:
        return JSONResponse({"error": code, "message": message[:2000]}, status_code=status)

    async def body(request: Request, model: type[Any]) -> Any:
        from verihub.hub.deps import describe, read_body
        from verihub.hub.errors import BodyTooLargeError

        try:
            raw = await read_body(request, MAX_BODY)
            return model.model_validate_json(raw or b"{}")
        except BodyTooLargeError as error:
            raise _Refused(problem(413, "BODY_TOO_LARGE", str(error))) from None
        except ValidationError as error:
            raise _Refused(problem(422, "VALIDATION_ERROR", f"invalid request body: {describe(error)}")) from None

    @app.exception_handler(_Refused)
    async def refused(_request: Request, error: _Refused) -> JSONResponse:
        return error.response

    @app.exception_handler(TaskNotFound)
    async def not_found(_request: Request, error: TaskNotFound) -> JSONResponse:
        return problem(404, "NOT_FOUND", str(error))

    # -- what is served -------------------------------------------------------------------------------

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "healthy", "active_sessions": len(sessions), "max_sessions": max_sessions}

    @app.get("/metadata")
    async def metadata() -> dict[str, Any]:
        served = list(catalog.envs.values())
        first = served[0]
        return {"name": first.id if len(served) == 1 else "verihub: " + ", ".join(catalog.envs),
                "description": first.spec.description if len(served) == 1 else "verihub environments",
                "version": first.version if len(served) == 1 else None,
                "environments": [{"name": env.id, "version": env.version, "domain": env.domain,
                                  "description": env.spec.description, "splits": env.split_names,
                                  "multi_turn": env.spec.interaction.kind == "multi_turn"} for env in served]}

    @app.get("/schema")
    async def schema() -> dict[str, Any]:
        return {"action": ActionSchema.model_json_schema(), "observation": ObservationSchema.model_json_schema(),
                "state": {"type": "object", "properties": {"episode_id": {"type": "string"},
                                                           "step_count": {"type": "integer"}}}}

    @app.get("/list_environments")
    async def list_environments() -> list[str]:
        return list(catalog.envs)

    @app.get("/{name}/splits")
    async def splits(name: str) -> list[dict[str, Any]]:
        env = catalog.env(name)
        return [{"name": split, "type": split if split in ("train", "validation", "test") else "validation",
                 "num_tasks": len(env.dataset(split))} for split in env.split_names]

    @app.post("/{name}/num_tasks")
    async def num_tasks(name: str, request: Request) -> dict[str, Any]:
        env, split = _env_split(catalog, name, await body(request, SplitBody))
        return {"num_tasks": len(env.dataset(split))}

    @app.post("/{name}/tasks")
    async def tasks(name: str, request: Request) -> dict[str, Any]:
        env, split = _env_split(catalog, name, await body(request, SplitBody))
        rows = env.dataset(split)
        if len(rows) > MAX_LISTED:
            return problem(413, "TOO_MANY_TASKS", f"{env.id}/{split} has {len(rows)} tasks: page with /{name}/task_range")
        return {"tasks": [_listed(env, row, index) for index, row in enumerate(rows)], "env_name": env.id}

    @app.post("/{name}/task")
    async def task(name: str, request: Request) -> dict[str, Any]:
        params = await body(request, TaskBody)
        env, split = _env_split(catalog, name, params)
        rows = env.dataset(split)
        if params.index >= len(rows):
            return problem(400, "INVALID_INDEX", f"{env.id}/{split} has {len(rows)} tasks")
        return {"task": _listed(env, rows[params.index], params.index)}

    @app.post("/{name}/task_range")
    async def task_range(name: str, request: Request) -> dict[str, Any]:
        params = await body(request, RangeBody)
        env, split = _env_split(catalog, name, params)
        indexes = range(len(env.dataset(split)))[params.start:params.stop]
        if len(indexes) > MAX_LISTED:
            return problem(413, "TOO_MANY_TASKS", f"at most {MAX_LISTED} tasks a range")
        rows = env.dataset(split).select(indexes)
        return {"tasks": [_listed(env, row, index) for index, row in zip(indexes, rows, strict=True)]}

    # -- OpenEnv's stateless HTTP forms, and batch grading ----------------------------------------------

    @app.post("/reset")
    async def reset(request: Request) -> dict[str, Any]:
        env, row = catalog.task(await body(request, ResetParams))
        session = env.session(row)
        observation = session.reset()
        return step_body(StepResult(observation, None, session.done, session.info()))

    @app.post("/step")
    async def step(request: Request) -> Any:
        params = await body(request, StepBody)
        env, row = catalog.task(ResetParams(env=params.env, split=params.split, task_id=params.task_id))
        if env.spec.interaction.kind == "multi_turn":
            return problem(409, "NEEDS_SESSION", f"{env.id} is multi-turn: hold a session on WS /ws")
        session = env.session(row)
        session.reset()
        try:
            async with grading:
                return step_body(await session.astep(params.action))
        except SessionError as error:
            return problem(422, "VALIDATION_ERROR", str(error))

    @app.post("/grade")
    async def grade(request: Request) -> Any:
        """Many single-turn grades in one request, in order, each with its layers."""
        items = (await body(request, GradeRequest)).items
        batches: dict[str, tuple[Environment, list[int], list[Mapping[str, Any]], list[str]]] = {}
        for number, item in enumerate(items):
            try:
                env = catalog.env(item.env)
                row = catalog.by_id(env, item.task_id, item.split)
            except TaskNotFound as error:
                return problem(404, "NOT_FOUND", f"items[{number}]: {error}")
            if env.spec.interaction.kind == "multi_turn":
                return problem(409, "NEEDS_SESSION", f"items[{number}]: {env.id} is multi-turn: hold a session on WS /ws")
            batch = batches.setdefault(env.id, (env, [], [], []))
            batch[1].append(number)
            batch[2].append(row)
            batch[3].append(item.completion)
        grades: list[dict[str, Any]] = [{}] * len(items)
        for env, numbers, rows, completions in batches.values():
            for start in range(0, len(rows), _CHUNK):
                chunk = slice(start, start + _CHUNK)
                async with grading:
                    done = await _grade_many(env, rows[chunk], completions[chunk])
                for number, detail in zip(numbers[chunk], done, strict=True):
                    grades[number] = detail
        # one json.dumps: fastapi's encoder costs more than a cheap grade
        return Response(json.dumps({"grades": grades}), media_type="application/json")

    # -- sessions -------------------------------------------------------------------------------------

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        if len(sessions) >= max_sessions:  # one event loop: the check and the add below cannot interleave
            await websocket.send_text(error_frame(
                ErrorCode.CAPACITY_REACHED, f"the server holds {len(sessions)} of {max_sessions} sessions: try later",
                active_sessions=len(sessions), max_sessions=max_sessions))
            await websocket.close(code=1013)
            return
        holder = _Holder()
        sessions.add(holder.placeholder)
        try:
            await _converse(websocket, catalog, holder, idle_timeout_s, sessions)
        except (WebSocketDisconnect, OSError):  # the client went away mid-reply (uvicorn's ClientDisconnected)
            pass
        finally:
            holder.close(sessions)
            try:
                await websocket.close()
            except RuntimeError:  # already closed
                pass

    return app


class _BearerToken:
    """Refuses a request or WebSocket without the token before the app sees a byte of it."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.expected = app, f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] == "/health":
            return await self.app(scope, receive, send)
        given = dict(scope["headers"]).get(b"authorization", b"")
        if hmac.compare_digest(given, self.expected):
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":  # closing before accept: the handshake gets HTTP 403
            await send({"type": "websocket.close", "code": 1008})
            return None
        body = json.dumps({"error": "UNAUTHORIZED", "message": "send Authorization: Bearer <token>"}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
        return None


class _Refused(Exception):
    def __init__(self, response: JSONResponse) -> None:
        self.response = response


class _Holder:
    """The connection's session; a placeholder counts against the limit before the first reset."""

    def __init__(self) -> None:
        self.placeholder: Any = object()
        self.session: Session | None = None
        self.episode_id: str | None = None

    def replace(self, session: Session, sessions: set[Any], episode_id: str | None) -> None:
        self.close(sessions)
        self.session, self.episode_id = session, episode_id
        sessions.add(session)

    def close(self, sessions: set[Any]) -> None:
        sessions.discard(self.placeholder)
        if self.session is not None:
            self.session.close()  # drops the work dir: nothing outlives the connection
            sessions.discard(self.session)


async def _converse(websocket: WebSocket, catalog: _Catalog, holder: _Holder, idle_timeout_s: float,
                    sessions: set[Any]) -> None:
    while True:
        try:
            message = await asyncio.wait_for(websocket.receive(), idle_timeout_s)
        except TimeoutError:
            await websocket.send_text(error_frame(ErrorCode.SESSION_ERROR,
                                                  f"no frame for {idle_timeout_s:g}s: the session is closed"))
            return
        if message["type"] == "websocket.disconnect":
            return
        text = message.get("text")
        if text is None or len(text) > MAX_FRAME:
            await websocket.send_text(error_frame(ErrorCode.INVALID_JSON, "frames are JSON text of at most "
                                                  f"{MAX_FRAME} bytes"))
            continue
        try:
            frame = json.loads(text)
        except (ValueError, RecursionError) as error:  # and past int_max_str_digits, or nested too deep
            await websocket.send_text(error_frame(ErrorCode.INVALID_JSON, f"invalid JSON: {str(error)[:200]}"))
            continue
        kind = frame.get("type") if isinstance(frame, dict) else None
        data = frame.get("data", {}) if isinstance(frame, dict) else None
        if kind == "close":
            return
        try:
            reply = await _answer(kind, data, catalog, holder, sessions)
        except (SessionError, TaskNotFound, ValidationError) as error:
            text = str(error) if not isinstance(error, ValidationError) else _validation(error)
            reply = error_frame(ErrorCode.VALIDATION_ERROR, text)
        except Exception as error:  # noqa: BLE001 - a bug answers this frame; the server and session go on
            reply = error_frame(ErrorCode.EXECUTION_ERROR, f"{type(error).__name__}: {error}")
        await websocket.send_text(reply)


async def _answer(kind: Any, data: Any, catalog: _Catalog, holder: _Holder, sessions: set[Any]) -> str:
    if kind == "reset":
        params = ResetParams.model_validate(data if data is not None else {})
        env, row = catalog.task(params)
        session = env.session(row)
        holder.replace(session, sessions, params.episode_id)
        observation = await session.areset()
        return observation_frame(StepResult(observation, None, session.done, session.info()))
    if kind == "step":
        if holder.session is None:
            raise SessionError("send a reset frame first: it picks the task")
        return observation_frame(await holder.session.astep(data))
    if kind == "state":
        if holder.session is None:
            return json.dumps({"type": "state", "data": {"episode_id": None, "step_count": 0}})
        state = holder.session.state()
        if holder.episode_id is not None:
            state["episode_id"] = holder.episode_id
        return json.dumps({"type": "state", "data": state})
    return error_frame(ErrorCode.UNKNOWN_TYPE, f"unknown frame type {kind!r}: use reset, step, state or close")


async def _grade_many(env: Environment, rows: Sequence[Mapping[str, Any]], completions: Sequence[str]) -> list[dict]:
    """Grades of one environment's pairs: the verifier's batch path (a plain loop for inline checks), and
    pair by pair if that raises, so a verifier bug costs only its own pairs their reward."""
    try:
        return [grade_detail(grade) for grade in await env.verifier.agrade_many(rows, completions)]
    except Exception:  # noqa: BLE001 - find the pairs that fault
        pass
    details = []
    for row, completion in zip(rows, completions, strict=True):
        try:
            details.append(grade_detail(await env.agrade(row, completion)))
        except Exception as error:  # noqa: BLE001 - a verifier bug is the environment's fault: no reward
            details.append({"status": "env_error", "reward": None, "layers": [],
                            "reason": f"{type(error).__name__}: {error}"[:500]})
        await asyncio.sleep(0)
    return details


def _env_split(catalog: _Catalog, name: str, params: Any) -> tuple[Environment, str]:
    env = catalog.env(name)
    return env, catalog.split(env, params.split)


def _listed(env: Environment, row: Mapping[str, Any], index: int) -> dict[str, Any]:
    """What a listing shows of a task: how to ask for it and its prompt, not its answer columns."""
    listed = {"id": str(row.get("id", "")), "index": index, "prompt": env.render(row)}
    if "difficulty" in row:
        listed["difficulty"] = row["difficulty"]
    return listed


def _validation(error: ValidationError) -> str:
    from verihub.hub.deps import describe

    return f"invalid frame data: {describe(error)}"


def run(envs: Sequence[Environment], *, host: str, port: int, max_sessions: int, idle_timeout_s: float,
        token: str | None = None) -> None:
    """Serve until interrupted; prints the address it listens on (``port`` 0 takes a free one). Raises
    :class:`ListenError` if it cannot listen there."""
    import uvicorn

    app = create_app(envs, max_sessions=max_sessions, idle_timeout_s=idle_timeout_s, token=token)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as error:
        listener.close()
        raise ListenError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    listener.listen(2048)  # connections wait in the backlog from the moment the address is printed
    bound = listener.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    print(f"verihub serve: {', '.join(env.id for env in envs)} on http://{shown}:{bound} "
          f"(ws://{shown}:{bound}/ws, at most {max_sessions} sessions)", flush=True)
    config = uvicorn.Config(app, ws="websockets-sansio", ws_max_size=MAX_FRAME + 1024, log_level="warning")
    uvicorn.Server(config).run(sockets=[listener])
