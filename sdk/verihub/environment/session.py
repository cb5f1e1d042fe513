"""Sessions: one episode of an environment on one task, Gymnasium-small.

>>> session = env.session(task)                                          # doctest: +SKIP
>>> observation = session.reset()                                        # the prompt, and the tools' schemas
>>> observation, reward, done, info = session.step({"content": "\\\\boxed{4}"})   # doctest: +SKIP

An action is the model's turn, an assistant message in the OpenAI form: its text (``content``) and, in
a multi-turn environment, ``tool_calls``. A single-turn session is one step: its text is graded. A
multi-turn session runs each tool call (sandboxed tools in the session's own work dir, which the task's
``files`` column seeds) and returns the outputs as tool messages; a turn without a tool call, or the
last turn the spec allows, ends it and the verifier grades the final state: the answer and, with a
sandbox, the work dir (``task[WORKDIR]``). The eval loop, the trainer's tool environments and
``verihub serve`` all drive this one class.

A fault (a sandbox that fails, a task whose files are malformed, a verifier that raises) ends the
session with reward None and the reason in ``info``; never 0. A model's own mistakes (an unknown tool,
bad arguments) go back to it as the tool's output.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import uuid
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from verihub.environment.toolschema import function_schema
from verihub.errors import SandboxInfraError, SandboxUnavailable, SessionError, describe_error
from verihub.generation.base import model_json
from verihub.grading.grade import Grade, GradeStatus, grade_detail
from verihub.sandbox.tools import SandboxTools, task_files, with_workdir
from verihub.sandbox.types import Snapshot
from verihub.spec.models import SANDBOX_TOOLS

if TYPE_CHECKING:
    from verihub.environment.core import Environment
    from verihub.sandbox import Sandbox

__all__ = ["CallsAreTurns", "Session", "SessionError", "StepResult", "grade_detail", "turn_chars"]

Task = Mapping[str, Any]
Message = dict[str, Any]
Observation = dict[str, Any]
Action = str | Mapping[str, Any]

MAX_TOOL_CALLS = 16  # per turn: each may start a jail, so a model cannot fan one turn out into hundreds


class StepResult(NamedTuple):
    observation: Observation
    reward: float | None  # None until done, and None for a fault
    done: bool
    info: dict[str, Any]  # when done: status, reason, turns, layers (see :func:`grade_detail`)


class _Call(NamedTuple):
    id: str
    name: str
    arguments: dict[str, Any] | None  # None: not a JSON object (the model's mistake)
    surplus: bool = False  # past MAX_TOOL_CALLS in its turn: not run


class Session:
    """One episode. Usable from construction (the trainer renders its own prompts and only calls tools);
    :meth:`reset` starts it over and returns the first observation."""

    def __init__(self, env: Environment, task: Task, *, sandbox: Sandbox | None = None, grader: Any = None) -> None:
        self.env, self.task = env, task
        self.sandbox = sandbox  # for sandboxed tools; None: the default sandbox
        self.grader = grader if grader is not None else env  # grade/agrade: in process, or a RemoteGrader
        interaction = env.spec.interaction
        self.multi_turn = interaction.kind == "multi_turn"
        self.max_turns = interaction.max_turns if self.multi_turn else 1
        self.sandboxed = self.multi_turn and interaction.sandboxed
        self._id: str | None = None
        self._start()

    @property
    def id(self) -> str:
        """The episode's id (made when first asked for: a uuid costs more than a cheap grade's bookkeeping)."""
        if self._id is None:
            self._id = uuid.uuid4().hex
        return self._id

    def _start(self) -> None:
        self.messages: list[Message] = []
        self.turns = 0
        self.tool_calls = 0  # run in this episode: at most MAX_TOOL_CALLS a turn, however they arrive
        self.done = False
        self.grade: Grade | None = None
        self.fault: str | None = None
        self.tools: SandboxTools | None = None  # made on the first sandboxed call: no call, no jail
        self._files: dict[str, str] | None = None
        if self.sandboxed:
            try:
                self._files = task_files(self.task)
            except ValueError as error:
                self._end(fault=f"cannot seed the work dir: {error}")

    # -- the API --------------------------------------------------------------------------------------

    def reset(self) -> Observation:
        """Start over: the prompt, and the schemas of the tools the model may call."""
        self.close()
        self._start()
        self._id = None  # a new episode
        self.messages = list(self.env.render(self.task))
        return {
            "env": self.env.id,
            "task_id": str(self.task.get("id", "")),
            "messages": list(self.messages),
            "tools": self.tool_schemas,
        }

    async def areset(self) -> Observation:
        return self.reset()

    def step(self, action: Action) -> StepResult:
        calls = self._begin(action)
        outputs = [
            self._tool_message(call, self._refusal(call) or self.call_tool(call.name, call.arguments)) for call in calls
        ]
        if self._ends_now(calls) and (task := self._graded_task()) is not None:
            try:
                self._end(grade=self.grader.grade(task, self.messages))
            except Exception as error:  # noqa: BLE001 - a verifier bug is the environment's fault
                self._verifier_failed(error)
        return self._result(outputs)

    async def astep(self, action: Action) -> StepResult:
        calls = self._begin(action)
        outputs = [
            self._tool_message(call, self._refusal(call) or await self.acall_tool(call.name, call.arguments))
            for call in calls
        ]
        if self._ends_now(calls) and (task := self._graded_task()) is not None:
            try:
                self._end(grade=await self.grader.agrade(task, self.messages))
            except Exception as error:  # noqa: BLE001 - a verifier bug is the environment's fault
                self._verifier_failed(error)
        return self._result(outputs)

    def state(self) -> dict[str, Any]:
        return {
            "episode_id": self.id,
            "step_count": self.turns,
            "env": self.env.id,
            "version": self.env.version,
            "task_id": str(self.task.get("id", "")),
            "max_turns": self.max_turns,
            "done": self.done,
            "messages": list(self.messages),
            **(self.info() if self.done else {}),
        }

    def info(self) -> dict[str, Any]:
        """What the episode came to: ``turns``, and once done ``status``, ``reason`` and ``layers``."""
        if self.grade is not None:
            return {"turns": self.turns, **grade_detail(self.grade)}
        if self.fault is not None:
            return {
                "turns": self.turns,
                "status": str(GradeStatus.ENV_ERROR),
                "reward": None,
                "reason": self.fault,
                "layers": [],
            }
        return {"turns": self.turns}

    def close(self) -> None:
        """Drop the work dir; a closed session takes no more steps until :meth:`reset`."""
        self.tools = None
        self.done = True

    async def aend_rollout(self) -> None:
        """The caller's rollout is over (the trainer's, after its answer's step). Here that step ended the
        episode; a session whose episode can outlast an answer (a remote's) ends it by its own rule."""

    # -- tools ----------------------------------------------------------------------------------------

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        return self.env.tool_schemas

    @property
    def workdir(self) -> Snapshot:
        """The work dir as the session leaves it: the tools' state, or the task's files if no tool ran."""
        return self.tools.session.snapshot() if self.tools is not None else Snapshot.of(self._files)

    def call_tool(self, name: str, arguments: dict[str, Any] | None) -> str:
        """Run one tool call; its output, or an error message for the model. A sandbox fault ends the
        session (reward None) and says so to the model."""
        if refusal := self._take_call():
            return refusal
        try:
            function = self._function(name)  # the first sandboxed call makes the sandbox, which can fail
        except (SandboxInfraError, SandboxUnavailable) as error:
            return self._sandbox_failed(name, error)
        if function is None:
            return f"error: no tool named {name!r}; tools: {', '.join(_toolset(self.env).names)}"
        if arguments is None:
            return "error: the arguments must be a JSON object"
        try:
            output = function(**arguments)
        except TypeError as error:
            return f"error: bad arguments for {name}: {error}"
        except (SandboxInfraError, SandboxUnavailable) as error:
            return self._sandbox_failed(name, error)
        except Exception as error:  # noqa: BLE001 - a tool's failure is reported to the model
            return f"error: {describe_error(error)}"
        return output if isinstance(output, str) else json.dumps(output, default=str)

    def _take_call(self) -> str:
        """Count one tool call against the episode, or why it does not run: a fault ended the episode, or its
        budget is spent (the trainer's tool environments call tools one by one, outside step()'s per-turn
        limit: the budget holds for every caller)."""
        if self.fault is not None:
            return f"error: {self.fault}; this rollout will not be scored"
        if self.tool_calls >= MAX_TOOL_CALLS * self.max_turns:
            return f"error: at most {MAX_TOOL_CALLS * self.max_turns} tool calls an episode; this one did not run"
        self.tool_calls += 1
        return ""

    def _sandbox_failed(self, name: str, error: Exception) -> str:
        self._end(fault=f"tool failed: {name}: {error}")
        return f"error: the sandbox failed ({error}); this rollout will not be scored"

    async def acall_tool(self, name: str, arguments: dict[str, Any] | None) -> str:
        return await asyncio.to_thread(self.call_tool, name, arguments)

    def _function(self, name: str) -> Callable[..., Any] | None:
        if name in SANDBOX_TOOLS and name in _toolset(self.env).names:
            if self.tools is None:
                self.tools = SandboxTools(files=self._files, limits=self.env.spec.sandbox, sandbox=self.sandbox)
            return getattr(self.tools, name)
        return _toolset(self.env).imported.get(name)

    # -- one step -------------------------------------------------------------------------------------

    def _begin(self, action: Action) -> list[_Call]:
        """Check the action, record the turn; the tool calls to run (none in a single-turn session)."""
        if self.done:
            raise SessionError("the session is over: reset it to start another episode")
        message = _assistant_message(action)
        calls = _calls(message.get("tool_calls") or []) if self.multi_turn else []
        self.messages.append(message)  # recorded only once the whole action is valid: a refusal costs no turn
        self.turns += 1
        if (chars := turn_chars(message)) > self.env.spec.max_answer_chars:  # wrong before a tool or layer runs
            self._end(grade=self.env.verifier.too_long(chars))
            return []
        return calls

    def _ends_now(self, calls: list[_Call]) -> bool:
        return not self.done and (not calls or self.turns >= self.max_turns)

    def _graded_task(self) -> Task | None:
        try:  # terminal state: with a sandbox, the verifier also sees the final work dir
            return with_workdir(self.task, self.workdir) if self.sandboxed else self.task
        except Exception as error:  # noqa: BLE001 - a snapshot that cannot be read is the environment's fault
            self._end(fault=f"cannot read the final work dir: {describe_error(error)}")
            return None

    def _verifier_failed(self, error: Exception) -> None:
        self._end(fault=f"verifier failed: {describe_error(error, 300)}")

    @staticmethod
    def _refusal(call: _Call) -> str:
        return f"error: at most {MAX_TOOL_CALLS} tool calls a turn; this one did not run" if call.surplus else ""

    def _end(self, *, grade: Grade | None = None, fault: str | None = None) -> None:
        self.grade, self.fault, self.done = grade, fault[:500] if fault else None, True

    def _result(self, outputs: list[Message]) -> StepResult:
        self.messages += outputs
        reward = self.grade.reward if self.grade is not None else None
        return StepResult({"messages": outputs}, reward, self.done, self.info())

    @staticmethod
    def _tool_message(call: _Call, content: str) -> Message:
        return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}


class CallsAreTurns:
    """For sessions in which every tool call is a turn of its own (a grader's session, a remote episode):
    the trainer's tools, called one at a time, each take a step of a single call."""

    done: bool
    fault: str | None
    turns: int

    def call_tool(self, name: str, arguments: dict[str, Any] | None) -> str:
        return self._refused() or self._output(self.step(self._single_call(name, arguments)))  # type: ignore[attr-defined]  # the host class's (ToolSession's) methods

    async def acall_tool(self, name: str, arguments: dict[str, Any] | None) -> str:
        return self._refused() or self._output(await self.astep(self._single_call(name, arguments)))  # type: ignore[attr-defined]  # the host class's (ToolSession's) methods

    def _refused(self) -> str:
        if not self.done:
            return ""
        return (
            f"error: {self.fault}; this rollout will not be scored"
            if self.fault
            else "error: the episode is over; this call did not run"
        )

    def _single_call(self, name: str, arguments: dict[str, Any] | None) -> Message:
        return {
            "content": "",
            "tool_calls": [
                {
                    "id": f"call_{self.turns}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments) if arguments is not None else "null"},
                }
            ],
        }

    @staticmethod
    def _output(result: StepResult) -> str:
        outputs = [message.get("content", "") for message in result.observation.get("messages", [])]
        return str(outputs[0]) if outputs else "error: the call ran no tool"


def turn_chars(message: Message) -> int:
    """The characters of an assistant turn: its text and its tool calls' arguments (what max_answer_chars bounds)."""
    calls = message.get("tool_calls") or ()
    return len(message.get("content") or "") + sum(len(json.dumps(call, default=str)) for call in calls)


def _assistant_message(action: Action) -> Message:
    if isinstance(action, str):
        return {"role": "assistant", "content": action}
    if not isinstance(action, dict | Mapping):  # dict first: an ABC check costs microseconds
        raise SessionError(f"an action is the model's text or an assistant message, not {type(action).__name__}")
    content = action.get("content") or ""
    if not isinstance(content, str):
        raise SessionError("action.content must be text")
    message: Message = {"role": "assistant", "content": content}
    calls = action.get("tool_calls")
    if calls:
        if not isinstance(calls, list) or not all(isinstance(call, Mapping) for call in calls):
            raise SessionError("action.tool_calls must be a list of objects")
        message["tool_calls"] = [dict(call) for call in calls]
    return message


def _calls(raw: list[Mapping[str, Any]]) -> list[_Call]:
    """The tool calls of a turn, in either the OpenAI form ({id, function: {name, arguments}}) or flat
    ({id, name, arguments}); arguments as a JSON object or its text. Past MAX_TOOL_CALLS the rest are dropped
    with an error for the model."""
    calls = []
    for index, call in enumerate(raw):
        function: Mapping[str, Any] = call["function"] if isinstance(call.get("function"), Mapping) else call
        name, arguments = function.get("name"), function.get("arguments")
        if not isinstance(name, str):
            raise SessionError(f"action.tool_calls[{index}] has no tool name")
        if isinstance(arguments, str):
            arguments = model_json(arguments)
        call_id = str(call.get("id") or f"call_{index}")
        calls.append(_Call(call_id, name, arguments if isinstance(arguments, dict) else None))
    if len(calls) > MAX_TOOL_CALLS:  # the surplus calls never run: the model hears why
        calls = calls[:MAX_TOOL_CALLS] + [call._replace(surplus=True) for call in calls[MAX_TOOL_CALLS:]]
    return calls


class _Toolset(NamedTuple):
    names: tuple[str, ...]  # as the model calls them
    imported: dict[str, Callable[..., Any]]  # the module:function tools
    schemas: list[dict[str, Any]]  # from the signatures: built once per environment (about a millisecond a tool)


_TOOLSETS: weakref.WeakKeyDictionary[Environment, _Toolset] = weakref.WeakKeyDictionary()


def _toolset(env: Environment) -> _Toolset:
    toolset = _TOOLSETS.get(env)
    if toolset is None:
        names, imported, schemas = [], {}, []
        for tool in env.spec.interaction.tools:
            if tool in SANDBOX_TOOLS:
                function, name = getattr(SandboxTools, tool), tool
            else:
                module, _, name = tool.partition(":")
                function = imported[name] = getattr(importlib.import_module(module), name)
            names.append(name)
            schemas.append(function_schema(function, name))
        toolset = _TOOLSETS[env] = _Toolset(tuple(names), imported, schemas)
    return toolset
