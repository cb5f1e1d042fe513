"""Sandboxed tools for multi-turn environments: ``python`` and ``bash``, over one session's work dir.

Each is a typed method with a docstring, the form tool-calling frameworks (TRL, OpenAI tools) turn
into a JSON schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from verihub.errors import DataError, SandboxInfraError
from verihub.sandbox import Files, Sandbox
from verihub.sandbox.session import SandboxSession
from verihub.sandbox.types import Limits, Result, RunStatus, Snapshot

__all__ = ["FILES", "WORKDIR", "SandboxTools", "task_files", "with_workdir"]

_SHOWN = 4000  # characters of output a tool call returns to the model

WORKDIR = "workdir"
"""The key under which a sandboxed multi-turn rollout's final work dir (a :class:`Snapshot`) reaches the
verifier: checks read ``task[WORKDIR]`` to grade the terminal state rather than the transcript."""

FILES = "files"
"""The task column that seeds a rollout's work dir: a JSON object of relative path -> text, or its JSON text."""


class SandboxTools:
    """The built-in tools of one rollout; state (files) carries over between calls."""

    def __init__(self, *, files: Files = None, limits: Limits | None = None, sandbox: Sandbox | None = None) -> None:
        self.session = SandboxSession(files=files, limits=limits, sandbox=sandbox)

    def python(self, code: str) -> str:
        """Run Python code in a sandbox and return its output.

        Args:
            code: A complete Python program; print what you want to see.
        """
        return _report(self.session.run_python(code))

    def bash(self, command: str) -> str:
        """Run a bash command in a sandbox and return its output.

        Args:
            command: The command line, run in the task's working directory.
        """
        return _report(self.session.run(command))

    def by_name(self) -> dict[str, object]:
        return {"python": self.python, "bash": self.bash}


def task_files(task: Mapping[str, Any]) -> dict[str, str] | None:
    """The initial work dir files of ``task`` (its ``files`` column), or None. Raises ValueError if malformed.

    The column may hold a mapping or its JSON text; None values are left out (a JSON lines dataset turns
    objects into structs that carry every key of every row, absent ones as None).
    """
    value = task.get(FILES)
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            raise DataError(f"task column {FILES!r} is not valid JSON: {error}") from None
    if not isinstance(value, Mapping) or not all(isinstance(name, str) for name in value):
        raise DataError(f"task column {FILES!r} must be a JSON object of path -> text")
    files = {name: content for name, content in value.items() if content is not None}
    if not all(isinstance(content, str) for content in files.values()):
        raise DataError(f"task column {FILES!r} must map each path to text")
    return files or None


def with_workdir(task: Mapping[str, Any], state: Snapshot) -> dict[str, Any]:
    """``task`` plus its rollout's final work dir, the form the verifier grades a terminal state in."""
    return {**task, WORKDIR: state}


def _report(result: Result) -> str:
    """Output for the model. A sandbox fault raises: it is the environment's, not the model's, problem."""
    if result.status is RunStatus.INFRA_ERROR:
        raise SandboxInfraError(f"sandbox failed: {result.reason}")
    text = result.stdout + (
        ("\n" if result.stdout and not result.stdout.endswith("\n") else "") + result.stderr if result.stderr else ""
    )
    if len(text) > _SHOWN:
        text = text[: _SHOWN // 2] + f"\n[... {len(text) - _SHOWN} characters cut ...]\n" + text[-_SHOWN // 2 :]
    if result.status is not RunStatus.OK:
        text += f"\n[{result.status}: {result.reason}]"
    return text
