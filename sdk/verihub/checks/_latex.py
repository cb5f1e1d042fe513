"""Cheap, bounded reading of a LaTeX answer: a canonical form, a plain number, and its size.

The math check decides most answers with these before sympy is involved: an answer that is, after
canonicalisation, the reference itself is right, two plain numbers compare exactly, and an answer far
larger than its reference is wrong without being parsed (sympy's LaTeX parser takes seconds on a
few hundred nested parentheses or terms). Every function here is linear in its input.

The canonical form only makes changes that keep the value: it drops ``\\left``/``\\right`` and spacing
commands, writes ``\\dfrac``/``\\tfrac`` as ``\\frac``, removes whitespace (one space stays between two
letters or digits: ``2 3`` is not ``23``), and removes redundant parentheses (a pair around another pair,
around the whole answer, or around a lone number or letter between operators), never a pair holding a
comma (a tuple or an interval).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Literal, NamedTuple

__all__ = ["Plain", "Size", "canonical", "plain_number", "plain_tuple", "size", "without_redundant_parentheses"]

_LEFT_RIGHT = re.compile(r"\\(?:left|right)(?![A-Za-z])\s*\.?")
_FRAC_VARIANT = re.compile(r"\\[dt]frac(?![A-Za-z])")
_SPACING = re.compile(r"\\[,;:! ]|\\(?:q?quad|displaystyle)(?![A-Za-z])|~")
_WHITESPACE = re.compile(r"\s+")
_LONE_SPACE = re.compile(r"(?<![A-Za-z0-9]) | (?![A-Za-z0-9])")  # a space not between two letters or digits
_ATOM = re.compile(r"\d+(?:\.\d+)?|[A-Za-z]")
_OPEN_CONTEXT = frozenset("(+-=,")  # before a pair around a lone atom: "2-(3)" is "2-3", "2(3)" stays
_CLOSE_CONTEXT = frozenset(")+-=,")
_PAREN_OR_COMMA = re.compile(r"[(),]")
_BRACKET = re.compile(r"[()\[\]{}]")
_MAX_DIGITS = 300  # a plain number with more digits is left to the bounds (no 10,000-digit int())
_PLAIN = re.compile(
    r"(-?)(?:(\d+)(?:\.(\d+))?"  # 42, -3.50
    r"|\\frac\{(-?\d+)\}\{(\d+)\}"  # \frac{7}{2}, -\frac{3}{4}, \frac{-3}{4}
    r"|(\d+)/(\d+))"  # 7/2
    r"(\\%|\^\\circ|\^\{\\circ\})?"  # 25\%, 30^\circ (math-verify reads degrees as the plain number)
)
_DELIMITERS = (("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))


def canonical(text: str) -> str:
    """``text`` in a canonical form with the same value (see the module's docstring)."""
    text = _without_math_delimiters(text.strip())
    text = _LEFT_RIGHT.sub("", text)
    text = _FRAC_VARIANT.sub(r"\\frac", text)
    text = _SPACING.sub("", text)
    text = _LONE_SPACE.sub("", _WHITESPACE.sub(" ", text).strip())
    if "(" in text:
        text = without_redundant_parentheses(text)
    return text


def _without_math_delimiters(text: str) -> str:
    """``$x$``, ``\\(x\\)`` or ``\\[x\\]`` around the whole answer as ``x``."""
    for opening, closing in _DELIMITERS:
        if text.startswith(opening) and text.endswith(closing) and len(text) >= len(opening) + len(closing):
            inner = text[len(opening) : -len(closing)]
            if opening == "$":
                inner = inner.strip("$")
            if opening not in inner and closing not in inner:
                return inner.strip()
    return text


def _pairs(text: str) -> tuple[dict[int, int], set[int]] | None:
    """Each "(" index mapped to its ")" index, and the "(" whose pair holds a comma at its own level;
    None when the parentheses do not balance (then nothing is removed)."""
    match: dict[int, int] = {}
    with_comma: set[int] = set()
    stack: list[int] = []
    for found in _PAREN_OR_COMMA.finditer(text):
        index, char = found.start(), found.group()
        if char == "(":
            stack.append(index)
        elif char == ")":
            if not stack:
                return None
            match[stack.pop()] = index
        elif char == "," and stack:
            with_comma.add(stack[-1])
    return (match, with_comma) if not stack else None


def without_redundant_parentheses(text: str) -> str:
    """``text`` without the redundant parentheses the module's docstring names (nothing else changes)."""
    # Pass 1: a pair directly around another pair ("((x+1))"): the outer one goes. In a chain of
    # k nested pairs every outer one goes, so 300 levels around "1" leave "(1)".
    found = _pairs(text)
    if found is None:
        return text
    match, with_comma = found
    drop = {
        position
        for opening, closing in match.items()
        if match.get(opening + 1) == closing - 1 and opening + 1 not in with_comma
        for position in (opening, closing)
    }
    if drop:
        text = _remove(text, drop)
        match, with_comma = _pairs(text)  # type: ignore[misc]  # still balanced: whole pairs were removed
    # Pass 2: a pair around the whole answer, or around a lone number or letter between operators.
    drop = set()
    last = len(text) - 1
    for opening, closing in match.items():
        if opening in with_comma:
            continue
        # Around the whole answer, unless what it holds is one tuple: "((1,2))" stays a tuple in a tuple.
        whole = (
            opening == 0
            and closing == last
            and not (match.get(opening + 1) == closing - 1 and opening + 1 in with_comma)
        )
        lone = (
            (opening == 0 or text[opening - 1] in _OPEN_CONTEXT)
            and (closing == last or text[closing + 1] in _CLOSE_CONTEXT)
            and _ATOM.fullmatch(text, opening + 1, closing) is not None
        )
        if whole or lone:
            drop.update((opening, closing))
    return _remove(text, drop) if drop else text


def _remove(text: str, positions: set[int]) -> str:
    kept, start = [], 0
    for position in sorted(positions):
        kept.append(text[start:position])
        start = position + 1
    kept.append(text[start:])
    return "".join(kept)


class Plain(NamedTuple):
    """A plain number: its value, how it was written, and whether it was a percentage (``25\\%``)."""

    value: Fraction
    kind: Literal["integer", "decimal", "fraction"]
    percent: bool


def plain_number(text: str) -> Plain | None:
    """A canonical answer that is one plain number (``42``, ``-3.50``, ``7/2``, ``\\frac{7}{2}``,
    ``-\\frac{3}{4}``, ``25\\%``, ``30^\\circ``) as its value; None for anything else."""
    found = _PLAIN.fullmatch(text)
    if found is None or len(text) > _MAX_DIGITS:
        return None
    sign, whole, decimals, frac_top, frac_bottom, slash_top, slash_bottom, suffix = found.groups()
    if whole is not None:
        value = Fraction(int(whole + (decimals or "")), 10 ** len(decimals or ""))
        kind: Literal["integer", "decimal", "fraction"] = "decimal" if decimals is not None else "integer"
    else:
        top, bottom = (frac_top, frac_bottom) if frac_top is not None else (slash_top, slash_bottom)
        if int(bottom) == 0:
            return None
        value, kind = Fraction(int(top), int(bottom)), "fraction"
    return Plain(-value if sign else value, kind, suffix == "\\%")


def plain_tuple(text: str) -> tuple[str, list[Plain], str] | None:
    """A canonical answer that is a tuple or an interval of plain numbers (``(1,-2)``, ``[3,7)``) as
    (its opening bracket, its numbers, its closing bracket); None for anything else."""
    if len(text) < 5 or text[0] not in "([" or text[-1] not in ")]" or "," not in text:
        return None
    inner = text[1:-1]
    if any(bracket in inner for bracket in "()[]") or len(text) > _MAX_DIGITS:
        return None
    numbers = [plain_number(part) for part in inner.split(",")]
    if any(
        number is None or number.percent or "^" in part for number, part in zip(numbers, inner.split(","), strict=True)
    ):
        return None
    return text[0], numbers, text[-1]  # type: ignore[return-value]  # no None left


class Size(NamedTuple):
    """How big an answer is: characters, deepest nesting of (), [] and {}, and terms (+ and - signs)."""

    length: int
    depth: int
    terms: int


def size(text: str) -> Size:
    depth = deepest = 0
    for found in _BRACKET.finditer(text):
        if found.group() in "([{":
            depth += 1
            if depth > deepest:
                deepest = depth
        elif depth:
            depth -= 1
    return Size(len(text), deepest, 1 + text.count("+") + text.count("-"))
