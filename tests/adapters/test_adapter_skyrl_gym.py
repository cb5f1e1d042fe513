"""skyrl-gym's own environments (skyrl-gym 0.4.0, unmodified) as verihub environments, on tasks in SkyRL's
dataset format: gsm8k (one step) and gsm8k_multi_turn (turn-level shaping; the last step's reward is the
grade), through the API, ``verihub eval`` and ``verihub validate``, and the environment's failures as faults."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import skyrl_gym  # noqa: F401 - the [games] extra, which setup.sh syncs: missing it fails, never skips

import verihub
from conftest import first_step, one_step_trainer, results_table, run_eval, validate_report
from verihub.adapters.openenv import RemoteEnvError
from verihub.errors import SpecError
from verihub.testing import ScriptedChatServer

PROBLEMS = [(a, b) for a in range(2, 12) for b in (3, 7)][:12]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("skyrl") / "arithmetic.jsonl"
    rows = [
        {
            "data_source": "verihub-test",
            "env_class": "gsm8k",
            "prompt": [
                {"role": "system", "content": "Think, then end with '#### ANSWER'."},
                {"role": "user", "content": f"What is {a} times {b}?"},
            ],
            "reward_spec": {"method": "rule", "ground_truth": str(a * b)},
            "extra_info": {"index": i},
        }
        for i, (a, b) in enumerate(PROBLEMS)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def product(prompt: str) -> int:
    a, b = map(int, re.findall(r"What is (\d+) times (\d+)", prompt)[0])
    return a * b


def test_gsm8k_grades_with_its_own_scorer(data: Path) -> None:
    env = verihub.load_env("skyrl-gym:gsm8k", data=str(data))
    assert (env.id, env.spec.interaction.kind) == ("skyrl-gym-gsm8k", "single_turn")
    assert [len(env.tasks(split)) for split in env.split_names] == [10, 2]
    task = env.tasks("eval")[0]
    assert task["prompt"].startswith("Think, then end with") and "times" in task["prompt"]
    right = env.grade(task, f"So it is #### {product(task['prompt'])}")
    wrong = env.grade(task, f"#### {product(task['prompt']) + 1}")
    assert (right.status, right.reward) == ("ok", 1.0) and (wrong.status, wrong.reward) == ("wrong", 0.0)


def test_gsm8k_multi_turn_grades_the_last_step_and_bounds_the_turns(data: Path) -> None:
    env = verihub.load_env(f"skyrl-gym:gsm8k_multi_turn?data={data}&max_turns=3")
    assert env.spec.interaction.max_turns == 3 and [t["function"]["name"] for t in env.tool_schemas] == ["act"]
    task = env.tasks("train")[0]
    session = env.session(task)
    session.reset()
    first = session.step({"content": "Let me think: #### 1"})  # well formed, wrong: the env's shaping, not a grade
    assert (first.done, first.reward) == (False, None) and "step-by-step" in first.observation["messages"][0]["content"]
    last = session.step({"content": f"#### {product(task['prompt'])}"})
    assert last.done and session.grade is not None and (session.grade.status, session.grade.reward) == ("ok", 1.0)
    stubborn = env.session(task)
    stubborn.reset()
    for _ in range(3):
        stubborn.step({"content": "#### 1"})
    assert stubborn.done and stubborn.grade is not None and stubborn.grade.status == "wrong"
    assert stubborn.grade.reward is not None and stubborn.grade.reward < 0.1


def test_bad_options_and_a_failing_environment_are_clear_errors(data: Path, tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="data=PATH"):
        verihub.load_env("skyrl-gym:gsm8k")
    with pytest.raises(SpecError, match="no environment 'nope'"):
        verihub.load_env("skyrl-gym:nope", data=str(data))
    with pytest.raises(TypeError, match="no players"):
        verihub.load_env("skyrl-gym:gsm8k", data=str(data), players=2)
    broken = tmp_path / "broken.jsonl"  # rows without reward_spec: gsm8k's own assertion, when an episode starts
    broken.write_text("".join(json.dumps({"prompt": f"What is {i} times 2?"}) + "\n" for i in range(6)))
    with pytest.raises(RemoteEnvError, match="raised during reset: AssertionError: reward_spec field is required"):
        verihub.load_env("skyrl-gym:gsm8k", data=str(broken))


def solver(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Answers right on the second turn of a multi-turn episode, at once in a single-turn one."""
    texts = [str(message.get("content") or "") for message in request["messages"]]
    turn = sum(message["role"] == "assistant" for message in request["messages"])
    if request.get("tools") and turn == 0:
        return [{"content": "", "tool_calls": [{"name": "act", "arguments": {"message": "Thinking. #### 0"}}]}]
    return [{"content": f"#### {product(next(t for t in texts if 'times' in t))}"}]


def test_verihub_eval_and_validate_on_two_skyrl_gym_environments(data: Path, tmp_path: Path) -> None:
    refs = {"single": f"skyrl-gym:gsm8k?data={data}", "multi": f"skyrl-gym:gsm8k_multi_turn?data={data}&max_turns=3"}
    with ScriptedChatServer(solver) as model:
        for name, ref in refs.items():
            result = run_eval(ref, f"openai:scripted@{model.url}", tmp_path / name, "-n", "2")
            assert result.returncode == 0, (name, result.stderr[-2000:])
            table = results_table(tmp_path / name)
            assert len(table) == 2 and set(table["status"]) == {"ok"} and set(table["reward"]) == {1.0}, table["reason"]
            assert set(table["turns"]) == ({1} if name == "single" else {2})
    for ref in refs.values():
        checked, report = validate_report(ref)
        assert checked.returncode == 0 and report["ok"], report["failures"]
        assert report["faults"] == 0 and report["faults_forced"] == 0 and report["max_exploit_reward"] == 0.0


@pytest.mark.slow
def test_one_grpo_step_on_both(data: Path, tiny_model: Path, tmp_path: Path) -> None:
    trainer = one_step_trainer(
        tiny_model,
        {f"skyrl-gym:gsm8k?data={data}": 1.0, f"skyrl-gym:gsm8k_multi_turn?data={data}&max_turns=3": 1.0},
        tmp_path / "run",
    )
    trainer.train()
    record = first_step(tmp_path / "run")
    assert record["step"] == 1
    for item in trainer.mix:
        assert record[f"verihub/{item.name}/faults"] == 0  # the group drawn from each (one of them, at one step)
