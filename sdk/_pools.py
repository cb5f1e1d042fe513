"""Process-wide executors for checks that must not block the event loop."""

from __future__ import annotations

import atexit
import multiprocessing
import os
import threading
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor

_lock = threading.Lock()
_threads: ThreadPoolExecutor | None = None
_processes: ProcessPoolExecutor | None = None


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def thread_pool() -> Executor:
    global _threads
    with _lock:
        if _threads is None:
            _threads = ThreadPoolExecutor(max_workers=min(32, cpu_count() + 4), thread_name_prefix="verihub-check")
        return _threads


def process_pool() -> Executor:
    """One worker per core. forkserver: forking a process that already runs threads is unsafe."""
    global _processes
    with _lock:
        if _processes is None:
            context = multiprocessing.get_context("forkserver")
            _processes = ProcessPoolExecutor(max_workers=cpu_count(), mp_context=context)
        return _processes


def reset_process_pool() -> None:
    """Drop a broken process pool (a worker died); the next use starts a fresh one."""
    global _processes
    with _lock:
        if _processes is not None:
            _processes.shutdown(wait=False, cancel_futures=True)
            _processes = None


@atexit.register
def _shutdown() -> None:
    for pool in (_threads, _processes):
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
