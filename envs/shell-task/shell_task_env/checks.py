"""The terminal-state check of shell-task: the task's own checker script, run against the final work dir.

In a multi-turn rollout (``verihub eval``, the GRPO trainer) the task reaches the verifier with the rollout's
final work dir under ``task["workdir"]`` (:data:`verihub.sandbox.tools.WORKDIR`); that state is all that is graded,
never what the model says about it. A plain text grade has no work dir (``verihub validate``, ``verihub
grade``): the commands of the completion's ```bash blocks are then run on the task's initial files, in
the sandbox, and the state they leave is checked the same way.

The checker is a Python script shipped in the task row (``checker`` column). It runs in the sandbox with
the final files as its working directory, under ``python3 -I`` (so files the model left, such as a
``json.py``, cannot shadow the modules it imports); it passes when it exits 0. Some checkers run a script
the model wrote, in the same jail: so the checker's source (which holds the expected outputs) reaches it on
stdin, never on its command line (``/proc/PID/cmdline`` is readable by every process), and it makes itself
non-dumpable first, which closes its ``/proc/PID/mem`` and ``fd`` to the model's processes. A sandbox
that fails to run is :class:`~verihub.errors.SandboxInfraError`: an environment fault, never a zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, PrivateAttr, ValidationInfo, model_validator
from verihub import CheckParams, CheckResult, check, sandbox
from verihub.checks import fenced_blocks
from verihub.errors import SandboxInfraError
from verihub.sandbox.tools import WORKDIR, task_files
from verihub.sandbox.types import Limits, Result, RunStatus, Snapshot

from shell_task_env.exploits import EXPLOITS

__all__ = ["FinalStateParams", "bash_commands", "final_state"]

_SHELLS = ("bash", "sh", "shell")
_KEPT = (RunStatus.OK, RunStatus.NONZERO_EXIT, RunStatus.MEMORY_LIMIT)  # runs whose files a session keeps too
# Runs the checker read from stdin, once it is non-dumpable (prctl PR_SET_DUMPABLE = 4, value 0).
_CHECKER_HOST = ("import ctypes, sys\n"
                 "if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:\n"
                 "    sys.exit('verihub: cannot make the checker non-dumpable')\n"
                 "source = sys.stdin.read()\n"
                 "exec(compile(source, '<checker>', 'exec'), {'__name__': '__main__'})\n")


class FinalStateParams(CheckParams):
    checker_field: str = Field("checker", description="Column with the Python checker script (exit 0: the state is right).")
    _limits: Limits = PrivateAttr(default_factory=Limits)

    @model_validator(mode="after")
    def _limits_from_the_environment(self, info: ValidationInfo) -> FinalStateParams:
        self._limits = (info.context or {}).get("sandbox") or Limits()
        return self

    def columns(self) -> set[str]:
        return {self.checker_field}

    @property
    def limits(self) -> Limits:
        return self._limits


def bash_commands(completion: str) -> str:
    """The commands of every ```bash (or ```sh, ```shell) block of ``completion``, in order."""
    blocks = [body for language, body in fenced_blocks(completion) if language.lower() in _SHELLS]
    return "\n".join(block.strip("\n") for block in blocks).strip()


@check(params=FinalStateParams, exploits=EXPLOITS)
def final_state(completion: str, task: Mapping[str, Any], params: FinalStateParams) -> CheckResult:
    """1 when the task's checker accepts the final work dir (``task["workdir"]``, else the state the
    completion's ```bash blocks leave on the initial files), 0 otherwise."""
    state = task.get(WORKDIR)
    if state is None:  # a plain text grade: the completion's commands make the final state
        commands = bash_commands(completion)
        if not commands:
            return CheckResult(0.0, "no work dir to inspect and no ```bash block to run")
        applied = _sandboxed(sandbox.run(commands, files=task_files(task), limits=params.limits, keep_files=True))
        if applied.status not in _KEPT or applied.files is None:
            return CheckResult(0.0, f"the commands did not finish ({applied.status}: {applied.reason})")
        state = applied.files
    if not isinstance(state, Snapshot):
        raise TypeError(f"task[{WORKDIR!r}] must be a verihub Snapshot, not {type(state).__name__}")
    verdict = _sandboxed(sandbox.run(["python3", "-I", "-c", _CHECKER_HOST], files=state or None,
                                     stdin=str(task[params.checker_field]), limits=params.limits))
    if verdict.ok:
        return CheckResult(1.0)
    return CheckResult(0.0, _why(verdict))


def _sandboxed(result: Result) -> Result:
    if result.status is RunStatus.INFRA_ERROR:
        raise SandboxInfraError(f"sandbox failed: {result.reason}")
    return result


def _why(result: Result) -> str:
    """The checker's last words (its failed assertion), or how it ended."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    last = lines[-1].strip() if lines else ""
    if result.status is RunStatus.NONZERO_EXIT:
        return last[:300] or f"the checker exited {result.exit_code}"
    return f"the checker did not finish ({result.status}: {result.reason}) {last[:200]}".strip()
