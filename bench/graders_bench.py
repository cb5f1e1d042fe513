"""What a GraderPool costs next to grading in-process and next to raw ``POST /grade``, side by side in one run.

    python bench/graders_bench.py [--grades 2048] [--repeats 3] [--concurrency 32]

Cheap check (`sums`), every completion different (no grade cache answers). Modes: in-process
``env.agrade`` one by one; raw ``POST /grade`` in batches of 64 (the pool's batch size) on one server;
the pool's ``agrade_many`` on one and on two servers; the pool's ``agrade`` one by one from
``--concurrency`` callers (the eval's shape: its 5 ms window batches them). Servers are real
``verihub serve`` processes on loopback, on the same cores as this process. The last line prints each
remote mode's time per grade over in-process.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import httpx

import verihub
from verihub.serve.graders import BATCH, GraderPool

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_bench import REPO, Timing, start_server, timed  # noqa: E402 - a sibling script


async def main(arguments: argparse.Namespace) -> None:
    servers = [start_server() for _ in range(2)]
    env = verihub.load_env(REPO / "envs" / "sums")
    tasks = [task for split in env.split_names for task in env.dataset(split)]
    grades, concurrency = arguments.grades, arguments.concurrency

    def pairs(round_: int) -> list[tuple[dict[str, Any], str]]:
        return [
            (
                tasks[n % len(tasks)],
                f"Round {round_} step {n}: " + (env.reference(tasks[n % len(tasks)]) if n % 2 else "\\boxed{-1}"),
            )
            for n in range(grades)
        ]

    def chunks(work: list[tuple[dict[str, Any], str]]) -> list[list[tuple[dict[str, Any], str]]]:
        return [work[start : start + BATCH] for start in range(0, len(work), BATCH)]

    one = GraderPool([servers[0][1]])
    two = GraderPool([url for _, url in servers])
    try:
        async with httpx.AsyncClient(timeout=120) as client:

            async def raw(chunk: list[tuple[dict[str, Any], str]]) -> None:
                items = [{"env": "sums", "task_id": task["id"], "completion": text} for task, text in chunk]
                response = await client.post(f"{servers[0][1]}/grade", json={"items": items})
                assert response.status_code == 200

            async def pooled(pool: GraderPool, chunk: list[tuple[dict[str, Any], str]]) -> None:
                graded = await pool.grader(env).agrade_many([t for t, _ in chunk], [c for _, c in chunk])
                assert all(grade.reward is not None for grade in graded)

            async def local(task: dict[str, Any], text: str) -> None:
                await env.agrade(task, text)

            async def single(task: dict[str, Any], text: str) -> None:
                assert (await two.grader(env).agrade(task, text)).reward is not None

            async def one_round(r: int) -> list[Timing]:
                return [
                    await timed(
                        "in-process agrade",
                        grades,
                        [lambda t=t, c=c: local(t, c) for t, c in pairs(5 * r)],
                        concurrency,
                    ),
                    await timed(
                        f"raw POST /grade ({BATCH}), 1 server",
                        grades,
                        [lambda k=k: raw(k) for k in chunks(pairs(5 * r + 1))],
                        4,
                    ),
                    await timed(
                        "pool agrade_many, 1 server",
                        grades,
                        [lambda k=k: pooled(one, k) for k in chunks(pairs(5 * r + 2))],
                        4,
                    ),
                    await timed(
                        "pool agrade_many, 2 servers",
                        grades,
                        [lambda k=k: pooled(two, k) for k in chunks(pairs(5 * r + 3))],
                        4,
                    ),
                    await timed(
                        f"pool agrade x{concurrency} callers, 2 servers",
                        grades,
                        [lambda t=t, c=c: single(t, c) for t, c in pairs(5 * r + 4)],
                        concurrency,
                    ),
                ]

            await one_round(-1)  # warm: imports, connections, the servers' task index and digest
            rounds = [await one_round(r) for r in range(arguments.repeats)]
        best = [min((r[mode] for r in rounds), key=lambda t: t.seconds) for mode in range(len(rounds[0]))]
    finally:
        one.close()
        two.close()
        for process, _ in servers:
            process.terminate()
            process.wait(timeout=20)
    for timing in best:
        print(timing.line())
    base = best[0].per_grade
    print("ratios (time per grade / in-process): " + ", ".join(f"{t.name} {t.per_grade / base:.2f}x" for t in best[1:]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grades", type=int, default=2048, help="grades per mode and round")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (best kept)")
    parser.add_argument("--concurrency", type=int, default=32, help="callers of agrade at once")
    asyncio.run(main(parser.parse_args()))
