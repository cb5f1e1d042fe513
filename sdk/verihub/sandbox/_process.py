"""Run one host process with pipes: feed input, cap output, enforce a deadline, measure its resources."""

from __future__ import annotations

import os
import resource
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["ExtraPipes", "Finished", "run_process"]

_CHUNK = 65536


class ExtraPipes:
    """Pipes beyond stdin/stdout/stderr. Create them first: the child fd numbers they return go into
    the command line, then :func:`run_process` feeds and drains them."""

    def __init__(self) -> None:
        self.feeds: dict[int, bytes] = {}  # parent write end -> data
        self.drains: dict[int, int] = {}  # child fd -> parent read end
        self.caps: dict[int, int] = {}  # parent read end -> the most bytes kept of it
        self.child_ends: list[int] = []

    def feed(self, data: bytes) -> int:
        """A pipe the child reads ``data`` from; returns the child's fd number."""
        read_end, write_end = os.pipe()
        self.feeds[write_end] = data
        self.child_ends.append(read_end)
        return read_end

    def drain(self, cap: int | None = None) -> int:
        """A pipe the child writes to; returns the child's fd number (its output is in ``extra``). With
        ``cap``, what comes once more than ``cap`` bytes are in is read and dropped (more than ``cap`` bytes in
        ``extra`` say that it passed the cap)."""
        read_end, write_end = os.pipe()
        self.drains[write_end] = read_end
        if cap is not None:
            self.caps[read_end] = cap
        self.child_ends.append(write_end)
        return write_end

    def close(self) -> None:
        for fd in [*self.child_ends, *self.feeds, *self.drains.values()]:
            try:
                os.close(fd)
            except OSError:
                pass


@dataclass
class Finished:
    returncode: int
    stdout: bytes = b""
    stderr: bytes = b""
    extra: dict[int, bytes] = field(default_factory=dict)  # what the child wrote to drained fds
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_mb: float | None = None  # the program's peak resident memory; None where it cannot be told (see below)
    timed_out: bool = False
    output_capped: bool = False


def run_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    stdin: bytes | None,
    wall_s: float,
    max_output: int,
    pipes: ExtraPipes | None = None,
) -> Finished:
    """Run ``argv`` in a new session and reap it, killing the session at ``wall_s`` or once stdout
    plus stderr pass ``max_output`` bytes (both are then cut to ``max_output``)."""
    pipes = pipes or ExtraPipes()
    start = time.perf_counter()
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=pipes.child_ends,
            env=dict(env),
            start_new_session=True,
        )
    except BaseException:
        pipes.close()
        raise
    for fd in pipes.child_ends:
        os.close(fd)
    pipes.child_ends = []
    assert process.stdout is not None and process.stderr is not None
    writers = dict(pipes.feeds)
    if stdin and process.stdin is not None:
        writers[os.dup(process.stdin.fileno())] = stdin  # our own fd: the writer loop closes it
        process.stdin.close()
    output = (process.stdout.fileno(), process.stderr.fileno())
    readers = {fd: bytearray() for fd in (*output, *pipes.drains.values())}
    finished = Finished(0)
    deadline = start + wall_s
    try:
        _pump(process, writers, readers, output, deadline, max_output, finished, pipes.caps)
    finally:
        status, usage = _reap(process, deadline, finished)
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, for the rusage
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()
        for read_end in pipes.drains.values():
            os.close(read_end)
    finished.returncode = process.returncode
    finished.wall_s = time.perf_counter() - start
    finished.cpu_s = usage.ru_utime + usage.ru_stime
    finished.peak_mb = _program_peak_mb(usage.ru_maxrss / 1024)
    finished.stdout, finished.stderr = bytes(readers[output[0]]), bytes(readers[output[1]])
    finished.extra = {child_fd: bytes(readers[read_end]) for child_fd, read_end in pipes.drains.items()}
    return finished


def _pump(
    process: subprocess.Popen[bytes],
    writers: dict[int, bytes],
    readers: dict[int, bytearray],
    capped: tuple[int, int],
    deadline: float,
    max_output: int,
    finished: Finished,
    caps: dict[int, int],
) -> None:
    selector = selectors.DefaultSelector()
    for fd in writers:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_WRITE)
    for fd in readers:
        selector.register(fd, selectors.EVENT_READ)
    open_readers = set(readers)
    try:
        while open_readers:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                finished.timed_out = True
                _kill(process)
                break
            for key, _ in selector.select(timeout=remaining):
                fd = key.fd
                if fd in writers:
                    if _write_some(fd, writers):
                        selector.unregister(fd)
                    continue
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    selector.unregister(fd)
                    open_readers.discard(fd)
                    continue
                if fd in caps and len(readers[fd]) > caps[fd]:
                    continue  # past its cap: read (so the child never blocks on it) and dropped
                readers[fd] += chunk
                if fd in capped and len(readers[capped[0]]) + len(readers[capped[1]]) > max_output:
                    finished.output_capped = True
                    _kill(process)
                    open_readers.clear()
                    break
    finally:
        for fd in writers:
            os.close(fd)
        selector.close()
    if finished.timed_out or finished.output_capped:
        for fd in capped:
            del readers[fd][max_output:]


def _reap(process: subprocess.Popen[bytes], deadline: float, finished: Finished) -> tuple[int, resource.struct_rusage]:
    """Wait for the process (it may outlive its pipes), killing it at the deadline; (status, rusage)."""
    pause = 0.0005
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            return status, usage
        if time.perf_counter() >= deadline:
            finished.timed_out = True
            _kill(process)
            _, status, usage = os.wait4(process.pid, 0)
            return status, usage
        time.sleep(pause)
        pause = min(pause * 2, 0.01)


def _write_some(fd: int, writers: dict[int, bytes]) -> bool:
    """Write what the pipe takes; True (and the fd closed) once all is written or the reader left."""
    data = writers[fd]
    try:
        data = data[os.write(fd, data[:_CHUNK]) :]
    except BlockingIOError:
        return False
    except BrokenPipeError:
        data = b""
    if data:
        writers[fd] = data
        return False
    del writers[fd]
    os.close(fd)
    return True


def _kill(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _program_peak_mb(child_max_rss_mb: float) -> float | None:
    """The child's peak resident memory, where it is the program's. A spawned child's ``ru_maxrss`` starts
    at this process's own peak (the kernel carries the spawning address space's high-water mark over
    ``exec``), so in a large process (a trainer, a test run) every child looks that large: only a peak
    clearly above our own was the child's."""
    own_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return child_max_rss_mb if child_max_rss_mb > own_mb * 1.1 else None
