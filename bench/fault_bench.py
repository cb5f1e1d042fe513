"""What faults cost, and what hostile answers cost, side by side in one run.

    python bench/fault_bench.py [--repeats 5] [--envs sums json-extract ...] [--mb 1]

1. The fault path: a check that raises on a long answer, graded by a verifier that decides whose fault it
   is (a retry, then the task's reference: ``verihub.grading.faults``) against the same verifier without a
   reference (the fault left as ``env_error`` at once, as before attribution), and the no-fault path of both
   (a right answer) to show it costs nothing. Best of ``--repeats``, cache cleared each time.
2. Seconds per MB of answer, for every bundled environment: each fault-forcing shape
   (``verihub.checks.attacks.faults.SHAPES``) in the environment's answer form at its ``max_answer_chars``,
   graded through ``env.grade``, less the same form with a few characters (what a grade costs whatever the
   answer), over the size. Goal: under 0.1 s/MB where every layer is inline.
3. Seconds per MB of each built-in inline check on ``--mb`` MB of each shape, past any edge limit (the check
   itself, bound in a one-layer verifier without an answer limit). Goal: under 0.1 s/MB.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from time import perf_counter
from typing import Any

from verihub.checks._unicode import forget_recent
from verihub.checks.attacks.faults import SHAPES, in_answer_form
from verihub.checks.registry import BUILTIN_CHECKS
from verihub.environment.core import load_env
from verihub.grading.verifier import BoundLayer, Verifier
from verihub.spec.models import LayerSpec

REPO = Path(__file__).resolve().parents[1]
GOAL_S_PER_MB = 0.1
_ARGS: dict[str, dict[str, Any]] = {  # layer arguments the inline checks need
    "regex": {"pattern": r"\d+"},
    "contains": {"patterns": ["answer"]},
    "forbidden": {"patterns": ["As an AI"]},
    "json_schema": {"schema": {"type": "object"}},
    "json_fields": {"field": "expected"},
    "xml_tags": {"tags": ["answer"]},
    "multiple_choice": {"choices": "ABCD"},
    "length": {"max_chars": 10_000_000},
}
_TASK = {"id": "t", "answer": "4", "expected": '{"a": 1}', "letter": "C"}


def best(seconds_of: Any, repeats: int) -> float:
    return min(seconds_of() for _ in range(repeats))


def fault_path(repeats: int) -> None:
    def raises_on_long(completion: str, task: Any) -> bool:
        if len(completion) > 100:
            raise ValueError("Exceeds the limit for integer string conversion")
        return completion == task["answer"]

    layer = BoundLayer(LayerSpec(name="c", layer="check", use="raises_on_long"), raises_on_long, "inline")
    attributing = Verifier([layer], reference=lambda task: task["answer"])
    plain = Verifier([layer])
    right, hostile = "4", "9" * 200

    def timed(verifier: Verifier, text: str) -> float:
        verifier.clear_cache()
        start = perf_counter()
        for _ in range(1000):
            verifier.clear_cache()
            verifier.grade(_TASK, text)
        return (perf_counter() - start) / 1000

    rows = [
        (label, best(lambda: timed(attributing, text), repeats), best(lambda: timed(plain, text), repeats))
        for label, text in (("right answer (no fault)", right), ("answer that makes the check raise", hostile))
    ]
    print("1. the fault path, per grade (cache cleared each grade)")
    print(f"   {'':36} {'attributed':>12} {'env_error':>12} {'ratio':>7}")
    for label, with_, without in rows:
        print(f"   {label:36} {with_ * 1e6:9.1f} us {without * 1e6:9.1f} us {with_ / without:6.2f}x")
    grade = attributing.grade(_TASK, hostile)
    print(
        f"   attributed: {grade.status} (reward {grade.reward}); without a reference: "
        f"{plain.grade(_TASK, hostile).status}"
    )


def environments(names: list[str], repeats: int) -> None:
    print("2. seconds per MB of answer through env.grade, each shape at the environment's max_answer_chars: the time")
    print("   beyond the same form with a few characters (a grade's fixed cost), over the size")
    for name in names:
        env = load_env(REPO / "envs" / name)
        task = env.tasks("eval")[0]
        worst, worst_shape = 0.0, ""
        for shape, payload_of in SHAPES.items():
            text = in_answer_form(env.spec, task, payload_of, env.spec.max_answer_chars - 64)
            small = in_answer_form(env.spec, task, payload_of, 64)
            if text is None or small is None:
                continue

            def once(text: str) -> float:
                env.verifier.clear_cache()
                forget_recent()  # each grade folds its answer anew, as a new answer would
                start = perf_counter()
                env.grade(task, text)
                return perf_counter() - start

            once(text)  # warm: first-use costs (a Unicode table, a worker's start) are not per MB
            per_mb = max(0.0, best(lambda: once(text), repeats) - best(lambda: once(small), repeats)) / (
                (len(text) - len(small)) / 1e6
            )
            if per_mb >= worst:
                worst, worst_shape = per_mb, shape
        inline = all(layer.mode == "inline" for layer in env.verifier.layers)
        goal = (
            f"goal {GOAL_S_PER_MB} s/MB: {'met' if worst < GOAL_S_PER_MB else 'NOT met'}"
            if inline
            else "(a sandbox or worker layer: its start dominates)"
        )
        print(f"   {name:14} worst {worst:8.3f} s/MB ({worst_shape}, {env.spec.max_answer_chars:,} chars) {goal}")


def checks(megabytes: float, repeats: int) -> None:
    print(f"3. seconds per MB of each built-in inline check, {megabytes:g} MB of each shape (no edge limit)")
    size = int(megabytes * 1e6)
    payloads = {shape: f"The answer is \\boxed{{{payload_of(size)}}}" for shape, payload_of in SHAPES.items()}
    for name, check in sorted(BUILTIN_CHECKS.items()):
        if check.mode != "inline":
            continue
        spec = LayerSpec(name=name, layer="check", use=name, args=_ARGS.get(name, {}), timeout_s=600)
        verifier = Verifier([BoundLayer.from_spec(spec, REPO)], cache_size=0)
        worst, worst_shape, status = 0.0, "", ""
        for shape, text in payloads.items():

            def once(text: str = text) -> float:
                forget_recent()
                start = perf_counter()
                verifier.grade(_TASK, text)
                return perf_counter() - start

            per_mb = best(once, repeats) / (len(text) / 1e6)
            if per_mb > worst:
                worst, worst_shape, status = per_mb, shape, verifier.grade(_TASK, text).status
        mark = "ok" if worst < GOAL_S_PER_MB else "OVER"
        print(f"   {name:16} worst {worst:7.3f} s/MB ({worst_shape}: {status}) {mark}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--envs",
        nargs="*",
        default=["arithmetic", "compare", "json-extract", "math-word", "report", "reverse", "sort", "sql", "sums"],
    )
    parser.add_argument("--mb", type=float, default=1.0)
    args = parser.parse_args()
    fault_path(args.repeats)
    environments(args.envs, max(1, args.repeats // 2))
    checks(args.mb, max(1, args.repeats // 2))


if __name__ == "__main__":
    main()
