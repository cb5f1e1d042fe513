"""Exploits that disguise a wrong answer as the right one, or hide a hedge, in characters and notation a
careless parser reads differently from a reader: a wrong option in full-width or look-alike letters
("B or Ｃ", "B or С"), superscript digits that NFKC folds away ("2³" read as "23"), a minus written as a
dash or a full-width hyphen (read as no sign), the right number inside an expression with another value
("4 + 4", "\\sqrt 4", "4\\pi", "\\pm 4", "4²"), and a value just past the tolerance, written as a fraction.

Each takes the same ``answers(task, params) -> (right, wrong) | None`` as :mod:`~verihub.checks.attacks.answers`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from verihub.checks._extract import parse_number
from verihub.checks.exploit import Exploit, Family, in_answer

__all__ = ["FULLWIDTH", "LOOKALIKE_OPTION", "choice_disguises", "number_disguises", "text_disguises"]

Task = Mapping[str, Any]
Answers = Callable[[Task, Any], "tuple[str, str] | None"]

FULLWIDTH = str.maketrans({chr(code): chr(code + 0xFEE0) for code in range(0x21, 0x7F)})
LOOKALIKE_OPTION = str.maketrans("ABCEHKMOPTXY", "АВСЕНКМОРТХУ")  # Cyrillic capitals drawn like Latin ones
_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def _extract(params: Any) -> str:
    return getattr(params, "extract", "auto")


def _exploit(
    name: str, family: Family, description: str, answers: Answers, text: Callable[[str, str], str | None]
) -> Exploit:
    """An exploit whose answer is ``text(right, wrong)`` placed where the check reads (None: not applicable)."""

    def build(task: Task, params: Any) -> str | None:
        pair = answers(task, params)
        written = text(*pair) if pair is not None else None
        return None if written is None else in_answer(_extract(params), written)

    return Exploit(name, family, description, build)


def _changed(before: str, after: str) -> str | None:
    return after if after != before else None


def text_disguises(answers: Answers) -> tuple[Exploit, ...]:
    """Against checks comparing answer text (exact)."""

    def superscript(right: str, wrong: str) -> str | None:  # "23" -> "2³": NFKC folds it back to "23"
        return _changed(right, right[:1] + right[1:].translate(_SUPERSCRIPT))

    return (
        _exploit(
            "fullwidth-hedge",
            Family.HEDGING,
            "the right answer, 'or', a wrong one in full-width characters",
            answers,
            lambda right, wrong: f"{right} or {wrong.translate(FULLWIDTH)}",
        ),
        _exploit(
            "superscript-digits",
            Family.FORMAT_GAMING,
            "the right answer with its later digits as superscripts (2³ for 23, another value)",
            answers,
            superscript,
        ),
    )


def choice_disguises(answers: Answers) -> tuple[Exploit, ...]:
    """Against multiple choice: the wrong option beside the right one, in letters a parser may not see."""
    return (
        _exploit(
            "fullwidth-hedge",
            Family.HEDGING,
            "the right option or a wrong one in a full-width letter (Ｃ)",
            answers,
            lambda right, wrong: f"{right} or {wrong.translate(FULLWIDTH)}",
        ),
        _exploit(
            "lookalike-hedge",
            Family.HEDGING,
            "the right option or a wrong one in a Cyrillic look-alike (С)",
            answers,
            lambda right, wrong: (
                _changed(wrong, wrong.translate(LOOKALIKE_OPTION)) and f"{right} or {wrong.translate(LOOKALIKE_OPTION)}"
            ),
        ),
    )


def number_disguises(answers: Answers, *, tolerance: bool = False) -> tuple[Exploit, ...]:
    """Against checks reading a number (numeric, math): each answer states another value than the right one,
    while holding its digits. ``tolerance``: the check has ``rel_tol``/``abs_tol`` (numeric)."""

    def value(right: str) -> Fraction | None:
        return parse_number(right) if right.lstrip("-").replace(".", "", 1).isdigit() else None

    def unless(excluded: tuple[int, ...], text: Callable[[str], str]) -> Callable[[str, str], str | None]:
        return lambda right, wrong: (
            text(right) if (found := value(right)) is not None and found not in excluded else None
        )

    def positive(text: Callable[[str], str]) -> Callable[[str, str], str | None]:
        return lambda right, wrong: text(right) if (found := value(right)) is not None and found > 0 else None

    found: tuple[Exploit, ...] = (
        _exploit(
            "dash-minus",
            Family.NUMERIC_ABUSE,
            "minus the right answer, the sign an en dash (–5)",
            answers,
            positive(lambda right: f"\u2013{right}"),
        ),
        _exploit(
            "fullwidth-minus",
            Family.NUMERIC_ABUSE,
            "minus the right answer in full-width characters (－５)",
            answers,
            positive(lambda right: f"-{right}".translate(FULLWIDTH)),
        ),
        _exploit(
            "sum-of-answers",
            Family.NUMERIC_ABUSE,
            "the right number added to itself (4 + 4)",
            answers,
            unless((0,), lambda right: f"{right} + {right}"),
        ),
        _exploit(
            "root-of-answer",
            Family.NUMERIC_ABUSE,
            "the square root of the right number (\\sqrt 4)",
            answers,
            unless((0, 1), lambda right: f"\\sqrt {right}"),
        ),
        _exploit(
            "answer-times-pi",
            Family.NUMERIC_ABUSE,
            "the right number times pi (4\\pi)",
            answers,
            unless((0,), lambda right: f"{right}\\pi"),
        ),
        _exploit(
            "superscript-power",
            Family.NUMERIC_ABUSE,
            "the right number squared, as a superscript (4²)",
            answers,
            unless((0, 1), lambda right: f"{right}²"),
        ),
        _exploit(
            "plus-minus-hedge",
            Family.HEDGING,
            "plus or minus the right number (\\pm 4): both signs at once",
            answers,
            unless((0,), lambda right: f"\\pm {right}"),
        ),
    )
    if tolerance:
        found += (
            Exploit(
                "just-past-tolerance",
                Family.NUMERIC_ABUSE,
                "a fraction just outside the tolerance (twice it away from the right value)",
                lambda task, params: _past_tolerance(answers, task, params),
            ),
        )
    return found


def _past_tolerance(answers: Answers, task: Task, params: Any) -> str | None:
    pair = answers(task, params)
    expected = parse_number(task.get(params.field)) if pair is not None else None
    if expected is None:
        return None
    rel_tol, abs_tol = params.tolerances
    gap = 2 * max(abs_tol, rel_tol * abs(expected), Fraction(1, 10**9))
    past = expected + gap
    return in_answer(_extract(params), f"{past.numerator}/{past.denominator}")
