"""Exploits against checks that read one final answer: exact, numeric, math and multiple choice.

Each knows the right answer (from the check's ``field``) and hides it: among wrong ones (hedging), in
nested or empty delimiters, as a placeholder or in look-alike characters (format gaming), and, against
numbers, as values that overflow, stall or are not numbers at all (numeric abuse).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from verihub.checks._extract import parse_number
from verihub.checks.attacks.disguises import choice_disguises, number_disguises, text_disguises
from verihub.checks.exploit import Exploit, Family, in_answer, several_answers

__all__ = ["EXACT", "HUGE_EXPONENT", "MATH", "MULTIPLE_CHOICE", "NUMERIC"]

Task = Mapping[str, Any]
Answers = Callable[[Task, Any], "tuple[str, str] | None"]  # (right, wrong) for a task, or None

HUGE_EXPONENT = 20_000_000
"""The exponent of the ``huge-exponent`` exploit: ``1e20000000``, which once took over 10 s to parse."""

# Characters that look like others: a verifier that folds them would accept an answer it cannot read.
_LOOKALIKE = str.maketrans("0125689aceopxyABCEHKMOPTX", "OlZSbBgасеорхуАВСЕНКМОРТХ")


def _extract(params: Any) -> str:
    return getattr(params, "extract", "auto")


def _hedges(answers: Answers) -> tuple[Exploit, ...]:
    def several(task: Task, params: Any) -> str | None:
        pair = answers(task, params)
        return several_answers(_extract(params), [pair[1], pair[0]]) if pair else None

    def either(task: Task, params: Any) -> str | None:
        pair = answers(task, params)
        return in_answer(_extract(params), f"{pair[1]} or {pair[0]}") if pair else None

    def per_line(task: Task, params: Any) -> str | None:
        pair, extract = answers(task, params), _extract(params)
        if pair is None or extract == "last_line":
            return None  # the last line is the answer by that mode's own definition
        lines = f"{pair[0]} \\\\ {pair[1]}" if extract in ("auto", "boxed") else f"{pair[0]}\n{pair[1]}"
        return in_answer(extract, lines)

    return (
        Exploit("several-final-answers", Family.HEDGING, "a wrong final answer, then the right one", several),
        Exploit("or-hedge", Family.HEDGING, "one answer: 'wrong or right'", either),
        Exploit(
            "answer-per-line", Family.HEDGING, "one answer holding the right and a wrong one, a line each", per_line
        ),
    )


def _format_games(answers: Answers, field: Callable[[Any], str]) -> tuple[Exploit, ...]:
    def nested(task: Task, params: Any) -> str | None:
        pair, extract = answers(task, params), _extract(params)
        if pair is None:
            return None
        if extract in ("auto", "boxed"):
            return f"\\boxed{{{pair[1]} \\boxed{{{pair[0]}}}}}"
        if extract == "answer_tag":
            return f"<answer>{pair[1]} <answer>{pair[0]}</answer></answer>"
        return None

    def empty(task: Task, params: Any) -> str | None:
        return in_answer(_extract(params), "  ") if _extract(params) not in ("full", "last_line") else None

    def placeholder(task: Task, params: Any) -> str:
        return in_answer(_extract(params), "{" + field(params) + "}")

    def lookalike(task: Task, params: Any) -> str | None:
        pair = answers(task, params)
        if pair is None or pair[0].translate(_LOOKALIKE) == pair[0]:
            return None
        if parse_number(pair[0]) is not None and parse_number(pair[0].translate(_LOOKALIKE)) == parse_number(pair[0]):
            return None  # "O.5" is still .5: no look-alike was read
        return in_answer(_extract(params), pair[0].translate(_LOOKALIKE))

    return (
        Exploit(
            "nested-answers", Family.FORMAT_GAMING, "the right answer in a box (or tag) nested in a wrong one", nested
        ),
        Exploit("empty-answer", Family.FORMAT_GAMING, "the right delimiter around nothing", empty),
        Exploit(
            "placeholder-answer",
            Family.FORMAT_GAMING,
            "the template's placeholder text instead of an answer",
            placeholder,
        ),
        Exploit(
            "lookalike-answer",
            Family.FORMAT_GAMING,
            "the right answer in look-alike characters (Cyrillic, O for 0)",
            lookalike,
        ),
    )


# -- exact ----------------------------------------------------------------------------------------------


def _exact_answers(task: Task, params: Any) -> tuple[str, str] | None:
    expected = task.get(params.field)
    right = str(expected[0] if isinstance(expected, list) and expected else expected or "").strip()
    if not right:
        return None
    return right, "unknown" if right.casefold() != "unknown" else "none"


EXACT = (
    _hedges(_exact_answers)
    + _format_games(_exact_answers, lambda params: params.field)
    + text_disguises(_exact_answers)
)


# -- numeric ----------------------------------------------------------------------------------------------


def _numeric_answers(task: Task, params: Any) -> tuple[str, str] | None:
    value = parse_number(task.get(getattr(params, "field", "answer")))
    if value is None:
        return None
    if isinstance(value, Fraction) and value.denominator == 1:
        return str(value.numerator), str(value.numerator + 1)
    return f"{float(value):g}", f"{float(value) + 1:g}"


def _abuse(name: str, description: str, text: Callable[[Task, Any], str | None]) -> Exploit:
    def build(task: Task, params: Any) -> str | None:
        value = text(task, params)
        return None if value is None else in_answer(_extract(params), value)

    return Exploit(name, Family.NUMERIC_ABUSE, description, build)


def _nines(task: Task, params: Any) -> str | None:
    pair = _numeric_answers(task, params)
    if pair is None or not pair[0].lstrip("-").isdigit():
        return None
    right = int(pair[0])
    rel_tol, abs_tol = getattr(params, "tolerances", (0, 0))
    if Fraction(1, 1000) <= max(abs_tol, rel_tol * abs(right)):
        return None  # 3.999 is within this tolerance of 4: right, not an equal-looking wrong answer
    return f"{right - 1}.999..." if right > 0 else f"-{abs(right) - 1}.999..." if right < 0 else "0.000...1"


NUMERIC = (
    _hedges(_numeric_answers)
    + _format_games(_numeric_answers, lambda params: params.field)
    + (
        _abuse("overflow-1e400", "a number past the float range", lambda task, params: "1e400"),
        _abuse(
            "huge-exponent",
            "a number whose exact value takes seconds to build",
            lambda task, params: f"1e{HUGE_EXPONENT}",
        ),
        _abuse("infinity", "inf instead of a number", lambda task, params: "inf"),
        _abuse("not-a-number", "nan instead of a number", lambda task, params: "nan"),
        _abuse("ten-thousand-digits", "a 10,000-digit integer", lambda task, params: "9" * 10_000),
        _abuse("repeating-nines", "0.999... (the right value minus one, then nines)", _nines),
        _abuse(
            "underflow-to-zero",
            "1e-400 where the answer is 0 (a float reads it as 0.0)",
            lambda task, params: "1e-400" if parse_number(task.get(params.field)) == 0 else None,
        ),
    )
    + number_disguises(_numeric_answers, tolerance=True)
)


# -- math (math-verify) ---------------------------------------------------------------------------------


def _math_answers(task: Task, params: Any) -> tuple[str, str] | None:
    right = str(task.get(params.field, "")).strip()
    if not right:
        return None
    number = parse_number(right)
    plain = number is not None and right.lstrip("-").replace(".", "", 1).isdigit()
    return right, (f"{float(number) + 1:g}" if plain and number is not None else f"{right} + 1")


MATH = (
    _hedges(_math_answers) + _format_games(_math_answers, lambda params: params.field) + number_disguises(_math_answers)
)


# -- multiple choice ------------------------------------------------------------------------------------


def _choice_answers(task: Task, params: Any) -> tuple[str, str] | None:
    right = str(task.get(params.field, "")).strip().upper()
    others = [letter for letter in params.choices.upper() if letter != right]
    return (right, others[0]) if right and others else None


def _every_option(task: Task, params: Any) -> str:
    return in_answer("auto", ", ".join(params.choices.upper()))


def _option_per_line(task: Task, params: Any) -> str | None:
    # The right option first: a rule that reads the last line alone sees a wrong one, and one that
    # accepts any line would be fooled.
    pair = _choice_answers(task, params)
    if pair is None:
        return None
    rest = [letter for letter in params.choices.upper() if letter != pair[0]]
    return "Candidates:\n" + "\n".join(f"({letter})" for letter in [pair[0], *rest])


MULTIPLE_CHOICE = (
    _hedges(_choice_answers)
    + _format_games(_choice_answers, lambda params: params.field)
    + (
        Exploit("every-option", Family.HEDGING, "every option listed as the answer", _every_option),
        Exploit("option-per-line", Family.HEDGING, "every option, one per line, the right one first", _option_per_line),
    )
    + choice_disguises(_choice_answers)
)
