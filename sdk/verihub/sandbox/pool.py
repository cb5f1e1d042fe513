"""A warm pool of jailed Python workers: a run costs a fork inside a ready jail, not a jail and an
interpreter start.

Each worker is one long-lived nsjail running ``_worker.py`` under the jail's Python (see that file for
how runs are kept apart: after every run the worker puts the jail back and checks it; a worker whose
jail did not come back clean is replaced, never reused). Runs whose limits the pool's jails cannot
honour (network, more memory or disk) go to a fresh jail instead. A worker that dies or stops answering
is replaced in the background, and the run is retried on another. No wait is unbounded: a run waits
for a busy worker only while some worker is alive (each comes back within its own run's limit, or is
replaced), and when none is, it waits at most its own ``wall_s`` for a new one before it reports
``infra_error`` with the reason the workers could not start.
"""

from __future__ import annotations

import json
import os
import queue
import re
import selectors
import signal
import struct
import subprocess
import tempfile
import threading
import time
from typing import IO, Any

from nsjail import MountPt
from nsjail.enums import RLimitType
from nsjail.serializers.textproto import to_textproto

from verihub.errors import SandboxStateError, SandboxUnavailable
from verihub.sandbox import _archive
from verihub.sandbox._classify import to_result
from verihub.sandbox._process import Finished
from verihub.sandbox.clock import waiting
from verihub.sandbox.nsjail import JAIL_ENV, NsjailSandbox, cpu_seconds, jail_source
from verihub.sandbox.types import Limits, Request, Result, RunStatus, Snapshot, UnsafeArchive, exec_refusal

__all__ = ["WarmPool"]

_RETRIES = 2
_START_TIMEOUT_S = 30.0
_REPLY_MARGIN_S = 10.0  # past a run's wall_s: the worker's own kill and pack
_RESET_S = 5.0  # after the reply, for the worker to put its jail back (a millisecond, unless a run left a lot)
_NSJAIL_LOG_PREFIX = re.compile(r"^\[[EF]\]\[[^]]*\]\[\d+\] ")  # "[E][time][pid] " on its errors
_POLL_S = 0.1  # how often a waiting run looks again at whether any worker is alive
_MAX_REPLY = 1 << 20  # bytes of a reply's JSON header or status: a few numbers and a traceback's tail


class WorkerGone(Exception):
    """The worker died, broke the protocol, or did not answer in time (or no worker could be had)."""


class _Worker:
    def __init__(self, jail: NsjailSandbox, limits: Limits, python: str) -> None:
        options = json.dumps({"own_network": not limits.network})
        source = jail_source("_jailpy.py", "_worker.py")
        config = jail.jail_config(
            [python, "-I", "-c", source, options], limits, None, None, keep_files=False, wrapper=False
        )
        config.time_limit = 0  # lives until the pool closes
        config.rlimit_cpu_type = RLimitType.INF
        config.rlimit_as = limits.memory_mb + 256  # the worker itself; each run lowers it to memory_mb
        config.rlimit_nproc = limits.max_procs + 2
        # POSIX message queues live as long as the jail's IPC namespace: mounted, the worker can list them
        config.mount.append(MountPt(dst="/dev/mqueue", fstype="mqueue", rw=True, is_dir=True, nosuid=True, nodev=True))
        # in a file of its own, not a pipe: the config (the worker's source inside it) passes a pipe's 64 KiB
        read_config = os.memfd_create("verihub-worker-config")
        os.write(read_config, to_textproto(config).encode())
        os.lseek(read_config, 0, os.SEEK_SET)
        self._log: IO[bytes] = tempfile.TemporaryFile()  # nsjail's and the worker's own stderr: why it died
        try:
            self.process = subprocess.Popen(
                [jail.nsjail_path, "--quiet", "--config", f"/proc/self/fd/{read_config}"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                pass_fds=[read_config],
                env=JAIL_ENV,
                start_new_session=True,
            )
        except BaseException:
            self._log.close()
            raise
        finally:
            os.close(read_config)
        try:
            hello = self._receive(time.monotonic() + _START_TIMEOUT_S)
            if not hello.get("ready"):
                raise WorkerGone(f"unexpected greeting {hello}")
        except (WorkerGone, ValueError) as error:
            why = self.log_tail() or str(error)
            self.kill()
            raise WorkerGone(f"a worker did not start: {why}") from None

    def call(self, message: dict[str, Any], timeout: float, stdin: bytes = b"", files: bytes = b"") -> dict[str, Any]:
        """One run: the reply header, with ``stdout``, ``stderr`` (bytes) and ``files`` (frames, or
        None), and ``dirty`` when the jail did not come back clean afterwards. The work dir's frames and
        then the run's stdin follow the request as raw bytes (the run restores the one a piece at a time;
        the worker moves the other into the run's stdin without reading it)."""
        body = json.dumps({**message, "files_size": len(files), "stdin_size": len(stdin)}).encode()
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(struct.pack(">I", len(body)) + body)
            self.process.stdin.write(files)
            self.process.stdin.write(stdin)
            self.process.stdin.flush()
        except (OSError, ValueError) as error:  # broken pipe, or a pipe already closed
            raise WorkerGone(f"worker pipe closed: {error}") from None
        deadline = time.monotonic() + timeout
        reply = self._receive(deadline)
        reply["stdout"] = self._read(_within(reply["stdout"], message["max_output"]), deadline)
        reply["stderr"] = self._read(_within(reply["stderr"], message["max_output"]), deadline)
        reply["files"] = self._read(self._length(message["max_files"], deadline), deadline) if reply["files"] else None
        # The run's result is whole here: however long what it left takes to clear, that is the jail's
        # cost (the worker is replaced), never the run's verdict.
        try:
            status = self._receive(time.monotonic() + _RESET_S)
        except WorkerGone as error:
            status = {"left": f"the jail was not put back: {error}"}
        if not status.get("clean"):
            reply["dirty"] = status.get("left") or "?"
        return reply

    def _receive(self, deadline: float) -> dict[str, Any]:
        try:
            return json.loads(self._read(self._length(_MAX_REPLY, deadline), deadline))
        except ValueError:
            raise WorkerGone("worker broke the protocol") from None

    def _length(self, most: int, deadline: float) -> int:
        """A length prefix, at most ``most``."""
        (length,) = struct.unpack(">I", self._read(4, deadline))
        return _within(length, most)

    def _read(self, size: int, deadline: float) -> bytes:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        data = bytearray()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while len(data) < size:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(remaining):
                    raise WorkerGone("worker did not answer in time")
                chunk = os.read(fd, size - len(data))
                if not chunk:
                    raise WorkerGone(f"worker exited (code {self.process.poll()})")
                data += chunk
        return bytes(data)

    def log_tail(self) -> str:
        """Why the worker died, from its stderr: nsjail's first error (the cause), else the last line."""
        try:
            self._log.seek(0)
            lines = self._log.read()[-8000:].decode("utf-8", "replace").strip().splitlines()
        except (OSError, ValueError):
            return ""
        errors = [_NSJAIL_LOG_PREFIX.sub("", line) for line in lines if _NSJAIL_LOG_PREFIX.match(line)]
        return (errors or lines or [""])[0 if errors else -1][-300:]

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self._log):
            if stream is not None:
                try:
                    stream.close()
                except OSError:  # unflushed bytes to a dead worker
                    pass


class WarmPool:
    """``size`` ready jails (default: one per core) with the given ``limits`` as their ceiling.

    Use as a context manager, or call :meth:`close`; workers also exit when this process does. Raises
    :class:`~verihub.errors.SandboxUnavailable`, saying why, if not one worker can start.
    """

    name = "pool"

    def __init__(
        self,
        size: int | None = None,
        *,
        limits: Limits | None = None,
        python: str = "/usr/bin/python3",
        nsjail_path: str | None = None,
    ) -> None:
        self.size = size or len(os.sched_getaffinity(0))  # the CPUs this process may use (nsjail is Linux-only)
        self.limits = limits or Limits()
        self.python = python
        self.fresh = NsjailSandbox(nsjail_path)
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._lock = threading.Lock()
        self._workers: list[_Worker] = []  # alive: idle or running
        self._starting = 0
        self._start_failures = 0
        self._last_failure = ""
        self._closed = False
        with self._lock:
            starters = [self._start_in_background() for _ in range(self.size)]
        for thread in starters:
            thread.join()
        if not self._workers:
            raise SandboxUnavailable(f"the warm pool could not start any worker: {self._last_failure}")

    def __enter__(self) -> WarmPool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers, self._workers = self._workers, []
        for worker in workers:
            worker.kill()

    def fits(self, limits: Limits) -> bool:
        """Whether the pool's jails can honour ``limits`` exactly (else runs go to a fresh jail). Memory,
        processes and time are set per run; network, the tmpfs size and aliases are fixed when a jail starts."""
        ceiling = self.limits
        return (
            limits.network == ceiling.network
            and limits.disk_mb == ceiling.disk_mb
            and limits.aliases == ceiling.aliases
            and limits.memory_mb <= ceiling.memory_mb
            and limits.max_procs <= ceiling.max_procs
        )

    def run(self, request: Request) -> Result:
        if (refused := exec_refusal(request)) is not None:
            return refused
        if not self.fits(request.limits):
            return self.fresh.run(request)
        message = _message(request, self.python)
        files = _archive.to_frames(request.files.entries()) if request.files else b""
        failures: list[str] = []
        restore = ""  # why the last attempt could not restore the work dir
        attempt = 0
        while attempt <= _RETRIES:
            attempt += 1
            try:
                with waiting():  # the queue for a warm jail is shared: waiting in it is no run's own time
                    worker = self._checkout(request.limits.wall_s)
            except WorkerGone as error:  # no worker to be had: another attempt would wait the same
                failures.append(str(error))
                break
            try:
                reply = worker.call(
                    message, timeout=request.limits.wall_s + _REPLY_MARGIN_S, stdin=request.stdin or b"", files=files
                )
            except WorkerGone as error:
                failures.append(str(error))
                restore = ""
                self._retire(worker)
                continue
            if "dirty" in reply:
                self._retire(worker)  # the run is over, but its jail did not come back clean
            else:
                self._idle.put(worker)
            if "error" in reply:
                failures.append(reply["error"].strip().splitlines()[-1])
                restore = reply.get("restore") or ""
                continue
            return _result(reply, request, attempt)
        if restore:  # the jail came up and its work dir did not, again and again: the state's, not the pool's
            raise SandboxStateError(f"restoring it failed: {restore}")
        return Result(RunStatus.INFRA_ERROR, None, "", "", 0.0, reason="; ".join(failures)[-500:], attempts=attempt)

    def _checkout(self, wait_s: float) -> _Worker:
        """An idle worker. While some worker is alive this waits for it (a busy one comes back within its
        run's limit, or is replaced); while none is, at most ``wait_s`` for a new one to start."""
        give_up: float | None = None
        failures_then = 0
        while True:
            try:
                return self._idle.get(timeout=_POLL_S)
            except queue.Empty:
                pass
            with self._lock:
                if self._closed:
                    raise WorkerGone("the warm pool is closed")
                if self._workers:
                    give_up = None
                    continue
                if give_up is None:
                    give_up, failures_then = time.monotonic() + wait_s, self._start_failures
                elif not self._starting and self._start_failures > failures_then:
                    raise WorkerGone(f"no warm worker is alive, and a new one failed to start: {self._last_failure}")
                if not self._starting:
                    self._start_in_background()
            if time.monotonic() > give_up:
                raise WorkerGone(
                    f"no warm worker is alive, and none became ready within {wait_s:g}s"
                    + (f" (last start failure: {self._last_failure})" if self._last_failure else "")
                )

    def _retire(self, worker: _Worker) -> None:
        """Kill ``worker`` and start its replacement in the background."""
        worker.kill()
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)
            if not self._closed and len(self._workers) + self._starting < self.size:
                self._start_in_background()

    def _start_in_background(self) -> threading.Thread:
        """Start one worker in a thread (call with the lock held)."""
        self._starting += 1
        thread = threading.Thread(target=self._start_one, name="verihub-pool-start", daemon=True)
        thread.start()
        return thread

    def _start_one(self) -> None:
        try:
            worker = _Worker(self.fresh, self.limits, self.python)
        except (WorkerGone, OSError) as error:
            with self._lock:
                self._starting -= 1
                self._start_failures += 1
                self._last_failure = str(error)
            return
        with self._lock:
            self._starting -= 1
            if self._closed:
                worker.kill()
                return
            self._workers.append(worker)
        self._idle.put(worker)


def _within(size: Any, most: int) -> int:
    """``size`` from a worker's reply; past ``most`` (or not a size) the worker broke the protocol, and what it
    announced is never read into memory."""
    if not isinstance(size, int) or not 0 <= size <= most:
        raise WorkerGone(f"worker broke the protocol (a reply part of {size!r} bytes, at most {most:,})")
    return size


def _message(request: Request, python: str) -> dict[str, Any]:
    limits = request.limits
    command = request.command
    return {
        "code": request.code,
        "argv": list(command) if command is not None else None,
        "wall_s": limits.wall_s,
        "cpu_s": cpu_seconds(limits),
        "memory_mb": limits.memory_mb,
        "max_file_mb": limits.max_file_mb,
        "max_procs": limits.max_procs,
        "max_output": limits.max_output_kb * 1024,
        "keep_files": request.keep_files,
        "max_files": _archive.archive_cap(limits.disk_mb << 20),  # a work dir past it is refused in the jail
        "env": JAIL_ENV,
    }


def _result(reply: dict[str, Any], request: Request, attempts: int) -> Result:
    finished = Finished(
        returncode=reply["exit_code"],
        stdout=reply["stdout"],
        stderr=reply["stderr"],
        wall_s=reply["wall_s"],
        cpu_s=reply["cpu_s"],
        peak_mb=reply["max_rss_kb"] / 1024,  # the worker forks the program from a small process of its own
        timed_out=reply["timed_out"],
        output_capped=reply["output_capped"],
    )
    files, files_error = None, ""
    if reply["files"] is not None:
        try:
            files = Snapshot.received(reply["files"])
        except UnsafeArchive as error:
            files_error = str(error)
    return to_result(finished, request.limits, files=files, files_error=files_error, attempts=attempts)
