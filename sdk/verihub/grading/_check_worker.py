"""The child side of a process check worker: a fresh interpreter that runs pickled checks, one at a time.

Started by :mod:`verihub.grading._pools` as ``python -c <bootstrap>`` with the parent's ``sys.path``, so the
user's ``__main__`` is never imported here (a script's top-level code runs once, in the parent).
Jobs arrive on fd 0 and replies leave on fd 1, as length-prefixed pickles; both are moved off the
standard descriptors first, so that a check that prints writes to stderr instead of into the
protocol, and a check that reads stdin reads nothing.
"""

from __future__ import annotations

import os
import pickle
import sys
from multiprocessing.connection import Connection
from time import perf_counter

from verihub.errors import describe_error

READY = b"ready"


def serve() -> None:
    jobs = Connection(os.dup(0), writable=False)
    replies = Connection(os.dup(1), readable=False)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    _die_with_parent()
    # pydantic, which every check's params need, loads before READY: outside the first check's time limit.
    import verihub.checks.base  # noqa: F401 - loaded before READY, outside the first check's time

    replies.send_bytes(READY)
    while True:
        try:
            job = jobs.recv_bytes()
        except (EOFError, OSError):
            return  # the parent is gone or closed the pipe: nothing more to do
        replies.send_bytes(_run(job))


def _run(job: bytes) -> bytes:
    """A reply: ("ok", output, seconds the check ran) or ("error", exception)."""
    try:
        fn, args = pickle.loads(job)
    except Exception as error:  # noqa: BLE001 - reported to the parent as the check's fault
        return _reply_error(RuntimeError(f"cannot load the check in a worker process: {describe_error(error)}"))
    start = perf_counter()
    try:
        output = fn(*args)
    except Exception as error:  # noqa: BLE001 - a check's failure goes back to the host as a fault
        return _reply_error(error)
    seconds = perf_counter() - start
    try:
        return pickle.dumps(("ok", output, seconds))
    except Exception as error:  # noqa: BLE001 - a check's failure goes back to the host as a fault
        return _reply_error(TypeError(f"the check's result cannot be sent back: {describe_error(error)}"))


def _reply_error(error: BaseException) -> bytes:
    try:
        reply = pickle.dumps(("error", error))
        pickle.loads(reply)  # an exception that pickles but cannot be rebuilt would fail in the parent
        return reply
    except Exception:  # noqa: BLE001 - a check's failure goes back to the host as a fault
        return pickle.dumps(("error", RuntimeError(describe_error(error))))


def _die_with_parent() -> None:
    """On Linux, get SIGKILL when the parent dies, so a check that never ends cannot outlive it.
    (Linux means the thread that started this process: the pool's long-lived driver thread.)"""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort; the parent kills its workers at exit anyway
        pass
    if os.getppid() == 1:  # the parent died before the line above
        os._exit(0)


if __name__ == "__main__":  # pragma: no cover - `python -m verihub.grading._check_worker` works too
    serve()
