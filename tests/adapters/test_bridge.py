"""The bridge processes of verihub.adapters._bridge leave nothing behind: one that died while idle is reaped when
its pool comes to it (on the work this started from it was dropped unreaped: a zombie), one given back dead is
reaped, and a pool's close() ends every one of its processes (it was never called: they lived until exit)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from verihub.adapters._bridge import BridgeProcess, bridge_pool


def state(pid: int) -> str:
    """The process's state letter (Z: a zombie, dead but not reaped), or "gone" once reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]
    except FileNotFoundError:
        return "gone"


def wait_for(pid: int, wanted: str) -> None:
    deadline = time.monotonic() + 30
    while state(pid) != wanted:
        assert time.monotonic() < deadline, f"process {pid} stayed {state(pid)}"
        time.sleep(0.02)


def pid_of(bridge: BridgeProcess) -> int:
    assert bridge._process is not None
    return bridge._process.pid


def test_dead_bridges_are_reaped_and_a_closed_pool_leaves_none() -> None:
    def make() -> BridgeProcess:  # a far side that needs no tool until asked
        return BridgeProcess(sys.executable, "gem_side.py", what="a test bridge", timeout_s=5, error=RuntimeError)

    pool = bridge_pool(make, "tests")
    first = pool.take()
    died_idle = pid_of(first)
    pool.give_back(first)
    os.kill(died_idle, signal.SIGKILL)
    wait_for(died_idle, "Z")  # dead while idle, not yet reaped
    second = pool.take()  # comes to the dead one first: reaps it, starts another
    assert state(died_idle) == "gone" and second.alive
    died_taken = pid_of(second)
    os.kill(died_taken, signal.SIGKILL)
    wait_for(died_taken, "Z")
    pool.give_back(second)  # given back dead: reaped
    assert state(died_taken) == "gone"
    third, fourth = pool.take(), pool.take()
    kept = [pid_of(third), pid_of(fourth)]
    pool.give_back(third)
    pool.close()  # the idle one and the taken one
    assert [state(pid) for pid in kept] == ["gone", "gone"] and not fourth.alive
    pool.give_back(fourth)
