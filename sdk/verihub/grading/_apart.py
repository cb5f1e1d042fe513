"""Work kept apart from every answer being graded: the evidence of the fault rule, and objects a hostile input
could freeze (an in-process game's episode).

- :func:`run_apart` runs one job of the fault rule's evidence (a retry, the reference, the answer once more)
  where no other answer's job queues in front of it: a thread of its own (a coroutine function's coroutine on
  an event loop of its own there), or a worker process leased for it alone (:func:`verihub.grading._pools.lease`).
  It shares no queue, lock or event loop of the grader's with the grades of other answers, and its limit counts
  its own time (:func:`verihub.grading._pools.waiting` stops the clock while it waits for infrastructure). A
  thread or coroutine job still shares this process's GIL: a neighbour's check that holds it (C code that never
  releases it) slows the job's clock too. Only a process job is apart from that. Code that serves many answers
  from one place (a bridge process under a lock) asks :func:`apart` and serves the evidence from a place of its
  own.
- :class:`Held` is an object made and kept in a worker process leased for it alone, its methods called one at
  a time under a deadline: a call that cannot be interrupted in this process (a game's regex holding the
  GIL) is killed there, with the process.
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Literal

from verihub.errors import GraderInfraError
from verihub.grading import _pools
from verihub.grading._pools import CLOCK, START_S, CheckTimeout, Clock, WorkerDied, settle, waiting

__all__ = ["Held", "apart", "run_apart"]

ApartMode = Literal["thread", "coroutine", "process"]

_APART: contextvars.ContextVar[bool] = contextvars.ContextVar("verihub_apart", default=False)
_WATCHDOG = _pools.Watchdog()  # times apart jobs on threads (the one timer of thread jobs, as the pools' is)


def apart() -> bool:
    """Whether this code runs as evidence of the fault rule, apart from every answer being graded."""
    return _APART.get()


def run_apart(fn: Callable[..., Any], args: Sequence[Any], timeout_s: float, mode: ApartMode) -> Future[Any]:
    """A future of ``(fn(*args)'s result, the seconds it ran)``, or of its exception: :class:`CheckTimeout`
    once its own time passes ``timeout_s`` (a thread is then abandoned, a process killed);
    :class:`~verihub.errors.GraderInfraError` when the machinery fails (no worker process, too many threads that
    never returned)."""
    context = contextvars.Context()  # nothing of the caller's: no clock, no loop, marked as evidence
    context.run(_APART.set, True)
    if mode == "process":
        return _pools.on_new_thread(_in_leased_worker, (fn, args, timeout_s), context=context, name="verihub-evidence")
    future: Future[Any] = Future()
    if _WATCHDOG.abandoned >= _pools._MAX_ABANDONED:
        future.set_exception(
            GraderInfraError(f"{_WATCHDOG.abandoned} evidence jobs never returned after their time limit")
        )
        return future

    def timed() -> None:
        clock = Clock()
        CLOCK.set(clock)
        watch = _WATCHDOG.start(
            clock, timeout_s, lambda: settle(future, CheckTimeout(f"ran past {timeout_s:g}s", timeout_s))
        )
        try:
            value = asyncio.run(fn(*args)) if mode == "coroutine" else fn(*args)
            result: Any = (value, clock.own())
        except BaseException as error:  # noqa: BLE001 - handed to whoever waits on the future
            result = error
        if _WATCHDOG.finish(watch):
            settle(future, result)

    _pools.on_new_thread(timed, context=context, name="verihub-evidence")
    return future


def _in_leased_worker(fn: Callable[..., Any], args: Sequence[Any], timeout_s: float) -> tuple[Any, float]:
    worker = _pools.lease()  # an idle worker, or one started now: outside the job's time
    try:
        return worker.call(fn, args, timeout_s)  # timed in the worker; killed with it past the limit
    finally:
        worker.release()


class Held:
    """``factory(*args)``, made and kept in a worker process leased for it alone; :meth:`call` runs one of its
    methods there under a deadline, and one past it kills the worker (the object with it: :attr:`alive` turns
    false). ``imports`` are modules to load first, outside any call's time (a game library's import), after
    which ``factory``'s own module. Workers are reused once given back: what a library keeps in its modules
    (its registry, Python's global random generator) carries over from one user to the next; only the object
    itself is dropped. Thread-safe (:class:`~verihub.grading._pools.LeasedWorker`)."""

    def __init__(self, factory: Callable[..., Any], args: Sequence[Any], *, imports: Sequence[str] = ()) -> None:
        with waiting():  # starting a worker and loading a library are the infrastructure's time
            self._worker = _pools.lease()
            module = ""
            try:
                for module in (*imports, factory.__module__):
                    self._worker.call(_load, (module,), START_S)
            except (CheckTimeout, WorkerDied) as error:  # the machinery's failure: no answer has played yet
                self._worker.kill()
                why = f"took longer than {START_S:g}s" if isinstance(error, CheckTimeout) else f"failed: {error}"
                raise GraderInfraError(f"loading {module} in a check worker process {why}") from None
            except BaseException:
                self._worker.kill()
                raise
        self._made = False
        self._factory, self._args = factory, tuple(args)
        self._reclaim = weakref.finalize(self, self._worker.kill)  # dropped without close(): the process goes

    @property
    def alive(self) -> bool:
        return not self._worker.dead

    def make(self, timeout_s: float) -> None:
        """Make the object (a call like any other: a factory that overruns is killed)."""
        self._worker.call(_make, (self._factory, self._args), timeout_s)
        self._made = True

    def call(self, method: str, args: Sequence[Any], timeout_s: float) -> Any:
        """The object's ``method(*args)``, run in its worker within ``timeout_s``: its result, or what it raised;
        :class:`CheckTimeout` past the limit, :class:`~verihub.grading._pools.WorkerDied` if the worker died."""
        return self._worker.call(_invoke, (method, tuple(args)), timeout_s)[0]

    def close(self) -> None:
        """Drop the object; its worker goes back to the idle ones, or is killed when a call is still in flight
        there (from a thread whose caller gave up on it) or the object cannot be dropped."""
        self._reclaim.detach()
        self._worker.release((_drop, ()) if self._made else None)


# -- the worker process's side: the one object it holds -------------------------------------------------

_HELD: list[Any] = []


def _load(module: str) -> None:
    importlib.import_module(module)


def _make(factory: Callable[..., Any], args: Sequence[Any]) -> None:
    _HELD[:] = [factory(*args)]


def _invoke(method: str, args: Sequence[Any]) -> Any:
    if not _HELD:
        raise RuntimeError("the worker holds no object (it was dropped, or never made)")
    return getattr(_HELD[0], method)(*args)


def _drop() -> None:
    held = _HELD[:]
    _HELD.clear()
    for each in held:
        close = getattr(each, "close", None)
        if callable(close):
            close()
