"""Every sum ``a + b`` of one-digit numbers, in a seeded order, each exactly once."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any


def make(n: int, seed: int) -> Iterator[dict[str, Any]]:
    """Up to ``n`` of the 100 sums; difficulty 1 without a carry (a + b < 10), 2 with one."""
    pairs = [(a, b) for a in range(10) for b in range(10)]
    if n > len(pairs):
        raise ValueError(f"there are only {len(pairs)} one-digit sums; size must be at most that (got {n})")
    rng = random.Random(seed)
    rng.shuffle(pairs)
    for a, b in pairs[:n]:
        total = a + b
        yield {
            "id": f"digits-{a}-{b}",
            "question": f"{a} + {b}",
            "answer": str(total),
            "wrong": str(total + rng.choice([-1, 1])),
            "difficulty": 1 if total < 10 else 2,
        }
