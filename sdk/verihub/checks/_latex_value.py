"""The value of a simple LaTeX expression at given values of its variables, without sympy.

The math check uses it to tell two expressions apart cheaply: where they differ at a point, math-verify
cannot find them equal. Only a grammar that latex2sympy reads the same way is accepted: numbers,
single-letter variables, ``\\pi``, ``+ - \\cdot \\times * /``, ``^``, ``\\frac{}{}``, ``\\sqrt{}``,
``\\sqrt[n]{}``, parentheses and implicit products (``2\\pi r``). Whatever latex2sympy reads otherwise
than LaTeX does, or might (``x^23`` is x**23 to it, ``x/2y`` is x/(2y), ``2 3`` is 5), or that names
a function, a constant or a unit (``f(x)``, ``xy``, ``e``, ``i``, a final ``m``), is refused:
:func:`evaluator` returns None.
So does a value that is not a finite real number. The cost is linear in the text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping

__all__ = ["evaluator"]

Evaluate = Callable[[Mapping[str, float]], float]

_TOKEN = re.compile(r"\d+(?:\.\d+)?|\\[A-Za-z]+|[A-Za-z]|\s+|.")
_MULTIPLY = frozenset({"\\cdot", "\\times", "*"})
_AFTER_OPERATOR = frozenset({"+", "-", "*", "/", "^", "(", "{", "[", "\\cdot", "\\times"})
_BARE = re.compile(r"[\d.()+-]+")  # a factor that is only a number, maybe in parentheses or signed
_CONSTANTS = "eEiI"  # Euler's number and the imaginary unit to latex2sympy, not variables
_MAX_TOKENS = 256  # keeps the nesting of the closures (and Python's stack) shallow
# math-verify strips a unit word that ends an answer ("3m" is 3 to it); these are its one-letter ones.
_UNIT_LETTERS = frozenset("cdghlmost")


class _Refused(Exception):
    """Outside the grammar, or read differently by latex2sympy."""


def evaluator(text: str) -> tuple[Evaluate, frozenset[str]] | None:
    """A function computing ``text``'s value from its variables' values (raising ArithmeticError or
    ValueError where it has none), and the variables; None when ``text`` is outside the grammar."""
    tokens = _tokens(text)
    if tokens is None or not tokens or len(tokens) > _MAX_TOKENS or tokens[-1] in _UNIT_LETTERS:
        return None
    parser = _Parser(tokens)
    try:
        tree = parser.expression()
        if parser.position != len(tokens):
            raise _Refused
    except (_Refused, IndexError):
        return None
    return tree, frozenset(parser.variables)


def _tokens(text: str) -> list[str] | None:
    tokens: list[str] = []
    for found in _TOKEN.finditer(text):
        token = found.group()
        if token.isspace():
            continue
        if tokens and _adjacent_refused(tokens[-1], token, found.start() > 0 and text[found.start() - 1].isspace()):
            return None
        tokens.append(token)
    return tokens


def _adjacent_refused(before: str, token: str, spaced: bool) -> bool:
    """Neighbours latex2sympy reads its own way: "2 3", "(2)3" (sums to it: mixed numbers), "xy" and "x2"
    (maybe names), "f(x)" (maybe a function)."""
    letter_before = len(before) == 1 and before.isalpha()
    if token[0].isdigit():
        return before not in _AFTER_OPERATOR
    if len(token) == 1 and token.isalpha():
        return letter_before or (spaced and before[0].isdigit())
    return token == "(" and letter_before


class _Parser:
    """Recursive descent over the tokens, building the value as nested closures."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.position = 0
        self.variables: set[str] = set()

    def _peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _take(self, expected: str | None = None) -> str:
        token = self.tokens[self.position]
        if expected is not None and token != expected:
            raise _Refused
        self.position += 1
        return token

    def expression(self) -> Evaluate:
        value = self._term()
        while self._peek() in ("+", "-"):
            sign = self._take()
            left, right = value, self._term()
            value = _add(left, right) if sign == "+" else _subtract(left, right)
        return value

    def _term(self) -> Evaluate:
        start = self.position
        value = self._factor()
        divided = False  # "x/2y" is x/(2y) to latex2sympy: no implicit product after a quotient
        while True:
            token = self._peek()
            if token in _MULTIPLY or token == "/":
                self._take()
                start = self.position
                left, right = value, self._factor()
                value = _multiply(left, right) if token != "/" else _divide(left, right)
                divided = token == "/"
            elif token is not None and _starts_primary(token):
                # A bare number before "(...)" or "\frac" is a mixed number to latex2sympy: (2)(3) is 5,
                # 2\frac{1}{2} is 5/2.
                bare = _BARE.fullmatch("".join(self.tokens[start : self.position])) is not None
                if divided or (bare and token in ("(", "\\frac")):
                    raise _Refused
                start = self.position
                left, right = value, self._factor()
                value = _multiply(left, right)
            else:
                return value

    def _factor(self) -> Evaluate:
        negative = False
        while self._peek() in ("-", "+"):
            negative ^= self._take() == "-"
        if negative:
            inner = self._factor()
            return lambda point: -inner(point)
        base = self._primary()
        if self._peek() != "^":
            return base
        self._take()
        if self._peek() == "{":
            self._take()
            exponent = self.expression()
            self._take("}")
        else:
            token = self._take()
            if not (len(token) == 1 and (token.isdigit() or token.isalpha())):
                raise _Refused  # "x^23" (x**23 to latex2sympy, x^2*3 to LaTeX), "x^-1"
            exponent = self._atom(token)
        if self._peek() == "^":
            raise _Refused  # "2^3^2"
        return _power(base, exponent)

    def _primary(self) -> Evaluate:
        token = self._take()
        if token == "(":
            inner = self.expression()
            self._take(")")
            return inner
        if token == "\\frac":
            top, bottom = self._group(), self._group()
            return _divide(top, bottom)
        if token == "\\sqrt":
            if self._peek() == "[":
                self._take()
                degree = self.expression()
                self._take("]")
                inner = self._group()
                return _power(inner, _divide(lambda point: 1.0, degree))
            inner = self._group()
            return lambda point: math.sqrt(inner(point))
        return self._atom(token)

    def _atom(self, token: str) -> Evaluate:
        if token[0].isdigit():
            number = float(token)
            return lambda point: number
        if token == "\\pi":
            return lambda point: math.pi
        if len(token) == 1 and token.isalpha() and token not in _CONSTANTS:
            self.variables.add(token)
            return lambda point: point[token]
        raise _Refused

    def _group(self) -> Evaluate:
        self._take("{")
        inner = self.expression()
        self._take("}")
        return inner


def _starts_primary(token: str) -> bool:
    return token in ("(", "\\frac", "\\sqrt", "\\pi") or token[0].isdigit() or (len(token) == 1 and token.isalpha())


def _add(left: Evaluate, right: Evaluate) -> Evaluate:
    return lambda point: left(point) + right(point)


def _subtract(left: Evaluate, right: Evaluate) -> Evaluate:
    return lambda point: left(point) - right(point)


def _multiply(left: Evaluate, right: Evaluate) -> Evaluate:
    return lambda point: left(point) * right(point)


def _divide(left: Evaluate, right: Evaluate) -> Evaluate:
    return lambda point: left(point) / right(point)


def _power(base: Evaluate, exponent: Evaluate) -> Evaluate:
    def value(point: Mapping[str, float]) -> float:
        result = math.pow(base(point), exponent(point))  # ValueError for a negative base and a fraction
        if not math.isfinite(result):
            raise OverflowError
        return result

    return value
