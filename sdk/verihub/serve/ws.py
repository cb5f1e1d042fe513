"""``verihub serve``'s ``WS /ws``: one :class:`~verihub.environment.session.Session` per connection, in OpenEnv's
frames."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from pydantic import ValidationError

from verihub.environment.session import Session, SessionError, StepResult
from verihub.errors import describe_error
from verihub.serve.body import describe
from verihub.serve.frames import ErrorCode, FrameError, error_frame, read_request, reply_frame
from verihub.serve.state import ServeState, TaskNotFound
from verihub.serve.wire import ResetParams, action_of, observation_frame

__all__ = ["router"]

router = APIRouter()


@router.websocket("/ws")
async def ws(websocket: WebSocket) -> None:
    state: ServeState = websocket.app.state.serve
    await websocket.accept()
    held = len(state.sessions)
    if held >= state.max_sessions:  # one event loop: this check and the add below cannot interleave
        await websocket.send_text(
            error_frame(
                ErrorCode.CAPACITY_REACHED,
                f"the server holds {held} of {state.max_sessions} sessions: try later",
                active_sessions=held,
                max_sessions=state.max_sessions,
            )
        )
        await websocket.close(code=1013)  # try again later
        return
    slot = _Slot(state.sessions)
    try:
        await _converse(websocket, state, slot)
    except (WebSocketDisconnect, OSError):  # the client went away mid-reply (uvicorn's ClientDisconnected)
        pass
    finally:
        slot.release()
        try:
            await websocket.close()
        except RuntimeError:  # already closed
            pass


class _Slot:
    """A connection's place among the sessions, and its session once a reset picked the task."""

    def __init__(self, sessions: set[Any]) -> None:
        self.sessions = sessions
        self.session: Session | None = None
        self.episode_id: str | None = None
        sessions.add(self)

    def start(self, session: Session, episode_id: str | None) -> None:
        if self.session is not None:
            self.session.close()
        self.session, self.episode_id = session, episode_id

    def release(self) -> None:
        if self.session is not None:
            self.session.close()  # drops the work dir: nothing outlives the connection
        self.sessions.discard(self)


async def _converse(websocket: WebSocket, state: ServeState, slot: _Slot) -> None:
    """Frames until the client closes, or the session idles (no reset or step for ``idle_timeout_s``: a
    ``state`` or malformed frame now and then is no work and keeps nothing open), or ``max_session_s``
    after the connection opened."""
    loop = asyncio.get_running_loop()
    ends = loop.time() + state.max_session_s
    worked = loop.time()
    while True:
        idle_ends = worked + state.idle_timeout_s
        try:
            if loop.time() >= min(idle_ends, ends):  # a frame already queued is taken without waiting: no timeout
                raise TimeoutError
            async with asyncio.timeout_at(min(idle_ends, ends)):
                message = await websocket.receive()
        except TimeoutError:
            why = (
                f"no reset or step for {state.idle_timeout_s:g}s"
                if idle_ends <= ends
                else f"it reached the longest a session may last, {state.max_session_s:g}s: connect again"
            )
            await websocket.send_text(error_frame(ErrorCode.SESSION_ERROR, f"the session is closed: {why}"))
            return
        if message["type"] == "websocket.disconnect":
            return
        try:
            kind, data = read_request(message.get("text"))
        except FrameError as error:
            await websocket.send_text(error_frame(error.code, str(error)))
            continue
        if kind == "close":
            return
        try:
            reply = await _answer(kind, data, state, slot)
            if kind in ("reset", "step"):
                worked = loop.time()  # after the work: a long tool call is not idle time
        except ValidationError as error:
            reply = error_frame(ErrorCode.VALIDATION_ERROR, f"invalid frame data: {describe(error)}")
        except (SessionError, TaskNotFound) as error:
            reply = error_frame(ErrorCode.VALIDATION_ERROR, str(error))
        except Exception as error:  # noqa: BLE001 - a bug answers this frame; the server and session go on
            reply = error_frame(ErrorCode.EXECUTION_ERROR, f"{describe_error(error)}")
        await websocket.send_text(reply)


async def _answer(kind: str, data: Any, state: ServeState, slot: _Slot) -> str:
    if kind == "reset":
        params = ResetParams.model_validate(data if data is not None else {})
        env, row = state.catalog.task(params)
        session = env.session(row)
        slot.start(session, params.episode_id)
        observation = await session.areset()
        return observation_frame(StepResult(observation, None, session.done, session.info()))
    if kind == "step":
        if slot.session is None:
            raise SessionError("send a reset frame first: it picks the task")
        return observation_frame(await slot.session.astep(action_of(data)))
    if slot.session is None:  # a state frame, the one kind left
        return reply_frame("state", {"episode_id": None, "step_count": 0})
    shown = slot.session.state()
    if slot.episode_id is not None:
        shown["episode_id"] = slot.episode_id
    return reply_frame("state", shown)
