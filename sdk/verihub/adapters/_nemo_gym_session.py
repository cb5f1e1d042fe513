"""A NeMo-Gym row with tools, played as a :class:`verihub.environment.session.Session`: the tools are the row's
own (``responses_create_params.tools``), each call posted to the resources server's route in the episode's
server session (:mod:`verihub.adapters.bridges.nemo_gym_side`), and the episode ends, as any tool episode
does, at a turn without a tool call or at ``max_turns``: its output items (the model's messages, its function
calls and their outputs, in order) then go to the server's ``/verify`` in that same session, whose reward is
the grade. The server seeds the episode at its first call (or at its end, for one without calls).

A call the server refuses (a 4xx: arguments its route does not take) goes back to the model as the tool's
output; the server failing (a 5xx, a malformed reply), the bridge dying or a call past ``timeout_s`` ends the
episode as a fault, reward None, never 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from verihub.adapters._openenv_session import episode_grade
from verihub.environment.core import Environment
from verihub.environment.session import Message, Session
from verihub.errors import GraderInfraError, RemoteEnvError, describe_error
from verihub.grading.grade import Grade

if TYPE_CHECKING:
    from verihub.adapters.nemo_gym import NemoGymServer

__all__ = ["NemoGymEnvironment", "NemoGymSession", "chat_tool"]


def chat_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A Responses API function tool (``{type, name, parameters, description}``) in the chat form models get."""
    return {
        "type": "function",
        "function": {
            "name": str(tool["name"]),
            "description": str(tool.get("description") or ""),
            "parameters": dict(tool.get("parameters") or {"type": "object", "properties": {}}),
        },
    }


class NemoGymEnvironment(Environment):
    """A ``nemo-gym:`` environment whose rows offer tools: its sessions play them on the server."""

    def __init__(self, loaded: Any, params: NemoGymServer, tools: list[dict[str, Any]], **options: Any) -> None:
        super().__init__(loaded, **options)
        self.params, self._tools = params, [chat_tool(tool) for tool in tools]

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        return list(self._tools)

    def session(self, task: Mapping[str, Any], *, sandbox: Any = None) -> Session:
        return NemoGymSession(self, task)


class NemoGymSession(Session):
    """One row's episode on the server (see the module docstring)."""

    env: NemoGymEnvironment

    def __init__(self, env: NemoGymEnvironment, task: Mapping[str, Any]) -> None:
        self.episode: str | None = None  # the server session's id on the bridge, from the first call on
        super().__init__(env, task, grader=_Verify(self))

    def call_tool(self, name: str, arguments: dict[str, Any] | None) -> str:
        if refusal := self._take_call():  # the episode's call budget, as every session keeps it
            return refusal
        names = [tool["function"]["name"] for tool in self.env.tool_schemas]
        if name not in names:
            return f"error: no tool named {name!r}; tools: {', '.join(names)}"
        if arguments is None:
            return "error: the arguments must be a JSON object"
        try:
            answer = self._ask({"op": "call", "episode": self._begun(), "name": name, "arguments": arguments})
        except (RemoteEnvError, GraderInfraError) as error:
            self._end(fault=f"tool failed: {name}: {describe_error(error, 300)}")
            return f"error: the environment failed ({error}); this rollout will not be scored"
        return str(answer["output"])

    def close(self) -> None:
        episode, self.episode = self.episode, None
        if episode is not None:
            try:
                self._ask({"op": "close", "episode": episode})
            except (RemoteEnvError, GraderInfraError):
                pass  # a dead bridge took its episodes with it
        super().close()

    def finish(self) -> Grade:
        """The episode's output verified in its server session: the grade (RemoteEnvError for a fault)."""
        episode, self.episode = self._begun(), None
        answer = self._ask({"op": "finish", "episode": episode, "output": output_items(self.messages)})
        from verihub.adapters.nemo_gym import scored

        score, detail = scored(self.env.params, answer)
        return episode_grade(self.env, score, detail)

    def _begun(self) -> str:
        if self.episode is None:
            self.episode = str(self._ask({"op": "begin", "row": json.loads(str(self.task["row"]))})["episode"])
        return self.episode

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        from verihub.adapters.nemo_gym import ask

        return ask(self.env.params, request, episode=True)


class _Verify:
    """The session's grader: its own episode's ``/verify`` (a fault, raised, ends the session as one)."""

    def __init__(self, session: NemoGymSession) -> None:
        self.session = session

    def grade(self, task: Mapping[str, Any], messages: Any) -> Grade:
        return self.session.finish()

    async def agrade(self, task: Mapping[str, Any], messages: Any) -> Grade:
        import asyncio

        return await asyncio.to_thread(self.session.finish)


def output_items(messages: list[Message]) -> list[dict[str, Any]]:
    """The episode's Responses output items from its messages after the prompt: each assistant text (a ``text``
    item the far side completes as a message), function call and tool output, in order."""
    first = next((index for index, message in enumerate(messages) if message.get("role") == "assistant"), len(messages))
    items: list[dict[str, Any]] = []
    for message in messages[first:]:
        if message.get("role") == "assistant":
            if message.get("content"):
                items.append({"type": "text", "text": str(message["content"])})
            for index, call in enumerate(message.get("tool_calls") or []):
                function = call.get("function") if isinstance(call.get("function"), Mapping) else call
                arguments = function.get("arguments")
                items.append(
                    {
                        "type": "function_call",
                        "call_id": str(call.get("id") or f"call_{index}"),
                        "name": str(function.get("name")),
                        "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                    }
                )
        elif message.get("role") == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": str(message.get("tool_call_id")),
                    "output": str(message.get("content") or ""),
                }
            )
    return items
