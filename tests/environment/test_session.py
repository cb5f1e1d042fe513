"""The session API: one episode of an environment on one task, single- and multi-turn, sync and async."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import verihub
from conftest import REPO
from verihub.environment.session import MAX_TOOL_CALLS, SessionError

SHELL_SPEC = """\
id: files
version: 0.1.0
domain: shell
description: Make answer.txt hold the answer.
dataset: {source: data/tasks.jsonl, split: {train: 0.5, eval: 0.5}}
prompt:
  user: "Write {answer} to answer.txt."
interaction: {kind: multi_turn, max_turns: 3, tools: [bash]}
sandbox: {wall_s: 5, memory_mb: 256}
verifier:
  - {name: answered, layer: check, use: "files_check:answered"}
gold:
  reference: "done"
  negatives: ["nothing"]
"""

CHECK = """\
from verihub.sandbox.tools import WORKDIR

def answered(completion, task):
    files = task[WORKDIR].files() if WORKDIR in task else {}
    return files.get("answer.txt", b"").strip() == task["answer"].encode()
"""


def bash(command: str, call_id: str = "c1") -> dict[str, Any]:
    """An assistant turn with one bash call, in the OpenAI form a backend returns."""
    return {
        "content": "",
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": command})},
            }
        ],
    }


@pytest.fixture
def sums() -> verihub.Environment:
    return verihub.load_env(REPO / "envs" / "sums")


@pytest.fixture
def files_env(make_env: Any, monkeypatch: pytest.MonkeyPatch) -> verihub.Environment:
    rows = [{"id": f"f{i}", "answer": str(i), "files": json.dumps({"seed.txt": "x"})} for i in range(5)]
    rows.append({"id": "broken", "answer": "0", "files": "{not json"})
    root = make_env(SHELL_SPEC, rows=rows, files={"files_check.py": CHECK}, name="files")
    monkeypatch.syspath_prepend(str(root))
    return verihub.load_env(root)


def task_of(env: verihub.Environment, task_id: str) -> dict[str, Any]:
    return next(row for split in env.split_names for row in env.dataset(split) if row["id"] == task_id)


def test_a_single_turn_session_is_one_graded_step(sums: verihub.Environment) -> None:
    task = sums.dataset("eval")[0]
    session = sums.session(task)
    observation = session.reset()
    assert observation["messages"] == sums.render(task) and observation["tools"] == []
    observation, reward, done, info = session.step(sums.reference(task))
    assert (reward, done, info["status"]) == (1.0, True, "ok")
    assert [layer["status"] for layer in info["layers"]] == ["passed", "passed"]
    with pytest.raises(SessionError, match="session is over"):
        session.step("\\boxed{0}")
    session.reset()  # a new episode on the same task
    _, reward, done, info = session.step({"role": "assistant", "content": sums.negatives(task)[0]})
    assert (reward, done, info["status"]) == (0.0, True, "wrong")
    assert session.state()["step_count"] == 1 and session.state()["messages"][-1]["role"] == "assistant"


def test_async_steps_grade_the_same(sums: verihub.Environment) -> None:
    task = sums.dataset("eval")[1]

    async def episode(answer: str) -> tuple[float | None, bool]:
        session = sums.session(task)
        await session.areset()
        result = await session.astep(answer)
        return result.reward, result.done

    assert asyncio.run(episode(sums.reference(task))) == (1.0, True)
    assert asyncio.run(episode("no box")) == (0.0, True)


def test_malformed_actions_are_refused_not_graded(sums: verihub.Environment) -> None:
    session = sums.session(sums.dataset("eval")[0])
    session.reset()
    for action in (42, {"content": ["x"]}, None):
        with pytest.raises(SessionError):
            session.step(action)
    assert not session.done  # a refused action is no turn


@pytest.mark.nsjail
def test_a_tool_session_steps_through_the_sandbox_and_grades_the_final_state(
    files_env: verihub.Environment, nsjail_path: str
) -> None:
    task = task_of(files_env, "f2")
    session = files_env.session(task)
    observation = session.reset()
    assert [tool["function"]["name"] for tool in observation["tools"]] == ["bash"]
    observation, reward, done, _ = session.step(bash("ls; id -u; echo 2 > answer.txt"))
    assert (reward, done) == (None, False)
    assert observation["messages"][0]["content"].split() == ["seed.txt", "65534"]  # seeded, and in the jail
    _, reward, done, info = session.step("done")
    assert (reward, done, info["status"], info["turns"]) == (1.0, True, "ok", 2)

    lazy = files_env.session(task)  # claims the work without doing it: graded on the files, not the words
    lazy.reset()
    assert lazy.step("I wrote 2 to answer.txt").reward == 0.0
    assert lazy.tools is None  # never called a tool: never started a jail


@pytest.mark.nsjail
def test_the_last_turn_allowed_ends_the_session_and_grades_it(files_env: verihub.Environment, nsjail_path: str) -> None:
    session = files_env.session(task_of(files_env, "f1"))
    session.reset()
    assert not session.step(bash("echo 1 > answer.txt")).done
    assert not session.step(bash("true")).done
    observation, reward, done, info = session.step(bash("cat answer.txt"))  # turn 3 of 3: tools run, then graded
    assert observation["messages"][0]["content"] == "1\n"
    assert (reward, done, info["turns"]) == (1.0, True, 3)


@pytest.mark.nsjail
def test_the_models_tool_mistakes_go_back_to_it(files_env: verihub.Environment, nsjail_path: str) -> None:
    session = files_env.session(task_of(files_env, "f1"))
    session.reset()
    calls = [
        {"id": "a", "function": {"name": "rm_rf", "arguments": "{}"}},
        {"id": "b", "function": {"name": "bash", "arguments": "not json"}},
        {"id": "c", "name": "bash", "arguments": {"cmd": "ls"}},
    ]  # the flat form, a wrong argument name
    observation, reward, done, _ = session.step({"content": "", "tool_calls": calls})
    shown = [message["content"] for message in observation["messages"]]
    assert [message["tool_call_id"] for message in observation["messages"]] == ["a", "b", "c"]
    assert "no tool named 'rm_rf'" in shown[0] and "must be a JSON object" in shown[1]
    assert shown[2].startswith("error: bad arguments for bash")
    assert (reward, done, session.fault) == (None, False, None)  # mistakes, not faults


@pytest.mark.nsjail
def test_one_turn_cannot_fan_out_past_the_tool_call_limit(files_env: verihub.Environment, nsjail_path: str) -> None:
    session = files_env.session(task_of(files_env, "f1"))
    session.reset()
    many = [bash(f"echo {n} >> log", f"c{n}")["tool_calls"][0] for n in range(MAX_TOOL_CALLS + 4)]
    observation, _, _, _ = session.step({"content": "", "tool_calls": many})
    assert len(observation["messages"]) == MAX_TOOL_CALLS + 4
    assert all("did not run" in m["content"] for m in observation["messages"][MAX_TOOL_CALLS:])
    assert session.workdir.files()["log"].split() == [str(n).encode() for n in range(MAX_TOOL_CALLS)]


def test_the_trainers_tool_calls_keep_the_episodes_budget(files_env: verihub.Environment, nsjail_path: str) -> None:
    # TRL calls the tools of an environment class one by one, never through step(): the cap holds there too
    from verihub.trainers.mixture import MixedEnv
    from verihub.trainers.toolenv import environment_class

    rollout = environment_class(MixedEnv("files", files_env, 1.0))()
    rollout.reset(task=json.dumps(task_of(files_env, "f1")))
    budget = MAX_TOOL_CALLS * files_env.spec.interaction.max_turns
    outputs = [rollout.bash(f"echo {n} >> log") for n in range(budget + 2)]
    assert all("did not run" in output for output in outputs[budget:])
    assert rollout.workdir.files()["log"].split() == [str(n).encode() for n in range(budget)]


def test_faults_end_the_session_with_no_reward(files_env: verihub.Environment) -> None:
    broken = files_env.session(task_of(files_env, "broken"))  # the task's files are not JSON
    broken.reset()
    assert broken.done and broken.info()["status"] == "env_error"
    assert "cannot seed the work dir" in broken.info()["reason"]
    assert "will not be scored" in broken.call_tool("bash", {"command": "ls"})

    from verihub.sandbox.nsjail import NsjailSandbox
    from verihub.sandbox.tools import SandboxTools

    failing = files_env.session(task_of(files_env, "f1"))
    failing.reset()
    failing.tools = SandboxTools(sandbox=NsjailSandbox("/bin/false"))  # a jail that never starts
    observation, reward, done, info = failing.step(bash("echo 1 > answer.txt"))
    assert "this rollout will not be scored" in observation["messages"][0]["content"]
    assert (reward, done, info["status"]) == (None, True, "env_error") and info["reason"].startswith("tool failed")


def test_no_sandbox_here_is_a_fault_not_a_crash(
    files_env: verihub.Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verihub.errors import SandboxUnavailable

    def unavailable() -> None:
        raise SandboxUnavailable("nsjail cannot run here")

    monkeypatch.setattr("verihub.sandbox.session.default_sandbox", unavailable)
    session = files_env.session(task_of(files_env, "f1"))
    session.reset()
    _, reward, done, info = session.step(bash("echo 1 > answer.txt"))
    assert (reward, done, info["status"]) == (None, True, "env_error") and "nsjail cannot run here" in info["reason"]


def test_a_verifier_that_raises_is_a_fault_not_a_zero(files_env: verihub.Environment) -> None:
    task = {k: v for k, v in task_of(files_env, "f1").items() if k != "answer"}  # the check reads task["answer"]
    session = files_env.session(task)
    session.messages = [{"role": "user", "content": "go"}]  # reset() would render the prompt from 'answer'
    _, reward, done, info = session.step("done")
    assert (reward, done, info["status"]) == (None, True, "env_error")
