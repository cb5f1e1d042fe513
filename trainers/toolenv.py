"""TRL ``environment_factory`` classes for the environments of a run.

TRL exposes an environment class's public methods as the tools of a rollout and calls ``reset`` with
the row before generating. For a multi-turn environment the class carries the tools its spec lists:
``python`` and ``bash`` are calls in the rollout's own :class:`~verihub.session.Session` (the one tool
loop the eval and ``verihub serve`` drive too), run in its sandbox under the environment's ``sandbox:``
limits; ``module:function`` tools are the functions themselves. A task's ``files`` column seeds the work dir. The rollout ends when the model answers without
a tool call; the verifier grades that final state, the answer and the work dir, as the reward
(:mod:`verihub.trainers.rewards`). A sandbox that fails marks the rollout as
an environment fault, so it gets no reward rather than a zero. Single-turn environments in a run that
has tool environments get a class without tools (TRL routes every row through the factory mapping).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from verihub.sandbox.types import Limits, Snapshot
from verihub.tools import SandboxTools, task_files
from verihub.trainers.mixture import MixedEnv

if TYPE_CHECKING:
    from verihub.environment import Environment
    from verihub.session import Session

__all__ = ["ToolEnvironment", "environment_class"]


class ToolEnvironment:
    """One rollout's state: a :class:`~verihub.session.Session` on its task. Subclasses (see
    :func:`environment_class`) add the tools as methods, each one call in the session."""

    env: Environment | None = None
    grader: Any = None  # a verihub.graders.RemoteGrader: sessions on its servers; None: in this process
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
    """A ``ToolEnvironment`` subclass with exactly the tools ``item``'s spec lists (none when single-turn);
    with a ``grader`` (:class:`verihub.graders.RemoteGrader`), its sessions and tools run on that pool."""
    members: dict[str, Any] = {"env": item.env, "grader": grader, "limits": item.env.spec.sandbox,
                               "__doc__": f"Tools of {item.name}."}
    bases: list[type] = [ToolEnvironment]
    for tool in item.env.spec.interaction.tools if item.multi_turn else []:
        if tool in _BUILTIN:
            bases.append(_BUILTIN[tool])
        else:
            module, _, attribute = tool.partition(":")
            members[attribute] = staticmethod(getattr(importlib.import_module(module), attribute))
    safe = "".join(ch if ch.isalnum() else "_" for ch in item.name)
    return type(f"ToolEnvironment_{safe}", tuple(bases), members)
