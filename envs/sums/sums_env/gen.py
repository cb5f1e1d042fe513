"""Every sum ``a + b`` with ``0 <= a, b < below``, in a seeded order, each exactly once."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any


def make(n: int, seed: int, below: int = 20) -> Iterator[dict[str, Any]]:
    """Up to ``n`` of the ``below**2`` sums; difficulty 1 for one-digit operands without a carry,
    2 for one-digit operands with one, 3 when an operand has two digits."""
    pairs = [(a, b) for a in range(below) for b in range(below)]
    if n > len(pairs):
        raise ValueError(
            f"there are only {len(pairs)} sums of numbers below {below}; size must be at most that (got {n})"
        )
    rng = random.Random(seed)
    rng.shuffle(pairs)
    for a, b in pairs[:n]:
        total = a + b
        yield {
            "id": f"sums-{a}-{b}",
            "question": f"{a} + {b}",
            "pair": f"{min(a, b)}+{max(a, b)}",  # a + b and b + a: one question, kept in one split
            "answer": str(total),
            "wrong": str(total + rng.choice([-1, 1])),
            "difficulty": 3 if max(a, b) >= 10 else 2 if total >= 10 else 1,
        }
