"""verihub's side of a bridge: a child interpreter of another tool (one whose pins verihub's lock cannot share)
running a far side from :mod:`verihub.adapters.bridges`, asked one JSON line at a time over pipes.

Answers share one bridge per tool, under a lock (:meth:`BridgeProcess.held`); the time a caller waits for it,
or for a bridge to start, is not its check's own (:func:`verihub.grading._pools.waiting`). The evidence of the
fault rule never waits there: :func:`bridge_pool` serves it from a bridge process of its own (at most
:data:`MAX_APART` at once: a caller beyond waits, outside its time), so a hostile answer stalling the shared
bridge (a scorer that spins on a crafted reply) cannot stall another's evidence. A bridge that does not start
(its interpreter, its tool's import, a taskset's load) is the grader's failure
(:class:`~verihub.errors.GraderInfraError`), never an answer's. Every bridge process is closed at exit, and a
pool's at its owner's ``close()``."""

from __future__ import annotations

import atexit
import json
import selectors
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from verihub.errors import GraderInfraError, describe_error
from verihub.grading._pools import Pool, cpu_count, waiting

__all__ = ["MAX_APART", "BridgeProcess", "bridge_pool", "held"]

SIDES = Path(__file__).with_name("bridges")
_MAX_LINE = 64 << 20  # bytes of one answer (a taskset's tasks, all prompts)
_START = "import sys; sys.path.insert(0, sys.argv[1]); import runpy; runpy.run_path(sys.argv[2], run_name='__main__')"
# Evidence bridges of one tool alive at once: each is a whole interpreter of that tool (verifiers, GEM), and
# evidence comes one grade per repeated fault, so one per core serves it; past that a grade waits, off its clock.
MAX_APART = max(2, cpu_count())


class BridgeProcess:
    """One child: ``python -P bridges/SIDE`` (-P: the far side's folder only, never this package's, on its
    path). Requests go one at a time (:meth:`ask` pairs each with its answer, whatever thread asks); a failure
    is ``error`` with what failed, and a child that died or stalled past ``timeout_s`` is started again at the
    next request (:meth:`ensure`), readied by ``ready`` (its first request: the tool's import, a taskset's load)."""

    def __init__(
        self,
        python: str,
        side: str,
        *,
        what: str,
        timeout_s: float,
        error: type[Exception],
        ready: Callable[[BridgeProcess], None] | None = None,
    ) -> None:
        self.python, self.side, self.what, self.timeout_s, self.error = python, side, what, timeout_s, error
        self.ready = ready
        self.lock = threading.Lock()  # held by callers across several requests (held())
        self._asking = threading.RLock()  # one request and its answer at a time (ready's own requests within)
        self._process: subprocess.Popen[bytes] | None = None
        self._starting = False
        _BRIDGES.add(self)

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        self.close()
        self._process = subprocess.Popen(
            [self.python, "-P", "-c", _START, str(SIDES), str(SIDES / self.side)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )

    def ensure(self) -> None:
        """Started and readied, if it is not running: outside the caller's time (:func:`waiting`), and a failure
        there is the grader's (:class:`~verihub.errors.GraderInfraError`, the tool's own error as its cause)."""
        with self._asking:
            if self._starting or self.alive:  # (ready's own requests come while it starts)
                return
            self._starting = True
            try:
                with waiting():
                    self.start()
                    if self.ready is not None:
                        self.ready(self)
            except Exception as error:
                self.close()
                raise GraderInfraError(f"{self.what}: the bridge did not start: {describe_error(error)}") from error
            finally:
                self._starting = False

    def ask(self, request: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        """The far side's answer to ``request`` within ``timeout_s`` (default: the bridge's); ``error`` when it
        failed, raised, died or stalled."""
        with self._asking:
            self.ensure()
            return self._ask(request, self.timeout_s if timeout_s is None else timeout_s)

    def _ask(self, request: dict[str, Any], limit: float) -> dict[str, Any]:
        process = self._process
        if process is None or process.stdin is None or process.stdout is None:
            raise self.error(f"{self.what}: the bridge failed ({request['op']}: it was closed)")
        try:
            process.stdin.write(json.dumps(request).encode() + b"\n")
            process.stdin.flush()
            line = _read_line(process, limit)
        except (OSError, TimeoutError, ValueError) as failure:  # ValueError: a pipe another thread closed
            self.close()
            reason = f"no answer within {limit:g}s" if isinstance(failure, TimeoutError) else "it died"
            raise self.error(f"{self.what}: the bridge failed ({request['op']}: {reason})") from None
        try:
            answer = json.loads(line)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise self.error(f"{self.what}: the bridge answered {request['op']} with {line[:200]!r}")
        if "error" in answer:
            kind, message = (list(answer["error"]) + ["", ""])[:2] if isinstance(answer["error"], list) else ("", "")
            raise self.error(f"{self.what}: {request['op']} raised {describe_error((str(kind), str(message)), 1000)}")
        return answer

    def close(self) -> None:
        """Kill the child and reap it (none is left a zombie)."""
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.wait()
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass

    @contextmanager
    def held(self) -> Iterator[BridgeProcess]:
        """This bridge for the caller alone, for a while (the lock; waiting for it is not the caller's time)."""
        with waiting():
            self.lock.acquire()
        try:
            yield self
        finally:
            self.lock.release()


def bridge_pool(make: Callable[[], BridgeProcess], what: str) -> Pool[BridgeProcess]:
    """Bridge processes made by ``make`` that each serve one caller at a time (the evidence of the fault rule),
    started and readied when taken (:meth:`BridgeProcess.ensure`), outside the caller's time; idle ones are kept
    warm, and all of them closed at the pool's ``close()`` or at exit."""

    def ready() -> BridgeProcess:
        process = make()
        process.ensure()
        return process

    return Pool(ready, live_max=MAX_APART, idle_max=MAX_APART, what=f"evidence bridges of {what}")


@contextmanager
def held(pool: Pool[BridgeProcess]) -> Iterator[BridgeProcess]:
    """A bridge of ``pool`` for the caller alone, given back afterwards (closed if it died meanwhile)."""
    process = pool.take()
    try:
        yield process
    finally:
        pool.give_back(process)


_BRIDGES: weakref.WeakSet[BridgeProcess] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for bridge in list(_BRIDGES):
        bridge.close()


def _read_line(process: subprocess.Popen[bytes], timeout_s: float) -> str:
    """One line of the process's stdout within ``timeout_s``; TimeoutError, or OSError when it ends first."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout_s
    data = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if not selector.select(left):
                continue
            chunk = process.stdout.read1(1 << 20)  # type: ignore[attr-defined]  # a BufferedReader's read1, on a pipe
            if not chunk:
                raise OSError("the bridge ended")
            data += chunk
            if len(data) > _MAX_LINE:
                raise OSError("an answer past its bound")
    return data.decode(errors="replace")
