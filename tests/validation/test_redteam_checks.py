"""The holes the red-team suite found, closed as classes, through `load_env(...).grade`: hedged answers are no
answers, every scan of a completion is linear, JSON is strict, gates count what checks read, disguised
forbidden text is still forbidden, and a checker's expected outputs are out of reach of the code it runs."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

import verihub
from conftest import PROBE_SPEC_HEAD, REPO, VERIHUB, MakeEnv
from verihub.grading.verifier import Verifier
from verihub.sandbox.tools import task_files, with_workdir

ROWS = [
    {
        "id": f"t{i}",
        "question": "q",
        "answer": "4",
        "letter": "C",
        "city": "Paris",
        "expected": json.dumps({"name": "Ada", "age": 30}),
    }
    for i in range(2)
]


def env_with(make_env: MakeEnv, *layers: str) -> verihub.Environment:
    env = verihub.load_env(make_env(PROBE_SPEC_HEAD + "".join(f"  - {layer}\n" for layer in layers), rows=ROWS))
    env.verifier = Verifier(env.verifier.layers, reference=env.reference)  # the checks themselves: no answer limit
    return env


def status(env: verihub.Environment, completion: str) -> str:
    return str(env.grade(ROWS[0], completion).status)


@pytest.mark.parametrize(
    ("completion", "graded"),
    [
        ("\\boxed{4}", "ok"),
        ("First \\boxed{4}; checking again, \\boxed{4}.", "ok"),  # restating the same answer is fine
        ("\\boxed{\\frac{8}{2}}", "ok"),
        ("The answer is 4.", "ok"),
        ("\\boxed{5} \\boxed{4}", "wrong"),  # several different final answers
        ("\\boxed{4}\n\\boxed{5}", "wrong"),
        ("\\boxed{5 or 4}", "wrong"),  # several numbers in one answer
        ("\\boxed{5, 4}", "wrong"),
        ("\\boxed{5 \\boxed{4}}", "wrong"),  # a box inside a box
        ("\\boxed{4 \\\\ 5}", "wrong"),  # an answer per line
        ("The answer is 5.\nNo wait, the answer is 4.", "wrong"),
        ("<answer>5</answer> <answer>4</answer>", "wrong"),
        ("<answer>5 <answer>4</answer></answer>", "wrong"),
    ],
)
def test_numeric_refuses_hedges(make_env: MakeEnv, completion: str, graded: str) -> None:
    env = env_with(make_env, "{name: correct, layer: check, use: numeric}")
    assert status(env, completion) == graded


@pytest.mark.parametrize(
    ("completion", "graded"),
    [
        ("\\boxed{4}", "ok"),
        ("\\boxed{5} \\boxed{4}", "wrong"),
        ("\\boxed{5 \\boxed{4}}", "wrong"),  # math-verify alone accepts this
        ("\\boxed{4 \\\\ 5}", "wrong"),  # and this
        ("\\boxed{\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}}", "wrong"),  # a matrix is one answer (a wrong one)
    ],
)
def test_math_refuses_hedges(make_env: MakeEnv, completion: str, graded: str) -> None:
    env = env_with(make_env, "{name: correct, layer: check, use: math}")
    assert status(env, completion) == graded


@pytest.mark.parametrize(
    ("completion", "graded"),
    [
        ("The answer is (C).", "ok"),
        ("\\boxed{c}", "ok"),
        ("A good choice here is C", "ok"),  # the article is not option A
        ("\\boxed{A or C}", "wrong"),
        ("\\boxed{A, B, C, D}", "wrong"),
        ("The answer is (B) or (C)", "wrong"),
        ("\\boxed{B} \\boxed{C}", "wrong"),
        ("\\boxed{C \\\\ B}", "wrong"),
    ],
)
def test_multiple_choice_refuses_more_than_one_option(make_env: MakeEnv, completion: str, graded: str) -> None:
    env = env_with(make_env, "{name: correct, layer: check, use: multiple_choice, args: {field: letter}}")
    assert status(env, completion) == graded


def test_exact_and_tags_refuse_hedges_and_nesting(make_env: MakeEnv) -> None:
    env = env_with(
        make_env,
        "{name: format, layer: rule, use: xml_tags, gate: true, args: {tags: [answer]}}",
        "{name: correct, layer: check, use: exact, args: {field: city, extract: answer_tag}}",
    )
    assert status(env, "<answer>Paris</answer>") == "ok"
    nested = env.grade(ROWS[0], "<answer><answer>Paris</answer></answer>")
    assert nested.status == "wrong" and "<answer> appears 2 times, expected once" in nested.layer("format").detail
    lone = env_with(make_env, "{name: correct, layer: check, use: exact, args: {field: city}}")
    assert status(lone, "\\boxed{Lyon} \\boxed{Paris}") == "wrong"


@pytest.mark.parametrize(
    ("completion", "why"),
    [
        ('```json\n{"name": "Bob", "name": "Ada", "age": 30}\n```', "duplicate key 'name'"),
        ('```json\n{"name": "Ada", "age": NaN}\n```', "NaN is not JSON"),
        ('```json\n{"name": "Ada", "age": "29 or 30"}\n```', "wrong or missing: age"),
        ('```json\n{"name": "Ada", "age": [29, 30]}\n```', "wrong or missing: age"),
        (
            '```json\n{"name": "Bob", "age": 29}\n```\n```json\n{"name": "Ada", "age": 30}\n```',
            "2 different JSON values",
        ),
        ('It is {"name": "Bob", "age": 29}, or {"name": "Ada", "age": 30}.', "2 different JSON values"),
        ('```json\n{"name": "Ada", "age": 30}\n{"name": "Bob"}\n```', "text after the JSON value"),
        ('```json\n{"v": ' + "[" * 100_000 + "]" * 100_000 + "}\n```", "nested deeper than 64 levels"),
        ("[" * 1_000_000, "nested deeper than 64 levels"),
    ],
)
def test_json_answers_are_strict(make_env: MakeEnv, completion: str, why: str) -> None:
    env = env_with(make_env, "{name: fields, layer: check, use: json_fields, args: {field: expected, partial: false}}")
    assert status(env, '```json\n{"name": "Ada", "age": 30}\n```') == "ok"
    assert status(env, 'Here: {"name": "Ada", "age": 30} (see [1])') == "ok"
    grade = env.grade(ROWS[0], completion)
    assert grade.status == "wrong" and why in grade.layers[0].detail, grade


def test_a_gate_counts_every_block_a_check_may_read(make_env: MakeEnv) -> None:
    env = env_with(make_env, "{name: format, layer: rule, use: code_block, args: {language: python, max_blocks: 1}}")
    assert status(env, "```python\nprint(1)\n```") == "ok"
    assert status(env, "```python\nprint(1)\n```\n```\nprint(2)\n```") == "wrong"  # the unlabelled one counts
    assert "1 empty" in env.grade(ROWS[0], "```python\n\n```").layers[0].detail


def test_forbidden_text_in_disguise_is_still_forbidden(make_env: MakeEnv) -> None:
    env = env_with(make_env, "{name: safe, layer: rule, use: forbidden, args: {patterns: ['<script', 'As an AI']}}")
    assert status(env, "a plain answer") == "ok"
    for disguised in ("＜script>", "<scr\u200bipt>", "As an A\u2060I", "As an Ａ\u00adI"):
        assert status(env, disguised) == "wrong", disguised


def test_an_answer_that_makes_a_pattern_backtrack_is_wrong_in_bounded_time(make_env: MakeEnv) -> None:
    """An environment's own pattern, however it backtracks, costs at most PATTERN_TIMEOUT_S per answer, and a
    pathological answer is wrong (regex, contains) or forbidden, never a fault and never a stall."""
    lazy = "'(?s)<answer>\\s*(?!</answer>)\\S.*?</answer>'"  # quadratic on unclosed <answer> tags
    layers = {
        "regex": f"{{name: p, layer: check, use: regex, args: {{pattern: {lazy}}}}}",
        "contains": f"{{name: p, layer: check, use: contains, args: {{patterns: [{lazy}], regex: true}}}}",
        "forbidden": f"{{name: p, layer: rule, use: forbidden, args: {{patterns: [{lazy}], regex: true}}}}",
    }
    for use, layer in layers.items():
        env = env_with(make_env, layer)
        start = time.perf_counter()
        grade = env.grade(ROWS[0], "<answer>x" * 200_000)
        assert grade.status == "wrong" and "ran past" in grade.layers[0].detail, (use, grade)
        assert time.perf_counter() - start < 5, use  # a minute or more without the timeout
        expected = "wrong" if use == "forbidden" else "ok"
        assert status(env, "<answer>4</answer>") == expected, use  # an ordinary answer is matched as usual


@pytest.mark.parametrize(
    "junk",
    [
        "\\boxed{" * 150_000,
        "<answer>" * 130_000,
        "<think>x" * 120_000,
        "```" * 330_000,
        "answer is" + "\n" * 1_000_000,
        "{" * 1_000_000,
        "\\boxed{1 " * 100_000 + "}" * 100_000,
    ],
)
def test_a_megabyte_of_open_delimiters_grades_in_bounded_time(make_env: MakeEnv, junk: str) -> None:
    root = make_env(
        PROBE_SPEC_HEAD + "  - {name: format, layer: rule, use: boxed}\n"
        "  - {name: tags, layer: rule, use: xml_tags, args: {tags: [answer]}}\n"
        "  - {name: code, layer: rule, use: code_block}\n"
        "  - {name: correct, layer: check, use: numeric}\n"
        "  - {name: json, layer: check, use: json_fields, args: {field: expected}}\n",
        rows=ROWS,
    )
    start = time.perf_counter()
    result = subprocess.run(
        [VERIHUB, "grade", str(root), "--completion", "-", "--json"],
        input=junk,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert json.loads(result.stdout)["status"] == "wrong"
    assert time.perf_counter() - start < 30


def test_a_script_the_checker_runs_cannot_read_the_checker(nsjail_path: str) -> None:
    env = verihub.load_env(REPO / "envs" / "shell-task")
    (task,) = [task for split in env.split_names for task in env.dataset(split) if task["id"] == "sh-027"]
    reader = (
        "import os, re, sys, ast\nsource = open('/proc/%d/cmdline' % os.getppid(), 'rb').read().decode()\n"
        "cases = ast.literal_eval(re.search(r'cases = (\\{.*?\\})\\n', source, re.S).group(1))\n"
        "print(cases[open(sys.argv[1]).read()])\n"
    )
    cheat = verihub.sandbox.types.Snapshot.of({**(task_files(task) or {}), "stats.py": reader})
    assert env.grade(with_workdir(task, cheat), "Done.").status == "wrong"
    solved = env.grade(task, env.reference(task))
    assert solved.status == "ok", solved
