"""The bundled code-repair environment: its data, splits, gold answers and tool loop."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import verihub
from conftest import REPO
from verihub.grading.grade import GradeStatus

ROOT = REPO / "envs" / "code-repair"
COLUMNS = ("id", "difficulty", "function", "description", "buggy_code", "tests", "fix", "wrong_fix")


@pytest.fixture(scope="module")
def env() -> verihub.Environment:
    return verihub.load_env(ROOT)


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (ROOT / "data" / "tasks.jsonl").read_text().splitlines()]


def sample(rows: list[dict[str, Any]], per_level: int = 2) -> list[dict[str, Any]]:
    """The first and last tasks of each difficulty level (fixed, so failures reproduce)."""
    picked = []
    for level in (1, 2, 3):
        of_level = [row for row in rows if row["difficulty"] == level]
        picked += [of_level[0], of_level[-1]][:per_level]
    return picked


def block(code: str) -> str:
    return f"```python\n{code}```"


def test_tasks_cover_every_difficulty(rows: list[dict[str, Any]]) -> None:
    assert len(rows) >= 60
    levels = Counter(row["difficulty"] for row in rows)
    assert set(levels) == {1, 2, 3} and min(levels.values()) >= 15, levels
    assert len({row["id"] for row in rows}) == len(rows)
    assert len({row["function"] for row in rows}) == len(rows)
    for row in rows:
        assert all(row.get(column) not in (None, "") for column in COLUMNS), row["id"]
        assert len({row["buggy_code"], row["fix"], row["wrong_fix"]}) == 3, row["id"]
        for column in ("buggy_code", "fix", "wrong_fix", "tests"):
            ast.parse(row[column])  # every piece of code at least parses
        assert f"from solution import {row['function']}\n" in row["tests"], row["id"]
        assert f"def {row['function']}(" in row["buggy_code"] and f"def {row['function']}(" in row["fix"]


def test_splits_are_disjoint_and_cover_the_data(env: verihub.Environment, rows: list[dict[str, Any]]) -> None:
    train, held_out = ({task["id"] for task in env.dataset(name)} for name in ("train", "eval"))
    assert train and held_out and not train & held_out
    assert train | held_out == {row["id"] for row in rows}
    assert {task["difficulty"] for task in env.dataset("eval")} == {1, 2, 3}


def test_the_data_file_is_what_the_script_writes(rows: list[dict[str, Any]]) -> None:
    spec = importlib.util.spec_from_file_location("code_repair_make_data", ROOT / "scripts" / "make_data.py")
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.TASKS == rows


def test_prompt_shows_the_bug_but_not_the_answer(env: verihub.Environment) -> None:
    task = env.dataset("eval")[0]
    messages = env.render(task)
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[-1]["content"]
    assert task["buggy_code"] in user and task["description"] in user and task["function"] in user
    assert task["fix"] not in user and "def test_" not in user
    assert env.spec.interaction.kind == "multi_turn" and env.spec.interaction.tools == ["python"]


def test_an_answer_without_one_python_block_is_stopped_at_the_gate(env: verihub.Environment) -> None:
    task = env.dataset("train")[0]
    for answer in ("The loop bound is off by one.", block(task["fix"]) + "\n" + block(task["fix"])):
        grade = env.grade(task, answer)
        assert grade.status is GradeStatus.WRONG and grade.reward == 0.0
        assert [layer.status for layer in grade.layers][1] == "skipped"


@pytest.mark.nsjail
def test_reference_passes_and_buggy_and_wrong_fix_fail(
    env: verihub.Environment, rows: list[dict[str, Any]], nsjail_path: str
) -> None:
    for task in sample(rows):
        reference = env.grade(task, env.reference(task))
        assert reference.status is GradeStatus.OK and reference.reward == 1.0, (task["id"], reference.reason)
        for column in ("buggy_code", "wrong_fix"):
            grade = env.grade(task, block(task[column]))
            assert grade.status is GradeStatus.WRONG and grade.reward == 0.0, (task["id"], column)
            assert "tests passed; failed:" in grade.layers[-1].detail  # failed on the tests, not on the format


@pytest.mark.nsjail
def test_buggy_code_gets_no_partial_credit(
    env: verihub.Environment, rows: list[dict[str, Any]], nsjail_path: str
) -> None:
    task = next(row for row in rows if row["function"] == "count_vowels")  # its bug breaks 1 test of 3
    grade = env.grade(task, block(task["buggy_code"]))
    assert grade.layers[-1].detail.startswith("2/3 tests passed") and grade.reward == 0.0


@pytest.mark.nsjail
def test_an_object_equal_to_everything_does_not_pass(
    env: verihub.Environment, rows: list[dict[str, Any]], nsjail_path: str
) -> None:
    task = next(row for row in rows if row["function"] == "sum_to_n")
    hack = (
        "class Anything:\n    def __eq__(self, other):\n        return True\n\n\n"
        "def sum_to_n(n):\n    return Anything()\n"
    )
    grade = env.grade(task, block(hack))
    assert grade.status is GradeStatus.WRONG and "not a plain value" in grade.layers[-1].detail


@pytest.mark.nsjail
def test_multi_turn_rollout_with_the_python_tool(env: verihub.Environment, nsjail_path: str) -> None:
    """A scripted model runs the buggy code with the tool, then answers with the fix (or never answers)."""
    from verihub.eval.evaluate import evaluate
    from verihub.generation import Sampling
    from verihub.testing import ScriptedChatServer

    tasks = {task["description"]: task for task in env.dataset("eval")}

    def agent(request: dict[str, Any]) -> list[dict[str, Any]]:
        messages = request["messages"]
        assert [tool["function"]["name"] for tool in request["tools"]] == ["python"]
        task = next(task for description, task in tasks.items() if description in messages[1]["content"])
        if not any(m["role"] == "tool" for m in messages):
            code = task["buggy_code"] + "\nprint('defined', callable(" + task["function"] + "))\n"
            return [{"content": "", "tool_calls": [{"name": "python", "arguments": {"code": code}}]}]
        assert "defined True" in next(m["content"] for m in messages if m["role"] == "tool")
        return [{"content": "Fixed:\n" + block(task["fix"])}]

    def stuck(request: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"content": "", "tool_calls": [{"name": "python", "arguments": {"code": "print(1)"}}]}]

    with ScriptedChatServer(agent) as server:
        report = evaluate(env, f"openai:agent@{server.url}", n=3, k=1, split="eval", sampling=Sampling(temperature=0))
    assert [(r.status, r.turns) for r in report.rollouts] == [("ok", 2)] * 3
    with ScriptedChatServer(stuck) as server:
        report = evaluate(env, f"openai:stuck@{server.url}", n=1, k=1, split="eval", sampling=Sampling(temperature=0))
    rollout = report.rollouts[0]
    assert rollout.turns == env.spec.interaction.max_turns and rollout.status == "wrong"


def test_installed_package_loads_by_name(tmp_path: Path) -> None:
    """In a fresh process: loading envs/code-repair from its directory (as above) puts it on sys.path, after
    which the name would import the source tree's package, which has no environment.yaml beside it."""
    if not importlib.metadata.entry_points(group="verihub.environments", name="code-repair"):
        pytest.skip("envs/code-repair is not pip-installed here")
    code = (
        "import json, verihub\n"
        "env = verihub.load_env('code-repair')\n"
        "print(json.dumps([env.id, env.version, env.spec.domain, str(env.root),"
        " len(env.dataset('train')) + len(env.dataset('eval'))]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    env_id, version, domain, root, size = json.loads(done.stdout.strip().splitlines()[-1])
    assert (env_id, version, domain) == ("code-repair", "1.0.0", "code")
    assert Path(root) != ROOT and (Path(root) / "data" / "tasks.jsonl").is_file() and size >= 60


@pytest.mark.slow
@pytest.mark.nsjail
def test_every_reference_passes_and_every_negative_fails(env: verihub.Environment, nsjail_path: str) -> None:
    from verihub.validation.validate import validate_env

    report = validate_env(env)
    assert report.ok, report.failures
    assert report.references == report.references_passed >= 60
    assert report.negatives == report.negatives_rejected == 3 * report.references


@pytest.mark.slow
def test_make_data_check_passes() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_data.py"), "--check"],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "tasks OK" in done.stdout
