"""One behaviour for sync calls over async code (verihub._sync): from inside a running event loop (a notebook
cell, an async server) each sync entry point still returns its result, the coroutine running on another
thread's loop: the verifier, an adapter's loading, an in-process or OpenEnv session, the grader pool."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import verihub
from conftest import REPO, start_serve, stop_serve
from verihub._sync import LoopThread, run_sync
from verihub.serve.graders import GraderPool


def inside_a_loop(call: Any) -> Any:
    async def main() -> Any:
        ticks = 0

        async def tick() -> None:  # the caller's loop is stalled while it waits: no tick runs meanwhile
            nonlocal ticks
            while True:
                await asyncio.sleep(0)
                ticks += 1

        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0)
        before = ticks
        result = call()
        assert ticks == before
        ticker.cancel()
        return result

    return asyncio.run(main())


def test_each_sync_entry_point_works_inside_a_running_loop() -> None:
    sums = verihub.load_env(REPO / "envs" / "sums")
    task = sums.tasks("eval")[0]
    assert inside_a_loop(lambda: sums.grade(task, sums.reference(task))).status == "ok"
    assert [g.status for g in inside_a_loop(lambda: sums.verifier.grade_many([task], ["nothing"]))] == ["wrong"]
    game = inside_a_loop(lambda: verihub.load_env("textarena:GuessTheNumber-v0?size=5&max_turns=5"))
    session = game.session(game.tasks("train")[0])
    session.reset()
    assert inside_a_loop(lambda: session.step({"content": "[10]"})).observation["messages"]
    process, url = start_serve("envs/sums")
    try:
        with GraderPool([url]) as pool:
            remote = pool.grader(sums)
            assert remote is not None
            assert inside_a_loop(lambda: remote.grade(task, sums.reference(task))).status == "ok"
    finally:
        stop_serve(process)


def test_the_helpers_return_results_and_raise_errors_in_the_caller() -> None:
    async def value() -> int:
        await asyncio.sleep(0)
        return 7

    async def fails() -> None:
        raise KeyError("missing")

    assert run_sync(value()) == 7 and inside_a_loop(lambda: run_sync(value())) == 7
    try:
        inside_a_loop(lambda: run_sync(fails()))
    except KeyError as error:
        assert "missing" in str(error)
    else:
        raise AssertionError("the coroutine's error must reach the caller")
    loop = LoopThread("test")
    assert loop.run(value()) == 7 and loop.thread is not None and loop.thread.is_alive()
    own = loop.submit(_on(loop))  # from the loop's own thread, a blocking call is refused, not a deadlock
    assert "would wait for itself" in own.result(timeout=10)
    thread = loop.thread
    loop.stop(join_s=5)
    time.sleep(0.05)
    assert not thread.is_alive() and loop.loop is None


async def _on(loop: LoopThread) -> str:
    async def nothing() -> None:
        return None

    try:
        loop.run(nothing())
    except RuntimeError as error:
        return str(error)
    return "ran"
