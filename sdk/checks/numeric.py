"""Numeric answers compared with a tolerance."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from verihub.checks._extract import Extract, answer_number, parse_number
from verihub.checks.base import CheckParams, CheckResult


class NumericParams(CheckParams):
    field: str = Field("answer", description="Column with the expected number (a number or text holding one).")
    extract: Extract = Field("auto", description="Which part of the completion holds the number.")
    rel_tol: float = Field(0.0, ge=0, description="Relative tolerance (for answers at any scale).")
    abs_tol: float = Field(1e-6, ge=0, description="Absolute tolerance (integers and fractions compare exactly).")
    percent_as_fraction: bool = Field(False, description="Read '50%' as 0.5 instead of 50.")

    def columns(self) -> set[str]:
        return {self.field}


def numeric(completion: str, task: Mapping[str, Any], params: NumericParams) -> CheckResult:
    """The one number the answer states equals the expected one within tolerance.

    Thousands separators (1,234), fractions (3/4, \\frac{3}{4}), signs, exponents, and units or
    currency around the number are handled.
    """
    expected = parse_number(task[params.field], percent_as_fraction=params.percent_as_fraction)
    if expected is None:
        # The environment's data is broken, not the answer: let the engine report an env_error.
        raise ValueError(f"expected value {task[params.field]!r} in column {params.field!r} is not a number")
    got, problem = answer_number(completion, params.extract, percent_as_fraction=params.percent_as_fraction)
    if got is None:
        return CheckResult(0.0, problem)  # no number, or several different ones (a hedge)
    if got == expected or math.isclose(got, expected, rel_tol=params.rel_tol, abs_tol=params.abs_tol):
        return CheckResult(1.0)
    return CheckResult(0.0, f"got {float(got):g}, expected {float(expected):g}")
