"""Built-in checks, called directly."""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path

import pytest
from pydantic import ValidationError

from verihub.checks import format as fmt
from verihub.checks import numeric, structured, symbolic, text
from verihub.checks._extract import extract_answer, find_json, last_boxed, parse_number, strip_think
from verihub.checks.registry import BUILTIN_CHECKS, resolve_check
from verihub.errors import CheckNotFoundError


def score(result: object) -> float:
    return float(getattr(result, "score", result))


@pytest.mark.parametrize(
    ("completion", "how", "expected"),
    [
        ("<think>maybe \\boxed{1}</think>so \\boxed{\\frac{1}{2}}", "auto", "\\frac{1}{2}"),
        ("work... <answer> Paris </answer>", "auto", "Paris"),
        ("Reasoning.\nThe final answer is: 42", "auto", "42"),
        ("line one\nlast line\n\n", "auto", "last line"),
        ("<think>unfinished", "full", ""),
        ("no box here", "boxed", ""),
    ],
)
def test_extract_answer(completion: str, how: str, expected: str) -> None:
    assert extract_answer(completion, how) == expected


def test_last_boxed_handles_nesting_and_unbalanced() -> None:
    assert last_boxed("\\boxed{a{b}c} then \\boxed{x") == "a{b}c"
    assert last_boxed("none") is None
    assert strip_think("<think>a</think>b<think>c</think>d") == "bd"


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("1,234", 1234),
        ("$1,234.50", Fraction("1234.5")),
        ("12 km", 12),
        ("-3", -3),
        ("3/4", Fraction(3, 4)),
        ("\\frac{7}{2}", Fraction(7, 2)),
        ("1.5e3", 1500),
        ("−7", -7),
        ("about 5 or 6", 6),
        (17, 17),
    ],
)
def test_parse_number(raw: object, value: object) -> None:
    assert parse_number(raw) == value


def test_parse_number_percent_and_none() -> None:
    assert parse_number("50%", percent_as_fraction=True) == Fraction(1, 2)
    assert parse_number("50%") == 50
    assert parse_number("no digits") is None
    assert parse_number("1/0") is None


def test_find_json() -> None:
    assert find_json('text ```json\n{"a": 1}\n``` more') == {"a": 1}
    assert find_json('I think {bad json} then {"b": [1]} end') == {"b": [1]}
    with pytest.raises(ValueError, match="no JSON"):
        find_json("nothing")


def test_exact_normalises() -> None:
    params = text.ExactParams(extract="answer_tag", ignore_articles=True)
    task = {"answer": "The Pacific Ocean"}
    assert score(text.exact("<answer>pacific  ocean.</answer>", task, params)) == 1
    assert score(text.exact("<answer>Atlantic</answer>", task, params)) == 0
    assert score(text.exact("\\boxed{B}", {"answer": ["a", "b"]}, text.ExactParams())) == 1
    assert score(text.exact("\\boxed{B}", {"answer": "b"}, text.ExactParams(case_sensitive=True))) == 0


def test_numeric_tolerance_and_big_integers() -> None:
    task = {"answer": "2147483647"}
    assert score(numeric.numeric("\\boxed{2,147,483,647}", task, numeric.NumericParams())) == 1
    assert score(numeric.numeric("\\boxed{2147483648}", task, numeric.NumericParams())) == 0
    assert score(numeric.numeric("The answer is 0.3333333", {"answer": "1/3"}, numeric.NumericParams())) == 1
    loose = numeric.NumericParams(rel_tol=0.01)
    assert score(numeric.numeric("answer: 101 apples", {"answer": 100}, loose)) == 1
    assert score(numeric.numeric("no idea", task, numeric.NumericParams())) == 0


def test_numeric_broken_expected_value_raises() -> None:
    with pytest.raises(ValueError, match="not a number"):
        numeric.numeric("\\boxed{1}", {"answer": "n/a"}, numeric.NumericParams())


def test_math_equivalence() -> None:
    params = symbolic.MathParams()
    assert score(symbolic.math_equivalent("so \\boxed{\\frac{7}{2}}", {"answer": "3.5"}, params)) == 1
    assert (
        score(symbolic.math_equivalent("<think>\\boxed{3}</think>\\boxed{7/2}", {"answer": "\\frac{7}{2}"}, params))
        == 1
    )
    assert score(symbolic.math_equivalent("\\boxed{4}", {"answer": "3.5"}, params)) == 0


def test_regex_and_invalid_pattern() -> None:
    params = text.RegexParams(pattern=r"^\d{3}-\d{4}$", fullmatch=True, extract="last_line")
    assert text.regex("call\n555-1234", {}, params).score == 1.0
    assert text.regex("call\n555-12345", {}, params) == text.CheckResult(0.0, "no match")
    with pytest.raises(ValidationError, match="invalid regular expression"):
        text.RegexParams(pattern="(unclosed")


@pytest.mark.parametrize(
    ("completion", "chosen"),
    [("The answer is (C).", "C"), ("\\boxed{b}", "B"), ("I pick\nD", "D"), ("A or B? Answer: A", "A")],
)
def test_multiple_choice(completion: str, chosen: str) -> None:
    params = text.MultipleChoiceParams()
    assert score(text.multiple_choice(completion, {"answer": chosen}, params)) == 1
    assert score(text.multiple_choice(completion, {"answer": "E" if chosen != "E" else "A"}, params)) == 0


def test_contains_and_forbidden() -> None:
    required = text.ContainsParams(patterns=["alpha", "beta"])
    assert score(text.contains("alpha and beta", {}, required)) == 1
    assert score(text.contains("alpha only", {}, required)) == 0
    assert score(text.contains("beta", {}, text.ContainsParams(patterns=["alpha", "beta"], mode="any"))) == 1
    banned = text.PatternsParams(patterns=[r"rm\s+-rf"], regex=True)
    result = text.forbidden("run rm  -rf /", {}, banned)
    assert score(result) == 0 and "rm  -rf" in result.detail
    with pytest.raises(ValidationError, match="invalid regular expression"):
        text.PatternsParams(patterns=["("], regex=True)


def test_json_schema_inline_and_file(tmp_path: Path) -> None:
    schema = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}
    params = structured.JsonSchemaParams.model_validate({"schema": schema})
    assert score(structured.json_schema('{"n": 3}', {}, params)) == 1
    failed = structured.json_schema('{"n": "x"}', {}, params)
    assert score(failed) == 0 and "n:" in failed.detail
    (tmp_path / "s.json").write_text('{"type": "array"}')
    from_file = structured.JsonSchemaParams.model_validate({"schema_file": "s.json"}, context={"root": tmp_path})
    assert score(structured.json_schema("[1, 2]", {}, from_file)) == 1
    with pytest.raises(ValidationError, match="exactly one"):
        structured.JsonSchemaParams.model_validate({})
    with pytest.raises(ValidationError, match="not a valid JSON schema"):
        structured.JsonSchemaParams.model_validate({"schema": {"type": "nonsense"}})


def test_json_fields_partial_credit_and_numbers() -> None:
    task = {"expected": '{"name": "Ada Lovelace", "employees": 12400, "city": "Oslo"}'}
    params = structured.JsonFieldsParams()
    assert (
        score(structured.json_fields('{"name": " ada lovelace", "employees": "12,400", "city": "Oslo"}', task, params))
        == 1
    )
    half = structured.json_fields('{"name": "Ada Lovelace", "employees": 1, "city": "Oslo"}', task, params)
    assert score(half) == pytest.approx(2 / 3) and "employees" in half.detail
    strict = structured.JsonFieldsParams(partial=False)
    assert score(structured.json_fields('{"name": "Ada Lovelace"}', task, strict)) == 0


def test_format_rules() -> None:
    tags = fmt.XmlTagsParams(tags=["think", "answer"], nothing_outside=True)
    assert score(fmt.xml_tags("<think>x</think><answer>1</answer>", {}, tags)) == 1
    assert score(fmt.xml_tags("<answer>1</answer><think>x</think>", {}, tags)) == 0
    assert score(fmt.xml_tags("<think>x</think><answer>1</answer> extra", {}, tags)) == 0
    assert score(fmt.boxed("\\boxed{ }", {}, fmt.NoParams())) == 0
    assert score(fmt.boxed("<think>\\boxed{1}</think> none", {}, fmt.NoParams())) == 0
    assert score(fmt.think("<think>plan</think> answer", {}, fmt.ThinkParams())) == 1
    assert score(fmt.think("<think>plan</think>", {}, fmt.ThinkParams())) == 0
    code = fmt.CodeBlockParams(language="python")
    assert score(fmt.code_block("```python\nprint(1)\n```", {}, code)) == 1
    assert score(fmt.code_block("```js\nx\n```", {}, code)) == 0
    assert score(fmt.code_block("```python\na\n```\n```python\nb\n```", {}, code)) == 0
    bounds = fmt.LengthParams(min_words=2, max_chars=20)
    assert score(fmt.length("two words", {}, bounds)) == 1
    assert score(fmt.length("one", {}, bounds)) == 0
    assert score(fmt.length("x " * 30, {}, bounds)) == 0
    with pytest.raises(ValidationError, match="at least one"):
        fmt.LengthParams()


def test_registry_resolves_builtin_path_and_unknown() -> None:
    assert resolve_check("numeric") is BUILTIN_CHECKS["numeric"]
    assert resolve_check("verihub.checks.text:exact").mode == "thread"  # plain function, imported by path
    with pytest.raises(CheckNotFoundError, match="Did you mean 'numeric'"):
        resolve_check("numerc")
    with pytest.raises(CheckNotFoundError, match="cannot import"):
        resolve_check("no_such_module_xyz:fn")


NUMERIC = numeric.NumericParams()
HUGE_TEXTS = {
    "megabyte of numbers": "1 " * 500_000 + "\\boxed{7}",
    "megabyte after the number": "\\boxed{7}" + "x" * 1_000_000,
    "megabyte of digits": "9" * 1_000_000,
    "unicode digits padding": "٣" * 200_000 + " 7",
}


@pytest.mark.parametrize(
    "answer",
    [
        "1e400",
        "-1e400",
        "1e-400",
        "1e20000000",
        "1e" + "9" * 5000,
        "9" * 10_000,
        "0." + "3" * 400,
        "inf",
        "nan",
        "\\frac{" + "9" * 400 + "}{3}",
        "\\frac{10^{9999}}{3}",
        "10^{10^{10}}",
        "9^9^9^9",
        "2**1000000",
        "7^{1}",
        "1,0000",
        "12,34",
        "7.0.1",
        "\\dfrac{1}{7}",
        "\\sqrt{7}",
        "x_7",
        "0.999...",
    ],
)
def test_numeric_abuse_is_wrong_never_a_fault(answer: str) -> None:
    # Overflow, huge exponents and digit counts, non-numbers and expressions that merely end in the
    # expected digits are wrong answers (GRPO must penalise them), at a bounded cost.
    result = numeric.numeric(f"\\boxed{{{answer}}}", {"answer": "7"}, NUMERIC)
    assert score(result) == 0
    assert score(numeric.numeric(f"\\boxed{{{answer}}}", {"answer": "1"}, NUMERIC)) == 0


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("-0", 0),
        ("1e-300", Fraction(1, 10**300)),
        ("1.5e3%", 1500),
        ("\\boxed{42}.", 42),
        ("\\text{42} dollars", 42),
        ("0e99999999", 0),
        (0.1, Fraction(1, 10)),
        (10**400, None),
        (float("inf"), None),
    ],
)
def test_parse_number_edges(raw: object, value: object) -> None:
    assert parse_number(raw) == value


@pytest.mark.parametrize("name", list(HUGE_TEXTS))
def test_parse_number_cost_is_bounded(name: str) -> None:
    text = HUGE_TEXTS[name]
    start = time.perf_counter()
    parse_number(text)
    numeric.numeric(text, {"answer": "7"}, NUMERIC)
    assert time.perf_counter() - start < 0.25  # linear scans in C at most; was seconds on main


def test_numeric_compares_exactly_at_every_scale() -> None:
    assert score(numeric.numeric("\\boxed{1e300}", {"answer": "1e300"}, NUMERIC)) == 1
    assert score(numeric.numeric("\\boxed{1.000001}", {"answer": "1"}, NUMERIC)) == 1  # abs_tol 1e-6, inclusive
    assert score(numeric.numeric("\\boxed{1.0000011}", {"answer": "1"}, NUMERIC)) == 0
    assert score(numeric.numeric("\\boxed{0.1}", {"answer": 0.1}, numeric.NumericParams(abs_tol=0))) == 1
    assert score(numeric.numeric("\\boxed{1e-300}", {"answer": 0}, numeric.NumericParams(abs_tol=0))) == 0
    # no float rounding: 1/3 is not 0.3333333333333333 when the tolerance is zero
    assert (
        score(
            numeric.numeric("\\boxed{\\frac{1}{3}}", {"answer": "0.3333333333333333"}, numeric.NumericParams(abs_tol=0))
        )
        == 0
    )
    wrong = numeric.numeric("\\boxed{3e300}", {"answer": "1e300"}, numeric.NumericParams(rel_tol=0.5))
    assert score(wrong) == 0 and "expected 1e+300" in wrong.detail
    assert score(numeric.numeric("\\boxed{1.4e300}", {"answer": "1e300"}, numeric.NumericParams(rel_tol=0.5))) == 1


@pytest.mark.parametrize("expected", ["1e400", float("nan"), float("inf"), 10**400, "9" * 10_000])
def test_numeric_expected_value_out_of_range_is_the_environments_fault(expected: object) -> None:
    with pytest.raises(ValueError, match="not a number"):
        numeric.numeric("\\boxed{1}", {"answer": expected}, NUMERIC)


def test_json_fields_huge_numbers_are_wrong_not_faults() -> None:
    task = {"expected": '{"n": 5}'}
    for completion in ('{"n": 1' + "0" * 400 + "}", '{"n": 1e400}', '{"n": NaN}', '{"n": "1e400"}'):
        assert score(structured.json_fields(completion, task, structured.JsonFieldsParams())) == 0
