"""Grades per second through the verifier engine against calling each check directly, same inputs, one run.

    python bench/verifier_bench.py [--n 10000] [--repeats 7] [--checks exact numeric ...]

For every built-in check: the check function called in a plain loop that collects its results
("direct", what grading by hand takes) and the same inputs graded by a one-layer Verifier
(``grade_many``, cache cleared each repetition), interleaved, best of ``--repeats``. Every input is
distinct (the "distinct" column counts the different completion/task pairs), so the cache never
answers inside a measurement; "cached/s" grades again the inputs the cache still holds (the newest
half of its size or fewer: every grade a hit). The math check's answers need sympy for half of them: direct runs them in
this process,
the engine decides what it can on the grading thread and sends the rest to its process pool (every
core). The last line prints the overhead ratios; targets: exact and numeric <= 1.15x. Beside them it
prints the floor of any engine that keeps per-layer timing and a cache: a hand-written grade function
(``floor_grader``) doing only the per-grade work those need, measured side by side with the other two.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from time import perf_counter
from typing import Any

from verihub.checks.base import BoundCheck
from verihub.checks.registry import BUILTIN_CHECKS
from verihub.grading.grade import Grade, GradeStatus, LayerResult, LayerStatus
from verihub.grading.verifier import BoundLayer, Verifier
from verihub.spec.models import LayerSpec

SANDBOXED = {"python_tests"}  # measured by bench/sandbox_bench.py
REASONING = (
    "Let me work through this carefully. First I read the question and note the quantities involved. "
    "Then I set up the computation step by step, checking each intermediate value as I go. "
)


def inputs(name: str, n: int, rng: random.Random) -> tuple[list[dict[str, Any]], list[str], dict[str, Any]]:
    """Tasks, completions (about half right, all different) and layer args for one check."""
    tasks, completions = [], []
    values = rng.sample(range(1, 10**6), n)  # distinct, so that no two inputs share a cached grade
    for i, value in enumerate(values):
        right = rng.random() < 0.5
        shown = value if right else value + 1
        task: dict[str, Any] = {"id": f"t{i}", "answer": str(value)}
        if name == "numeric":
            completion = f"{REASONING}The total is {shown:,} dollars, so the answer is \\boxed{{{shown:,}}}."
        elif name == "math":  # a radical, which only sympy finds equal; a wrong one is told apart inline
            task["answer"] = f"{value % 97 + 2}\\sqrt{{2}}"
            times = value % 97 + (2 if right else 3)
            completion = f"{REASONING}Case {value}: so the answer is \\boxed{{\\sqrt{{{2 * times * times}}}}}."
        elif name == "multiple_choice":
            task["answer"] = "ABCD"[value % 4]
            completion = f"{REASONING}Case {value}: the answer is ({'ABCD'[(value + (0 if right else 1)) % 4]})."
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


def floor_grader(
    run: BoundCheck, name: str, cache: dict[tuple[str, Any], Grade]
) -> Callable[[dict[str, Any], str], Grade]:
    """The least a grade with per-layer timing and a cache costs over the check: a key of the completion and
    the answer, one lookup and one insert, two clock reads and the Grade with its LayerResult (no fault
    handling, no output check, no eviction order; the engine does all of that too)."""
    new, passed, failed, ok, wrong = (
        tuple.__new__,
        LayerStatus.PASSED,
        LayerStatus.FAILED,
        GradeStatus.OK,
        GradeStatus.WRONG,
    )

    def grade(task: dict[str, Any], completion: str) -> Grade:
        key = (completion, task["answer"])
        if (cached := cache.get(key)) is not None:
            return cached
        start = perf_counter()
        output = run(completion, task)
        seconds = perf_counter() - start
        score = output.score
        right = score >= 1.0
        layer = new(LayerResult, (name, "check", passed if right else failed, score, 1.0, seconds, output.detail))
        graded = cache[key] = new(Grade, (ok if right else wrong, score, (layer,), ""))
        return graded

    return grade


def best_of(repeats: int, run: Callable[[], object], before: Callable[[], None] = lambda: None) -> float:
    times = []
    for _ in range(repeats):
        before()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def side_by_side(
    repeats: int, chunk: int, count: int, sides: list[Callable[[int, int], object]], before: Callable[[], None]
) -> list[float]:
    """Seconds each side takes for all ``count`` inputs: the sum over chunks of the best time of that
    chunk, the sides taking turns chunk by chunk (a burst of load on the shared machine then spoils
    one chunk of one repetition, not a whole side)."""
    best = [[float("inf")] * len(sides) for _ in range(0, count, chunk)]
    for _ in range(repeats):
        before()
        for index, start in enumerate(range(0, count, chunk)):
            for number, side in enumerate(sides):
                begin = time.perf_counter()
                side(start, min(count, start + chunk))
                best[index][number] = min(best[index][number], time.perf_counter() - begin)
    return [sum(row[number] for row in best) for number in range(len(sides))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="grades per check (math uses n/25)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--checks",
        nargs="+",
        choices=sorted(set(BUILTIN_CHECKS) - SANDBOXED),
        default=["exact", "numeric", "math", *sorted(set(BUILTIN_CHECKS) - SANDBOXED - {"exact", "numeric", "math"})],
        help="which checks to measure (default: all but the sandboxed ones)",
    )
    options = parser.parse_args()
    rng = random.Random(0)
    ratios: dict[str, float] = {}
    floors: dict[str, float] = {}
    print(
        f"{'check':<16}{'n':>7}{'distinct':>9}{'direct/s':>12}{'engine/s':>12}{'cached/s':>12}"
        f"{'engine/direct time':>20}"
    )
    for name in options.checks:
        check = BUILTIN_CHECKS[name]
        n = max(50, options.n // 25) if name == "math" else options.n
        tasks, completions, args = inputs(name, n, rng)
        layer = BoundLayer.from_spec(
            LayerSpec(name=name, layer="check", use=name, args=args, timeout_s=120), Path.cwd()
        )
        run_direct, _ = check.bind(args, Path.cwd())
        verifier = Verifier([layer])
        distinct = len(
            {
                (completion, json.dumps(task, sort_keys=True))
                for task, completion in zip(tasks, completions, strict=True)
            }
        )

        def direct(start: int, end: int) -> list[object]:
            return [
                run_direct(completion, task)
                for task, completion in zip(tasks[start:end], completions[start:end], strict=True)
            ]

        def engine(start: int, end: int) -> list[object]:
            return verifier.grade_many(tasks[start:end], completions[start:end])

        floor_cache: dict[tuple[str, Any], Grade] = {}
        by_floor = floor_grader(run_direct, name, floor_cache)

        def floor(start: int, end: int) -> list[object]:
            return [
                by_floor(task, completion)
                for task, completion in zip(tasks[start:end], completions[start:end], strict=True)
            ]

        def forget() -> None:
            verifier.clear_cache()
            floor_cache.clear()

        if name == "math":
            verifier.grade_many(tasks[:8], completions[:8])  # start the worker processes first
            repeats, chunk = max(1, options.repeats // 2), n
        else:
            repeats, chunk = options.repeats, 500
        sides = [direct, engine, floor] if name in ("exact", "numeric") else [direct, engine]
        direct_s, engine_s, *floor_s = side_by_side(repeats, chunk, n, sides, forget)
        if floor_s:
            floors[name] = floor_s[0] / direct_s
        held = min(n, verifier._cache_size // 2)  # the newest grades, which the last repetition left cached
        cached_s = best_of(repeats, lambda: verifier.grade_many(tasks[-held:], completions[-held:])) * n / held
        ratios[name] = engine_s / direct_s
        print(
            f"{name:<16}{n:>7}{distinct:>9}{n / direct_s:>12,.0f}{n / engine_s:>12,.0f}{n / cached_s:>12,.0f}"
            f"{ratios[name]:>19.2f}x"
        )
    shown = [
        f"{name} {ratios[name]:.3f}x (floor {floors[name]:.3f}x)" for name in ("exact", "numeric") if name in ratios
    ]
    if shown:
        print(
            f"overhead ratio (engine/direct time): {', '.join(shown)} (target <= 1.15x)"
            + (
                f"; math through the engine (first step inline, sympy in the process pool) is "
                f"{1 / ratios['math']:.2f}x faster than direct"
                if "math" in ratios
                else ""
            )
        )


if __name__ == "__main__":
    main()
