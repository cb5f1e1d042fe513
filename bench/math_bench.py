"""The math check against verifiers 0.4's math scoring on one mixed fixture, side by side in one run.

    python bench/math_bench.py [--verifiers-python /tmp/vf/bin/python] [--baseline-python /work/main/.venv/bin/python]
                               [--rounds 2] [--pairs 2544]

The fixture (built here, seeded) holds reference/completion pairs of four kinds: equivalent forms of
the reference (42.0, 7/2 for \\frac{7}{2}, (x+1)^2 for x^2+2x+1, redundant parentheses, ...), wrong
answers, malformed ones (unclosed boxes, empty boxes, hedges, an unclosed <think>), and a few
pathological ones (300 nested parentheses around the answer, an 800-term polynomial). Each side
grades all of it, in its own process, alternating for ``--rounds`` (the machine is shared and noisy):

- ``engine``: this checkout's ``Verifier`` with one math layer (``grade_many``, cache cleared);
- ``baseline``: the same through another checkout's interpreter (``--baseline-python``: main's code);
- ``verifiers``: ``verify_boxed_math_answer`` of verifiers 0.4, sequential and on a pool of
  ``--workers`` processes (``--verifiers-python``: an interpreter that imports it).

Then each pathological answer alone (seconds and verdict), the verdicts that differ between engine and
baseline, and last the ratios: engine grades/s over verifiers' pool (goal >= 2x).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REASONING = (
    "Let me work through this carefully. First I read the question and note the quantities involved. "
    "Then I set up the computation step by step, checking each intermediate value as I go. "
)
Pair = dict[str, str]  # kind, reference, completion


# -- the fixture --------------------------------------------------------------------------------------


def _problems(rng: random.Random) -> list[tuple[str, list[str], list[str]]]:
    """(reference, equivalent forms, wrong answers) of one random problem of each family."""
    n = rng.randint(2, 999)
    a, b = rng.randint(1, 40), rng.randint(2, 41)
    while b == a:
        b = rng.randint(2, 41)
    k = rng.randint(2, 9)
    c = rng.randint(1, 9)
    quarter = f"{n}.{rng.choice(['25', '5', '75', '125'])}"
    top, bottom = quarter.replace(".", ""), 10 ** len(quarter.split(".")[1])
    return [
        (str(n), [str(n), f"{n}.0", f"({n})", f" {n} ", f"{n}.00", f"(({n}))"], [str(n + 1), str(-n), str(n * 10)]),
        (
            f"\\frac{{{a}}}{{{b}}}",
            [
                f"{a}/{b}",
                f"\\dfrac{{{a}}}{{{b}}}",
                f"\\frac{{{2 * a}}}{{{2 * b}}}",
                f"\\left(\\frac{{{a}}}{{{b}}}\\right)",
            ],
            [f"\\frac{{{b}}}{{{a}}}", f"\\frac{{{a + 1}}}{{{b}}}", f"{a}/{b + 1}"],
        ),
        (
            quarter,
            [f"\\frac{{{top}}}{{{bottom}}}", f"{quarter}0", f"{top}/{bottom}"],
            [quarter[::-1].lstrip("0") or "1", f"{n}", f"{quarter}1"],
        ),
        (
            f"{k}\\sqrt{{{c + 1}}}",
            [f"\\sqrt{{{k * k * (c + 1)}}}", f"{k} \\sqrt{{{c + 1}}}", f"{k}\\cdot\\sqrt{{{c + 1}}}"],
            [f"{k + 1}\\sqrt{{{c + 1}}}", f"\\sqrt{{{k * (c + 1)}}}"],
        ),
        (
            f"\\frac{{\\pi}}{{{k}}}",
            [f"\\pi/{k}", f"\\frac{{1}}{{{k}}}\\pi", f"\\dfrac{{\\pi}}{{{k}}}"],
            [f"\\frac{{\\pi}}{{{k + 1}}}", f"{k}\\pi"],
        ),
        (
            f"x^2+{2 * c}x+{c * c}",
            [f"(x+{c})^2", f"x^2 + {2 * c}x + {c * c}", f"{c * c}+{2 * c}x+x^2"],
            [f"(x-{c})^2", f"x^2+{c}x+{c * c}"],
        ),
        (f"[{c}, {c + k})", [f"[{c},{c + k})", f"\\left[{c}, {c + k}\\right)"], [f"({c}, {c + k})", f"[{c}, {c + k}]"]),
        (f"({c}, -{k})", [f"({c},-{k})", f"\\left({c}, -{k}\\right)"], [f"(-{k}, {c})", f"({c}, {k})"]),
        (f"x={n}", [f"{n}", f"x = {n}"], [f"x={n + 1}"]),
        (f"{c * 5}\\%", [f"{c * 5}", f"{c * 5}\\%"], [f"{c * 5 + 1}\\%"]),
    ]


def _completion(answer: str, rng: random.Random) -> str:
    style = rng.random()
    if style < 0.7:
        return f"{REASONING}So the answer is \\boxed{{{answer}}}."
    if style < 0.85:
        return f"<think>{REASONING}Maybe \\boxed{{0}}?</think>The final answer is $\\boxed{{{answer}}}$."
    return f"{REASONING}\nThe answer is ${answer}$."


def _malformed(reference: str, rng: random.Random) -> str:
    return rng.choice(
        [
            f"{REASONING}So the answer is \\boxed{{\\frac{{1}}{{}}",  # unclosed box
            f"{REASONING}So the answer is \\boxed{{}}.",
            f"{REASONING}I could not finish.",
            f"{REASONING}\\boxed{{{reference}}} or maybe \\boxed{{{reference}1}}",  # a hedge
            f"{REASONING}\\boxed{{\\sqrt}}",
            f"{REASONING}\\boxed{{x^}}",
            f"<think>{REASONING}\\boxed{{{reference}}}",  # unclosed think: no answer
            f"{REASONING}\\boxed{{(1}}",
        ]
    )


def _polynomial(terms: int) -> str:
    return " + ".join(f"{i + 1}x^{{{terms - i}}}" for i in range(terms))


PATHOLOGICAL: list[Pair] = [
    {
        "kind": "pathological",
        "name": "300 parentheses around the reference",
        "reference": "7",
        "completion": f"{REASONING}\\boxed{{{'(' * 300}7{')' * 300}}}",
    },
    {
        "kind": "pathological",
        "name": "300 parentheses around a wrong answer",
        "reference": "7",
        "completion": f"{REASONING}\\boxed{{{'(' * 300}8{')' * 300}}}",
    },
    {
        "kind": "pathological",
        "name": "an 800-term polynomial",
        "reference": "x^2+2x+1",
        "completion": f"{REASONING}\\boxed{{{_polynomial(800)}}}",
    },
    {
        "kind": "pathological",
        "name": "an 800-term polynomial that is the reference",
        "reference": _polynomial(800),
        "completion": f"{REASONING}\\boxed{{{_polynomial(800)}}}",
    },
]


def fixture(count: int, seed: int = 0, pathological: bool = True) -> list[Pair]:
    """``count`` pairs: the pathological ones (unless left out), the rest drawn from the families."""
    rng = random.Random(seed)
    pairs: list[Pair] = []
    while len(pairs) < count - (len(PATHOLOGICAL) if pathological else 0):
        for reference, same, wrong in _problems(rng):
            pairs += [
                {"kind": "equivalent", "reference": reference, "completion": _completion(form, rng)}
                for form in rng.sample(same, min(2, len(same)))
            ]
            pairs.append({"kind": "wrong", "reference": reference, "completion": _completion(rng.choice(wrong), rng)})
            if rng.random() < 0.4:
                pairs.append({"kind": "malformed", "reference": reference, "completion": _malformed(reference, rng)})
    pairs = pairs[: count - (len(PATHOLOGICAL) if pathological else 0)]
    if pathological:
        pairs += [{key: value for key, value in pair.items() if key != "name"} for pair in PATHOLOGICAL]
    rng.shuffle(pairs)
    return pairs


# -- the sides: each a process of its own interpreter, grading the chunks it is sent ----------------------


class EngineSide:
    def __init__(self, timeout_s: float) -> None:
        from verihub.grading.verifier import BoundLayer, Verifier
        from verihub.spec.models import LayerSpec

        spec = LayerSpec(name="math", layer="check", use="math", timeout_s=timeout_s)
        self.verifier = Verifier([BoundLayer.from_spec(spec, Path.cwd())])

    def grade(self, pairs: list[Pair], how: str) -> list[str]:
        self.verifier.clear_cache()
        tasks = [{"id": str(i), "answer": pair["reference"]} for i, pair in enumerate(pairs)]
        return [str(grade.status) for grade in self.verifier.grade_many(tasks, [pair["completion"] for pair in pairs])]


def _verifiers_score(pair: tuple[str, str]) -> float:
    from verifiers.v1.utils.score import verify_boxed_math_answer

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    return verify_boxed_math_answer(pair[1], pair[0])


class VerifiersSide:
    def __init__(self, workers: int) -> None:
        from multiprocessing import get_context

        self.pool = get_context("spawn").Pool(workers)

    def grade(self, pairs: list[Pair], how: str) -> list[str]:
        items = [(pair["reference"], pair["completion"]) for pair in pairs]
        scores = map(_verifiers_score, items) if how == "sequential" else self.pool.map(_verifiers_score, items, 4)
        return ["ok" if score == 1.0 else "wrong" for score in scores]


def serve(role: str, fixtures_path: str, options: argparse.Namespace) -> None:
    """Warm up, say "ready", then for each command line {"fixture", "start", "end", "how"} grade that
    chunk and answer {"seconds", "statuses"}."""
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # a timeout on a pathological answer is expected
    fixtures = json.loads(Path(fixtures_path).read_text())
    side = EngineSide(options.timeout_s) if role == "engine" else VerifiersSide(options.workers)
    for how in ("engine",) if role == "engine" else ("sequential", "pool"):
        side.grade(fixtures["warmup"], how)  # sympy's parser builds its tables as it meets new shapes
    print("ready", flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        chunk = fixtures[command["fixture"]][command["start"] : command["end"]]
        start = time.perf_counter()
        statuses = side.grade(chunk, command["how"])
        print(json.dumps({"seconds": time.perf_counter() - start, "statuses": statuses}), flush=True)


class Side:
    """The parent's handle on a side's process."""

    def __init__(self, name: str, python: str, role: str, fixtures_path: str, options: argparse.Namespace) -> None:
        self.name = name
        command = [
            python,
            __file__,
            "--role",
            role,
            "--fixture",
            fixtures_path,
            "--workers",
            str(options.workers),
            "--timeout-s",
            str(options.timeout_s),
        ]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parent.parent
        )
        if self._line() != "ready":
            raise SystemExit(f"{name} ({python}) did not start")

    def _line(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"{self.name} exited with {self.process.wait()}")
        return line.strip()

    def grade(self, fixture_name: str, start: int, end: int, how: str) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"fixture": fixture_name, "start": start, "end": end, "how": how}) + "\n")
        self.process.stdin.flush()
        return json.loads(self._line())

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait()


# -- the run and its report ---------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=2544)
    parser.add_argument("--chunk", type=int, default=200, help="pairs each side grades in turn")
    parser.add_argument("--workers", type=int, default=2, help="verifiers' process pool")
    parser.add_argument("--timeout-s", type=float, default=20.0, help="the math layer's timeout_s")
    parser.add_argument("--verifiers-python", default=os.environ.get("VERIFIERS_PYTHON", sys.executable))
    parser.add_argument("--baseline-python", default=None, help="e.g. /work/main/.venv/bin/python")
    parser.add_argument("--no-sequential", action="store_true", help="skip verifiers' sequential run")
    parser.add_argument("--role", choices=["engine", "verifiers"], help=argparse.SUPPRESS)
    parser.add_argument("--fixture", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.role:
        serve(options.role, options.fixture, options)
        return

    # Three draws of one mix: one warms every side up, one is measured, and one without the
    # pathological answers is measured too (other references: parsed references cached by a side
    # must not carry over from one measurement to the next).
    fixtures = {
        "warmup": fixture(400, seed=1, pathological=False),
        "mixed": fixture(options.pairs, seed=0),
        "regular": fixture(options.pairs, seed=2, pathological=False),
        "pathological": [dict(pair) for pair in PATHOLOGICAL],
    }
    kinds = Counter(pair["kind"] for pair in fixtures["mixed"])
    print(
        f"fixture: {options.pairs} pairs ({', '.join(f'{n} {kind}' for kind, n in sorted(kinds.items()))}); "
        f"sides take turns on chunks of {options.chunk}"
    )
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump(fixtures, file)
    # (side, how it grades) in the order they take turns; the order rotates from chunk to chunk.
    runs = [("engine", "engine")]
    names = [("engine", sys.executable, "engine"), ("verifiers", options.verifiers_python, "verifiers")]
    if options.baseline_python:
        names.insert(1, ("baseline", options.baseline_python, "engine"))
        runs.append(("baseline", "engine"))
    runs.append(("verifiers", "pool"))
    sides: dict[str, Side] = {}
    try:
        for name, python, role in names:
            sides[name] = Side(name, python, role, file.name, options)
        seconds: dict[tuple[str, str, str], float] = Counter()
        statuses: dict[tuple[str, str], list[str]] = {}
        for fixture_name in ("mixed", "regular"):
            plan = runs + (
                [("verifiers", "sequential")] if fixture_name == "regular" and not options.no_sequential else []
            )
            for number, start in enumerate(range(0, len(fixtures[fixture_name]), options.chunk)):
                shift = number % len(plan)
                for name, how in plan[shift:] + plan[:shift]:
                    answer = sides[name].grade(fixture_name, start, start + options.chunk, how)
                    seconds[name, how, fixture_name] += answer["seconds"]
                    if fixture_name == "mixed" and how != "sequential":
                        statuses.setdefault((name, how), []).extend(answer["statuses"])
        alone: dict[tuple[str, int], tuple[float, str]] = {}
        for index in range(len(PATHOLOGICAL)):
            for name, how in runs:
                answer = sides[name].grade("pathological", index, index + 1, how)
                alone[name, index] = (answer["seconds"], answer["statuses"][0])
    finally:
        for side in sides.values():
            side.close()
        os.unlink(file.name)
    _report(fixtures, options, runs, seconds, statuses, alone)


def _report(
    fixtures: dict[str, list[Pair]],
    options: argparse.Namespace,
    runs: list[tuple[str, str]],
    seconds: dict[tuple[str, str, str], float],
    statuses: dict[tuple[str, str], list[str]],
    alone: dict[tuple[str, int], tuple[float, str]],
) -> None:
    def rate(name: str, how: str, fixture_name: str) -> float:
        return len(fixtures[fixture_name]) / seconds[name, how, fixture_name]

    label = {
        ("engine", "engine"): "engine (this checkout)",
        ("baseline", "engine"): "baseline engine",
        ("verifiers", "pool"): f"verifiers ({options.workers}-process pool)",
    }
    print(f"\n{'side':<30}{'mixed grades/s':>16}{'regular grades/s':>18}{'passed':>8}{'faults':>8}")
    for name, how in runs:
        mixed = statuses[name, how]
        print(
            f"{label[name, how]:<30}{rate(name, how, 'mixed'):>16,.0f}{rate(name, how, 'regular'):>18,.0f}"
            f"{mixed.count('ok'):>8}{sum(s in ('env_error', 'timeout') for s in mixed):>8}"
        )
    if ("verifiers", "sequential", "regular") in seconds:
        print(f"{'verifiers (sequential)':<30}{'':>16}{rate('verifiers', 'sequential', 'regular'):>18,.0f}")
    print(
        f"(mixed: {len(fixtures['mixed'])} pairs with {len(PATHOLOGICAL)} pathological; regular: "
        f"{len(fixtures['regular'])} other pairs, none pathological)"
    )
    print("\npathological answers, one at a time (seconds, verdict):")
    for index, pair in enumerate(PATHOLOGICAL):
        cells = [f"{name} {alone[name, index][0]:.3f}s {alone[name, index][1]}" for name, _ in runs]
        print(f"  {pair['name']:<46}" + "  ".join(cells))
    if ("baseline", "engine") in statuses:
        changed = [
            (pair, before, after)
            for pair, before, after in zip(
                fixtures["mixed"], statuses["baseline", "engine"], statuses["engine", "engine"], strict=True
            )
            if before != after
        ]
        print(f"\nverdicts that differ from the baseline: {len(changed)}")
        for pair, before, after in changed:
            completion = pair["completion"].replace(REASONING, "…").replace("\n", " ")
            print(
                f"  {pair['kind']:<12} ref {pair['reference'][:24]!r:<28} {completion[:70]!r:<74} {before} -> {after}"
            )
    line = []
    for fixture_name in ("mixed", "regular"):
        engine = rate("engine", "engine", fixture_name)
        ratios = [f"{engine / rate('verifiers', 'pool', fixture_name):.2f}x verifiers' pool"]
        if ("baseline", "engine") in statuses:
            ratios.append(f"{engine / rate('baseline', 'engine', fixture_name):.2f}x baseline")
        line.append(f"{fixture_name} {engine:,.0f}/s ({', '.join(ratios)})")
    print(f"\nmath grades/s through the engine: {'; '.join(line)}; goal >= 2x verifiers' pool")


if __name__ == "__main__":
    main()
