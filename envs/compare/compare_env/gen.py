"""Pairs of different two-digit numbers, each unordered pair at most once, in a seeded order."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

_PAIRS = 90 * 89 // 2  # unordered pairs of different numbers in 10..99


def make(n: int, seed: int) -> Iterator[dict[str, Any]]:
    """``n`` tasks; difficulty 1 when the tens digits differ, 2 when only the units decide."""
    if n > _PAIRS:
        raise ValueError(f"there are only {_PAIRS} pairs of different two-digit numbers (got size {n})")
    rng = random.Random(seed)
    seen: set[tuple[int, int]] = set()
    while len(seen) < n:
        a, b = rng.sample(range(10, 100), 2)
        key = (min(a, b), max(a, b))
        if key in seen:
            continue
        seen.add(key)
        yield {
            "id": f"compare-{a}-{b}",
            "a": a,
            "b": b,
            "answer": str(max(a, b)),
            "wrong": str(min(a, b)),
            "difficulty": 1 if a // 10 != b // 10 else 2,
        }
