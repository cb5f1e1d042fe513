"""Sync calls over async code, with one behaviour everywhere (``Verifier.grade``, ``load_env`` of an adapter,
OpenEnv and in-process game sessions, the grader pool).

A sync method runs its coroutine to completion and returns its result. Called from inside a running event
loop (a notebook cell, an async server), it does the same: the coroutine runs on another thread's loop and
the calling thread waits for it. It works, but that loop is stalled meanwhile; async code should await the
``a``-method instead (``agrade``, ``astep``, ...). Two helpers:

- :func:`run_sync` runs one coroutine on a fresh loop (on a helper thread when this thread runs one);
- :class:`LoopThread` is one long-lived loop on a daemon thread, for objects whose connections must stay on
  the loop that opened them (a grader pool's HTTP client, an OpenEnv session's WebSocket).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any

__all__ = ["LoopThread", "run_sync"]


def run_sync[T](coroutine: Coroutine[Any, Any, T]) -> T:
    """``coroutine``'s result, from sync code, also while an event loop runs in this thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = asyncio.run(coroutine)
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=target, name="verihub-sync")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


class LoopThread:
    """An event loop on a daemon thread, started at the first use."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self.loop is None:
                self.loop = asyncio.new_event_loop()
                self.thread = threading.Thread(
                    target=_run_until_stopped, args=(self.loop,), name=self.name, daemon=True
                )
                self.thread.start()
            return self.loop

    def submit[T](self, coroutine: Coroutine[Any, Any, T]) -> Future[T]:
        """Start ``coroutine`` on the loop; its future. Refused on the loop's own thread (a wait there would
        wait for itself)."""
        loop = self.ensure()
        if threading.current_thread() is self.thread:
            coroutine.close()
            raise RuntimeError(f"a blocking call on {self.name}'s own loop would wait for itself: await it")
        return asyncio.run_coroutine_threadsafe(coroutine, loop)

    def run[T](self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and wait for its result."""
        return self.submit(coroutine).result()

    def on_it(self) -> bool:
        """Whether the calling code runs on this loop."""
        try:
            return self.loop is not None and asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    def stop(self, join_s: float | None = None) -> None:
        """Stop the loop (it closes once stopped); wait up to ``join_s`` for its thread, if given."""
        with self._lock:
            loop, thread, self.loop, self.thread = self.loop, self.thread, None, None
        if loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if join_s is not None and thread is not None and thread is not threading.current_thread():
            thread.join(timeout=join_s)


def _run_until_stopped(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.close()
