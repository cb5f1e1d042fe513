"""Grades per second through the verifier engine against calling each check directly, same inputs, one run.

    python bench/verifier_bench.py [--n 10000] [--repeats 5]

For every built-in check: the check function called in a plain loop ("direct") and the same inputs
graded by a one-layer Verifier (``grade_many``, cache cleared each repetition), interleaved, best of
``--repeats``. The math check also runs direct (one process) against the engine (its process pool,
every core). The last line prints the overhead ratios; targets: exact and numeric <= 1.15x.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from verihub.checks.registry import BUILTIN_CHECKS
from verihub.spec import LayerSpec
from verihub.verifier import BoundLayer, Verifier

SANDBOXED = {"python_tests"}  # measured by bench/sandbox_bench.py
REASONING = (
    "Let me work through this carefully. First I read the question and note the quantities involved. "
    "Then I set up the computation step by step, checking each intermediate value as I go. "
)


def inputs(name: str, n: int, rng: random.Random) -> tuple[list[dict[str, Any]], list[str], dict[str, Any]]:
    """Tasks, completions (about half right) and layer args for one check."""
    tasks, completions = [], []
    for i in range(n):
        value = rng.randint(1, 10**6)
        right = rng.random() < 0.5
        shown = value if right else value + 1
        task: dict[str, Any] = {"id": f"t{i}", "answer": str(value)}
        if name == "numeric":
            completion = f"{REASONING}The total is {shown:,} dollars, so the answer is \\boxed{{{shown:,}}}."
        elif name == "math":
            task["answer"] = f"\\frac{{{value}}}{{7}}"
            completion = f"{REASONING}So the answer is \\boxed{{\\frac{{{shown}}}{{7}}}}."
        elif name == "multiple_choice":
            task["answer"] = "ABCD"[value % 4]
            completion = f"{REASONING}The answer is ({'ABCD'[(value + (0 if right else 1)) % 4]})."
        elif name in ("json_schema", "json_fields"):
            task["expected"] = json.dumps({"name": f"n{value}", "count": value})
            completion = f'{REASONING}\n```json\n{{"name": "n{value}", "count": {shown}}}\n```'
        elif name == "xml_tags":
            completion = f"<think>{REASONING}</think><answer>{shown}</answer>"
        elif name == "think":
            completion = f"<think>{REASONING}</think> The answer is {shown}."
        elif name == "code_block":
            completion = f"{REASONING}\n```python\nprint({shown})\n```"
        else:
            completion = f"{REASONING}The final answer is \\boxed{{{shown}}}."
        tasks.append(task)
        completions.append(completion)
    args: dict[str, Any] = {
        "regex": {"pattern": r"\\boxed\{\d+\}"},
        "json_schema": {"schema": {"type": "object", "required": ["name", "count"]}},
        "xml_tags": {"tags": ["think", "answer"]},
        "length": {"max_words": 200},
        "contains": {"patterns": ["answer", "step"]},
        "forbidden": {"patterns": ["import os", "rm -rf"]},
        "code_block": {"language": "python"},
    }.get(name, {})
    return tasks, completions, args


def best_of(repeats: int, run: Callable[[], object], before: Callable[[], None] = lambda: None) -> float:
    times = []
    for _ in range(repeats):
        before()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="grades per check (math uses n/25)")
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args()
    rng = random.Random(0)
    ratios: dict[str, float] = {}
    print(f"{'check':<16}{'n':>7}{'direct/s':>12}{'engine/s':>12}{'engine/direct time':>20}")
    for name, check in BUILTIN_CHECKS.items():
        if name in SANDBOXED:
            continue
        n = max(50, options.n // 25) if name == "math" else options.n
        tasks, completions, args = inputs(name, n, rng)
        layer = BoundLayer.from_spec(LayerSpec(name=name, layer="check", use=name, args=args, timeout_s=120), Path.cwd())
        run_direct, _ = check.bind(args, Path.cwd())
        verifier = Verifier([layer])

        def direct() -> None:
            for task, completion in zip(tasks, completions):
                run_direct(completion, task)

        if name == "math":
            verifier.grade_many(tasks[:8], completions[:8])  # start the worker processes first
            repeats = max(1, options.repeats // 2)
        else:
            repeats = options.repeats
        direct_s = engine_s = float("inf")
        for _ in range(repeats):  # interleaved so that machine noise hits both sides alike
            direct_s = min(direct_s, best_of(1, direct))
            engine_s = min(engine_s, best_of(1, lambda: verifier.grade_many(tasks, completions), verifier.clear_cache))
        ratios[name] = engine_s / direct_s
        print(f"{name:<16}{n:>7}{n / direct_s:>12,.0f}{n / engine_s:>12,.0f}{ratios[name]:>19.2f}x")
    math_speedup = 1 / ratios["math"]
    print(
        f"overhead ratio (engine/direct time): exact {ratios['exact']:.3f}x, numeric {ratios['numeric']:.3f}x "
        f"(target <= 1.15x); math through the engine's process pool is {math_speedup:.2f}x faster than direct"
    )


if __name__ == "__main__":
    main()
