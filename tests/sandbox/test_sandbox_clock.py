"""A check's limit counts its own time (verihub.sandbox.clock): the wait for a jail of the shared warm pool is not
the check's. On the work this started from, a check whose pool was busy with another answer's run timed out while
it queued, and the fault rule read that as the check's time (evidence graded while a hostile neighbour held the
pool was "slow", or timed out)."""

from __future__ import annotations

import functools
import threading
import time

import pytest

from verihub import sandbox
from verihub.grading import _pools
from verihub.sandbox import Limits
from verihub.sandbox.pool import WarmPool

pytestmark = pytest.mark.nsjail
LIMITS = Limits(wall_s=10, cpu_s=10, memory_mb=256, max_procs=16)


def test_waiting_for_a_warm_jail_is_not_the_checks_own_time(nsjail_path: str) -> None:
    with WarmPool(1, limits=LIMITS, nsjail_path=nsjail_path) as pool:
        run = functools.partial(sandbox.run, limits=LIMITS, sandbox=pool)
        neighbour = threading.Thread(target=run, args=(["sleep", "4"],))
        neighbour.start()  # another answer's run holds the pool's one jail for 4 s
        deadline = time.monotonic() + 30
        while pool._idle.qsize():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        check = _pools.ThreadWorkers(1).submit(run, (["true"],), 1.5)  # its limit: 1.5 s of its own
        result, seconds = check.result(timeout=60)
        neighbour.join(30)
    assert result.ok and seconds < 1.5, (result, seconds)
