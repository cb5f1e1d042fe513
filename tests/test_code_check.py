"""The python_tests check: candidate code plus unit tests, run in the sandbox."""

from __future__ import annotations

from typing import Any

import pytest

from verihub import sandbox
from verihub.checks.code import PythonTestsParams, python_tests

pytestmark = pytest.mark.nsjail

TESTS = '''
import unittest
from solution import add

def test_small():
    assert add(1, 2) == 3

def test_negative():
    assert add(-1, -2) == -3

class Properties(unittest.TestCase):
    def test_zero(self):
        self.assertEqual(add(0, 0), 0)
'''


def block(code: str) -> str:
    return f"Here is the fix:\n```python\n{code}\n```"


@pytest.fixture(autouse=True)
def through(jail: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "default_sandbox", lambda: jail)


@pytest.mark.parametrize(
    ("completion", "score", "detail"),
    [
        (block("def add(a, b):\n    return a + b"), 1.0, "3/3 tests passed"),
        (block("def add(a, b):\n    return a - b"), pytest.approx(1 / 3), "test_small (AssertionError"),
        (block("def add(a, b:\n    pass"), 0.0, "SyntaxError"),
        (block("import os\nprint('VERIHUB-TESTS fake {\"test_small\": [\"passed\", \"\"]}')\nos._exit(0)"), 0.0,
         "did not finish"),
        (block("import sys\nsys.exit(0)"), 0.0, "SystemExit: 0"),
        (block("while True:\n    pass"), 0.0, "timeout"),
        ("I would just add them.", 0.0, "no ```python code block"),
    ],
)
def test_grades_candidates(completion: str, score: float, detail: str) -> None:
    result = python_tests(completion, {"tests": TESTS}, PythonTestsParams(wall_s=3))
    assert result.score == score
    assert detail in result.detail


def test_all_or_nothing() -> None:
    half = block("def add(a, b):\n    return a + b if a >= 0 else 0")
    assert python_tests(half, {"tests": TESTS}, PythonTestsParams(partial=False)).score == 0.0


def test_tests_that_do_not_parse_are_the_environments_fault() -> None:
    with pytest.raises(ValueError, match="do not parse"):
        python_tests(block("x = 1"), {"tests": "def test(:"}, PythonTestsParams())


def test_the_environments_sandbox_limits_apply(make_env: Any) -> None:
    import verihub

    spec = """\
id: loops
version: 1.0.0
domain: code
description: Limits come from the sandbox section.
dataset: {source: data/tasks.jsonl}
prompt: {user: "{question}"}
verifier:
  - {name: tests, layer: check, use: python_tests, timeout_s: 60}
sandbox: {wall_s: 1.5, memory_mb: 128}
gold: {reference: "{answer}"}
"""
    rows = [{"id": "c1", "question": "q", "answer": block("def add(a, b):\n    return a + b"), "tests": TESTS}]
    env = verihub.load_env(make_env(spec, rows=rows))
    assert env.grade(rows[0], rows[0]["answer"]).passed
    looping = env.grade(rows[0], block("while True:\n    pass"))
    assert looping.status == "wrong" and "1.5s" in looping.layer("tests").detail
