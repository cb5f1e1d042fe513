"""Seeded generator of integer arithmetic tasks at three difficulty levels."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any


def make(n: int, seed: int, levels: Sequence[int] = (1, 2, 3)) -> Iterator[dict[str, Any]]:
    """``n`` tasks cycling through ``levels``; the same ``seed`` always gives the same tasks.

    Level 1: one operation on small numbers. Level 2: two operations with precedence.
    Level 3: parentheses, negatives and exact division on larger numbers.
    """
    unknown = sorted(set(levels) - {1, 2, 3})
    if unknown:
        raise ValueError(f"levels must be among 1, 2, 3; got {unknown}")
    rng = random.Random(seed)
    for index in range(n):
        level = levels[index % len(levels)]
        question, answer = _LEVELS[level](rng)
        assert eval(question) == answer  # noqa: S307 - our own expression, checked once at generation
        slip = rng.choice([-10, -2, -1, 1, 2, 10])
        yield {
            "id": f"arith-{seed}-{index:05d}",
            "question": question,
            "answer": str(answer),
            "wrong": str(answer + slip),
            "difficulty": level,
        }


def _level1(rng: random.Random) -> tuple[str, int]:
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    op = rng.choice("+-*")
    if op == "*":
        b = rng.randint(2, 12)
    return f"{a} {op} {b}", {"+": a + b, "-": a - b, "*": a * b}[op]


def _level2(rng: random.Random) -> tuple[str, int]:
    a, b, c = rng.randint(10, 99), rng.randint(2, 19), rng.randint(10, 999)
    if rng.random() < 0.5:
        return f"{a} * {b} + {c}", a * b + c
    return f"{c} - {a} * {b}", c - a * b


def _level3(rng: random.Random) -> tuple[str, int]:
    divisor = rng.randint(2, 12)
    quotient = rng.randint(-60, 60)
    a, b, c = rng.randint(100, 999), rng.randint(-99, -10), rng.randint(3, 25)
    expression = f"({a} + ({b})) * {c} - {divisor * quotient} // {divisor}"
    return expression, (a + b) * c - quotient


_LEVELS = {1: _level1, 2: _level2, 3: _level3}
