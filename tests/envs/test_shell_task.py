"""shell-task, and the terminal-state plumbing under it: a sandboxed rollout's final work dir reaches the
verifier as ``task["workdir"]`` (eval's rollout engine and the GRPO trainer's rewards), a task's ``files``
seed the work dir, and the grade cache keys on the final state."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import verihub
from conftest import REPO
from verihub.eval.evaluate import evaluate
from verihub.generation import Sampling
from verihub.sandbox.tools import FILES, WORKDIR, SandboxTools, task_files, with_workdir
from verihub.sandbox.types import Snapshot
from verihub.testing import ScriptedChatServer
from verihub.validation.validate import validate_env

SHELL_TASK = REPO / "envs" / "shell-task"


@pytest.fixture(scope="module")
def env() -> verihub.Environment:
    return verihub.load_env(SHELL_TASK)


def all_tasks(env: verihub.Environment) -> list[dict[str, Any]]:
    return sorted((dict(task) for split in env.split_names for task in env.dataset(split)), key=lambda t: t["id"])


def solved_state(task: dict[str, Any]) -> Snapshot:
    tools = SandboxTools(files=task_files(task))
    tools.bash(task["solution"])
    return tools.session.snapshot()


# -- the plumbing ------------------------------------------------------------------------------------------


def test_task_files_reads_json_text_mappings_and_structs() -> None:
    assert task_files({}) is None and task_files({FILES: "{}"}) is None and task_files({FILES: ""}) is None
    assert task_files({FILES: '{"a.txt": "hi\\n", "d/b.txt": ""}'}) == {"a.txt": "hi\n", "d/b.txt": ""}
    # a JSON lines dataset turns objects into structs with every row's keys, absent ones as None
    assert task_files({FILES: {"a.txt": "x", "other-row.txt": None}}) == {"a.txt": "x"}
    for bad in ("[1, 2]", "{not json", '{"a.txt": 3}'):
        with pytest.raises(ValueError, match="files"):
            task_files({FILES: bad})
    task = {"id": "t1", "q": "?"}
    state = Snapshot.of({"a.txt": "x"})
    assert with_workdir(task, state) == {"id": "t1", "q": "?", WORKDIR: state} and WORKDIR not in task


def test_cache_keys_on_the_final_work_dir(env: verihub.Environment) -> None:
    task = {"id": "t1"}
    key = env.verifier._key
    assert len(key(task, "done")) == 2  # no work dir: completion and task content only
    one, two = Snapshot.of({"a.txt": "one"}), Snapshot.of({"a.txt": "two"})
    assert key(with_workdir(task, one), "done") != key(with_workdir(task, two), "done")
    assert key(with_workdir(task, one), "done") != key(task, "done")
    # the digest is of the content (names, modes, bytes), not of when the archive was made
    assert key(with_workdir(task, one), "done") == key(with_workdir(task, Snapshot.of({"a.txt": "one"})), "done")


def test_same_words_over_different_files_do_not_share_a_grade(env: verihub.Environment, nsjail_path: str) -> None:
    task = all_tasks(env)[0]
    untouched = env.grade(with_workdir(task, Snapshot.of(task_files(task))), "Done, hello.txt is in place.")
    solved = env.grade(with_workdir(task, solved_state(task)), "Done, hello.txt is in place.")
    assert (untouched.status, solved.status) == ("wrong", "ok")
    assert "hello.txt is missing" in untouched.layers[0].detail


# -- the environment ---------------------------------------------------------------------------------------


def test_shell_task_validates_with_at_least_30_tasks(env: verihub.Environment, nsjail_path: str) -> None:
    tasks = all_tasks(env)
    assert len(tasks) >= 30 and len({task["id"] for task in tasks}) == len(tasks)
    assert set(Counter(task["difficulty"] for task in tasks)) == {1, 2, 3}
    assert env.spec.interaction.kind == "multi_turn" and env.spec.interaction.tools == ["bash"]
    assert (env.id, env.version, env.domain) == ("shell-task", "1.0.0", "shell")
    report = validate_env(env)
    assert report.ok, report.failures
    assert report.reference_pass_rate == 1.0


def test_the_initial_state_fails_and_the_solved_state_passes_every_checker(
    env: verihub.Environment, nsjail_path: str
) -> None:
    """What the rollout path grades: the final work dir, whatever the last message says."""
    tasks = all_tasks(env)
    claim = "All done: every file is in place and I checked it."
    untouched = env.verifier.grade_many(
        [with_workdir(t, Snapshot.of(task_files(t))) for t in tasks], [claim] * len(tasks)
    )
    assert [grade.status for grade in untouched] == ["wrong"] * len(tasks)
    # a work dir rules out the text path: the solution's commands in the last message are not run
    ignored = env.verifier.grade_many(
        [with_workdir(t, Snapshot.of(task_files(t))) for t in tasks], [env.reference(t) for t in tasks]
    )
    assert [grade.status for grade in ignored] == ["wrong"] * len(tasks)
    solved = env.verifier.grade_many([with_workdir(t, solved_state(t)) for t in tasks[::4]], [claim] * len(tasks[::4]))
    assert [grade.status for grade in solved] == ["ok"] * len(tasks[::4])


def test_checker_cannot_be_shadowed_by_the_models_files(env: verihub.Environment, nsjail_path: str) -> None:
    task = next(t for t in all_tasks(env) if t["category"] == "csv-json")
    planted = Snapshot.of(task_files(task)).adding(
        {"json.py": "import sys\nsys.exit(0)\n", "os.py": "raise SystemExit(0)\n"}
    )
    assert env.grade(with_workdir(task, planted), "done").status == "wrong"


# -- the rollout path: eval against a scripted model over real HTTP ---------------------------------------


def _by_prompt(env: verihub.Environment) -> dict[str, dict[str, Any]]:
    return {env.render(task)[-1]["content"]: task for task in all_tasks(env)}


def test_rollout_that_does_the_work_with_bash_is_ok(env: verihub.Environment, nsjail_path: str) -> None:
    tasks = _by_prompt(env)

    def agent(request: dict[str, Any]) -> list[dict[str, Any]]:
        """Looks around, runs the solution in the sandbox, then answers without a tool call."""
        messages = request["messages"]
        assert [tool["function"]["name"] for tool in request["tools"]] == ["bash"]
        task = tasks[next(m["content"] for m in messages if m["role"] == "user")]
        done = sum(1 for m in messages if m["role"] == "tool")
        if done == 0:
            return [{"content": "", "tool_calls": [{"name": "bash", "arguments": {"command": "ls -A"}}]}]
        if done == 1:
            return [{"content": "", "tool_calls": [{"name": "bash", "arguments": {"command": task["solution"]}}]}]
        return [{"content": "done"}]

    with ScriptedChatServer(agent) as server:
        report = evaluate(env, f"openai:agent@{server.url}", n=6, k=1, split="eval", sampling=Sampling(temperature=0))
    assert len(report.rollouts) == 6 and {r.status for r in report.rollouts} == {"ok"}, [
        (r.task_id, r.status, r.reason) for r in report.rollouts
    ]
    for rollout in report.rollouts:
        assert rollout.turns == 3 and rollout.completion == "done"
        task = next(t for t in tasks.values() if t["id"] == rollout.task_id)
        listed = next(m["content"] for m in rollout.messages if m["role"] == "tool").split()
        assert sorted(listed) == sorted({name.split("/")[0] for name in task_files(task) or {}})  # seeded work dir


def test_rollout_that_only_claims_success_is_wrong(env: verihub.Environment, nsjail_path: str) -> None:
    tasks = _by_prompt(env)

    def liar(request: dict[str, Any]) -> list[dict[str, Any]]:
        """Never touches the files, but pastes the right commands into its final answer."""
        task = tasks[next(m["content"] for m in request["messages"] if m["role"] == "user")]
        return [{"content": f"done, I ran:\n```bash\n{task['solution']}\n```"}]

    with ScriptedChatServer(liar) as server:
        report = evaluate(env, f"openai:liar@{server.url}", n=6, k=1, split="eval", sampling=Sampling(temperature=0))
    assert len(report.rollouts) == 6 and {r.status for r in report.rollouts} == {"wrong"}
    assert all(r.turns == 1 and r.reward == 0.0 for r in report.rollouts)


# -- the trainer path ------------------------------------------------------------------------------------


def test_env_reward_grades_the_tool_environments_final_work_dir(env: verihub.Environment, nsjail_path: str) -> None:
    from verihub.trainers.mixture import MixedEnv
    from verihub.trainers.rewards import EnvReward, GradeLedger
    from verihub.trainers.toolenv import environment_class

    item = MixedEnv("shell-task", env, 1.0)
    tool_env = environment_class(item)
    task = next(t for t in all_tasks(env) if t["category"] == "csv-json")
    row = json.dumps(task)

    worker = tool_env()
    worker.reset(task=row)
    assert "users.csv" in worker.bash("ls")  # the task's files seed the session
    worker.bash(task["solution"])
    idle = tool_env()  # never called a tool: graded on the initial files
    idle.reset(task=row)
    sloppy = tool_env()
    sloppy.reset(task=row)
    sloppy.bash(task["partial"])

    reward = EnvReward(item, GradeLedger())
    rows = [worker, idle, sloppy]
    done = [[{"role": "assistant", "content": "done"}]] * len(rows)
    scores = asyncio.run(
        reward(
            prompts=[[]] * len(rows),
            completions=done,
            environment=["shell-task"] * len(rows),
            task=[row] * len(rows),
            difficulty=[str(task["difficulty"])] * len(rows),
            environments=rows,
        )
    )
    assert scores == [1.0, 0.0, 0.0]
    assert idle._sandbox is None  # grading the untouched state started no session of its own


@pytest.mark.slow
def test_grpo_trains_on_shell_task_and_arithmetic(tiny_model: Path, tmp_path: Path, nsjail_path: str) -> None:
    from verihub.trainers import GRPOTrainer

    trainer = GRPOTrainer(
        str(tiny_model),
        {str(SHELL_TASK): 3, "envs/arithmetic": 1},
        lora=True,
        max_steps=1,
        num_generations=4,
        per_device_train_batch_size=8,
        max_completion_length=12,
        output_dir=tmp_path / "run",
    )
    trl_trainer = trainer.trl
    assert set(trl_trainer.environment_factories) == {"shell-task", "arithmetic"}
    assert [tool.__name__ for tool in trl_trainer._env_tools["shell-task"]] == ["bash"]
    trainer.train()
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert records[0]["step"] == 1
    used = [instance for instance in trl_trainer._environment_pool["shell-task"] if instance.task]
    assert used and all(instance.task["id"].startswith("sh-") for instance in used)
    # a random tiny model scores, it does not fault: the state check ran on every shell-task rollout
    assert records[0]["verihub/shell-task/fault_rate"] == 0.0
    assert "rewards/shell-task/mean" in records[0]
