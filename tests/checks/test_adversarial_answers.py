"""The built-in checks read an answer as a reader does, through the grade path: invisible marks, full-width
forms, other scripts' digits and dashes fold to what they mean; superscripts and look-alike letters do not;
a number inside an expression is no number; JSON numbers a float cannot hold are refused; a second JSON
answer in a plain block is a hedge; and every exploit of these classes is declared, so `validate` runs it."""

from __future__ import annotations

import json

import pytest

import verihub
from conftest import PROBE_SPEC_HEAD, MakeEnv
from verihub.checks.registry import BUILTIN_CHECKS


def grade(make_env: MakeEnv, layer: str, row: dict, completion: str) -> verihub.Grade:
    rows = [{"id": f"t{i}", "question": "q", **row} for i in range(2)]
    env = verihub.load_env(make_env(PROBE_SPEC_HEAD + f"  - {layer}\n", rows=rows))
    return env.grade(rows[0], completion)


@pytest.mark.parametrize(
    ("answer", "completion", "graded"),
    [
        ("4", "\\boxed{4 + 4}", "wrong"),  # the right digits inside an expression of another value
        ("4", "\\boxed{4+4}", "wrong"),
        ("4", "\\boxed{x + 4}", "wrong"),
        ("4", "\\boxed{4 \\cdot 4}", "wrong"),
        ("4", "\\boxed{\\sqrt 4}", "wrong"),
        ("4", "\\boxed{√4}", "wrong"),
        ("4", "\\boxed{4\\pi}", "wrong"),
        ("4", "\\boxed{4²}", "wrong"),
        ("4", "\\boxed{\\pm 4}", "wrong"),  # both signs at once
        ("4", "\\boxed{±4}", "wrong"),
        ("4", "\\boxed{\u20134}", "wrong"),  # an en dash is a minus
        ("4", "\\boxed{\uff0d\uff14}", "wrong"),  # full-width minus four
        ("4", "\\boxed{-$4}", "wrong"),  # a sign the parser would drop
        ("4", "\\boxed{4\u200b4}", "wrong"),  # 44 with a zero-width space, not a hedge of 4 and 4
        ("4", "\\boxed{11/2}", "wrong"),
        ("-4", "\\boxed{\u20134}", "ok"),
        ("-4", "\\boxed{x = -4}", "ok"),
        ("42", "\\boxed{\u0664\u0662}", "ok"),  # Arabic-Indic digits
        ("42", "\\boxed{\u096a\u0968}", "ok"),  # Devanagari digits
        ("42", "\\boxed{\uff14\uff12}", "ok"),  # full-width digits
        ("42", "\\boxed{4\u200d2}", "ok"),  # a zero-width joiner inside
        ("42", "\\boxed{\u202e42\u202c}", "ok"),  # bidi controls around it
        ("42", "The answer is 42 cm.", "ok"),
        ("5", "\\boxed{5\\,\\text{cm}}", "ok"),
        ("0", "\\boxed{-0}", "ok"),
        ("0", "\\boxed{1e-400}", "wrong"),
    ],
)
def test_numeric_reads_what_the_answer_says(make_env: MakeEnv, answer: str, completion: str, graded: str) -> None:
    found = grade(make_env, "{name: n, layer: check, use: numeric}", {"answer": answer}, completion)
    assert str(found.status) == graded, found


@pytest.mark.parametrize(
    ("answer", "completion", "graded"),
    [
        ("23", "\\boxed{2³}", "wrong"),  # NFKC reads 2³ as 23
        ("23", "\\boxed{2₃}", "wrong"),
        ("XII", "\\boxed{Ⅻ}", "wrong"),
        ("23", "\\boxed{\uff12\uff13}", "ok"),
        ("23", "\\boxed{2\u200b3}", "ok"),
        ("-5", "\\boxed{\u22125}", "ok"),
        ("cba", "\\boxed{\uff43\uff42\uff41}", "ok"),
        ("cba", "\\boxed{сbа}", "wrong"),  # Cyrillic look-alikes
    ],
)
def test_exact_folds_width_and_invisible_marks_not_meaning(
    make_env: MakeEnv, answer: str, completion: str, graded: str
) -> None:
    found = grade(make_env, "{name: e, layer: check, use: exact}", {"answer": answer}, completion)
    assert str(found.status) == graded, found


@pytest.mark.parametrize(
    ("completion", "graded"),
    [
        ("\\boxed{B or \uff23}", "wrong"),  # the wrong option in a full-width letter
        ("\\boxed{B or С}", "wrong"),  # ... in a Cyrillic look-alike
        ("\\boxed{\uff22}", "ok"),
        ("\\boxed{В}", "wrong"),  # a Cyrillic look-alike alone is no option
    ],
)
def test_multiple_choice_sees_disguised_options(make_env: MakeEnv, completion: str, graded: str) -> None:
    found = grade(make_env, "{name: m, layer: check, use: multiple_choice}", {"answer": "B"}, completion)
    assert str(found.status) == graded, found


EXPECTED = {"name": "Ada", "age": 30, "debt": 0}


@pytest.mark.parametrize(
    ("answer", "score"),
    [
        ('```json\n{"name": "Ada", "age": 30, "debt": 1e-400}\n```', 0.0),  # 1e-400 is not 0: refused
        ('```json\n{"name": "Ada", "age": 1e400, "debt": 0}\n```', 0.0),
        ('```json\n{"name": "Ada", "age": 30, "debt": 0}\n```\n```\n{"name": "Bob", "age": 31, "debt": 1}\n```', 0.0),
        ('```json\n{"name": "Ada", "age": "\u201330", "debt": 0}\n```', 2 / 3),  # minus thirty
        ('```json\n{"name": "Ada", "age": "15 + 15", "debt": 0}\n```', 2 / 3),
        ('```json\n{"name": "Ada", "age": 30, "debt": 0}\n```\n```\nprint("done")\n```', 1.0),  # a plain block of code
        ('```json\n{"name": "Ada", "age": "\uff13\uff10", "debt": 0.0}\n```', 1.0),
    ],
)
def test_json_fields_numbers_are_the_numbers_written(make_env: MakeEnv, answer: str, score: float) -> None:
    found = grade(make_env, "{name: j, layer: check, use: json_fields}", {"expected": json.dumps(EXPECTED)}, answer)
    assert found.reward == pytest.approx(score), found


def test_forbidden_text_split_by_bidi_controls_is_forbidden(make_env: MakeEnv) -> None:
    layer = '{name: f, layer: rule, use: forbidden, args: {patterns: ["<script"]}}'
    for hidden in ("<\u2066\u2069script", "<scr\u202aipt", "<scr\ufe0fipt", "\uff1cscript"):
        assert str(grade(make_env, layer, {}, f"Here: {hidden}>").status) == "wrong", hidden


@pytest.mark.parametrize(
    ("check", "names"),
    [
        (
            "numeric",
            {
                "dash-minus",
                "fullwidth-minus",
                "sum-of-answers",
                "root-of-answer",
                "answer-times-pi",
                "superscript-power",
                "plus-minus-hedge",
                "just-past-tolerance",
                "underflow-to-zero",
            },
        ),
        ("math", {"dash-minus", "sum-of-answers", "root-of-answer", "plus-minus-hedge"}),
        ("exact", {"fullwidth-hedge", "superscript-digits"}),
        ("multiple_choice", {"fullwidth-hedge", "lookalike-hedge"}),
        (
            "json_fields",
            {"json-then-plain-block", "underflow-to-zero", "dash-minus-text", "sum-as-text", "huge-integer"},
        ),
        ("forbidden", {"bidi-split-forbidden", "fullwidth-forbidden"}),
    ],
)
def test_each_class_is_an_exploit_the_check_declares(check: str, names: set[str]) -> None:
    assert names <= {exploit.name for exploit in BUILTIN_CHECKS[check].exploits}
