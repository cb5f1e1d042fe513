"""Mathematical equivalence through math-verify (runs in the process pool: sympy is CPU-heavy)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from verihub.checks._extract import find_answer, strip_think
from verihub.checks.base import CheckParams, CheckResult


class MathParams(CheckParams):
    field: str = Field("answer", description="Column with the reference answer (LaTeX or plain).")
    float_rounding: int = Field(6, ge=0, le=20, description="Decimal places used when comparing floats.")
    timeout_s: int = Field(
        5, ge=1,
        description="math-verify's own limit per parse and per comparison, past which the answer is wrong "
        "(10^{10^{10}}); the layer's timeout_s still ends the whole check.",
    )

    def columns(self) -> set[str]:
        return {self.field}


def math_equivalent(completion: str, task: Mapping[str, Any], params: MathParams) -> CheckResult:
    """The final answer (\\boxed{} first) is mathematically equivalent to the reference (math-verify)."""
    from math_verify import parse, verify  # sympy is slow to import; only math checks pay for it

    reference = str(task[params.field]).strip()
    if "$" not in reference and "\\boxed" not in reference:
        reference = f"${reference}$"
    gold = parse(reference, parsing_timeout=params.timeout_s)
    if not gold:
        raise ValueError(f"math-verify could not parse the reference answer {reference!r}")
    hedged = find_answer(completion, "auto").problem  # several different boxed answers, nested boxes, ...
    if hedged:
        return CheckResult(0.0, hedged)
    answer = parse(strip_think(completion), parsing_timeout=params.timeout_s)
    if not answer:
        return CheckResult(0.0, "no parseable final answer")
    if verify(gold, answer, float_rounding=params.float_rounding, timeout_seconds=params.timeout_s):
        return CheckResult(1.0)
    return CheckResult(0.0, f"got {str(answer[-1])[:60]}, expected {str(gold[-1])[:60]}")
