"""Numbers of nonzero digits to write backwards, each number at most once, in a seeded order."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any


def make(n: int, seed: int, lengths: Sequence[int] = (4, 5)) -> Iterator[dict[str, Any]]:
    """``n`` distinct numbers that are no palindromes, their lengths cycling through ``lengths``; digits 1-9,
    so no answer has a leading zero. Difficulty: the number of digits less 3 (4 digits: 1, 5 digits: 2)."""
    capacity = sum(9**length for length in set(lengths))
    if n > capacity:
        raise ValueError(f"there are only {capacity} numbers of {sorted(set(lengths))} nonzero digits (got size {n})")
    rng = random.Random(seed)
    seen: set[str] = set()
    index = 0
    while len(seen) < n:
        length = lengths[index % len(lengths)]
        number = "".join(rng.choice("123456789") for _ in range(length))
        if number in seen or number == number[::-1]:  # a palindrome is its own answer: it asks nothing
            continue
        seen.add(number)
        index += 1
        backwards = number[::-1]
        yield {
            "id": f"reverse-{number}",
            "number": number,
            "twin": min(number, backwards),  # 1234 and 4321 answer each other: one question, kept in one split
            "answer": backwards,
            "wrong": _slip(backwards, rng),
            "difficulty": length - 3,
        }


def _slip(answer: str, rng: random.Random) -> str:
    """The answer with two different neighbouring digits swapped (a non-palindrome has such a pair)."""
    at = rng.choice([at for at in range(len(answer) - 1) if answer[at] != answer[at + 1]])
    return answer[:at] + answer[at + 1] + answer[at] + answer[at + 2 :]
