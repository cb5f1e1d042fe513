"""Process-wide workers for checks that must not run on the event loop, each job under its own time limit.

``submit(fn, args, timeout_s)`` returns a ``concurrent.futures.Future`` of ``(output, seconds)``, or
one that raises :class:`CheckTimeout` or :class:`WorkerDied`. The limit counts the check's own
running time, from the moment a worker starts it, and a check past its limit never keeps holding a
worker, so its neighbours are unaffected:

- a **thread** that overruns is abandoned (Python cannot stop a thread) and a new thread takes its
  place; the abandoned one exits whenever its check returns (:class:`Watchdog`, the one timer of thread
  jobs, these and :mod:`verihub.grading._apart`'s). Time a thread check spends inside :func:`waiting` (a lock
  another answer holds, a process starting, a warm jail to check out) is not its own: its limit stops
  meanwhile and its seconds leave it out;
- a **process** that overruns is killed and a fresh one takes its place.

Every worker process comes from one :class:`Pool` (:func:`lease`): a worker for one user alone (an episode of a
game, the evidence of the fault rule, a driver of :class:`ProcessWorkers`) until it gives it back, its calls
timed where they run. At most :data:`MAX_WORKERS` worker processes live at once; a lease beyond waits for one
(in :func:`waiting`: not the waiter's time). :class:`Pool` also keeps the bridges of
:mod:`verihub.adapters._bridge`: one bound, one idle list and one cleanup (at its owner's ``close()`` and at
exit) for every kind of process the grader keeps.

A failure of this machinery (a worker that does not start, no worker free within :data:`START_S`, thread jobs
that never returned) is :class:`~verihub.errors.GraderInfraError`: the grader's, never an answer's.

Process workers are fresh interpreters started from verihub's own entry point
(:mod:`verihub.grading._check_worker`), never from the user's ``__main__``: a script's top-level code runs
once, whether it is run as a file, from stdin (``python - < script.py``) or with ``-c``.
"""

from __future__ import annotations

import atexit
import contextvars
import functools
import os
import pickle
import queue
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from time import monotonic, perf_counter
from typing import Any, Protocol

from verihub.errors import GraderInfraError, describe_error
from verihub.grading._check_worker import READY
from verihub.sandbox.clock import CLOCK, Clock, waiting

__all__ = [
    "CLOCK",
    "MAX_WORKERS",
    "START_S",
    "CheckTimeout",
    "Clock",
    "LeasedWorker",
    "Pool",
    "Watchdog",
    "WorkerDied",
    "cpu_count",
    "lease",
    "on_new_thread",
    "process_workers",
    "settle",
    "thread_workers",
    "waiting",
]

# A process's start and what it loads before its first call (a game library, a taskset): the infrastructure's
# time, never a call's. Also how long a lease waits for a worker when all are taken.
START_S = 300.0
_MAX_ABANDONED = 256  # thread jobs past their limit still running, per watchdog, before no more are replaced
_RELEASE_S = 10.0  # a leased worker's clean-up call (dropping what it held) before it is reused
_BOOTSTRAP = "import sys; sys.path[:] = {path!r}; from verihub.grading._check_worker import serve; serve()"


class CheckTimeout(TimeoutError):
    """The check ran past its limit; its worker was abandoned or killed and replaced. ``seconds``: the check's
    own time when it was stopped (its limit), never time it spent queued or waiting."""

    def __init__(self, message: str = "", seconds: float | None = None) -> None:
        super().__init__(message)
        self.seconds = seconds


class WorkerDied(RuntimeError):
    """The worker process running the check died during it (a crash, a kill, ``os._exit``). A worker that does
    not start is the grader's failure instead (:class:`~verihub.errors.GraderInfraError`)."""


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# Worker processes alive at once. Each is a whole interpreter (37 MB bare, 75 MB with textarena loaded, measured),
# and an episode holds one while the model writes its next move, so the bound is on memory and on how many
# episodes are open at once rather than on the CPU (a move's work only queues for the cores past one per core):
# four per core, at least 16 (64 workers, about 5 GB, on 16 cores).
MAX_WORKERS = max(16, 4 * cpu_count())


def on_new_thread(
    fn: Callable[..., Any],
    args: Sequence[Any] = (),
    *,
    context: contextvars.Context | None = None,
    name: str = "verihub-call",
) -> Future[Any]:
    """``fn(*args)`` on a thread of its own (never a shared executor, which other answers' calls could fill), in
    ``context`` (default: a copy of the caller's, so work timed or kept apart stays so), as a future that cannot
    be cancelled once it runs."""
    future: Future[Any] = Future()
    run_in = context if context is not None else contextvars.copy_context()

    def body() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(run_in.run(fn, *args))
        except BaseException as error:  # noqa: BLE001 - handed to whoever waits on the future
            future.set_exception(error)

    threading.Thread(target=body, name=name, daemon=True).start()
    return future


# -- timing thread jobs --------------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class _Watch:
    clock: Clock
    timeout_s: float
    expired: Callable[[], None]


class Watchdog:
    """Times thread jobs by their own time (:class:`Clock`) on one thread of its own. Past a job's limit it calls
    the job's ``expired`` (off its lock) and counts the job's thread as abandoned (Python cannot stop it) until
    the job ends: :meth:`finish` then says it was too late."""

    def __init__(self) -> None:
        self._reset()
        _WATCHDOGS.add(self)

    def _reset(self) -> None:
        self._lock = threading.Condition()
        self._running: set[_Watch] = set()
        self._thread: threading.Thread | None = None
        self._wake_at = float("inf")  # when the thread looks next; a job ending sooner wakes it
        self.abandoned = 0  # jobs past their limit whose thread has not returned yet

    def start(self, clock: Clock, timeout_s: float, expired: Callable[[], None]) -> _Watch:
        watch = _Watch(clock, timeout_s, expired)
        with self._lock:
            self._running.add(watch)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._watch, name="verihub-watchdog", daemon=True)
                self._thread.start()
            if clock.began + timeout_s < self._wake_at:
                self._lock.notify()
        return watch

    def finish(self, watch: _Watch) -> bool:
        """The job ended: True if within its limit (its caller answers), False if ``expired`` was called."""
        with self._lock:
            if watch in self._running:
                self._running.discard(watch)
                return True
            self.abandoned -= 1
            return False

    def _watch(self) -> None:
        while True:
            expired: list[_Watch] = []
            with self._lock:
                now = perf_counter()
                wake_at = float("inf")
                for watch in list(self._running):
                    left = watch.timeout_s - watch.clock.own(now)
                    if left > 0:  # (a job waiting is looked at again when it would have run out)
                        wake_at = min(wake_at, now + left)
                        continue
                    self._running.discard(watch)
                    self.abandoned += 1
                    expired.append(watch)
                if not expired:
                    self._wake_at = wake_at
                    self._lock.wait(None if wake_at == float("inf") else wake_at - now)
                    self._wake_at = float("inf")
            for watch in expired:
                watch.expired()


_WATCHDOGS: weakref.WeakSet[Watchdog] = weakref.WeakSet()


@dataclass(slots=True, eq=False)
class _Job:
    fn: Callable[..., Any]
    args: Sequence[Any]
    timeout_s: float
    future: Future[tuple[Any, float]] = field(default_factory=Future)


class ThreadWorkers:
    """``size`` threads serving one queue, timed by a :class:`Watchdog` that replaces a thread whose check overruns.

    Threads whose check never returns cannot be reclaimed; past ``_MAX_ABANDONED`` of them no more
    replacements are started, and once no thread serves the queue every job fails at once with the
    reason (a fault, never a wait without end). A thread whose check does return rejoins the pool.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._watchdog = Watchdog()
        self._serving = 0  # threads taking jobs from the queue
        self._next_worker = 0
        with self._lock:
            for _ in range(size):
                self._spawn()

    def submit(self, fn: Callable[..., Any], args: Sequence[Any], timeout_s: float) -> Future[tuple[Any, float]]:
        job = _Job(fn, args, timeout_s)
        self._jobs.put(job)
        if not self._serving:
            self._fail_queued()
        return job.future

    def _spawn(self) -> None:  # with the lock held
        number, self._next_worker = self._next_worker, self._next_worker + 1
        try:
            threading.Thread(target=self._serve, name=f"verihub-check-{number}", daemon=True).start()
        except RuntimeError:  # the system refuses more threads: the pool runs smaller
            return
        self._serving += 1

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if not job.future.set_running_or_notify_cancel():
                continue
            clock = Clock()
            watch = self._watchdog.start(clock, job.timeout_s, functools.partial(self._expired, job))
            token = CLOCK.set(clock)
            try:
                result: tuple[Any, float] | BaseException = (job.fn(*job.args), clock.own())
            except BaseException as error:  # noqa: BLE001 - handed to whoever waits on the future
                result = error
            finally:
                CLOCK.reset(token)
            if self._watchdog.finish(watch):
                settle(job.future, result)
                continue
            with self._lock:  # timed out: the watchdog answered for us and replaced us, unless the pool is short
                if self._serving >= self._size:
                    return
                self._serving += 1

    def _expired(self, job: _Job) -> None:
        settle(job.future, CheckTimeout(f"ran past {job.timeout_s:g}s", job.timeout_s))
        with self._lock:
            self._serving -= 1
            if self._watchdog.abandoned <= _MAX_ABANDONED:
                self._spawn()
            serving = self._serving
        if not serving:
            self._fail_queued()

    def _fail_queued(self) -> None:
        stuck = GraderInfraError(
            f"no thread is left to run checks: {self._watchdog.abandoned} thread checks never returned after their "
            "time limit"
        )
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            if job.future.set_running_or_notify_cancel():
                job.future.set_exception(stuck)


# -- processes kept for reuse ---------------------------------------------------------------------------------


class Reusable(Protocol):
    """A process a :class:`Pool` keeps: whether it is still alive, and how to end it (idempotent)."""

    @property
    def alive(self) -> bool: ...

    def close(self) -> None: ...


class Pool[P: Reusable]:
    """Processes that each serve one user at a time, made by ``make`` (started and readied: its imports, its
    first request), at most ``live_max`` alive at once; :meth:`take` hands out an idle one or makes one, and
    past the bound waits up to ``wait_s`` for one to be given back (:func:`waiting`: not the taker's time), then
    raises :class:`~verihub.errors.GraderInfraError`. Given back, up to ``idle_max`` are kept warm; the rest, and
    all of them at :meth:`close` or at exit, are closed."""

    def __init__(self, make: Callable[[], P], *, live_max: int, idle_max: int, what: str) -> None:
        self._make, self.live_max, self.idle_max, self.what = make, live_max, idle_max, what
        self._reset()
        _POOLS.add(self)

    def _reset(self) -> None:
        self._lock = threading.Condition()
        self._idle: list[P] = []
        self._taken: set[P] = set()
        self._live = 0  # taken, idle, or being made
        self.waiting = 0  # takers waiting for a process to be given back
        self.peak = 0  # the most alive at once

    def take(self, wait_s: float = START_S) -> P:
        with waiting():
            return self._take(wait_s)

    def _take(self, wait_s: float) -> P:
        dead: list[P] = []
        try:
            with self._lock:
                deadline = monotonic() + wait_s
                while True:
                    while self._idle:
                        candidate = self._idle.pop()
                        if candidate.alive:
                            self._taken.add(candidate)
                            return candidate
                        dead.append(candidate)  # it died idle: reaped below, its place free now
                        self._live -= 1
                    if self._live < self.live_max:
                        self._live += 1
                        self.peak = max(self.peak, self._live)
                        break
                    left = deadline - monotonic()
                    if left <= 0:
                        raise GraderInfraError(f"all {self.live_max} {self.what} stayed in use for {wait_s:g}s")
                    self.waiting += 1
                    try:
                        self._lock.wait(left)
                    finally:
                        self.waiting -= 1
        finally:
            for process in dead:
                process.close()  # (a dead process left unreaped would stay a zombie)
        try:
            made = self._make()
        except BaseException:
            with self._lock:
                self._live -= 1
                self._lock.notify()
            raise
        with self._lock:
            self._taken.add(made)
        return made

    def give_back(self, process: P, *, keep: bool = True) -> None:
        """``process`` back to the idle ones (``keep``, alive, and within their bound), else closed."""
        with self._lock:
            self._taken.discard(process)
            if keep and process.alive and len(self._idle) < self.idle_max:
                self._idle.append(process)
                self._lock.notify()
                return
        process.close()
        self.forget(process)

    def forget(self, process: P) -> None:
        """``process`` is gone (closed, or being closed by its user): it counts no more."""
        with self._lock:
            self._taken.discard(process)
            self._live -= 1
            self._lock.notify()

    def close(self) -> None:
        """Close every process of the pool, the taken ones included (their users then find them dead)."""
        with self._lock:
            processes = [*self._idle, *self._taken]
            self._live -= len(self._idle)
            self._idle.clear()
            self._lock.notify_all()
        for process in processes:
            process.close()


_POOLS: weakref.WeakSet[Pool[Any]] = weakref.WeakSet()


class _WorkerProcess:
    """One child interpreter running :func:`verihub.grading._check_worker.serve` over two pipes."""

    def __init__(self) -> None:
        """Start the child (:meth:`wait_ready` waits until it is)."""
        self.failed: GraderInfraError | None = None
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
            self.failed = GraderInfraError(f"could not start a check worker process: {error}")
            self._process = None
        finally:
            os.close(to_child)
            os.close(from_child)
        self._send = Connection(self._to_child, readable=False)
        self._receive = Connection(self._from_child, writable=False)

    def wait_ready(self) -> None:
        if self.failed is None:
            try:
                if not self._receive.poll(START_S) or self._receive.recv_bytes() != READY:
                    raise EOFError
            except (EOFError, OSError):
                self.failed = GraderInfraError(f"a check worker process did not start{self._exit_note()}")
                self.close()

    def run(self, job: _Job) -> tuple[Any, float] | BaseException:
        try:
            payload = pickle.dumps((job.fn, job.args))
        except Exception as error:  # noqa: BLE001 - the check or its task cannot reach a worker
            return TypeError(f"a process check and its task must pickle: {describe_error(error)}")
        try:
            self._send.send_bytes(payload)
            if not self._receive.poll(job.timeout_s):
                return CheckTimeout(f"ran past {job.timeout_s:g}s", job.timeout_s)
            reply = pickle.loads(self._receive.recv_bytes())
        except (EOFError, OSError):
            return WorkerDied(f"a check worker process died{self._exit_note()}")
        except Exception as error:  # noqa: BLE001 - a reply that does not unpickle in this process
            return RuntimeError(f"cannot read a check worker's reply: {describe_error(error)}")
        if reply[0] == "ok":
            return reply[1], reply[2]
        return reply[1]

    @property
    def alive(self) -> bool:
        return self.failed is None and self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        """Kill the child; its pipes stay open (a thread may still be reading them: :meth:`close` closes them)."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()

    def close(self) -> None:
        self.stop()
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


class LeasedWorker:
    """A worker process of one user alone until :meth:`release` (:func:`lease`): its calls run one at a time,
    each timed where it runs, and one past its limit is killed with the worker (and what the user kept there).
    Thread-safe: a call from a thread that outlived its user (one whose caller gave up waiting) never reads
    another call's reply, nor one of the worker's next user: a worker with a call in flight is killed, never
    given back."""

    def __init__(self, process: _WorkerProcess) -> None:
        self._process = process
        self._calling = threading.Lock()  # one call at a time
        self._state = threading.Lock()  # guards the three flags, briefly
        self._busy = False  # a call is reading the pipes
        self.dead = False  # killed or given back: no more calls
        self._gone = False  # no longer counted by the pool

    def call(self, fn: Callable[..., Any], args: Sequence[Any], timeout_s: float) -> tuple[Any, float]:
        """``fn(*args)``'s result and the seconds it ran in the worker; raises what it raised, or
        :class:`CheckTimeout` / :class:`WorkerDied` (the worker is gone then)."""
        with self._calling:
            result = self._run(_Job(fn, args, timeout_s))
        if isinstance(result, CheckTimeout | WorkerDied):
            self.kill()
        if isinstance(result, BaseException):
            raise result
        return result

    def _run(self, job: _Job) -> tuple[Any, float] | BaseException:  # with _calling held
        with self._state:
            if self.dead:
                return WorkerDied("the worker process was killed or given back after an earlier call")
            self._busy = True
        try:
            return self._process.run(job)
        finally:
            with self._state:
                self._busy = False
                killed = self.dead
            if killed:  # killed while this call read its pipes: they are closed now that nobody reads them
                self._process.close()

    def kill(self) -> None:
        with self._state:
            self.dead = True
            if self._gone:
                return
            self._gone = True
            busy = self._busy
        if busy:
            self._process.stop()  # the call in flight gets EOF, then closes the pipes
        else:
            self._process.close()
        _WORKERS.forget(self._process)

    def release(self, cleanup: tuple[Callable[..., Any], Sequence[Any]] | None = None) -> None:
        """Back to the idle workers, after ``cleanup`` (a call dropping what the user kept there). A worker with a
        call in flight (whose reply would reach its next user), whose clean-up fails, or that is dead, is
        killed instead."""
        if not self._calling.acquire(blocking=False):
            self.kill()
            return
        try:
            keep = True
            if cleanup is not None:
                result = self._run(_Job(cleanup[0], cleanup[1], _RELEASE_S))
                keep = not isinstance(result, BaseException)
            with self._state:
                if self._gone:
                    return
                self.dead = self._gone = True
            _WORKERS.give_back(self._process, keep=keep)
        finally:
            self._calling.release()


def _start_worker() -> _WorkerProcess:
    """A ready worker process, started by a thread that lives as long as this process: the child dies with the
    thread that started it (PR_SET_PDEATHSIG), and a lease may come from a thread that ends before its worker."""
    global _spawner
    made: Future[_WorkerProcess] = Future()
    with _lock:
        if _spawner is None or not _spawner.is_alive():
            _spawner = threading.Thread(target=_spawn_forever, name="verihub-worker-spawner", daemon=True)
            _spawner.start()
        _to_spawn.put(made)
    process = made.result()
    process.wait_ready()  # here, not on the spawner: one slow start holds up no other
    if process.failed is not None:
        raise process.failed
    return process


def _spawn_forever() -> None:
    while True:
        made = _to_spawn.get()
        made.set_result(_WorkerProcess())


_WORKERS: Pool[_WorkerProcess] = Pool(
    _start_worker, live_max=MAX_WORKERS, idle_max=max(4, 2 * cpu_count()), what="check worker processes"
)


def lease(wait_s: float = START_S) -> LeasedWorker:
    """A worker process for the caller alone: an idle one, or one started now, either ready before it is handed
    out (its start is never part of a call's time); past :data:`MAX_WORKERS` alive, the first one given back
    within ``wait_s``. Raises :class:`~verihub.errors.GraderInfraError` when none starts or none comes."""
    return LeasedWorker(_WORKERS.take(wait_s))


class ProcessWorkers:
    """``size`` driver threads, each with a leased worker process (:func:`lease`), serving one queue; a job's limit
    is enforced where it runs, and a worker past it is killed and replaced."""

    def __init__(self, size: int) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        for number in range(size):
            threading.Thread(target=self._drive, name=f"verihub-process-check-{number}", daemon=True).start()

    def submit(self, fn: Callable[..., Any], args: Sequence[Any], timeout_s: float) -> Future[tuple[Any, float]]:
        job = _Job(fn, args, timeout_s)
        self._jobs.put(job)
        return job.future

    def _drive(self) -> None:
        worker: LeasedWorker | None = None
        failed: BaseException | None = None
        while True:
            if worker is None and failed is None:  # ready before the next job arrives: startup is no job's time
                try:
                    worker = lease()
                except GraderInfraError as error:
                    failed = error
            job = self._jobs.get()
            if not job.future.set_running_or_notify_cancel():
                continue
            if worker is None:
                settle(job.future, failed or GraderInfraError("no check worker process"))
                failed = None
                continue
            try:
                result: tuple[Any, float] | BaseException = worker.call(job.fn, job.args, job.timeout_s)
            except BaseException as error:  # noqa: BLE001 - handed to whoever waits on the future
                result = error
            if worker.dead:
                worker = None
            settle(job.future, result)


def settle(future: Future[Any], result: Any) -> None:
    """``result`` (or the exception it is) to ``future``, unless it is already settled (a watchdog got there first)."""
    if future.done():
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)


_lock = threading.Lock()
_threads: ThreadWorkers | None = None
_processes: ProcessWorkers | None = None
_to_spawn: queue.SimpleQueue[Future[_WorkerProcess]] = queue.SimpleQueue()
_spawner: threading.Thread | None = None


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
    """A forked child has none of the parent's threads (and none of the locks they held): it starts pools, timers
    and processes of its own when it needs them, and neither uses nor kills the parent's."""
    global _threads, _processes, _lock, _spawner, _to_spawn
    _lock = threading.Lock()
    _threads = _processes = _spawner = None
    _to_spawn = queue.SimpleQueue()
    for watchdog in list(_WATCHDOGS):
        watchdog._reset()
    for pool in list(_POOLS):
        pool._reset()


os.register_at_fork(after_in_child=_forget_after_fork)


@atexit.register
def _shutdown() -> None:
    for pool in list(_POOLS):
        pool.close()
