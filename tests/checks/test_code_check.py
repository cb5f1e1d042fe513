"""The python_tests check: candidate code plus unit tests, run in the sandbox (both isolating backends).

The tests run in the runner; the candidate's code runs in a child process, and what crosses between
them is plain data or a handle (see verihub/checks/_test_runner.py). These tests pin what a test may
do with the solution, and that one test's crash or hang costs only that test.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from verihub import sandbox
from verihub.checks.code import PythonTestsParams, python_tests

pytestmark = pytest.mark.nsjail

TESTS = """
import unittest
from solution import add

def test_small():
    assert add(1, 2) == 3

def test_negative():
    assert add(-1, -2) == -3

class Properties(unittest.TestCase):
    def test_zero(self):
        self.assertEqual(add(0, 0), 0)
"""


def block(code: str) -> str:
    return f"Here is the fix:\n```python\n{code}\n```"


def grade(code: str, tests: str, **params: Any) -> Any:
    return python_tests(block(code), {"tests": tests}, PythonTestsParams(**{"wall_s": 5, **params}))


@pytest.fixture(autouse=True)
def through(jail: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "default_sandbox", lambda: jail)


@pytest.mark.parametrize(
    ("completion", "score", "detail"),
    [
        (block("def add(a, b):\n    return a + b"), 1.0, "3/3 tests passed"),
        (block("def add(a, b):\n    return a - b"), pytest.approx(1 / 3), "test_small (AssertionError"),
        (block("def add(a, b:\n    pass"), 0.0, "SyntaxError"),
        (
            block('import os\nprint(\'VERIHUB-TESTS fake {"test_small": ["passed", ""]}\')\nos._exit(0)'),
            0.0,
            "the solution's process exited (status 0)",
        ),
        (block("import sys\nsys.exit(0)"), 0.0, "SystemExit: 0"),
        (block("while True:\n    pass"), 0.0, "timed out"),
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


def test_plain_values_cross_exactly() -> None:
    values = (
        "[None, True, 2 ** 100, -7, 0.5, float('inf'), -0.0, 3j, 'é\\ud800', b'\\x00\\xff', (1, (2,)), "
        "{1: 'a', (2, 3): [4]}, {5, 6}, frozenset({7}), []]"
    )
    tests = f"""
import math
from solution import values

EXPECTED = {values}

def test_each_value_and_type():
    got = values()
    assert type(got) is list and len(got) == len(EXPECTED)
    for item, want in zip(got, EXPECTED):
        assert type(item) is type(want) and item == want, (item, want)
    assert math.copysign(1, got[6]) == -1

def test_nan():
    from solution import nan
    assert math.isnan(nan())
"""
    code = f"def values():\n    return {values}\n\ndef nan():\n    return float('nan')"
    assert grade(code, tests).detail == "2/2 tests passed"


def test_shared_and_mutated_containers_behave_as_in_python() -> None:
    tests = """
from solution import append, grid, extend_twice

def test_the_argument_changes_in_place_and_comes_back_itself():
    xs = [1]
    assert append(xs, 2) is xs
    assert xs == [1, 2]

def test_dicts_and_sets_change_in_place():
    seen, counts = set(), {}
    extend_twice(seen, counts, "a")
    assert seen == {"a"} and counts == {"a": 2}

def test_shared_rows_stay_shared():
    rows = grid()
    rows[0][0] = 1
    assert rows == [[1, 0], [1, 0]]
"""
    code = """
def append(xs, x):
    xs.append(x)
    return xs

def extend_twice(seen, counts, key):
    for _ in range(2):
        seen.add(key)
        counts[key] = counts.get(key, 0) + 1

def grid():
    row = [0, 0]
    return [row, row]
"""
    assert grade(code, tests).detail == "3/3 tests passed"


def test_objects_of_the_solution_work_through_handles() -> None:
    tests = """
from solution import Stack, countdown, Point

def test_methods_attributes_len_bool_and_items():
    stack = Stack()
    assert not stack and len(stack) == 0
    stack.push(3)
    stack.push(4)
    assert stack.pop() == 4 and len(stack) == 1 and stack
    assert stack.items == [3] and stack[0] == 3
    stack[0] = 9
    stack.label = "mine"
    assert stack.describe() == "mine: [9]" and str(stack) == "Stack(1)" and repr(stack) == "<Stack>"

def test_generators_iterate():
    assert list(countdown(3)) == [3, 2, 1]
    assert 2 in countdown(3)

def test_objects_are_never_equal_to_values_or_to_each_other():
    assert Point(1, 2) != Point(1, 2)
    assert Point(1, 2) != (1, 2)
    point = Point(1, 2)
    assert point == point and {point: 1}[point] == 1
    assert (point.x, point.y) == (1, 2)
"""
    code = """
class Stack:
    def __init__(self):
        self.items = []
    def push(self, item):
        self.items.append(item)
    def pop(self):
        return self.items.pop()
    def __len__(self):
        return len(self.items)
    def __getitem__(self, index):
        return self.items[index]
    def __setitem__(self, index, value):
        self.items[index] = value
    def describe(self):
        return "%s: %s" % (self.label, self.items)
    def __str__(self):
        return "Stack(%d)" % len(self)
    def __repr__(self):
        return "<Stack>"

def countdown(n):
    while n:
        yield n
        n -= 1

class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y
    def __eq__(self, other):
        return True
    __hash__ = object.__hash__
"""
    assert grade(code, tests).detail == "3/3 tests passed"


def test_exceptions_cross_as_builtin_types() -> None:
    tests = """
from solution import parse, lookup, overflow

def test_a_subclass_of_value_error_is_a_value_error():
    try:
        parse("x")
    except ValueError as error:
        assert str(error) == "not a number: x" and type(error) is ValueError
    else:
        raise AssertionError("no error")

def test_key_error_keeps_its_key():
    try:
        lookup({}, "k")
    except KeyError as error:
        assert error.args == ("k",)

def test_recursion_is_an_error_of_the_solution():
    try:
        overflow(1)
    except RecursionError:
        pass
"""
    code = """
class ParseError(ValueError):
    pass

def parse(text):
    raise ParseError("not a number: " + text)

def lookup(mapping, key):
    return mapping[key]

def overflow(n):
    return overflow(n + 1)
"""
    assert grade(code, tests).detail == "3/3 tests passed"


def test_functions_of_the_tests_can_be_called_back() -> None:
    tests = """
from solution import apply, sort_by

def test_a_callback():
    assert apply(lambda x, scale=1: x * 2 * scale, 3, scale=2) == 12

def test_a_key_function():
    assert sort_by([3, 1, 2], key=lambda v: -v) == [3, 2, 1]

def test_a_callback_that_raises():
    def boom(_):
        raise KeyError("nope")
    assert apply(boom, 1) == "caught KeyError"
"""
    code = """
def apply(function, value, **options):
    try:
        return function(value, **options)
    except KeyError:
        return "caught KeyError"

def sort_by(items, key):
    return sorted(items, key=key)
"""
    assert grade(code, tests).detail == "3/3 tests passed"


def test_a_crash_or_a_hang_costs_only_its_own_test() -> None:
    tests = """
from solution import f

def test_crash():
    f("crash")

def test_hang():
    f("hang")

def test_fine():
    assert f(2) == 4

def test_also_fine():
    assert f(3) == 6
"""
    code = """
import os

def f(x):
    if x == "crash":
        os._exit(3)
    if x == "hang":
        while True:
            pass
    return 2 * x
"""
    start = time.monotonic()
    result = grade(code, tests, wall_s=4)
    assert result.score == 0.5, result.detail
    assert "test_crash (the solution's process exited (status 3))" in result.detail
    assert "test_hang (timed out" in result.detail and "wall_s 4s" in result.detail
    assert time.monotonic() - start < 4


def test_only_the_tests_own_functions_run() -> None:
    tests = """
from solution import test_everything_passes, f

def test_f():
    assert f() == 1
"""
    code = "def test_everything_passes():\n    pass\n\ndef f():\n    return 2"
    result = grade(code, tests)
    assert result.score == 0.0 and result.detail.startswith("0/1 tests passed")


def test_values_too_large_to_cross_are_an_error() -> None:
    tests = "from solution import big\n\ndef test_big():\n    assert len(big()) == 3 * 10 ** 6\n"
    result = grade("def big():\n    return 'abc' * 10 ** 6 * 3", tests)
    assert result.score == 0.0 and "larger than 8 MiB" in result.detail


def test_async_tests_and_skips() -> None:
    tests = """
import unittest
from solution import add

async def test_async():
    assert add(1, 1) == 2

class Cases(unittest.TestCase):
    @unittest.skip("not today")
    def test_skipped(self):
        pass

    def test_run(self):
        self.assertEqual(add(2, 2), 4)
"""
    result = grade("def add(a, b):\n    return a + b", tests)
    assert result.score == pytest.approx(2 / 3) and result.detail == "2/3 tests passed"


def test_a_runner_built_for_another_python_is_the_sandboxs_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    from verihub.checks import _harness
    from verihub.errors import SandboxInfraError

    monkeypatch.setattr(_harness, "program", lambda: _harness.main_for(0x30100F0, b""))
    with pytest.raises(SandboxInfraError, match="compiled for Python 30100f0"):
        grade("def add(a, b):\n    return a + b", TESTS)


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


def test_without_isolation_too(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """unsafe-local runs the same runner, unjailed: same verdicts (and the usual warning)."""
    from verihub.sandbox.local import UnsafeLocalSandbox

    monkeypatch.setattr(sandbox, "default_sandbox", lambda: UnsafeLocalSandbox())
    assert grade("def add(a, b):\n    return a + b", TESTS).detail == "3/3 tests passed"
    crash = grade("import os\ndef add(a, b):\n    os._exit(1)", TESTS)
    assert crash.score == 0.0 and "exited (status 1)" in crash.detail
    assert "WITHOUT isolation" in caplog.text
