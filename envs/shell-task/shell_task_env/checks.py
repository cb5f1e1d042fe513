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

from pydantic import Field

from shell_task_env.exploits import EXPLOITS
from verihub import CheckResult, check, sandbox
from verihub.checks.base import SandboxParams
from verihub.checks.terminal_state import final_work_dir, sandboxed
from verihub.sandbox.types import Result, RunStatus

__all__ = ["FinalStateParams", "final_state"]

# Runs the checker read from stdin, once it is non-dumpable (prctl PR_SET_DUMPABLE = 4, value 0).
_CHECKER_HOST = (
    "import ctypes, sys\n"
    "if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:\n"
    "    sys.exit('verihub: cannot make the checker non-dumpable')\n"
    "source = sys.stdin.read()\n"
    "exec(compile(source, '<checker>', 'exec'), {'__name__': '__main__'})\n"
)


class FinalStateParams(SandboxParams):
    checker_field: str = Field(
        "checker", description="Column with the Python checker script (exit 0: the state is right)."
    )

    def columns(self) -> set[str]:
        return {self.checker_field}


@check(params=FinalStateParams, exploits=EXPLOITS)
def final_state(completion: str, task: Mapping[str, Any], params: FinalStateParams) -> CheckResult:
    """1 when the task's checker accepts the final work dir (``task["workdir"]``, else the state the
    completion's ```bash blocks leave on the initial files), 0 otherwise."""
    state = final_work_dir(completion, task, params.limits)
    if isinstance(state, str):
        return CheckResult(0.0, state)
    verdict = sandboxed(
        sandbox.run(
            ["python3", "-I", "-c", _CHECKER_HOST],
            files=state or None,
            stdin=str(task[params.checker_field]),
            limits=params.limits,
        )
    )
    if verdict.ok:
        return CheckResult(1.0)
    return CheckResult(0.0, _why(verdict))


def _why(result: Result) -> str:
    """The checker's last words (its failed assertion), or how it ended."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    last = lines[-1].strip() if lines else ""
    if result.status is RunStatus.NONZERO_EXIT:
        return last[:300] or f"the checker exited {result.exit_code}"
    return f"the checker did not finish ({result.status}: {result.reason}) {last[:200]}".strip()
