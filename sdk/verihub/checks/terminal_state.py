"""What a terminal-state check grades: the work dir an answer leaves, in the sandbox.

In a multi-turn rollout (``verihub eval``, the GRPO trainer) the task reaches the verifier with the rollout's
final work dir under ``task["workdir"]`` (:data:`verihub.sandbox.tools.WORKDIR`). A plain text grade has none
(``verihub validate``, ``verihub grade``): the commands of the completion's ```bash blocks are then run on the
task's initial files, and the state they leave is graded the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verihub import sandbox
from verihub.checks._extract import bash_commands
from verihub.errors import SandboxInfraError
from verihub.sandbox.tools import WORKDIR, task_files
from verihub.sandbox.types import Limits, Result, RunStatus, Snapshot

__all__ = ["KEPT", "final_work_dir", "sandboxed"]

KEPT = (RunStatus.OK, RunStatus.NONZERO_EXIT, RunStatus.MEMORY_LIMIT)  # runs whose files a session keeps too


def final_work_dir(completion: str, task: Mapping[str, Any], limits: Limits) -> Snapshot | str:
    """The work dir to grade, or why the answer left none (its failing: a 0)."""
    state = task.get(WORKDIR)
    if state is None:
        commands = bash_commands(completion)
        if not commands:
            return "no work dir to inspect and no ```bash block to run"
        applied = sandboxed(sandbox.run(commands, files=task_files(task), limits=limits, keep_files=True))
        if applied.status not in KEPT or applied.files is None:
            return f"the commands did not finish ({applied.status}: {applied.reason})"
        state = applied.files
    if not isinstance(state, Snapshot):
        raise TypeError(f"task[{WORKDIR!r}] must be a verihub Snapshot, not {type(state).__name__}")
    return state


def sandboxed(result: Result) -> Result:
    """``result``; :class:`SandboxInfraError` (an environment fault, never a 0) when the sandbox failed."""
    if result.status is RunStatus.INFRA_ERROR:
        raise SandboxInfraError(f"sandbox failed: {result.reason}")
    return result
