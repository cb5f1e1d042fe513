"""How verihub's servers stop: within seconds of SIGTERM (or SIGINT), whatever their threads are doing.

uvicorn stops by itself only once every request in flight has finished, and a request can wait on a grading
thread that spins, on a check that holds the GIL in C code (a regex backtracking), or on a client that never
sends the body it announced. :func:`serve` runs uvicorn with two bounds, the second for what the first cannot
reach:

- the requests in flight get :data:`GRACE_S` seconds (``timeout_graceful_shutdown``), then they are cancelled
  and the process ends by the signal it got (uvicorn re-raises it);
- a watchdog process learns of the signal from a handler that needs no GIL (:mod:`faulthandler`'s, which then
  passes the signal on to Python's) and kills the server :data:`KILL_S` seconds later if it is still there:
  a thread that holds the GIL keeps Python's own handler, and so uvicorn, from ever running.

Jails the server started end by their own time limits; warm-pool workers and check processes end when their
pipes to the server close.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
from typing import Any

__all__ = ["GRACE_S", "KILL_S", "STOP_SIGNALS", "serve", "watch"]

GRACE_S = 3.0  # seconds requests in flight get after SIGTERM before uvicorn cancels them
KILL_S = GRACE_S + 3.0  # seconds after SIGTERM at which the watchdog kills a server that is still there
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

# The watchdog: a byte on its pipe means a stop signal reached the server; end of file, that the server is
# gone. It kills only its own parent (one that died leaves it with another).
_WATCHDOG = """\
import os, select, signal, sys, time
parent, kill_s, fd = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
if os.read(fd, 65536):
    deadline = time.monotonic() + kill_s
    while select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
        if not os.read(fd, 65536):
            sys.exit()  # the server ended in time
    if os.getppid() == parent:
        os.kill(parent, signal.SIGKILL)
"""
_watchdogs: list[subprocess.Popen[bytes]] = []  # kept, so that each is reaped when it ends


def serve(config: Any, sockets: list[Any] | None = None) -> None:
    """Run a ``uvicorn.Config`` until SIGTERM or SIGINT, then stop within :data:`KILL_S` seconds (requests
    in flight get :data:`GRACE_S`, unless the config says less)."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[Any] | None = None) -> None:
            await super().startup(sockets=sockets)
            watch(KILL_S)  # after uvicorn put its handlers in: faulthandler's go in front of them

    if config.timeout_graceful_shutdown is None or config.timeout_graceful_shutdown > GRACE_S:
        config.timeout_graceful_shutdown = GRACE_S
    Server(config).run(sockets=sockets)


def watch(kill_s: float) -> None:
    """Start a watchdog that kills this process ``kill_s`` seconds after it gets a stop signal. Call it
    once the stop signals' Python handlers are in place (it keeps them, in front of its own)."""
    read_end, write_end = os.pipe()
    try:
        _watchdogs.append(
            subprocess.Popen(
                [sys.executable, "-I", "-c", _WATCHDOG, str(os.getpid()), str(kill_s), str(read_end)],
                pass_fds=[read_end],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C to the terminal's process group is not for it
            )
        )
    finally:
        os.close(read_end)
    for number in STOP_SIGNALS:
        # writes this thread's traceback to the pipe, in the signal handler itself (no GIL), then hands the
        # signal to the handler that was there before (Python's, which runs when the GIL lets it)
        faulthandler.register(number, file=write_end, all_threads=False, chain=True)
