"""Process-wide workers for checks that must not run on the event loop, each job under its own time limit.

``submit(fn, args, timeout_s)`` returns a ``concurrent.futures.Future`` of ``(output, seconds)``, or
one that raises :class:`CheckTimeout` or :class:`WorkerDied`. The limit counts the check's own
running time, from the moment a worker starts it, and a check past its limit never keeps holding a
worker, so its neighbours are unaffected:

- a **thread** that overruns is abandoned (Python cannot stop a thread) and a new thread takes its
  place; the abandoned one exits whenever its check returns;
- a **process** that overruns is killed and a fresh one takes its place.

Process workers are fresh interpreters started from verihub's own entry point
(:mod:`verihub.grading._check_worker`), never from the user's ``__main__``: a script's top-level code runs
once, whether it is run as a file, from stdin (``python - < script.py``) or with ``-c``.
"""

from __future__ import annotations

import atexit
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from time import perf_counter
from typing import Any

from verihub.errors import describe_error
from verihub.grading._check_worker import READY

__all__ = ["CheckTimeout", "WorkerDied", "cpu_count", "process_workers", "thread_workers"]

_START_TIMEOUT_S = 120.0  # a worker process that is not ready by then is reported as dead
_MAX_ABANDONED = 256  # thread checks past their limit that may still be running before no more are replaced
_BOOTSTRAP = "import sys; sys.path[:] = {path!r}; from verihub.grading._check_worker import serve; serve()"


class CheckTimeout(TimeoutError):
    """The check ran past its limit; its worker was abandoned or killed and replaced."""


class WorkerDied(RuntimeError):
    """The worker process running the check died (a crash, a kill, ``os._exit``) or did not start."""


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@dataclass(slots=True, eq=False)
class _Job:
    fn: Callable[..., Any]
    args: Sequence[Any]
    timeout_s: float
    future: Future[tuple[Any, float]] = field(default_factory=Future)


class ThreadWorkers:
    """``size`` threads serving one queue, plus a watchdog that replaces a thread whose check overruns.

    Threads whose check never returns cannot be reclaimed; past ``_MAX_ABANDONED`` of them no more
    replacements are started, and once no thread serves the queue every job fails at once with the
    reason (a fault, never a wait without end). A thread whose check does return rejoins the pool.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Condition()
        self._running: dict[int, tuple[float, _Job]] = {}  # worker number -> (deadline, job)
        self._abandoned: set[int] = set()  # threads still inside a check that ran past its limit
        self._serving = 0  # threads taking jobs from the queue
        self._next_worker = 0
        self._wake_at = float("inf")  # when the watchdog looks next; a job ending sooner wakes it
        with self._lock:
            for _ in range(size):
                self._spawn()
        threading.Thread(target=self._watch, name="verihub-check-watchdog", daemon=True).start()

    def submit(self, fn: Callable[..., Any], args: Sequence[Any], timeout_s: float) -> Future[tuple[Any, float]]:
        job = _Job(fn, args, timeout_s)
        self._jobs.put(job)
        if not self._serving:
            self._fail_queued()
        return job.future

    def _spawn(self) -> None:  # with the lock held
        number, self._next_worker = self._next_worker, self._next_worker + 1
        try:
            threading.Thread(target=self._serve, args=(number,), name=f"verihub-check-{number}", daemon=True).start()
        except RuntimeError:  # the system refuses more threads: the pool runs smaller
            return
        self._serving += 1

    def _serve(self, number: int) -> None:
        while True:
            job = self._jobs.get()
            if not job.future.set_running_or_notify_cancel():
                continue
            start = perf_counter()
            deadline = start + job.timeout_s
            with self._lock:
                self._running[number] = (deadline, job)
                if deadline < self._wake_at:
                    self._lock.notify()
            try:
                result: tuple[Any, float] | BaseException = (job.fn(*job.args), perf_counter() - start)
            except BaseException as error:  # noqa: BLE001 - handed to whoever waits on the future
                result = error
            with self._lock:
                if number not in self._abandoned:
                    del self._running[number]
                    answered = False
                else:  # timed out: the watchdog answered for us and replaced us, unless the pool is short
                    self._abandoned.discard(number)
                    answered = True
                    if self._serving >= self._size:
                        return
                    self._serving += 1
            if not answered:
                _settle(job.future, result)

    def _watch(self) -> None:
        while True:
            expired: list[_Job] = []
            with self._lock:
                now = perf_counter()
                for number, (deadline, job) in list(self._running.items()):
                    if deadline <= now:
                        del self._running[number]
                        self._abandoned.add(number)
                        self._serving -= 1
                        if len(self._abandoned) <= _MAX_ABANDONED:
                            self._spawn()
                        expired.append(job)
                if not expired:
                    self._wake_at = min((deadline for deadline, _ in self._running.values()), default=float("inf"))
                    self._lock.wait(None if self._wake_at == float("inf") else self._wake_at - now)
                    self._wake_at = float("inf")
            for job in expired:
                _settle(job.future, CheckTimeout(f"ran past {job.timeout_s:g}s"))
            if not self._serving:
                self._fail_queued()

    def _fail_queued(self) -> None:
        stuck = RuntimeError(
            f"no thread is left to run checks: {len(self._abandoned)} thread checks never returned after their time "
            "limit"
        )
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            if job.future.set_running_or_notify_cancel():
                job.future.set_exception(stuck)


class ProcessWorkers:
    """``size`` worker processes, each driven by a thread of ours that enforces the job's limit."""

    def __init__(self, size: int) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._workers: list[_WorkerProcess] = []
        self._lock = threading.Lock()
        for number in range(size):
            threading.Thread(target=self._drive, name=f"verihub-process-check-{number}", daemon=True).start()

    def submit(self, fn: Callable[..., Any], args: Sequence[Any], timeout_s: float) -> Future[tuple[Any, float]]:
        job = _Job(fn, args, timeout_s)
        self._jobs.put(job)
        return job.future

    def close(self) -> None:
        with self._lock:
            workers, self._workers = self._workers, []
        for worker in workers:
            worker.kill()

    def _drive(self) -> None:
        worker: _WorkerProcess | None = None
        while True:
            if worker is None:  # started before the next job arrives: startup never counts as a job's time
                worker = self._start()
            job = self._jobs.get()
            if not job.future.set_running_or_notify_cancel():
                continue
            if worker.failed is not None:
                _settle(job.future, worker.failed)
                self._forget(worker)
                worker = None
                continue
            result = worker.run(job)
            if isinstance(result, CheckTimeout | WorkerDied):
                self._forget(worker)
                worker = None
            _settle(job.future, result)

    def _start(self) -> _WorkerProcess:
        worker = _WorkerProcess()
        with self._lock:
            self._workers.append(worker)
        return worker

    def _forget(self, worker: _WorkerProcess) -> None:
        worker.kill()
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)


class _WorkerProcess:
    """One child interpreter running :func:`verihub.grading._check_worker.serve` over two pipes."""

    def __init__(self) -> None:
        self.failed: WorkerDied | None = None
        to_child, self._to_child = os.pipe()
        self._from_child, from_child = os.pipe()
        try:
            self._process: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-c", _BOOTSTRAP.format(path=list(sys.path))],
                stdin=to_child,
                stdout=from_child,
                close_fds=True,
            )
        except OSError as error:
            self.failed = WorkerDied(f"could not start a check worker process: {error}")
            self._process = None
        finally:
            os.close(to_child)
            os.close(from_child)
        self._send = Connection(self._to_child, readable=False)
        self._receive = Connection(self._from_child, writable=False)
        if self.failed is None:
            try:
                if not self._receive.poll(_START_TIMEOUT_S) or self._receive.recv_bytes() != READY:
                    raise EOFError
            except (EOFError, OSError):
                self.failed = WorkerDied(f"a check worker process did not start{self._exit_note()}")
                self.kill()

    def run(self, job: _Job) -> tuple[Any, float] | BaseException:
        try:
            payload = pickle.dumps((job.fn, job.args))
        except Exception as error:  # noqa: BLE001 - the check or its task cannot reach a worker
            return TypeError(f"a process check and its task must pickle: {describe_error(error)}")
        try:
            self._send.send_bytes(payload)
            if not self._receive.poll(job.timeout_s):
                return CheckTimeout(f"ran past {job.timeout_s:g}s")
            reply = pickle.loads(self._receive.recv_bytes())
        except (EOFError, OSError):
            return WorkerDied(f"a check worker process died{self._exit_note()}")
        except Exception as error:  # noqa: BLE001 - a reply that does not unpickle in this process
            return RuntimeError(f"cannot read a check worker's reply: {describe_error(error)}")
        if reply[0] == "ok":
            return reply[1], reply[2]
        return reply[1]

    def kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._send.close()
        self._receive.close()

    def _exit_note(self) -> str:
        if self._process is None:
            return ""
        try:
            code = self._process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            return ""
        return f" (exit code {code})"


def _settle(future: Future[tuple[Any, float]], result: tuple[Any, float] | BaseException) -> None:
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)


_lock = threading.Lock()
_threads: ThreadWorkers | None = None
_processes: ProcessWorkers | None = None


def thread_workers() -> ThreadWorkers:
    global _threads
    with _lock:
        if _threads is None:
            _threads = ThreadWorkers(min(32, cpu_count() + 4))
        return _threads


def process_workers() -> ProcessWorkers:
    """One worker process per core."""
    global _processes
    with _lock:
        if _processes is None:
            _processes = ProcessWorkers(cpu_count())
        return _processes


def _forget_after_fork() -> None:
    """A forked child has none of the parent's threads: it starts pools of its own when it needs them."""
    global _threads, _processes, _lock
    _lock = threading.Lock()
    _threads = _processes = None


os.register_at_fork(after_in_child=_forget_after_fork)


@atexit.register
def _shutdown() -> None:
    if _processes is not None:
        _processes.close()
