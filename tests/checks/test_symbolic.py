"""The math check: cheap decisions before math-verify, bounded cost, and the same verdicts as math-verify."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from verihub import GradeStatus
from verihub.checks import symbolic
from verihub.checks._latex import canonical
from verihub.grading.verifier import BoundLayer, Verifier
from verihub.spec.models import LayerSpec

PARAMS = symbolic.MathParams()
REASONING = "First I add the two numbers, then I check the sum. "


def polynomial(terms: int) -> str:
    return " + ".join(f"{i + 1}x^{{{terms - i}}}" for i in range(terms))


def math_verifier(timeout_s: float = 30) -> Verifier:
    spec = LayerSpec(name="math", layer="check", use="math", timeout_s=timeout_s)
    return Verifier([BoundLayer.from_spec(spec, Path.cwd())])


def math_verify_alone(reference: str, completion: str) -> float:
    """The verdict of math-verify on its own, as the check gave it before it decided anything itself."""
    from math_verify import parse, verify

    gold = parse(f"${reference}$", parsing_timeout=5)
    answer = parse(completion, parsing_timeout=5)
    return float(bool(answer) and verify(gold, answer, float_rounding=6, timeout_seconds=5))


# -- pathological answers: bounded, and right when they are the reference -------------------------------


@pytest.mark.parametrize(
    ("reference", "answer", "graded"),
    [
        ("7", "(" * 300 + "7" + ")" * 300, "ok"),  # main: 5 s, then "no parseable final answer"
        ("7", "(" * 300 + "8" + ")" * 300, "wrong"),
        ("x^2+2x+1", "(" * 300 + "x^2+2x+1" + ")" * 300, "ok"),
        ("x^2+2x+1", polynomial(800), "wrong"),
        (polynomial(800), polynomial(800), "ok"),  # main: the reference itself timed out: env_error
        (polynomial(800), "(" * 50 + polynomial(800) + ")" * 50, "ok"),
        ("7", "1+" * 5000 + "1", "wrong"),
        ("7", "{" * 300 + "7" + "}" * 300, "wrong"),  # braces are sets to math-verify: not redundant
        ("7", "\\sqrt{" * 300 + "49" + "}" * 300, "wrong"),
        ("7", "7" * 40_000, "wrong"),
    ],
)
def test_pathological_answers_are_bounded_and_right_when_they_are_the_reference(
    reference: str, answer: str, graded: str
) -> None:
    verifier = math_verifier()
    start = time.perf_counter()
    grade = verifier.grade({"id": "p", "answer": reference}, f"{REASONING}So \\boxed{{{answer}}}.")
    assert time.perf_counter() - start < 2  # main: 5 s or more each
    assert grade.status == graded, grade.reason or grade.layers[0].detail


def test_a_megabyte_answer_is_wrong_at_once() -> None:
    start = time.perf_counter()
    result = symbolic.math_equivalent("\\boxed{" + "(" * 500_000 + "7" + ")" * 500_000 + "}", {"answer": "7"}, PARAMS)
    assert result.score == 0 and "too long" in result.detail
    assert time.perf_counter() - start < 2


def test_the_bounds_grow_with_the_reference() -> None:
    small, large = polynomial(3), polynomial(40)
    refused = symbolic.math_prescreen(f"\\boxed{{{large}}}", {"answer": small}, PARAMS)
    assert refused is not None and refused.score == 0 and "terms long" in refused.detail
    # The same answer against a reference of its own size is left to math-verify (reordered: not equal).
    reordered = " + ".join(reversed(large.split(" + ")))
    assert symbolic.math_prescreen(f"\\boxed{{{reordered}}}", {"answer": large}, PARAMS) is None


def test_hedges_stay_wrong_whatever_their_form() -> None:
    for completion in (
        "\\boxed{6} \\boxed{(((7)))}",
        "\\boxed{7} and \\boxed{8}",
        "\\boxed{7 \\boxed{7}}",
        "\\boxed{7 \\\\ 8}",
    ):
        assert symbolic.math_equivalent(completion, {"answer": "7"}, PARAMS).score == 0, completion


# -- equivalent forms decided without sympy ------------------------------------------------------------


@pytest.mark.parametrize(
    ("reference", "answer"),
    [
        ("42", "42.0"),
        ("42", " ( 42 ) "),
        ("42", "((42))"),
        ("42", "\\left(42\\right)"),
        ("\\frac{7}{2}", "3.5"),
        ("\\frac{7}{2}", "7/2"),
        ("\\frac{7}{2}", "\\dfrac{14}{4}"),
        ("-\\frac{3}{4}", "\\frac{-3}{4}"),
        ("x=5", "5"),
        ("5", "x=5"),
        ("25\\%", "25"),
        ("30^\\circ", "30"),
        ("(1, -2)", "(1,-2.0)"),
        ("[3, 7)", "\\left[3,7\\right)"),
        ("x^2+2x+1", "(x^2 + 2x + 1)"),
        ("2\\sqrt{3}", "2 \\sqrt{3}"),
        ("\\frac{\\pi}{2}", "$\\frac{\\pi}{2}$"),
    ],
)
def test_equivalent_forms_are_right_without_sympy(reference: str, answer: str) -> None:
    decided = symbolic.math_prescreen(f"{REASONING}\\boxed{{{answer}}}", {"answer": reference}, PARAMS)
    assert decided is not None and decided.score == 1, decided


@pytest.mark.parametrize(
    ("reference", "answer"),
    [
        ("42", "43"),
        ("42", "-42"),
        ("\\frac{7}{2}", "\\frac{2}{7}"),
        ("3.25", "3.52"),
        ("x=5", "x=6"),
        ("25\\%", "26\\%"),
        ("(1, -2)", "(-2, 1)"),
        ("[3, 7)", "[3, 7]"),
        ("x^2+2x+1", "(x-1)^2"),
        ("2\\sqrt{3}", "3\\sqrt{2}"),
        ("\\frac{\\pi}{4}", "\\frac{\\pi}{5}"),
    ],
)
def test_wrong_answers_are_wrong_without_sympy(reference: str, answer: str) -> None:
    decided = symbolic.math_prescreen(f"{REASONING}\\boxed{{{answer}}}", {"answer": reference}, PARAMS)
    assert decided is not None and decided.score == 0, decided


# -- the same verdicts as math-verify -------------------------------------------------------------------

AGREEMENT = [
    # numbers: exact for integers and fractions, math-verify's rounding for decimals
    ("2", "2.0000001"),
    ("2", "2.000001"),
    ("\\frac{1}{3}", "0.333333"),
    ("\\frac{1}{3}", "0.3333"),
    ("\\frac{2}{3}", "0.67"),
    ("12345678901234567.5", "12345678901234567.6"),
    ("0.5", "\\frac{1}{2}"),
    ("42", "007"),
    ("42", "+42"),
    ("42", "42."),
    ("0", "-0"),
    ("1.5\\%", "1.5"),
    ("50\\%", "0.5"),
    ("x=5", "y=5"),
    ("5", "y=5"),
    ("y=2x+1", "2x+1"),
    ("1000", "1,000"),
    ("5", "5\\text{ cm}"),
    # what latex2sympy reads its own way: mixed numbers, digits after ^, quotients, units
    ("6", "(2)(3)"),
    ("5", "(2)(3)"),
    ("\\frac{5}{2}", "2\\frac{1}{2}"),
    ("1", "2\\frac{1}{2}"),
    ("x^{23}", "x^23"),
    ("\\frac{x}{2y}", "x/2y"),
    ("5", "2 3"),
    ("6", "2 3"),
    ("2", "2t"),
    ("2x", "2xy"),
    ("2", "2m"),
    ("x", "x \\cdot 1"),
    # expressions
    ("x^2+2x+1", "(x+1)^2"),
    ("x^2+2x+1", "(x+1)^3"),
    ("2\\sqrt{3}", "\\sqrt{12}"),
    ("2\\sqrt{3}", "3.464102"),
    ("2\\sqrt{3}", "3.46"),
    ("\\frac{\\pi}{2}", "\\pi/2"),
    ("\\frac{\\pi}{2}", "1.5708"),
    ("\\sqrt[3]{8}", "2"),
    ("\\frac{1}{x}", "x^{-1}"),
    ("\\frac{1}{x}", "x^{-2}"),
    ("\\pi r^2", "\\pi r^{2}"),
    ("\\pi r^2", "2\\pi r"),
    # tuples and intervals
    ("(6, -8)", "(-8, 6)"),
    ("(6, -8)", "(6.0, -8)"),
    ("(1, 2)", "(2, 1)"),
    ("[1, 2]", "[2, 1]"),
    ("(1, 2, 3)", "(1, 2)"),
    ("[3, 7)", "(3, 7)"),
    ("(1, 2)", "\\{1, 2\\}"),
    ("(1, 2)", "[1, 2]"),
]


@pytest.mark.parametrize(("reference", "answer"), AGREEMENT)
def test_the_checks_own_decisions_agree_with_math_verify(reference: str, answer: str) -> None:
    completion = f"{REASONING}So the answer is \\boxed{{{answer}}}."
    expected = math_verify_alone(reference, completion)
    assert symbolic.math_equivalent(completion, {"answer": reference}, PARAMS).score == expected
    decided = symbolic.math_prescreen(completion, {"answer": reference}, PARAMS)
    assert decided is None or decided.score == expected


def test_canonical_keeps_what_changes_a_value() -> None:
    assert canonical("((1, 2))") == "((1,2))"  # a tuple in a tuple
    assert canonical("2(3)") == "2(3)"  # a mixed number to latex2sympy
    assert canonical("2 3") == "2 3"
    assert canonical("2 \\pi r") == "2\\pi r"
    assert canonical("-(x)") == "-x"
    assert canonical("(" * 300 + "1" + ")" * 300) == "1"


# -- through the engine ---------------------------------------------------------------------------------


def test_the_engine_grades_decided_answers_without_a_worker_and_the_rest_in_one() -> None:
    verifier = math_verifier()
    tasks = [{"id": str(i), "answer": reference} for i, reference in enumerate(["42", "x^2+2x+1", "7", "7"])]
    completions = ["\\boxed{42.0}", "\\boxed{(x+1)^2}", "\\boxed{8}", "\\boxed{7} \\boxed{8}"]
    grades = verifier.grade_many(tasks, completions)
    assert [grade.status for grade in grades] == [GradeStatus.OK, GradeStatus.OK, GradeStatus.WRONG, GradeStatus.WRONG]
