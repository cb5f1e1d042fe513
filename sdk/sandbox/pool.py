"""A warm pool of jailed Python workers: a run costs a fork inside a ready jail, not a jail and an
interpreter start.

Each worker is one long-lived nsjail running ``_worker.py`` under the jail's Python (see that file for
how runs are kept apart). Runs whose limits the pool's jails cannot honour (network, more memory or
disk) go to a fresh jail instead. A worker that dies or stops answering is replaced, and the run is
retried on another; after the retries the result is ``infra_error``.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import selectors
import signal
import struct
import subprocess
import threading
import time
from importlib import resources
from typing import Any

from nsjail.enums import RLimitType
from nsjail.serializers.textproto import to_textproto

from verihub.sandbox._classify import to_result
from verihub.sandbox._process import Finished
from verihub.sandbox.nsjail import JAIL_ENV, NsjailSandbox
from verihub.sandbox.types import Limits, Request, Result, RunStatus, Snapshot

__all__ = ["WarmPool"]

_RETRIES = 2
_START_TIMEOUT_S = 30.0


class WorkerGone(Exception):
    """The worker died, broke the protocol, or did not answer in time."""


class _Worker:
    def __init__(self, jail: NsjailSandbox, limits: Limits, python: str) -> None:
        package = resources.files("verihub.sandbox")
        source = package.joinpath("_jailpy.py").read_text() + "\n" + package.joinpath("_worker.py").read_text()
        config = jail.jail_config([python, "-I", "-c", source], limits, None, None, keep_files=False, wrapper=False)
        config.time_limit = 0  # lives until the pool closes
        config.rlimit_cpu_type = RLimitType.INF
        config.rlimit_as = limits.memory_mb + 256  # the worker itself; each run lowers it to memory_mb
        config.rlimit_nproc = limits.max_procs + 2
        read_config, write_config = os.pipe()
        os.write(write_config, to_textproto(config).encode())
        os.close(write_config)
        try:
            self.process = subprocess.Popen(
                [jail.nsjail_path, "--quiet", "--config", f"/proc/self/fd/{read_config}"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                pass_fds=[read_config], env=JAIL_ENV, start_new_session=True,
            )
        finally:
            os.close(read_config)
        hello = self._receive(time.monotonic() + _START_TIMEOUT_S)
        if not hello.get("ready"):
            self.kill()
            raise WorkerGone(f"worker did not start: {hello}")

    def call(self, message: dict[str, Any], timeout: float, stdin: bytes = b"") -> dict[str, Any]:
        """Send a request, then the run's stdin as raw bytes (``stdin_size`` of them), and wait for the reply."""
        body = json.dumps({**message, "stdin_size": len(stdin)}).encode()
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(struct.pack(">I", len(body)) + body + stdin)
            self.process.stdin.flush()
        except (OSError, ValueError) as error:  # broken pipe, or a pipe already closed
            raise WorkerGone(f"worker pipe closed: {error}") from None
        return self._receive(time.monotonic() + timeout)

    def _receive(self, deadline: float) -> dict[str, Any]:
        header = self._read(4, deadline)
        return json.loads(self._read(struct.unpack(">I", header)[0], deadline))

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

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:  # unflushed bytes to a dead worker
                    pass


class WarmPool:
    """``size`` ready jails (default: one per core) with the given ``limits`` as their ceiling.

    Use as a context manager, or call :meth:`close`; workers also exit when this process does.
    """

    name = "pool"

    def __init__(self, size: int | None = None, *, limits: Limits | None = None, python: str = "/usr/bin/python3",
                 nsjail_path: str | None = None) -> None:
        from verihub._pools import cpu_count

        self.size = size or cpu_count()
        self.limits = limits or Limits()
        self.python = python
        self.fresh = NsjailSandbox(nsjail_path)
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._lock = threading.Lock()
        self._workers: list[_Worker] = []
        self._closed = False
        starters = [threading.Thread(target=self._add_worker) for _ in range(self.size)]
        for thread in starters:
            thread.start()
        for thread in starters:
            thread.join()
        if not self._workers:
            raise RuntimeError("the warm pool could not start any worker")

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
        processes and time are set per run; network and the tmpfs size are fixed when a jail starts."""
        ceiling = self.limits
        return (limits.network == ceiling.network and limits.disk_mb == ceiling.disk_mb
                and limits.memory_mb <= ceiling.memory_mb and limits.max_procs <= ceiling.max_procs)

    def run(self, request: Request) -> Result:
        if not self.fits(request.limits):
            return self.fresh.run(request)
        message = _message(request, self.python)
        failures: list[str] = []
        for attempt in range(1, _RETRIES + 2):
            worker = self._idle.get()
            try:
                reply = worker.call(message, timeout=request.limits.wall_s + 10, stdin=request.stdin or b"")
            except WorkerGone as error:
                failures.append(str(error))
                self._replace(worker)
                continue
            self._idle.put(worker)
            if "error" in reply:
                failures.append(reply["error"].strip().splitlines()[-1])
                continue
            return _result(reply, request, attempt)
        return Result(RunStatus.INFRA_ERROR, None, "", "", 0.0, reason="; ".join(failures)[-500:], attempts=_RETRIES + 1)

    def _add_worker(self) -> None:
        try:
            worker = _Worker(self.fresh, self.limits, self.python)
        except (WorkerGone, OSError):
            return
        with self._lock:
            if self._closed:
                worker.kill()
                return
            self._workers.append(worker)
        self._idle.put(worker)

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)
        self._add_worker()


def _message(request: Request, python: str) -> dict[str, Any]:
    limits = request.limits
    command = request.command
    return {
        "code": request.code,
        "argv": list(command) if command is not None else None,
        "files": base64.b64encode(request.files.tar).decode() if request.files else None,
        "wall_s": limits.wall_s,
        "cpu_s": limits.cpu_limit_s,
        "memory_mb": limits.memory_mb,
        "max_file_mb": limits.max_file_mb,
        "max_procs": limits.max_procs,
        "max_output": limits.max_output_kb * 1024,
        "keep_files": request.keep_files,
        "env": JAIL_ENV,
    }


def _result(reply: dict[str, Any], request: Request, attempts: int) -> Result:
    finished = Finished(
        returncode=reply["exit_code"],
        stdout=base64.b64decode(reply["stdout"]),
        stderr=base64.b64decode(reply["stderr"]),
        wall_s=reply["wall_s"],
        cpu_s=reply["cpu_s"],
        max_rss_mb=reply["max_rss_kb"] / 1024,
        timed_out=reply["timed_out"],
        output_capped=reply["output_capped"],
    )
    files = Snapshot(base64.b64decode(reply["files"])) if "files" in reply else None
    return to_result(finished, request.limits, files=files, peak_memory_mb=finished.max_rss_mb, attempts=attempts)
