"""A running job's own time: the wall time since it began, less the time it spent waiting for shared
infrastructure (:func:`waiting`: a warm jail to check out, a worker process to start, another answer's lock on a
bridge).

The grader's limits read it (:mod:`verihub.grading._pools` sets a :class:`Clock` for each timed check); it lives
here, at the sandbox's layer, because the lowest code that waits on shared infrastructure is the sandbox's warm
pool, and that code must not import the grader. Outside a timed job :func:`waiting` does nothing.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from time import perf_counter

__all__ = ["CLOCK", "Clock", "waiting"]


@dataclass(slots=True, eq=False)
class Clock:
    """A running job's own time: the wall time since it began, less what it spent in :func:`waiting`."""

    began: float = field(default_factory=perf_counter)
    waited: float = 0.0
    since: float | None = None  # inside waiting() since then

    def own(self, now: float | None = None) -> float:
        now = perf_counter() if now is None else now
        since = self.since
        return now - self.began - self.waited - (now - since if since is not None else 0.0)


CLOCK: contextvars.ContextVar[Clock | None] = contextvars.ContextVar("verihub_check_clock", default=None)


@contextmanager
def waiting() -> Iterator[None]:
    """Time spent inside is not the running job's own (a lock another answer holds, a process starting, a warm
    jail to check out): its limit stops meanwhile and its seconds leave it out. Outside a timed job it does
    nothing."""
    clock = CLOCK.get()
    if clock is None or clock.since is not None:
        yield
        return
    clock.since = perf_counter()
    try:
        yield
    finally:
        # waited first, then since cleared: a watchdog reading in between sees less time, never more
        clock.waited += perf_counter() - clock.since
        clock.since = None
