"""Harbor tasks in verihub's jail (``harbor:PATH``). The task directories under harbor_tasks/ and harbor_hostile/
were made by harbor 0.25's own ``harbor init --task`` (then filled in); needs-pytest/ is its default
template untouched, whose tests image RUNs an install: the jail cannot stand in for it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import verihub
from conftest import REPO, results_table, run_eval, validate_report
from verihub.errors import SpecError
from verihub.testing import ScriptedChatServer

TASKS = REPO / "tests" / "adapters" / "harbor_tasks"
HOSTILE = REPO / "tests" / "adapters" / "harbor_hostile"


def bash(commands: str) -> str:
    return f"```bash\n{commands}\n```"


@pytest.fixture(scope="module")
def suite() -> verihub.Environment:
    return verihub.load_env(f"harbor:{TASKS}")


def by_name(env: verihub.Environment) -> dict[str, dict[str, Any]]:
    return {task["id"].split("/")[-1]: task for task in env.tasks("train")}


def test_a_suite_loads_what_the_jail_can_run_and_names_the_line_of_what_it_cannot(
    suite: verihub.Environment, caplog: pytest.LogCaptureFixture
) -> None:
    assert sorted(by_name(suite)) == ["hello-file", "word-count"]
    assert suite.spec.interaction.tools == ["bash"] and dict(suite.spec.sandbox.aliases)["/app"] == "/work"
    with pytest.raises(SpecError, match=r"tests/Dockerfile line 3 \(COPY --from=ghcr.io/astral-sh/uv"):
        verihub.load_env(f"harbor:{TASKS / 'needs-pytest'}")
    word_count = by_name(suite)["word-count"]
    assert json.loads(word_count["files"]) == {
        "data/story.txt": (TASKS / "word-count/environment/data/story.txt").read_text()
    }


def task_with(tmp_path: Path, dockerfile: str, toml: str = "") -> Path:
    task = tmp_path / "task"
    shutil.copytree(TASKS / "hello-file", task)
    (task / "environment" / "Dockerfile").write_text(dockerfile)
    (task / "task.toml").write_text((task / "task.toml").read_text() + toml)
    return task


@pytest.mark.parametrize(
    ("dockerfile", "toml", "named"),
    [
        ("FROM ubuntu:24.04\nRUN apt-get update && apt-get install -y jq\nWORKDIR /app\n", "", "line 2 (RUN apt-get"),
        ("FROM node:20\nWORKDIR /app\n", "", "line 1 (FROM node:20)"),
        ("FROM python:3.12\nENV MODE=fast\nWORKDIR /app\n", "", "line 2 (ENV MODE=fast): the jail cannot do ENV"),
        ("FROM ubuntu:24.04\nWORKDIR /app\nCOPY secret.txt /etc/secret.txt\n", "", "seeds only the WORKDIR"),
        ("FROM ubuntu:24.04\nWORKDIR /app\nCOPY ../../x /app/x\n", "", "COPY ../../x"),
        ("FROM ubuntu:24.04\n", "", "sets no WORKDIR"),
        ("FROM ubuntu:24.04\nWORKDIR /usr/app\n", "", "the jail's own"),
    ],
)
def test_a_task_the_jail_cannot_stand_in_for_is_refused_with_the_line(
    tmp_path: Path, dockerfile: str, toml: str, named: str
) -> None:
    task = task_with(tmp_path, dockerfile, toml)
    (task / "environment" / "secret.txt").write_text("x")
    with pytest.raises(SpecError) as raised:
        verihub.load_env(f"harbor:{task}")
    assert named in str(raised.value), str(raised.value)


@pytest.mark.parametrize(
    ("setting", "named"),
    [('docker_image = "org/img:1"', "docker_image = 'org/img:1': a prebuilt"), ("gpus = 1", "asks for an accelerator")],
)
def test_a_prebuilt_image_or_an_accelerator_is_refused(tmp_path: Path, setting: str, named: str) -> None:
    task = task_with(tmp_path, "FROM ubuntu:24.04\nWORKDIR /app\n")
    (task / "task.toml").write_text(
        (task / "task.toml").read_text().replace("[environment]\n", f"[environment]\n{setting}\n")
    )
    with pytest.raises(SpecError, match=named):
        verihub.load_env(f"harbor:{task}")


def test_the_tasks_own_tests_grade_the_state_the_answer_leaves(suite: verihub.Environment, nsjail_path: str) -> None:
    tasks = by_name(suite)
    for task in tasks.values():
        right = suite.grade(task, bash(task["solution"]))
        assert (right.status, right.reward) == ("ok", 1.0), right
        for wrong in ("I have created the file.", bash("true")):
            assert suite.grade(task, wrong).status == "wrong"
    hello = suite.grade(tasks["hello-file"], bash("echo 'Hello, world' > hello.txt"))  # cwd is /app too
    assert (hello.status, hello.reward) == ("wrong", 0.0)
    partial = suite.grade(
        tasks["word-count"],
        bash(
            'echo \'{"the": 3, "quick": 1, "brown": 1, "fox": 1, "jumps": 1, "over": 1, "lazy": 1, "dog": 2}\' > '
            "counts.json"
        ),
    )
    assert partial.reward == pytest.approx(7 / 9) and "parsed 1" in partial.layers[-1].detail, partial


@pytest.mark.parametrize(
    "attack",
    [
        # writes the reward, then kills every process it can (the tests' shell and their host among them)
        "echo 1 > /logs/verifier/reward.txt; kill -9 -1",
        # makes the tests' own `echo 0 > reward.txt` fail, leaving a reward.txt that is no file
        "rm -f /logs/verifier/reward.txt; mkdir /logs/verifier/reward.txt; echo 1 > /logs/verifier/reward.txt/x",
        # points reward.txt at a file of its own that says 1
        "echo 1 > /tmp/mine; ln -sf /tmp/mine /logs/verifier/reward.txt; chmod a-w /tmp/mine",
        # forges the host's report on every stdout it can reach (it never learns the nonce)
        'for fd in /proc/[0-9]*/fd/1; do printf \'%s\\n\' \'{"ended": 0, "found": {"reward.txt": "1"}}\' > $fd; done'
        " 2>/dev/null",
        # rewrites the tests while they run (test.sh runs from memory)
        "printf 'echo 1 > /logs/verifier/reward.txt\\n' > /tests/test.sh; echo 41",
        # outlives the tests' time
        "echo 1 > /logs/verifier/reward.txt; sleep 1000",
    ],
)
def test_an_answer_run_by_the_tests_cannot_grant_itself_the_reward(attack: str, nsjail_path: str) -> None:
    env = verihub.load_env(f"harbor:{HOSTILE}")
    task = env.tasks("train")[0]
    script = attack.replace("'", "'\\''")
    grade = env.grade(task, bash(f"printf '%s\\n' '{script}' > answer.sh"))
    assert grade.status == "wrong" and grade.reward == 0.0, grade


def test_tests_that_write_no_reward_are_the_environments_fault(tmp_path: Path, nsjail_path: str) -> None:
    task = task_with(tmp_path, "FROM ubuntu:24.04\nWORKDIR /app\n")
    (task / "tests" / "test.sh").write_text("#!/bin/bash\npytest /tests/test_outputs.py\n")  # no pytest, no reward
    env = verihub.load_env(f"harbor:{task}")
    grade = env.grade(env.tasks("train")[0], bash("echo 'Hello, world!' > /app/hello.txt"))
    assert grade.status == "env_error" and grade.reward is None, grade
    assert (
        "wrote no reward to /logs/verifier" in grade.reason and "the task's reference faults there too" in grade.reason
    )


def test_verihub_eval_plays_harbor_tasks_with_the_bash_tool(tmp_path: Path, nsjail_path: str) -> None:
    prompts = {task["instruction"]: task for task in by_name(verihub.load_env(f"harbor:{TASKS}")).values()}

    def agent(request: dict[str, Any]) -> list[dict[str, Any]]:
        """Runs the task's solution with the bash tool, checks with ls, then says it is done."""
        task = prompts[next(m["content"] for m in request["messages"] if m["role"] == "user")]
        done = sum(1 for m in request["messages"] if m["role"] == "tool")
        if done == 0:
            return [{"content": "", "tool_calls": [{"name": "bash", "arguments": {"command": task["solution"]}}]}]
        if done == 1:
            return [{"content": "", "tool_calls": [{"name": "bash", "arguments": {"command": "pwd; ls /app"}}]}]
        return [{"content": "done"}]

    with ScriptedChatServer(agent) as model:
        result = run_eval(f"harbor:{TASKS}", f"openai:agent@{model.url}", tmp_path)
    assert result.returncode == 0, result.stderr
    table = results_table(tmp_path)
    assert sorted(table["status"]) == ["ok", "ok"] and set(table["reward"]) == {1.0}, table["reason"]


def test_verihub_validate_runs_the_red_team_suite_on_harbor_tasks(nsjail_path: str) -> None:
    found, report = validate_report(f"harbor:{TASKS}")
    assert found.returncode == 0 and report["ok"], report["failures"]
    assert report["exploits_ran"] >= 20 and report["faults_forced"] == 0 and report["max_exploit_reward"] == 0


def test_one_grpo_step_on_harbor_tasks(tiny_model: Path, tmp_path: Path, nsjail_path: str) -> None:
    from verihub.trainers import GRPOTrainer

    trainer = GRPOTrainer(
        str(tiny_model),
        {f"harbor:{TASKS}": 1},
        lora=True,
        max_steps=1,
        num_generations=4,
        per_device_train_batch_size=4,
        max_completion_length=12,
        output_dir=tmp_path / "run",
    )
    assert [tool.__name__ for tool in trainer.trl._env_tools["harbor-harbor_tasks"]] == ["bash"]
    trainer.train()
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert records[0]["step"] == 1 and records[0]["verihub/harbor-harbor_tasks/fault_rate"] == 0.0
