"""The check workers themselves: limits from the moment a check starts, and a bounded number of stuck threads."""

from __future__ import annotations

import threading
import time
from concurrent.futures import wait

import pytest

from verihub.grading import _pools


def test_a_limit_counts_running_time_not_queueing() -> None:
    workers = _pools.ThreadWorkers(1)
    jobs = [workers.submit(time.sleep, (0.15,), 0.5) for _ in range(5)]  # 0.75 s in all, one thread
    assert [job.result(timeout=10)[1] < 0.5 for job in jobs] == [True] * 5


def test_threads_stuck_past_the_cap_fail_jobs_at_once_and_rejoin_when_they_return(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_pools, "_MAX_ABANDONED", 1)
    release = threading.Event()
    workers = _pools.ThreadWorkers(1)
    stuck = [workers.submit(release.wait, (30,), 0.1) for _ in range(2)]
    wait(stuck, timeout=10)
    assert all(isinstance(job.exception(), _pools.CheckTimeout) for job in stuck)
    refused = workers.submit(lambda: 1, (), 1.0)  # both threads are stuck and only one was replaced
    with pytest.raises(RuntimeError, match="no thread is left"):
        refused.result(timeout=5)
    release.set()  # the stuck checks return: their threads serve again
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        job = workers.submit(lambda: 1, (), 1.0)
        if job.exception(timeout=5) is None:
            break
        time.sleep(0.05)
    assert job.result()[0] == 1
