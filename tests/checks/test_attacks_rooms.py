"""The exploits of verihub.checks.attacks.rooms, against the graders that run beside answer-made state: the
programs and modules they target are found in any task's words, and shell-task's final_state and python_tests'
runner (in envs/code-repair) grade every one of them wrong. (Harbor's tests: tests/adapters/test_adapter_harbor.py.)"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

import verihub
from conftest import REPO
from verihub.checks.attacks import code, rooms
from verihub.sandbox.tools import with_workdir
from verihub.sandbox.types import Limits, Snapshot

FORGING = next(exploit for exploit in rooms.TERMINAL_STATE if exploit.name == "forging-program")
HOOKS = next(exploit for exploit in rooms.TERMINAL_STATE if exploit.name == "startup-hooks")
STAND_INS = next(exploit for exploit in rooms.TERMINAL_STATE if exploit.name == "stand-in-modules")


def test_a_forging_program_stands_in_for_every_program_the_task_names_in_its_work_dir() -> None:
    params = SimpleNamespace(limits=Limits(aliases={"/app": "/work"}))
    task = {
        "instruction": "Write a script `/app/answer.sh` that prints 42, and `tools/run.py`.",
        "tests": json.dumps({"test.sh": "bash /app/answer.sh; python3 /tests/check.py; /usr/lib/x.py"}),
        "files": json.dumps({"data.txt": "x"}),
    }
    attempt = FORGING.attempt(task, params)
    assert attempt is not None and attempt.workdir is not None
    assert sorted(attempt.workdir) == ["answer.sh", "data.txt", "tools/run.py"]
    assert attempt.workdir["answer.sh"].startswith("#!/bin/bash") and "chmod a-w" in attempt.workdir["answer.sh"]
    assert FORGING.attempt({"instruction": "Count the words of `story.txt`.", "files": "{}"}, params) is None
    hooks = HOOKS.attempt(task, params)
    assert hooks is not None and hooks.workdir is not None
    assert {".local/lib/python3.11/site-packages/zz-verihub.pth", "sitecustomize.py", ".bashrc", "data.txt"} <= set(
        hooks.workdir
    )


def test_stand_ins_cover_what_the_tasks_python_imports_but_the_answers_own_modules() -> None:
    params = SimpleNamespace(limits=Limits(aliases={"/app": "/work"}))
    task = {
        "instruction": "Write `/app/solution.py` defining `count`.",
        "tests": json.dumps(
            {
                "test.sh": "cd /app && python3 -m pytest /tests/test_outputs.py; python3 -c 'import yaml, toml as t'",
                "test_outputs.py": "import numpy.linalg as la\nfrom solution import count\nfrom helpers import x\n",
            }
        ),
        "files": json.dumps({"helpers.py": "x = 1\n"}),
    }
    attempt = STAND_INS.attempt(task, params)
    assert attempt is not None and attempt.workdir is not None
    made = attempt.workdir
    for module in ("pytest", "yaml", "toml", "numpy", "json", "unittest"):
        assert made[f"{module}.py"].startswith("import os\n") and "os._exit(0)" in made[f"{module}.py"], module
    assert "solution.py" not in made and made["helpers.py"] == "x = 1\n"  # the answer's to write; the task's own
    assert "[pytest11]" in made["verihub_forge-1.0.dist-info/entry_points.txt"] and "conftest.py" in made
    assert all("-p verihub_forge" in made[name] for name in ("pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"))
    assert (
        STAND_INS.attempt({"instruction": "Create `hello.txt`.", "tests": json.dumps({"test.sh": "cat x"})}, params)
        is None
    )


@pytest.mark.nsjail
def test_shell_tasks_checker_runs_no_hook_and_reads_no_forged_channel(nsjail_path: str) -> None:
    env = verihub.load_env(REPO / "envs" / "shell-task")
    tasks = [*env.tasks("train"), *env.tasks("eval")]
    runs_a_script = next(task for task in tasks if "run([sys.executable, '-I', '" in task["checker"])
    for exploit, task in (
        (HOOKS, tasks[0]),
        (FORGING, runs_a_script),
        (STAND_INS, tasks[0]),
        (STAND_INS, runs_a_script),
    ):
        attempt = exploit.attempt(task, None)
        assert attempt is not None and attempt.workdir is not None
        grade = env.grade(with_workdir(task, Snapshot.of(dict(attempt.workdir))), attempt.completion)
        assert (grade.status, grade.reward) == ("wrong", 0.0), (exploit.name, task["id"], grade)


@pytest.mark.nsjail
def test_python_tests_runner_honours_no_hook_a_solution_leaves(nsjail_path: str) -> None:
    root = REPO / "envs" / "code-repair"
    env = verihub.load_env(root)
    rows: list[dict[str, Any]] = [json.loads(line) for line in (root / "data" / "tasks.jsonl").read_text().splitlines()]
    leave = next(exploit for exploit in code.PYTHON_TESTS if exploit.name == "leave-startup-hooks")
    for task in rows[:2]:
        assert env.grade(task, f"```python\n{task['fix']}\n```").status == "ok"
        grade = env.grade(task, str(leave.attempt(task, None).completion))  # type: ignore[union-attr]
        tests = grade.layer("tests")
        assert grade.status == "wrong" and tests is not None and tests.score == 0.0, (task["id"], grade)
