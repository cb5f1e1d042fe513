"""TRL ``environment_factory`` classes for the environments of a run.

TRL exposes an environment class's public methods as the tools of a rollout and calls ``reset`` with
the row before generating. For a multi-turn environment the class carries the tools its spec lists:
``python`` and ``bash`` are calls in the rollout's own :class:`~verihub.environment.session.Session` (the one tool
loop the eval and ``verihub serve`` drive too), run in its sandbox under the environment's ``sandbox:``
limits; ``module:function`` tools are the functions themselves. A task's ``files`` column seeds the work
dir. Tools that only the session knows (a multi-turn OpenEnv remote's ``act``, whose parameters are the
remote's action schema) become async methods whose type hints say what the schema says, each call a turn
of the session. The rollout ends when the model answers without
a tool call; the verifier grades that final state, the answer and the work dir, as the reward
(:mod:`verihub.trainers.rewards`). A sandbox that fails marks the rollout as
an environment fault, so it gets no reward rather than a zero. Single-turn environments in a run that
has tool environments get a class without tools (TRL routes every row through the factory mapping).
"""

from __future__ import annotations

import importlib
import inspect
import json
import keyword
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Union

from verihub.environment.session import _toolset
from verihub.sandbox.tools import SandboxTools, task_files
from verihub.sandbox.types import Limits, Snapshot
from verihub.trainers.mixture import MixedEnv

if TYPE_CHECKING:
    from verihub.environment.core import Environment
    from verihub.environment.session import Session

__all__ = ["ToolEnvironment", "environment_class"]


class ToolEnvironment:
    """One rollout's state: a :class:`~verihub.environment.session.Session` on its task. Subclasses (see
    :func:`environment_class`) add the tools as methods, each one call in the session."""

    env: Environment | None = None
    grader: Any = None  # a verihub.serve.graders.RemoteGrader: sessions on its servers; None: in this process
    limits: Limits = Limits()

    def __init__(self) -> None:
        self.task: dict[str, Any] = {}
        self.session: Session | None = None

    def reset(self, **row: Any) -> None:
        self.task = json.loads(row["task"]) if "task" in row else {}
        if self.session is not None:
            self.session.close()  # the last rollout's work dir (or its server's session) goes
        # TRL renders the prompt itself; the session only runs the tools (a jail starts on the first call)
        sessions = self.grader if self.grader is not None else self.env
        self.session = sessions.session(self.task) if sessions is not None else None

    @property
    def fault(self) -> str | None:
        """Why the rollout cannot be scored (a sandbox that failed, malformed task files), or None."""
        return self.session.fault if self.session is not None else None

    @property
    def workdir(self) -> Snapshot:
        """The work dir the rollout left: its session's, or the task's initial files if it ran no tool.
        (A property, not a method: TRL would offer a public method to the model as a tool.)"""
        if self.session is None:
            return Snapshot.of(task_files(self.task))
        return self.session.workdir

    @property
    def _sandbox(self) -> SandboxTools | None:
        return self.session.tools if self.session is not None else None

    @_sandbox.setter
    def _sandbox(self, tools: SandboxTools | None) -> None:  # tests put a failing sandbox in
        if self.session is not None:
            self.session.tools = tools

    def _run(self, tool: str, argument: str) -> str:
        if self.session is None:
            raise RuntimeError("reset() starts a rollout: TRL calls it before the tools")
        parameter = "code" if tool == "python" else "command"
        return self.session.call_tool(tool, {parameter: argument})

    async def _acall(self, tool: str, arguments: dict[str, Any]) -> str:
        if self.session is None:
            raise RuntimeError("reset() starts a rollout: TRL calls it before the tools")
        return await self.session.acall_tool(tool, arguments)


class _Tool:
    # no annotation on `self` in the tools: transformers builds the JSON schema from the type hints
    _run: Callable[[str, str], str]


class _Python(_Tool):
    def python(self, code: str) -> str:
        """Run Python code in a sandbox and return its output.

        Args:
            code: A complete Python program; print what you want to see.
        """
        return self._run("python", code)


class _Bash(_Tool):
    def bash(self, command: str) -> str:
        """Run a bash command in a sandbox and return its output.

        Args:
            command: The command line, run in the task's working directory.
        """
        return self._run("bash", command)


_BUILTIN: dict[str, type] = {"python": _Python, "bash": _Bash}


def environment_class(item: MixedEnv, grader: Any = None) -> type[ToolEnvironment]:
    """A ``ToolEnvironment`` subclass with exactly the tools ``item``'s sessions offer (none when single-turn);
    with a ``grader`` (:class:`verihub.serve.graders.RemoteGrader`), its sessions and tools run on that pool."""
    members: dict[str, Any] = {
        "env": item.env,
        "grader": grader,
        "limits": item.env.spec.sandbox,
        "__doc__": f"Tools of {item.name}.",
    }
    bases: list[type] = [ToolEnvironment]
    for tool in item.env.spec.interaction.tools if item.multi_turn else []:
        if tool in _BUILTIN:
            bases.append(_BUILTIN[tool])
        else:
            module, _, attribute = tool.partition(":")
            members[attribute] = staticmethod(getattr(importlib.import_module(module), attribute))
    spec_tools = set(_toolset(item.env).names)
    for schema in item.env.tool_schemas if item.multi_turn else []:
        if schema["function"]["name"] not in spec_tools:
            session_tool = _session_tool(item.name, schema["function"])
            members[session_tool.__name__] = session_tool
    safe = "".join(ch if ch.isalnum() else "_" for ch in item.name)
    return type(f"ToolEnvironment_{safe}", tuple(bases), members)


# -- tools only the session knows, from their JSON schema ----------------------------------------------------

MAX_DEPTH = 8  # of nested schemas ($ref chains, arrays of arrays): past it a value is Any
MAX_NODES = 512  # schema nodes read for one tool: a hostile remote's schema costs a bounded walk
_RESERVED = {"get_reward"} | {name for name in dir(ToolEnvironment) if not name.startswith("_")}  # TRL's, ours


def _usable(name: Any) -> bool:
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


def _session_tool(env_name: str, function: Mapping[str, Any]) -> Callable[..., Any]:
    """An async method for TRL that calls the session's tool ``function`` (an OpenAI function schema). TRL and
    transformers build the model's schema back from its signature, type hints and docstring."""
    name, parameters = function.get("name"), function.get("parameters") or {}
    fields = parameters.get("properties") or {}
    if not isinstance(name, str) or not _usable(name) or name.startswith("_") or name in _RESERVED:
        raise ValueError(
            f"{env_name}: tool {name!r} cannot be offered to TRL, which calls tools as public methods "
            f"of the environment class (reserved: {', '.join(sorted(_RESERVED))})"
        )
    bad = (
        [field for field in fields if not _usable(field) or field == "self"]
        if isinstance(fields, Mapping)
        else ["properties"]
    )
    if bad:
        raise ValueError(
            f"{env_name}: tool {name!r} cannot be offered to TRL, which passes arguments as Python "
            f"keywords: {', '.join(map(repr, bad[:5]))} is not a usable name"
        )
    walk = _SchemaWalk(parameters.get("$defs") or parameters.get("definitions") or {})
    required = set(parameters.get("required") or [])
    hints = {field: walk.hint(schema) for field, schema in fields.items()}
    signature = inspect.Signature(
        [
            inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            *(
                inspect.Parameter(
                    field,
                    inspect.Parameter.KEYWORD_ONLY,
                    annotation=hints[field],
                    default=inspect.Parameter.empty if field in required else None,
                )
                for field in fields
            ),
        ]
    )

    async def tool(self: ToolEnvironment, **arguments: Any) -> str:
        return await self._acall(name, arguments)

    lines = [
        f"    {field}: {_one_line(schema.get('description') if isinstance(schema, Mapping) else None, field)}"
        for field, schema in fields.items()
    ]
    tool.__name__ = tool.__qualname__ = name
    tool.__signature__ = signature  # type: ignore[attr-defined]  # what inspect.signature reads
    tool.__annotations__ = {**hints, "return": str}
    tool.__doc__ = _one_line(function.get("description"), name) + ("\n\nArgs:\n" + "\n".join(lines) if lines else "")
    return tool


def _one_line(text: Any, fallback: str) -> str:
    """A description that transformers' docstring parser reads back as it is: one line, no section
    headers, no trailing ``(choices: ...)`` (which it would parse as JSON)."""
    line = " ".join(str(text).split())[:300] if isinstance(text, str) and text.strip() else fallback
    line = re.sub(r"\b(Args|Returns|Raises)\s*:", r"\1 -", line)
    return re.sub(r"\(\s*choices\s*:", "[choices:", line, flags=re.IGNORECASE)


class _SchemaWalk:
    """JSON schema -> the type hint transformers turns back into (about) the same schema."""

    _SIMPLE = {
        "string": str,
        "integer": int,
        "number": float,
        "boolean": bool,
        "null": type(None),
        "object": dict[str, Any],
    }

    def __init__(self, definitions: Mapping[str, Any]) -> None:
        self.definitions = definitions if isinstance(definitions, Mapping) else {}
        self.nodes = 0

    def hint(self, schema: Any, depth: int = 0) -> Any:
        self.nodes += 1
        if not isinstance(schema, Mapping) or depth >= MAX_DEPTH or self.nodes > MAX_NODES:
            return Any
        reference = schema.get("$ref")
        if isinstance(reference, str):
            return self.hint(self.definitions.get(reference.rsplit("/", 1)[-1]), depth + 1)
        choices = (
            schema["enum"] if isinstance(schema.get("enum"), list) else [schema["const"]] if "const" in schema else None
        )
        if choices and all(type(choice) in (str, int, float, bool, type(None)) for choice in choices):
            return Literal[tuple(dict.fromkeys(choices))[:64]]
        alternatives = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(alternatives, list) and alternatives:
            return self._union([self.hint(one, depth + 1) for one in alternatives[:16]])
        kind = schema.get("type")
        if isinstance(kind, list) and kind:
            return self._union([self.hint({**schema, "type": one}, depth + 1) for one in kind[:8]])
        if kind == "array":
            return list[self.hint(schema.get("items"), depth + 1)]  # type: ignore[misc]  # a type built at run time from the schema
        return self._SIMPLE.get(kind, Any) if isinstance(kind, str) else Any

    @staticmethod
    def _union(hints: list[Any]) -> Any:
        unique = list(dict.fromkeys(hints))
        return Any if Any in unique else unique[0] if len(unique) == 1 else Union[tuple(unique)]  # noqa: UP007 - a Union of a runtime tuple: | cannot build one
