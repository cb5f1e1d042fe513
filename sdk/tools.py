"""Sandboxed tools for multi-turn environments: ``python`` and ``bash``, over one session's work dir.

Each is a typed method with a docstring, the form tool-calling frameworks (TRL, OpenAI tools) turn
into a JSON schema.
"""

from __future__ import annotations

from verihub.errors import SandboxInfraError
from verihub.sandbox import Files, Sandbox
from verihub.sandbox.session import SandboxSession
from verihub.sandbox.types import Limits, Result, RunStatus

__all__ = ["SandboxTools"]

_SHOWN = 4000  # characters of output a tool call returns to the model


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


def _report(result: Result) -> str:
    """Output for the model. A sandbox fault raises: it is the environment's, not the model's, problem."""
    if result.status is RunStatus.INFRA_ERROR:
        raise SandboxInfraError(f"sandbox failed: {result.reason}")
    text = result.stdout + (("\n" if result.stdout and not result.stdout.endswith("\n") else "") + result.stderr
                            if result.stderr else "")
    if len(text) > _SHOWN:
        text = text[: _SHOWN // 2] + f"\n[... {len(text) - _SHOWN} characters cut ...]\n" + text[-_SHOWN // 2 :]
    if result.status is not RunStatus.OK:
        text += f"\n[{result.status}: {result.reason}]"
    return text
