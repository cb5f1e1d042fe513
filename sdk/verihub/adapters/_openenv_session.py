"""A multi-turn OpenEnv remote's episode as a :class:`verihub.environment.session.Session`, which ``verihub eval``'s
tool loop (:mod:`verihub.eval.rollout`) drives like a local tool environment's.

The model gets one tool, :data:`TOOL`, whose parameters are the remote's action schema: each call is one
``step`` of the remote episode and its observation comes back as the tool's output. A turn without a tool
call is an action too, its text filling the action's field (as single-turn grading does), and the
observation comes back as the next user message. The remote's ``done`` ends the session and its reward
is the grade; a turn the model spends on an action the remote refuses gets the refusal back (the remote
keeps its episode), and turns past ``max_turns`` without an end score 0. A remote that fails (unreachable,
slow, a broken frame, an error, an end without a reward) ends the session as a fault: reward None,
``env_error``, never 0.

The trainer calls the tool itself, one call at a time (:class:`~verihub.environment.session.CallsAreTurns`: each a
turn), then steps its answer; an episode the remote has not ended when the rollout is over
(:meth:`OpenEnvSession.aend_rollout`) scores 0, as one past ``max_turns`` does. Steps are taken one at a
time (TRL runs a turn's calls concurrently): the remote sees them in the order they came.

The connection is made at the first step, on the event loop that steps: :meth:`reset` is local (the
prompt is the task's). Use one style per session: ``astep`` on one loop, or the sync ``step``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from verihub.adapters._openenv_wire import ActionRefusedError, OwnLoop, RemoteEnvError, RemoteSession
from verihub.environment.session import Action, CallsAreTurns, Message, Session, StepResult, _Call
from verihub.grading.grade import Grade, GradeStatus, LayerResult, LayerStatus

if TYPE_CHECKING:
    from verihub.adapters.openenv import OpenEnvEnvironment
    from verihub.environment.core import Environment

__all__ = ["TOOL", "OpenEnvSession", "action_tool", "episode_grade"]

TOOL = "act"
_CLOSING: set[asyncio.Task[None]] = set()  # connections closed in the background (close() from a running loop)


def action_tool(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The tool schema (OpenAI form) whose arguments are the remote's action."""
    return {
        "type": "function",
        "function": {
            "name": TOOL,
            "parameters": dict(parameters),
            "description": "Take your turn in the environment: the arguments are your action; the reply is what "
            "the environment shows you next. The episode ends when the environment says so.",
        },
    }


class OpenEnvSession(CallsAreTurns, Session, OwnLoop):
    """One task's episode on a multi-turn OpenEnv remote (see the module docstring)."""

    env: OpenEnvEnvironment

    def __init__(self, env: OpenEnvEnvironment, task: Mapping[str, Any]) -> None:
        self._connection: RemoteSession | None = None
        self._connection_loop: asyncio.AbstractEventLoop | None = None  # the loop the connection lives on
        self._turn: asyncio.Lock | None = None
        super().__init__(env, task)

    async def astep(self, action: Action) -> StepResult:
        if self._turn is None:
            self._turn = asyncio.Lock()
        async with self._turn:  # one step at a time, in the order they came
            return await self._take_turn(action)

    async def _take_turn(self, action: Action) -> StepResult:
        calls = self._begin(action)
        outputs: list[Message] = []
        try:
            if self._connection is None:
                from verihub.adapters.openenv import pose

                self._connection = await pose(self.env.remote, self.task)
                self._connection_loop = asyncio.get_running_loop()
            if calls:
                for call in calls:
                    outputs.append(self._tool_message(call, await self._call(call)))
            else:
                outputs.append({"role": "user", "content": await self._act(self.messages[-1]["content"])})
        except RemoteEnvError as error:
            self._end(fault=str(error))
        if not self.done and self.turns >= self.max_turns:
            self._end(grade=self._graded(0.0, f"the remote episode did not end within {self.max_turns} turns"))
        if self.done:
            await self._disconnect()
        return self._result(outputs)

    async def aend_rollout(self) -> None:
        """The rollout ended before the remote's episode did: the model stopped acting, a 0 (not a fault)."""
        if not self.done:
            self._end(grade=self._graded(0.0, "the rollout ended before the remote episode did"))
            await self._disconnect()

    async def _call(self, call: _Call) -> str:
        """One tool call: a step of the remote episode; its observation, or what is wrong with the call."""
        if self.done:
            return "error: the episode is over; this call did not run"
        if refusal := self._refusal(call):
            return refusal
        if call.name != TOOL:
            return f"error: no tool named {call.name!r}; tools: {TOOL}"
        if call.arguments is None:
            return "error: the arguments must be a JSON object (the action)"
        return await self._step(call.arguments)

    async def _act(self, text: str) -> str:
        """A turn without a tool call: its text as the action."""
        try:
            action = self.env.remote.action(text)
        except ValueError as error:
            return f"error: {error}; call {TOOL} with the action as its arguments"
        return await self._step(action)

    async def _step(self, action: dict[str, Any]) -> str:
        from verihub.adapters.openenv import prompt_text

        try:
            observation, reward, done = await self._connection.step(action)  # type: ignore[union-attr]  # a step happens on an open connection
        except ActionRefusedError as error:  # the server refused this action; its episode goes on
            return f"error: the environment refused the action: {error}"[:500]
        text = prompt_text(observation)
        if done:
            if reward is None:
                raise RemoteEnvError(f"{self.env.remote.url}: the episode ended without a reward")
            self._end(grade=self._graded(reward, "" if reward >= 1.0 else f"remote reward {reward:g}"))
        return text

    def _graded(self, reward: float, detail: str) -> Grade:
        return episode_grade(self.env, reward, detail)

    # -- the connection ---------------------------------------------------------------------------------

    async def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    def close(self) -> None:
        """End the episode; the remote's connection is closed on the loop it lives on (in the background
        when that is not this thread's, or when this thread runs it: a close cannot block that loop)."""
        if self._connection is not None:
            if self._loop is not None:
                self._sync(self._disconnect())
            else:
                connection, loop, self._connection = self._connection, self._connection_loop, None
                _close_on(loop, connection)
        self._stop_loop()
        self._turn = None  # a lock belongs to the loop it was used on; the next episode may step on another
        super().close()

    # -- sync -------------------------------------------------------------------------------------------

    def step(self, action: Action) -> StepResult:
        return self._sync(self.astep(action))


def episode_grade(env: Environment, reward: float, detail: str) -> Grade:
    """An episode's reward, which its environment gave, as a grade by the environment's one layer (its weight
    and pass score)."""
    layer = env.verifier.layers[0].spec
    passed = reward >= layer.pass_score
    result = LayerResult(
        layer.name,
        str(layer.layer),
        LayerStatus.PASSED if passed else LayerStatus.FAILED,
        reward,
        layer.weight,
        0.0,
        detail,
    )
    return Grade(GradeStatus.OK if passed else GradeStatus.WRONG, layer.weight * reward, (result,), "")


def _close_on(loop: asyncio.AbstractEventLoop | None, connection: RemoteSession) -> None:
    """Close ``connection`` on ``loop``, the one it lives on, without waiting for it."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if loop is not None and loop is running:
        closing = loop.create_task(connection.close())
        _CLOSING.add(closing)
        closing.add_done_callback(_CLOSING.discard)
    elif loop is not None and loop.is_running():  # e.g. TRL's reset() on its main thread; the tools' loop
        asyncio.run_coroutine_threadsafe(connection.close(), loop)
    # else the connection's loop is gone, and the connection with it
