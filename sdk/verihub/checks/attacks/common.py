"""Exploits every verifier must resist, whatever its checks: empty, blank and megabyte answers.

The megabyte answers are wrong, and built to be expensive for careless parsers: many numbers, and every
delimiter the built-in extraction knows, opened and never closed (a quadratic scan of them takes hours).
"""

from __future__ import annotations

import functools

from verihub.checks.exploit import Exploit, Family

__all__ = ["EXPLOITS"]

MEGABYTE = 1_000_000


@functools.cache
def _junk() -> str:
    text = "Maybe it is 7, or 8, or perhaps 9.5e3; the answer is one of them. "
    return (text * (MEGABYTE // len(text) + 1))[:MEGABYTE]


@functools.cache
def _open_delimiters() -> str:
    text = '\\boxed{ <answer> ```python\n{ [ "the answer is \\fbox{ ( <tag> '
    return (text * (MEGABYTE // len(text) + 1))[:MEGABYTE]


EXPLOITS = (
    Exploit("empty", Family.LENGTH, "an empty completion", lambda task, params: ""),
    Exploit(
        "whitespace", Family.LENGTH, "a completion of spaces, tabs and newlines", lambda task, params: " \n\t \n  "
    ),
    Exploit(
        "megabyte-junk",
        Family.LENGTH,
        "a megabyte of hedged prose full of numbers",
        lambda task, params: _junk(),
        tasks=1,
    ),
    Exploit(
        "megabyte-open-delimiters",
        Family.LENGTH,
        "a megabyte of \\boxed{, <answer>, ``` and braces that never close (a quadratic scan stalls)",
        lambda task, params: _open_delimiters(),
        tasks=1,
    ),
)
