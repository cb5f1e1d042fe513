"""Mathematical equivalence: cheap decisions first, math-verify (sympy) for the rest, in the process pool.

Most answers are decided by :func:`math_prescreen` in microseconds, without sympy: a hedge is wrong, an
answer that is the reference after canonicalisation (:func:`verihub.checks._latex.canonical`: spacing,
``\\left``/``\\right``, redundant parentheses) is right, two plain numbers compare exactly (by math-verify's
own rules), and an answer far larger than its reference is wrong unparsed. The engine runs the prescreen
on the grading thread and sends only the undecided answers to a worker process, where
:func:`math_equivalent` parses them with math-verify (the parsed reference is kept per worker).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from pydantic import Field

from verihub.checks._extract import boxed_spans, find_answer, strip_think
from verihub.checks._latex import Plain, Size, canonical, plain_number, plain_tuple, size, without_redundant_parentheses
from verihub.checks._latex_value import evaluator
from verihub.checks.base import CheckParams, CheckResult

__all__ = ["MAX_DEPTH", "MAX_LENGTH", "MAX_TERMS", "MathParams", "math_equivalent", "math_prescreen"]

# Bounds on a boxed answer sympy is asked to parse, each at least twice the reference's own measure:
# latex2sympy takes seconds on a few dozen nested parentheses or a few hundred terms, and an answer
# that large is no answer to a question whose reference is small. They apply only to an answer that
# is not the reference: after canonicalisation the reference itself is right at any size up to
# _MAX_RAW characters (300 parentheses around the reference are the reference).
MAX_LENGTH = 400  # characters of the canonical answer
MAX_DEPTH = 8  # nesting of (), [] and {}
MAX_TERMS = 32  # + and - signs, plus one
_MAX_RAW = 50_000  # characters of the answer as written, past which it is not canonicalised at all
_NUMERIC_MARGIN = Fraction(1, 10**12)  # relative gap past which two floats differ at 15 digits
# Where two expressions are evaluated: each variable takes one of these (irrational-looking) values.
_POINTS = (
    (0.5772156649, 1.3247179572, 2.6854520010, 0.9159655942),
    (1.6180339887, 0.7390851332, 1.2020569032, 2.5029078751),
    (2.2360679775, 1.4142135624, 0.3678794412, 1.7320508076),
)


class MathParams(CheckParams):
    field: str = Field("answer", description="Column with the reference answer (LaTeX or plain).")
    float_rounding: int = Field(6, ge=0, le=20, description="Decimal places used when comparing floats.")
    timeout_s: int = Field(
        5,
        ge=1,
        description="math-verify's own limit per parse and per comparison, past which the answer is wrong "
        "(10^{10^{10}}); the layer's timeout_s still ends the whole check.",
    )

    def columns(self) -> set[str]:
        return {self.field}


def math_prescreen(completion: str, task: Mapping[str, Any], params: MathParams) -> CheckResult | None:
    """The verdict when it needs no sympy, else None. Bounded cost: linear in the completion."""
    found = find_answer(completion, "auto")
    if found.problem:  # several different boxed answers, nested boxes, ...
        return CheckResult(0.0, found.problem)
    raw_reference = str(task[params.field]).strip()
    reference = _reference_answer(raw_reference)
    boxed = found.source == "boxed"
    text = found.text if boxed else found.text.removesuffix(".")  # in a box, "7." is no number
    if len(text) > max(_MAX_RAW, 4 * len(raw_reference)):
        return CheckResult(0.0, f"the answer is {len(text):,} characters long, too long to compare")
    answer = canonical(text)
    gold = canonical(reference) if reference is not None else None
    if answer == gold:
        return CheckResult(1.0)
    if not boxed:  # math-verify reads the whole completion: only it knows what it will find there
        return None
    too_large = _too_large(answer, gold if gold is not None else canonical(raw_reference))
    if too_large is not None or gold is None:
        return too_large
    return _compare(answer, gold, params.float_rounding)


def math_equivalent(completion: str, task: Mapping[str, Any], params: MathParams) -> CheckResult:
    """The final answer (\\boxed{} first) is mathematically equivalent to the reference (math-verify)."""
    decided = math_prescreen(completion, task, params)
    if decided is not None:
        return decided
    from math_verify import parse, verify  # sympy is slow to import; only math checks pay for it

    gold = _parsed_reference(str(task[params.field]).strip(), params.timeout_s)
    found = find_answer(completion, "auto")
    # A boxed answer is parsed alone, without redundant parentheses (they cost the parser most); another
    # answer is found by math-verify in the whole completion, as it always was.
    boxed = found.source == "boxed"
    text = f"\\boxed{{{without_redundant_parentheses(found.text)}}}" if boxed else strip_think(completion)
    answer = parse(text, parsing_timeout=params.timeout_s)
    if not answer:
        return CheckResult(0.0, "no parseable final answer")
    if verify(gold, answer, float_rounding=params.float_rounding, timeout_seconds=params.timeout_s):
        return CheckResult(1.0)
    return CheckResult(0.0, f"got {str(answer[-1])[:60]}, expected {str(gold[-1])[:60]}")


def _reference_answer(reference: str) -> str | None:
    """The answer part of a reference (its box, or what is between its $ signs); None when it is not
    one plain piece of LaTeX (then only math-verify reads it)."""
    if "\\boxed" in reference or "\\fbox" in reference:
        spans, nested = boxed_spans(reference)
        return reference[spans[0][0] : spans[0][1]].strip() if len(spans) == 1 and not nested else None
    if "$" in reference:
        inner = reference.strip("$")
        return inner.strip() if "$" not in inner and reference[0] == reference[-1] == "$" else None
    return reference


def _compare(answer: str, gold: str, float_rounding: int) -> CheckResult | None:
    """The verdict on two answers that are plain numbers, assignments of them (``x=5``), or simple
    expressions with different values, decided as math-verify decides; None when it must decide."""
    answer_variable, answer_value = _assignment(answer)
    gold_variable, gold_value = _assignment(gold)
    if answer_variable is not None and gold_variable is not None and answer_variable != gold_variable:
        return None  # x=5 against y=5: math-verify's relation rules decide
    # math-verify compares an assignment's value with a plain answer, and a plain reference with an
    # answer's value (x=5 is 5, y=2x+1 is 2x+1); two assignments to one variable compare their values.
    if answer_value == gold_value:
        return CheckResult(1.0)
    wrong = CheckResult(0.0, f"got {answer[:60]}, expected {gold[:60]}")
    got, expected = plain_number(answer_value), plain_number(gold_value)
    if got is not None and expected is not None:
        if got.percent or expected.percent:  # 25\% is 25 when both are integers; else math-verify decides
            both_integers = got.kind == expected.kind == "integer"
            return (CheckResult(1.0) if got.value == expected.value else wrong) if both_integers else None
        same = _same_number(got, expected, float_rounding)
        return None if same is None else CheckResult(1.0) if same else wrong
    got_tuple, expected_tuple = plain_tuple(answer_value), plain_tuple(gold_value)
    if got_tuple is not None and expected_tuple is not None:
        same = _same_tuple(got_tuple, expected_tuple, float_rounding)
        return None if same is None else CheckResult(1.0) if same else wrong
    return wrong if _differ(answer_value, gold_value, float_rounding) else None


def _same_number(got: Plain, expected: Plain, float_rounding: int) -> bool | None:
    """Whether math-verify finds two plain numbers equal; None where only it can tell."""
    if got.value == expected.value:
        return True
    # Integers and fractions compare exactly; a decimal is rounded to float_rounding places (at 15
    # significant digits), so only a gap larger than that rounding can move decides.
    gap = abs(got.value - expected.value)
    if "decimal" not in (got.kind, expected.kind) or (
        gap > 2 * Fraction(1, 10**float_rounding) and gap > _NUMERIC_MARGIN * max(abs(got.value), abs(expected.value))
    ):
        return False
    return None


def _same_tuple(
    got: tuple[str, list[Plain], str], expected: tuple[str, list[Plain], str], float_rounding: int
) -> bool | None:
    """Whether math-verify finds two tuples or intervals of plain numbers equal; None where only it can
    tell. latex2sympy reads (a,b) as an open interval when a < b and as a tuple otherwise, and math-verify
    compares either with the other number by number; two intervals compare brackets and ends."""

    def interval(value: tuple[str, list[Plain], str]) -> bool:
        return len(value[1]) == 2 and value[1][0].value < value[1][1].value

    if not ((got[0], got[2]) == (expected[0], expected[2]) == ("(", ")")):
        if not (interval(got) and interval(expected)):
            return None  # [2,1] is a tuple, [1,2] an interval: math-verify's own rules decide
        if (got[0], got[2]) != (expected[0], expected[2]):
            return False
    if len(got[1]) != len(expected[1]):
        return False
    same = [_same_number(a, b, float_rounding) for a, b in zip(got[1], expected[1], strict=True)]
    return False if False in same else None if None in same else True


def _differ(answer: str, gold: str, float_rounding: int) -> bool:
    """Whether two simple expressions (:mod:`verihub.checks._latex_value`) take values further apart than
    math-verify's rounding at one of a few points, so that it cannot find them equal."""
    got, expected = evaluator(answer), evaluator(gold)
    if got is None or expected is None:
        return False
    names = sorted(got[1] | expected[1])
    band = 2 * 10.0**-float_rounding
    for values in _POINTS:
        point = {name: values[index % len(values)] + index // len(values) for index, name in enumerate(names)}
        try:
            first, second = got[0](point), expected[0](point)
        except (ArithmeticError, ValueError):  # no value there (1/0, a negative square root)
            continue
        if (
            math.isfinite(first)
            and math.isfinite(second)
            and abs(first - second) > max(band, 1e-9 * max(abs(first), abs(second)))
        ):
            return True
    return False


def _assignment(text: str) -> tuple[str | None, str]:
    """``x=5`` as ("x", "5"); anything else as (None, text). e, i and E are constants, not variables."""
    left, equals, right = text.partition("=")
    if equals and len(left) == 1 and left.isalpha() and left not in "eiE" and "=" not in right and "," not in right:
        return left, right
    return None, text


def _too_large(answer: str, gold: str) -> CheckResult | None:
    """Wrong, saying why, when the answer exceeds a bound (each at least twice the reference's own)."""
    own = size(gold)
    bounds = Size(max(MAX_LENGTH, 2 * own.length), max(MAX_DEPTH, 2 * own.depth), max(MAX_TERMS, 2 * own.terms))
    measured = size(answer) if len(answer) <= bounds.length else Size(len(answer), 0, 0)
    for value, bound, what in zip(measured, bounds, ("characters long", "levels deep", "terms long"), strict=True):
        if value > bound:
            return CheckResult(
                0.0, f"the answer is {value:,} {what}, more than the {bound:,} compared for this reference"
            )
    return None


_references: dict[tuple[str, int], list[Any]] = {}  # per worker process: the parsed reference of each task
_MAX_REFERENCES = 4096


def _parsed_reference(reference: str, timeout_s: int) -> list[Any]:
    key = (reference, timeout_s)
    gold = _references.get(key)
    if gold is None:
        from math_verify import parse

        text = reference if "$" in reference or "\\boxed" in reference else f"${reference}$"
        gold = parse(text, parsing_timeout=timeout_s)
        if not gold:
            raise ValueError(f"math-verify could not parse the reference answer {text!r}")
        if len(_references) >= _MAX_REFERENCES:
            del _references[next(iter(_references))]  # oldest first
        _references[key] = gold
    return gold
