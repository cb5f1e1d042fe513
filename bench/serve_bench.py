"""What grading through `verihub serve` costs next to grading in-process, measured side by side in one run.

    python bench/serve_bench.py [--grades 8192] [--batch 256] [--repeats 3] [--episodes 64] [--concurrency 4]

Cheap check (`sums`): in-process grading (``env.agrade`` one by one, and the verifier's ``agrade_many``
in batches; the ratio is against the faster) against ``POST /grade`` (batches of ``--batch``) and
against WebSocket sessions (reset + one step each, ``--concurrency`` connections). Sandboxed env
(`shell-task`, needs nsjail): in-process sessions against WebSocket sessions, each episode one bash call
(the task's solution) and a final answer, graded on the work dir (each answer differs, so that the checker
runs in the jail every time rather than the grade cache answering). Defaults are long enough for a
steady flow (a few hundred milliseconds of start-up per mode would otherwise weigh on short rounds). The
server is a real `verihub serve`
process on loopback. Prints grades/s and p50/p95 latency per mode; the last line the ratios (remote time
per grade / in-process). Targets: batch grading of a cheap check <= 1.3x; sandboxed sessions <= 1.1x.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import connect

import verihub

REPO = Path(__file__).resolve().parents[1]


def start_server() -> tuple[subprocess.Popen[str], str]:
    verihub_cli = str(Path(sys.executable).with_name("verihub"))
    process = subprocess.Popen(
        [verihub_cli, "serve", "envs/sums", "envs/shell-task", "--port", "0", "--max-sessions", "256"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline() if process.stdout else ""
    found = re.search(r"http://\S+", line)
    if found is None:
        process.kill()
        raise SystemExit(f"verihub serve did not start: {line}")
    return process, found.group(0)


class Timing:
    def __init__(self, name: str, grades: int, seconds: float, latencies: Sequence[float]) -> None:
        self.name, self.grades, self.seconds = name, grades, seconds
        ordered = sorted(latencies)
        self.p50 = statistics.median(ordered)
        self.p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]

    @property
    def per_grade(self) -> float:
        return self.seconds / self.grades

    def line(self) -> str:
        return (
            f"{self.name:<34} {self.grades / self.seconds:9.1f} grades/s   p50 {self.p50 * 1e3:8.2f} ms   "
            f"p95 {self.p95 * 1e3:8.2f} ms"
        )


async def timed(name: str, grades: int, jobs: Sequence[Callable[[], Awaitable[None]]], concurrency: int) -> Timing:
    """Run ``jobs`` with at most ``concurrency`` at once; each job's latency, and the wall time."""
    limit = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async def one(job: Callable[[], Awaitable[None]]) -> None:
        async with limit:
            began = time.perf_counter()
            await job()
            latencies.append(time.perf_counter() - began)

    began = time.perf_counter()
    await asyncio.gather(*(one(job) for job in jobs))
    return Timing(name, grades, time.perf_counter() - began, latencies)


async def ws_episodes(
    url: str, episodes: Sequence[tuple[dict[str, Any], list[dict[str, Any]]]], concurrency: int, name: str
) -> Timing:
    """Each connection plays its share of ``episodes`` (reset params, actions), one after another."""
    shares = [episodes[index::concurrency] for index in range(concurrency)]
    latencies: list[float] = []

    async def play(share: Sequence[tuple[dict[str, Any], list[dict[str, Any]]]]) -> None:
        async with connect(url.replace("http://", "ws://") + "/ws", max_size=4 << 20) as ws:
            for reset, actions in share:
                began = time.perf_counter()
                await ws.send(json.dumps({"type": "reset", "data": reset}))
                await ws.recv()
                for action in actions:
                    await ws.send(json.dumps({"type": "step", "data": action}))
                    reply = json.loads(await ws.recv())
                assert reply["data"]["done"], reply
                latencies.append(time.perf_counter() - began)

    began = time.perf_counter()
    await asyncio.gather(*(play(share) for share in shares if share))
    return Timing(name, len(episodes), time.perf_counter() - began, latencies)


async def cheap(url: str, grades: int, batch: int, concurrency: int, repeats: int) -> list[Timing]:
    env = verihub.load_env(REPO / "envs" / "sums")
    tasks = [task for split in env.split_names for task in env.dataset(split)]

    def pairs(round_: int) -> list[tuple[dict[str, Any], str]]:
        # every completion differs: the verifier's grade cache (both sides have one) must not answer for the check
        return [
            (
                tasks[n % len(tasks)],
                f"Round {round_} step {n}: " + (env.reference(tasks[n % len(tasks)]) if n % 2 else "\\boxed{-1}"),
            )
            for n in range(grades)
        ]

    async with httpx.AsyncClient(timeout=120) as client:

        async def local(task: dict[str, Any], text: str) -> None:
            await env.agrade(task, text)

        async def remote(chunk: Sequence[tuple[dict[str, Any], str]]) -> None:
            items = [{"env": "sums", "task_id": task["id"], "completion": text} for task, text in chunk]
            response = await client.post(f"{url}/grade", json={"items": items})
            assert response.status_code == 200 and len(response.json()["grades"]) == len(items)

        async def local_many(chunk: Sequence[tuple[dict[str, Any], str]]) -> None:
            await env.verifier.agrade_many([task for task, _ in chunk], [text for _, text in chunk])

        def chunks(work: list[tuple[dict[str, Any], str]]) -> list[list[tuple[dict[str, Any], str]]]:
            return [work[start : start + batch] for start in range(0, grades, batch)]

        async def one_round(round_: int) -> tuple[Timing, Timing, Timing]:
            one_by_one = await timed(
                "cheap: in-process agrade", grades, [lambda t=t, c=c: local(t, c) for t, c in pairs(3 * round_)], batch
            )
            many = await timed(
                f"cheap: in-process agrade_many ({batch})",
                grades,
                [lambda chunk=chunk: local_many(chunk) for chunk in chunks(pairs(3 * round_ + 1))],
                concurrency,
            )
            batched = await timed(
                f"cheap: POST /grade (batches of {batch})",
                grades,
                [lambda chunk=chunk: remote(chunk) for chunk in chunks(pairs(3 * round_ + 2))],
                concurrency,
            )
            return one_by_one, many, batched

        await one_round(-1)  # warm both sides: imports, the server's task index
        gc.freeze()  # as `verihub serve` does at start: both sides' collectors then skip their start-up objects
        rounds = [await one_round(round_) for round_ in range(repeats)]  # interleaved; the best of each
    best = [min((r[mode] for r in rounds), key=lambda t: t.seconds) for mode in range(3)]
    sessions = await ws_episodes(
        url,
        [({"env": "sums", "task_id": task["id"]}, [{"content": text}]) for task, text in pairs(-5)],
        concurrency,
        "cheap: WS sessions",
    )
    return [*best, sessions]


async def sandboxed(url: str, episodes: int, concurrency: int, repeats: int) -> list[Timing]:
    env = verihub.load_env(REPO / "envs" / "shell-task")
    tasks = [task for task in env.dataset("train")][:episodes]
    tasks = [tasks[n % len(tasks)] for n in range(episodes)]

    def actions(task: dict[str, Any], episode: str) -> list[dict[str, Any]]:
        call = {"id": "1", "function": {"name": "bash", "arguments": {"command": task["solution"]}}}
        return [{"content": "", "tool_calls": [call]}, {"content": f"done ({episode})"}]  # no two grades alike

    async def local(task: dict[str, Any], episode: str) -> None:
        session = env.session(task)
        await session.areset()
        for action in actions(task, episode):
            result = await session.astep(action)
        assert result.done and result.reward == 1.0, result

    async def one_round(round_: int) -> tuple[Timing, Timing]:
        in_process = await timed(
            "sandboxed: in-process sessions",
            episodes,
            [lambda t=t, n=n: local(t, f"local {round_}.{n}") for n, t in enumerate(tasks)],
            concurrency,
        )
        remote = await ws_episodes(
            url,
            [
                ({"env": "shell-task", "task_id": task["id"], "split": "train"}, actions(task, f"remote {round_}.{n}"))
                for n, task in enumerate(tasks)
            ],
            concurrency,
            "sandboxed: WS sessions",
        )
        return in_process, remote

    await one_round(-1)  # warm: the jail, the checker's imports, on both sides
    rounds = [await one_round(round_) for round_ in range(repeats)]  # interleaved; the best of each
    return [min((r[mode] for r in rounds), key=lambda t: t.seconds) for mode in range(2)]


async def main(arguments: argparse.Namespace) -> None:
    process, url = start_server()
    try:
        cheap_timings = await cheap(url, arguments.grades, arguments.batch, arguments.concurrency, arguments.repeats)
        sandbox_timings = (
            []
            if arguments.no_sandbox
            else await sandboxed(url, arguments.episodes, arguments.concurrency, arguments.repeats)
        )
    finally:
        process.terminate()
        process.wait(timeout=30)
    for timing in (*cheap_timings, *sandbox_timings):
        print(timing.line())
    one_by_one, many, batched, sessions = cheap_timings
    local = min(one_by_one, many, key=lambda t: t.seconds)  # against the faster in-process path
    ratios = [
        f"cheap POST /grade {batched.per_grade / local.per_grade:.2f}x (target <= 1.3x)",
        f"cheap WS sessions {sessions.per_grade / local.per_grade:.2f}x",
    ]
    if sandbox_timings:
        ratios.append(
            f"sandboxed WS sessions {sandbox_timings[1].per_grade / sandbox_timings[0].per_grade:.2f}x (target <= 1.1x)"
        )
    print("ratios, remote time per grade / in-process: " + "; ".join(ratios))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grades", type=int, default=8192, help="cheap grades per mode and round")
    parser.add_argument("--batch", type=int, default=256, help="items per POST /grade")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds of each comparison (best kept)")
    parser.add_argument("--episodes", type=int, default=64, help="sandboxed episodes per mode")
    parser.add_argument("--concurrency", type=int, default=4, help="requests / connections in flight")
    parser.add_argument("--no-sandbox", action="store_true", help="skip the sandboxed env (no nsjail here)")
    asyncio.run(main(parser.parse_args()))
