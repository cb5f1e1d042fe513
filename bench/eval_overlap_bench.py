"""How well `verihub eval` overlaps generation with grading.

    python bench/eval_overlap_bench.py [--tasks 128] [--concurrency 32] [--latency-s 0.2] [--check-s 0.04]

A loopback OpenAI-compatible server answers each request after a fixed latency; the environment's
check costs a fixed time (a sleep in the check thread pool). Measured in one run: G, the eval with a
free check (generation alone); V, grading the same completions with the costly check (grading alone);
T, the real eval. Perfect overlap gives T = max(G, V); none gives G + V. The last line prints the
overlap efficiency max(G, V) / T; target >= 0.85 at concurrency 32.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import tempfile
import threading
import time
from pathlib import Path

import verihub
from verihub.eval.evaluate import aevaluate
from verihub.testing import ScriptedChatServer

SPEC = """\
id: overlap
version: 1.0.0
domain: bench
description: Fixed-cost grading.
dataset: {{source: data/tasks.jsonl}}
prompt: {{user: "{{question}}"}}
verifier:
  - {{name: cost, layer: check, use: "overlap_{check}_checks:{check}", timeout_s: 60}}
gold: {{reference: "{{answer}}"}}
"""
CHECKS = """
import time

def costly(completion, task, seconds={seconds}):
    time.sleep(seconds)
    return completion.strip() == task["answer"]

def free(completion, task):
    return completion.strip() == task["answer"]
"""


def make_env(root: Path, tasks: int, check: str, seconds: float) -> Path:
    directory = root / check
    (directory / "data").mkdir(parents=True)
    rows = [{"id": f"t{i}", "question": f"say {i}", "answer": str(i)} for i in range(tasks)]
    (directory / "data" / "tasks.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (directory / "environment.yaml").write_text(SPEC.format(check=check))
    (directory / f"overlap_{check}_checks.py").write_text(CHECKS.format(seconds=seconds))
    return directory


def answer(request: dict) -> list[dict]:
    return [{"content": request["messages"][-1]["content"].removeprefix("say ")}] * request.get("n", 1)


def serve(latency_s: float, urls: multiprocessing.Queue) -> None:
    """The endpoint, in a process of its own (as a real server would be), so it does not share our GIL."""
    with ScriptedChatServer(answer, latency_s=latency_s) as server:
        urls.put(server.url)
        threading.Event().wait()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=128)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency-s", type=float, default=0.2, help="per request, at the server")
    parser.add_argument("--check-s", type=float, default=0.04, help="per grade, in the check")
    options = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    urls: multiprocessing.Queue = context.Queue()
    endpoint = context.Process(target=serve, args=(options.latency_s, urls), daemon=True)
    endpoint.start()
    model = f"openai:bench@{urls.get(timeout=60)}"
    with tempfile.TemporaryDirectory() as scratch:
        free = verihub.load_env(make_env(Path(scratch), options.tasks, "free", 0))
        costly = verihub.load_env(make_env(Path(scratch), options.tasks, "costly", options.check_s))
        await aevaluate(
            free, model, n=options.concurrency, k=1, split="train", concurrency=options.concurrency
        )  # warm-up
        start = time.perf_counter()
        baseline = await aevaluate(free, model, n=options.tasks, k=1, split="train", concurrency=options.concurrency)
        generation_s = time.perf_counter() - start
        tasks = list(costly.dataset("train"))
        by_id = {r.task_id: r.completion for r in baseline.rollouts}
        start = time.perf_counter()
        await costly.verifier.agrade_many(tasks, [by_id[str(task["id"])] for task in tasks])
        grading_s = time.perf_counter() - start
        costly.verifier.clear_cache()
        start = time.perf_counter()
        report = await aevaluate(costly, model, n=options.tasks, k=1, split="train", concurrency=options.concurrency)
        total_s = time.perf_counter() - start
    endpoint.terminate()
    assert report.metrics["pass@1"] == 1.0, report.metrics
    print(
        f"tasks {options.tasks}, concurrency {options.concurrency}, latency {options.latency_s}s, check "
        f"{options.check_s}s"
    )
    print(
        f"generation alone G = {generation_s:.2f}s, grading alone V = {grading_s:.2f}s, eval T = {total_s:.2f}s, "
        f"G + V = {generation_s + grading_s:.2f}s"
    )
    print(
        f"overlap efficiency max(G, V) / T = {max(generation_s, grading_s) / total_s:.2f} "
        f"((G + V) / T = {(generation_s + grading_s) / total_s:.2f}; target >= 0.85)"
    )


if __name__ == "__main__":
    asyncio.run(main())
