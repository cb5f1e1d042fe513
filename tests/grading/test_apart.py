"""Work kept apart from the answers being graded (verihub.grading._apart, ._pools): a job's limit counts its own
time, never a wait for infrastructure; evidence never queues behind a pool's stuck jobs; an object held in a
leased worker process is killed with its process when a call overruns, and nothing else is; worker processes never
pass their bound (a lease beyond waits, off the waiter's clock); a worker with a call still in flight is never
handed to its next user; and the machinery's own failures are the grader's (GraderInfraError), never an answer's."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import wait
from pathlib import Path
from typing import Any

import pytest

from verihub.errors import GraderInfraError
from verihub.grading import _apart, _pools


def _waits_for(event: threading.Event, seconds: float) -> str:
    with _pools.waiting():  # e.g. another answer's lock on a bridge: not this job's time
        event.wait(seconds)
    return "done"


def test_a_limit_stops_while_a_job_waits_on_infrastructure() -> None:
    gate = threading.Event()
    job = _apart.run_apart(_waits_for, (gate, 30), 0.2, "thread")
    time.sleep(0.5)  # past the limit on the wall clock, all of it waiting
    assert not job.done()
    gate.set()
    value, seconds = job.result(timeout=10)
    assert value == "done" and seconds < 0.2
    pool = _pools.ThreadWorkers(1)  # a pool's threads keep the same clock
    gate.clear()
    pooled = pool.submit(_waits_for, (gate, 30), 0.2)
    time.sleep(0.5)
    assert not pooled.done()
    gate.set()
    assert pooled.result(timeout=10)[0] == "done"


def test_evidence_never_queues_behind_a_pools_stuck_jobs() -> None:
    release = threading.Event()
    pool = _pools.ThreadWorkers(1)
    stuck = pool.submit(release.wait, (30,), 20)  # the pool's one thread is busy for as long as it likes
    queued = pool.submit(lambda: "queued", (), 20)
    evidence = _apart.run_apart(lambda: (_apart.apart(), "evidence"), (), 5, "thread")
    assert evidence.result(timeout=10)[0] == (True, "evidence")  # a thread of its own, marked as evidence
    assert not queued.done()
    release.set()
    assert queued.result(timeout=10)[0] == "queued" and stuck.result(timeout=10)[0] is True


def test_a_job_past_its_own_time_is_a_timeout_with_that_time() -> None:
    job = _apart.run_apart(time.sleep, (5,), 0.1, "thread")
    with pytest.raises(_pools.CheckTimeout) as raised:
        job.result(timeout=10)
    assert raised.value.seconds == 0.1


class Counter:
    """An object a leased worker holds."""

    def __init__(self, start: int) -> None:
        self.value = start

    def add(self, amount: int) -> int:
        self.value += amount
        return self.value

    def spin(self) -> None:
        while True:  # holds its process's GIL for good
            pass

    def pid(self) -> int:
        return os.getpid()

    def slow(self, seconds: float, started: str) -> str:
        Path(started).touch()
        time.sleep(seconds)
        return "slow"


def wait_until(condition: Callable[[], bool], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition never came"
        time.sleep(0.02)


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch) -> Iterator[_pools.Pool[Any]]:
    """The worker processes of this test alone, at most two alive."""
    pool: _pools.Pool[Any] = _pools.Pool(_pools._start_worker, live_max=2, idle_max=2, what="test workers")
    monkeypatch.setattr(_pools, "_WORKERS", pool)
    yield pool
    pool.close()


def test_a_held_object_keeps_its_state_and_a_call_past_its_time_kills_its_process_alone() -> None:
    held, other = _apart.Held(Counter, (10,)), _apart.Held(Counter, (0,))
    held.make(10)
    other.make(10)
    assert [held.call("add", (1,), 10), held.call("add", (2,), 10)] == [11, 13]  # kept between calls
    assert held.call("pid", (), 10) not in (os.getpid(), other.call("pid", (), 10))  # a process of its own
    with pytest.raises(_pools.CheckTimeout):
        held.call("spin", (), 0.3)
    assert not held.alive
    with pytest.raises(_pools.WorkerDied):
        held.call("add", (1,), 10)
    assert other.call("add", (5,), 10) == 5  # its neighbour plays on
    held.close()
    other.close()


def test_leased_workers_are_reused_once_given_back() -> None:
    first = _apart.Held(Counter, (0,))
    first.make(10)
    pid = first.call("pid", (), 10)
    first.close()
    again = _apart.Held(Counter, (1,))
    again.make(10)
    assert again.call("pid", (), 10) == pid and again.call("add", (0,), 10) == 1  # warm, and a fresh object
    again.close()
    done = [_apart.run_apart(os.getpid, (), 10, "process") for _ in range(2)]
    wait(done, timeout=60)
    assert all(job.result()[0] != os.getpid() for job in done)


def test_worker_processes_never_pass_their_bound_and_a_lease_beyond_waits_off_the_clock(
    workers: _pools.Pool[Any],
) -> None:
    """On the work this started from, every episode started an interpreter of its own: a batch of hundreds, hundreds
    of processes. Here six episodes and an evidence job share two workers: the rest wait, and the evidence job's
    limit (0.5 s) does not run while it waits (a second and more)."""
    release = threading.Event()
    pids: list[int] = []

    def episode(start: int) -> None:
        held = _apart.Held(Counter, (start,))
        held.make(10)
        pids.append(held.call("pid", (), 10))
        release.wait(60)
        held.close()

    def evidence() -> int:
        held = _apart.Held(Counter, (40,))
        held.make(10)
        try:
            return int(held.call("add", (2,), 10))
        finally:
            held.close()

    episodes = [threading.Thread(target=episode, args=(start,)) for start in range(6)]
    for thread in episodes:
        thread.start()
    try:
        wait_until(lambda: len(pids) == 2 and workers.waiting == 4)  # two play, four wait
        job = _apart.run_apart(evidence, (), 0.5, "thread")
        wait_until(lambda: workers.waiting == 5)
        time.sleep(1.0)  # the evidence job waits past its limit, none of it its own time
        assert len(pids) == 2 and not job.done()
    finally:
        release.set()
    assert job.result(timeout=60)[0] == 42
    for thread in episodes:
        thread.join(60)
    assert len(pids) == 6 and len(set(pids)) <= 2 and workers.peak == 2


def test_a_worker_with_a_call_in_flight_is_never_handed_to_its_next_user(tmp_path: Path) -> None:
    """A move whose caller gave up on it (a backstop, a cancelled grade) runs on while its episode is closed. On the
    work this started from, the close sent its own request down the same pipe and the worker went back to the idle
    ones with a reply still to come: the next episode could read the last one's replies."""
    held = _apart.Held(Counter, (0,))
    held.make(10)
    first = held.call("pid", (), 10)
    started, outcome = tmp_path / "started", []

    def stale_move() -> None:
        try:
            outcome.append(held.call("slow", (2.0, str(started)), 10))
        except Exception as error:  # noqa: BLE001 - what the move ended with is the assertion
            outcome.append(error)

    thread = threading.Thread(target=stale_move)
    thread.start()
    wait_until(started.exists)
    held.close()  # the episode ends while its move still runs
    following = _apart.Held(Counter, (100,))
    following.make(10)
    assert following.call("pid", (), 10) != first  # the worker with a reply to come was killed, not reused
    assert [following.call("add", (1,), 10), following.call("add", (2,), 10)] == [101, 103]
    thread.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], _pools.WorkerDied)  # it ended with its worker
    following.close()


def test_the_machinerys_own_failures_are_the_graders(
    workers: _pools.Pool[Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """On the work this started from these were WorkerDied, RuntimeError and a check's timeout: faults a grade
    weighs, and blames on the answer when its evidence was spared."""
    first = _pools.lease()
    second = _pools.lease()
    with pytest.raises(GraderInfraError, match="all 2 test workers stayed in use"):
        _pools.lease(wait_s=0.2)  # none came back in time
    first.release()
    second.release()
    workers.close()

    (tmp_path / "slow_to_import.py").write_text("import time\ntime.sleep(60)\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # (a worker gets this process's path when it starts)
    monkeypatch.setattr(_apart, "START_S", 0.5)
    with pytest.raises(GraderInfraError, match="loading slow_to_import in a check worker process took longer"):
        _apart.Held(Counter, (0,), imports=("slow_to_import",))

    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    with pytest.raises(GraderInfraError, match="could not start a check worker process"):
        _pools.lease()

    monkeypatch.setattr(_pools, "_MAX_ABANDONED", 0)  # as if every evidence thread allowed were stuck
    refused = _apart.run_apart(lambda: 1, (), 5, "thread")
    assert isinstance(refused.exception(timeout=5), GraderInfraError)
