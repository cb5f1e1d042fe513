"""Turning how a sandboxed process ended into a Result: status, reason, exit code."""

from __future__ import annotations

import signal

from verihub.sandbox._process import Finished
from verihub.sandbox.types import Limits, Result, RunStatus, Snapshot

_FINISHED = (RunStatus.OK, RunStatus.NONZERO_EXIT, RunStatus.MEMORY_LIMIT, RunStatus.KILLED)


class RestoreFailed(Exception):  # noqa: N818 - control flow between a backend's attempts, never raised out of it
    """The jail came up and failed while restoring the work dir it was given: after its retries a backend
    raises :class:`~verihub.errors.SandboxStateError` with this reason, never an infrastructure fault."""


def restore_failure(finished: Finished, limits: Limits, stderr: bytes, jail_log: str = "") -> str:
    """Why restoring the work dir failed, from how the jail that was restoring it ended."""
    if finished.timed_out:
        return f"restoring it took past the wall-clock limit of {limits.wall_s:g}s"
    lines = stderr.decode("utf-8", "replace").strip().splitlines() or jail_log.strip().splitlines() or ["?"]
    said = [line for line in lines if "Exiting with failure status" not in line] or lines  # GNU tar's last words
    return f"restoring it failed: {said[-1][-300:]}"


_MEMORY_MARKERS = (b"MemoryError", b"Cannot allocate memory", b"std::bad_alloc", b"out of memory", b"xmalloc")


def classify(
    finished: Finished, stderr: bytes, limits: Limits, *, started: bool, jail_log: str = ""
) -> tuple[RunStatus, str]:
    """Status and reason. ``started`` says the command itself began (the sandbox came up)."""
    if not started:
        if finished.timed_out:
            return RunStatus.INFRA_ERROR, f"the sandbox did not start within {limits.wall_s:g}s"
        detail = (jail_log.strip().splitlines() or stderr.decode("utf-8", "replace").strip().splitlines() or ["?"])[-1]
        return RunStatus.INFRA_ERROR, f"the sandbox failed to start: {detail[-300:]}"
    if finished.output_capped:
        return RunStatus.OUTPUT_LIMIT, f"output passed {limits.max_output_kb} KiB"
    if finished.timed_out:
        return RunStatus.TIMEOUT, f"ran past the wall-clock limit of {limits.wall_s:g}s"
    code = finished.returncode
    signal_number = code - 128 if code > 128 else -code if code < 0 else 0
    if signal_number == signal.SIGXCPU or finished.cpu_s >= limits.cpu_limit_s and signal_number:
        return RunStatus.TIMEOUT, f"ran past the CPU-time limit of {limits.cpu_limit_s:g}s"
    if "time limit" in jail_log or "run time >= time limit" in jail_log:
        return RunStatus.TIMEOUT, f"ran past the wall-clock limit of {limits.wall_s:g}s"
    if code != 0 and any(marker in stderr for marker in _MEMORY_MARKERS):
        return RunStatus.MEMORY_LIMIT, f"an allocation failed at the {limits.memory_mb} MiB limit"
    if signal_number:
        name = signal.Signals(signal_number).name if signal_number in signal.valid_signals() else str(signal_number)
        if signal_number == signal.SIGXFSZ:
            return RunStatus.KILLED, f"killed by {name}: a file passed the {limits.max_file_mb} MiB limit"
        if signal_number == signal.SIGKILL and (finished.peak_mb or 0.0) >= limits.memory_mb * 0.9:
            return RunStatus.MEMORY_LIMIT, f"killed at the {limits.memory_mb} MiB memory limit"
        return RunStatus.KILLED, f"killed by {name}"
    return (RunStatus.OK, "") if code == 0 else (RunStatus.NONZERO_EXIT, f"exit code {code}")


def exit_code(status: RunStatus, returncode: int) -> int | None:
    """The exit code to report: none when a limit or a fault ended the run; 128+N for signal N."""
    if status in (RunStatus.TIMEOUT, RunStatus.OUTPUT_LIMIT, RunStatus.INFRA_ERROR):
        return None
    return 128 - returncode if returncode < 0 else returncode


def to_result(
    finished: Finished,
    limits: Limits,
    *,
    stderr: bytes | None = None,
    started: bool = True,
    jail_log: str = "",
    files: Snapshot | None = None,
    files_error: str = "",
    attempts: int = 1,
) -> Result:
    """The Result of a finished process; ``stderr`` replaces ``finished.stderr`` when cleaned.
    ``files_error`` says why the work dir asked for could not be kept (past the snapshot bounds): the
    run's own output then failed a limit, like output past ``max_output_kb``."""
    stderr = finished.stderr if stderr is None else stderr
    status, reason = classify(finished, stderr, limits, started=started, jail_log=jail_log)
    if files is not None and not files_error:
        # what the next run pays to restore it, not what this one paid to make it (a sparse file is free in the
        # jail and costs every byte restored): a state no later run could start from is refused now, as the run's
        files_error = files.cost.refusal(limits)
    if files_error and status in _FINISHED:
        status, reason, files = RunStatus.OUTPUT_LIMIT, f"the work dir cannot be kept: {files_error}", None
    return Result(
        status=status,
        exit_code=exit_code(status, finished.returncode),
        stdout=finished.stdout.decode("utf-8", "replace"),
        stderr=stderr.decode("utf-8", "replace"),
        wall_s=finished.wall_s,
        cpu_s=finished.cpu_s,
        peak_memory_mb=finished.peak_mb,
        reason=reason,
        files=files if status is not RunStatus.INFRA_ERROR else None,
        attempts=attempts,
    )
