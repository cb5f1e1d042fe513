"""A multi-turn session held on a ``verihub serve`` of a :class:`~verihub.serve.graders.GraderPool` (``WS /ws``).

It has the surface of :class:`verihub.environment.session.Session` that the eval loop and the trainer's tool
environments use: ``reset`` (answered here: the prompt and the tools' schemas come from the environment
loaded in this process), ``step``/``astep``, ``call_tool``, ``done``, ``messages``, ``turns``, ``grade``,
``fault``, ``close``. The connection is made on the first step, to the least busy server; the server
runs the tools in its sandbox and grades the final state.

A server that fails mid-episode (the connection drops, a frame goes unanswered for ``timeout_s``) takes
its work dir with it: the episode is replayed on another server, its earlier turns re-sent (the model
already saw their outputs; the work dir the grade sees is the replay's), then the turn that failed. After
the pool's ``attempts`` the session ends as a fault (reward None) with every server's reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from verihub.environment.session import (
    CallsAreTurns,
    Message,
    Observation,
    SessionError,
    StepResult,
    _assistant_message,
    turn_chars,
)
from verihub.errors import FrameError, MissingDependencyError, describe_error
from verihub.grading.grade import Grade, GradeStatus, grade_detail, grade_from_detail
from verihub.serve.frames import TRANSPORT_MAX, ErrorCode, read_reply, request_frame, ws_url
from verihub.serve.graders import Refuses, Retry, Unavailable

if TYPE_CHECKING:
    from verihub.serve.graders import RemoteGrader, _Server

__all__ = ["RemoteSession"]


class RemoteSession(CallsAreTurns):
    """One episode of a multi-turn environment on one server of a grader pool."""

    def __init__(self, grader: RemoteGrader, task: Mapping[str, Any]) -> None:
        self.grader, self.env, self.task = grader, grader.env, task
        self.pool = grader.pool
        self.multi_turn, self.sandboxed = True, self.env.spec.interaction.sandboxed
        self.max_turns = self.env.spec.interaction.max_turns
        self._connection: Any = None
        self._server: _Server | None = None
        self._start()

    def _start(self) -> None:
        self.messages: list[Message] = []
        self.turns = 0
        self.done = False
        self.grade: Grade | None = None
        self.fault: str | None = None
        self._detail: dict[str, Any] = {}
        self._sent: list[Message] = []  # the turns so far: a replay on another server re-sends them

    # -- the API ----------------------------------------------------------------------------------------

    def reset(self) -> Observation:
        self.close()
        self._start()
        self.messages = list(self.env.render(self.task))
        return {
            "env": self.env.id,
            "task_id": str(self.task.get("id", "")),
            "messages": list(self.messages),
            "tools": self.tool_schemas,
        }

    async def areset(self) -> Observation:
        return self.reset()

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        return self.env.tool_schemas

    def step(self, action: Any) -> StepResult:
        return self.pool.run(self._step(action))

    async def astep(self, action: Any) -> StepResult:
        return await self.pool.arun(self._step(action))

    def info(self) -> dict[str, Any]:
        return {"turns": self.turns, **self._detail}

    async def aend_rollout(self) -> None:
        """Nothing to end: the answer's turn ended the server's episode."""

    @property
    def workdir(self) -> Any:
        raise SessionError("a remote session's work dir stays on its server, which grades it")

    def close(self) -> None:
        """End the episode; its server drops the work dir. Returns at once (the close frame goes later)."""
        self.done = True
        if self._connection is not None or self._server is not None:
            try:  # on the pool's loop, which owns the connection and the server's count
                self.pool.submit(self._hang_up())
            except RuntimeError:  # the pool is closed, and its connections with it
                self._connection = None

    # -- on the pool's loop ---------------------------------------------------------------------------

    async def _step(self, action: Any) -> StepResult:
        if self.done:
            raise SessionError("the session is over: reset it to start another episode")
        message = _assistant_message(action)
        if (chars := turn_chars(message)) > self.env.spec.max_answer_chars:  # wrong here: never sent, never faults
            await self._hang_up()
            return self._ended(message, [], grade=self.env.verifier.too_long(chars))
        try:
            reply = await self.pool.on_a_server(
                self.env, lambda server: self._turn(server, message), prefer=self._server
            )  # the server that holds the episode
        except Unavailable as error:
            await self._hang_up()
            return self._ended(message, [], fault=str(error))
        self._sent.append(message)
        observation, done, info = reply
        outputs = [dict(output) for output in observation.get("messages", []) if isinstance(output, Mapping)]
        if not done:
            self.messages += [message, *outputs]
            self.turns += 1
            return StepResult({"messages": outputs}, None, False, self.info())
        await self._hang_up()
        if info.get("status") in (str(GradeStatus.ENV_ERROR), str(GradeStatus.TIMEOUT)) and not info.get("layers"):
            return self._ended(message, outputs, fault=str(info.get("reason") or "the server ended it ungraded"))
        try:
            grade = grade_from_detail(info, self.grader.weights)
        except (KeyError, TypeError, ValueError) as error:
            return self._ended(message, outputs, fault=f"the grader sent a malformed grade: {error}"[:500])
        return self._ended(message, outputs, grade=grade)

    def _ended(
        self, message: Message, outputs: list[Message], *, grade: Grade | None = None, fault: str | None = None
    ) -> StepResult:
        self.messages += [message, *outputs]
        self.turns += 1
        self.done, self.grade, self.fault = True, grade, fault[:500] if fault else None
        if grade is not None:
            self._detail = grade_detail(grade)
        else:
            self._detail = {"status": str(GradeStatus.ENV_ERROR), "reward": None, "reason": self.fault, "layers": []}
        return StepResult({"messages": outputs}, grade.reward if grade else None, True, self.info())

    async def _turn(self, server: _Server, message: Message) -> tuple[dict[str, Any], bool, dict[str, Any]]:
        """``message`` as the next turn on ``server``: first connecting and replaying, if the session is not
        held there yet."""
        try:
            if self._server is not server or self._connection is None:
                await self._hang_up()
                await self._open(server)
                for earlier in self._sent:
                    observation, done, info = await self._exchange(earlier)
                    if done:  # the replay ended sooner than the first run: the server's word is final
                        return observation, done, info
            return await self._exchange(message)
        except (Retry, Refuses):
            await self._hang_up()
            raise

    async def _open(self, server: _Server) -> None:
        try:
            from websockets.asyncio.client import connect
        except ImportError:
            raise MissingDependencyError("remote tool sessions need websockets: pip install 'verihub[hub]'") from None
        from websockets.exceptions import InvalidStatus, WebSocketException

        try:
            self._connection = await connect(
                ws_url(server.url),
                additional_headers=self.pool.headers,
                max_size=TRANSPORT_MAX,
                open_timeout=self.pool.timeout_s,
                close_timeout=1,
                ping_interval=None,
            )
        except InvalidStatus as error:
            if error.response.status_code in (401, 403):
                raise Refuses("it wants another token (--grader-token, VERIHUB_GRADER_TOKEN)") from None
            raise Retry(f"the WebSocket handshake got HTTP {error.response.status_code}") from None
        except (OSError, TimeoutError, WebSocketException) as error:
            raise Retry(f"cannot open a session: {describe_error(error)}"[:300]) from None
        self._server = server
        server.busy += 1
        split = self.grader.split
        await self._send(
            "reset", {"env": self.env.id, "task_id": str(self.task["id"]), **({"split": split} if split else {})}
        )

    async def _exchange(self, message: Message) -> tuple[dict[str, Any], bool, dict[str, Any]]:
        data = await self._send("step", message)
        observation, metadata = data.get("observation"), data.get("metadata")
        if not isinstance(observation, dict) or not isinstance(metadata, dict):
            raise Retry("an observation frame without observation and metadata")
        return observation, bool(data.get("done")), metadata

    async def _send(self, kind: str, data: Any) -> dict[str, Any]:
        """One frame out, its answer's data back; a dropped or silent connection is :class:`Retry`."""
        from websockets.exceptions import ConnectionClosed, WebSocketException

        try:
            await self._connection.send(request_frame(kind, data))
            text = await asyncio.wait_for(self._connection.recv(), self.pool.timeout_s)
        except TimeoutError:
            raise Retry(f"no answer in {self.pool.timeout_s:g}s") from None
        except ConnectionClosed as error:
            if error.rcvd is not None and error.rcvd.code == 1013:  # a CAPACITY_REACHED frame, then "try later"
                raise Retry("full (it holds its --max-sessions)") from None
            raise Retry(f"the session dropped: {error}"[:300]) from None
        except (OSError, WebSocketException) as error:
            raise Retry(f"the session dropped: {describe_error(error)}"[:300]) from None
        try:
            return read_reply(text, kind)
        except FrameError as error:
            raise Retry(f"full ({error})" if error.code == ErrorCode.CAPACITY_REACHED else str(error)) from None

    async def _hang_up(self) -> None:
        connection, self._connection = self._connection, None
        self._release()
        if connection is not None:
            try:
                await connection.close()
            except Exception:  # noqa: BLE001 - already gone
                pass

    def _release(self) -> None:
        if self._server is not None:
            self._server.busy -= 1
            self._server = None
