"""Numbers whose digits to sort, each set of digits at most once, in a seeded order."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any


def make(n: int, seed: int, lengths: Sequence[int] = (4, 5)) -> Iterator[dict[str, Any]]:
    """``n`` numbers of digits 1-9 with different sorted digits, their lengths cycling through ``lengths``
    (7193 and 3917 are one question: only one of them is made). Difficulty: the number of digits less 3."""
    rng = random.Random(seed)
    seen: set[str] = set()
    index = attempts = 0
    while len(seen) < n:
        attempts += 1
        if attempts > 100 * n:
            raise ValueError(f"cannot find {n} different digit sets of lengths {list(lengths)}; lower the size")
        length = lengths[index % len(lengths)]
        number = "".join(rng.choice("123456789") for _ in range(length))
        ordered = "".join(sorted(number))
        if ordered in seen or ordered == number:  # a number already sorted asks nothing
            continue
        seen.add(ordered)
        index += 1
        yield {
            "id": f"sort-{number}",
            "number": number,
            "answer": ordered,
            "wrong": number,
            "difficulty": length - 3,
        }
