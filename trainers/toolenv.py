"""TRL ``environment_factory`` classes for the environments of a run.

TRL exposes an environment class's public methods as the tools of a rollout and calls ``reset`` with
the row before generating. For a multi-turn environment the class carries the tools its spec lists:
``python`` and ``bash`` run in a :class:`~verihub.sandbox.session.SandboxSession` fresh for each
rollout (under the environment's ``sandbox:`` limits), ``module:function`` tools are the functions
themselves. A task's ``files`` column seeds the work dir. The rollout ends when the model answers without
a tool call; the verifier grades that final state, the answer and the work dir, as the reward
(:mod:`verihub.trainers.rewards`). A sandbox that fails marks the rollout as
an environment fault, so it gets no reward rather than a zero. Single-turn environments in a run that
has tool environments get a class without tools (TRL routes every row through the factory mapping).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from typing import Any

from verihub.errors import SandboxInfraError
from verihub.sandbox.types import Limits, Snapshot
from verihub.tools import SandboxTools, task_files
from verihub.trainers.mixture import MixedEnv

__all__ = ["ToolEnvironment", "environment_class"]


class ToolEnvironment:
    """One rollout's state. Subclasses (see :func:`environment_class`) add the tools as methods."""

    limits: Limits = Limits()

    def __init__(self) -> None:
        self.task: dict[str, Any] = {}
        self.fault: str | None = None
        self._sandbox: SandboxTools | None = None

    def reset(self, **row: Any) -> None:
        self.task = json.loads(row["task"]) if "task" in row else {}
        self.fault = None
        self._sandbox = None  # made on the first sandboxed call: a rollout without one never starts a jail

    @property
    def workdir(self) -> Snapshot:
        """The work dir the rollout left: its session's, or the task's initial files if it ran no tool.
        (A property, not a method: TRL would offer a public method to the model as a tool.)"""
        if self._sandbox is None:
            return Snapshot.of(task_files(self.task))
        return self._sandbox.session.snapshot()

    def _run(self, tool: str, argument: str) -> str:
        if self._sandbox is None:
            try:  # the task's `files` column seeds the work dir
                self._sandbox = SandboxTools(files=task_files(self.task), limits=self.limits)
            except ValueError as error:
                self.fault = f"cannot seed the work dir: {error}"
                return f"error: the task's files are malformed ({error}); this rollout will not be scored"
        try:
            return getattr(self._sandbox, tool)(argument)
        except SandboxInfraError as error:
            self.fault = f"tool {tool} failed: {error}"
            return f"error: the sandbox failed ({error}); this rollout will not be scored"


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


def environment_class(item: MixedEnv) -> type[ToolEnvironment]:
    """A ``ToolEnvironment`` subclass with exactly the tools ``item``'s spec lists (none when single-turn)."""
    members: dict[str, Any] = {"limits": item.env.spec.sandbox, "__doc__": f"Tools of {item.name}."}
    bases: list[type] = [ToolEnvironment]
    for tool in item.env.spec.interaction.tools if item.multi_turn else []:
        if tool in _BUILTIN:
            bases.append(_BUILTIN[tool])
        else:
            module, _, attribute = tool.partition(":")
            members[attribute] = staticmethod(getattr(importlib.import_module(module), attribute))
    safe = "".join(ch if ch.isalnum() else "_" for ch in item.name)
    return type(f"ToolEnvironment_{safe}", tuple(bases), members)
