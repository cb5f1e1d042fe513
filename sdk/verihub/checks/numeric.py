"""Numeric answers compared with a tolerance."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from functools import cached_property
from typing import Any

from pydantic import Field

from verihub.checks._extract import Extract, answer_number, parse_number
from verihub.checks.base import CheckParams, CheckResult
from verihub.errors import DataError


class NumericParams(CheckParams):
    field: str = Field("answer", description="Column with the expected number (a number or text holding one).")
    extract: Extract = Field("auto", description="Which part of the completion holds the number.")
    rel_tol: float = Field(0.0, ge=0, description="Relative tolerance (for answers at any scale).")
    abs_tol: float = Field(1e-6, ge=0, description="Absolute tolerance (integers and fractions compare exactly).")
    percent_as_fraction: bool = Field(False, description="Read '50%' as 0.5 instead of 50.")

    def columns(self) -> set[str]:
        return {self.field}

    @cached_property
    def tolerances(self) -> tuple[Fraction, Fraction]:
        """(rel_tol, abs_tol) as the decimals they were written as: 1e-6 is exactly 1/10**6."""
        return Fraction(repr(self.rel_tol)), Fraction(repr(self.abs_tol))


def numeric(completion: str, task: Mapping[str, Any], params: NumericParams) -> CheckResult:
    """The one number the answer states equals the expected one within tolerance.

    Thousands separators (1,234), fractions (3/4, \\frac{3}{4}), signs, exponents, and units or
    currency around the number are handled. Comparison is exact (no float rounding); numbers beyond
    a float's range or with more than 300 digits (1e400, inf) are not numbers, so such an answer is
    wrong, at a bounded cost.
    """
    expected = parse_number(task[params.field], percent_as_fraction=params.percent_as_fraction)
    if expected is None:
        # The environment's data is broken, not the answer: let the engine report an env_error.
        raise DataError(
            f"expected value {str(task[params.field])[:80]!r} in column {params.field!r} is not a number "
            "(or not one within ±1e308 with at most 300 digits)"
        )
    got, problem = answer_number(completion, params.extract, percent_as_fraction=params.percent_as_fraction)
    if got is None:
        return CheckResult(0.0, problem)  # no number, several different ones (a hedge), or out of bounds
    if got == expected or _close(got, expected, *params.tolerances):
        return CheckResult(1.0)
    return CheckResult(0.0, f"got {float(got):g}, expected {float(expected):g}")


def _close(got: Fraction, expected: Fraction, rel_tol: Fraction, abs_tol: Fraction) -> bool:
    """|got - expected| <= max(rel_tol * max(|got|, |expected|), abs_tol), in exact integer arithmetic."""
    p, q, r, s = got.numerator, got.denominator, expected.numerator, expected.denominator
    gap, scale = abs(p * s - r * q), q * s  # |got - expected| == gap / scale
    if gap * abs_tol.denominator <= abs_tol.numerator * scale:
        return True
    return bool(rel_tol) and gap * rel_tol.denominator <= rel_tol.numerator * max(abs(p) * s, abs(r) * q)
