"""`verihub serve` serving adapted environments, as a user serves what they load by name: a GEM game (gem-llm in
.venv-gem), legacy verifiers environments (verifiers 0.3.1 in .venv-verifiers-legacy), single-turn
(sophistry-bench-sprint, unmodified from PyPI) and multi-turn (tests/adapters/vf_legacy/vf_legacy_guess.py), and
NeMo-Gym resources servers (nemo-gym 0.7.0 in .venv-nemo-gym) on the example rows it ships, one with a tool. One
real server on loopback holds them all: batch grades equal the in-process ones, and OpenEnv's unmodified
client plays both games over the server's websocket, turn by turn, to the grade the game gives."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from openenv import GenericEnvClient

import verihub
from conftest import REPO, start_serve, stop_serve, use_own_environment

GEM_GUESS = "gem:game:GuessTheNumber-v0-easy?size=10"
VF_GUESS = f"verifiers:vf_legacy_guess?paths=[{REPO / 'tests' / 'adapters' / 'vf_legacy'}]"
SOPHISTRY = "verifiers:sophistry_bench_sprint"
NEMO_ROWS = REPO / ".venv-nemo-gym/lib/python3.13/site-packages/resources_servers/equivalence_rule/data/example.jsonl"
NEMO = f"nemo-gym:equivalence_rule?data={NEMO_ROWS}&reference='{{expected_answer}}'"
NEMO_TOOLS = (
    f"nemo-gym:example_single_tool_call?data={NEMO_ROWS.parents[2] / 'example_single_tool_call/data/example.jsonl'}"
)
REFS = (GEM_GUESS, VF_GUESS, SOPHISTRY, NEMO, NEMO_TOOLS)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, dict[str, verihub.Environment]]]:
    with pytest.MonkeyPatch.context() as monkeypatch:  # the server inherits the interpreters' variables
        use_own_environment("gem", "VERIHUB_GEM_PYTHON", monkeypatch)
        use_own_environment("verifiers-legacy", "VERIHUB_VERIFIERS_PYTHON", monkeypatch)
        use_own_environment("nemo-gym", "VERIHUB_NEMO_GYM_PYTHON", monkeypatch)
        envs = {ref: verihub.load_env(ref) for ref in REFS}
        process, url = start_serve(*REFS)
        try:
            yield url, envs
        finally:
            stop_serve(process)


def task_of(env: verihub.Environment) -> dict[str, Any]:
    return env.tasks(env.split_names[-1])[0]


def gem_bisect(texts: list[str]) -> str:
    """GEM's GuessTheNumber (1-10): halve by its hints ('the target number is lower than 5')."""
    low, high = 1, 10
    for direction, guess in re.findall(r"target number is (higher|lower) than (\d+)", "\n".join(texts)):
        low, high = (int(guess) + 1, high) if direction == "higher" else (low, int(guess) - 1)
    return f"\\boxed{{{(low + high) // 2}}}"


def vf_bisect(texts: list[str]) -> str:
    """The legacy guessing game (1-16): halve by its hints, each a line after the guess it answers."""
    low, high = 1, 16
    for guess, hint in re.findall(r"^(\d+)\n(higher|lower)$", "\n".join(texts), re.MULTILINE):
        low, high = (int(guess) + 1, high) if hint == "higher" else (low, int(guess) - 1)
    return str((low + high) // 2)


def play(url: str, env: verihub.Environment, player: Callable[[list[str]], str]) -> tuple[Any, int]:
    """One episode of ``env``'s first task on the server, by OpenEnv's client: the last step's result, turns."""
    texts: list[str] = []
    with GenericEnvClient(base_url=url, message_timeout_s=120).sync() as client:
        result = client.reset(env=env.id, task_id=task_of(env)["id"])
        texts += [str(message["content"]) for message in result.observation["messages"]]
        for turn in range(1, 12):
            texts.append(player(texts))
            result = client.step({"content": texts[-1]})
            texts += [str(message["content"]) for message in result.observation.get("messages") or []]
            if result.done:
                return result, turn
    raise AssertionError(f"{env.id}: no end in 11 turns: {texts[-4:]}")


def test_batch_grades_of_adapted_environments_are_the_in_process_ones(
    served: tuple[str, dict[str, verihub.Environment]],
) -> None:
    url, envs = served
    answers = {
        GEM_GUESS: ["\\boxed{5}", "\\boxed{99}", "no guess at all"],
        VF_GUESS: ["8", "0", ""],
        SOPHISTRY: ["I claim nothing.", "The answer is 42."],
        NEMO: [envs[NEMO].reference(task_of(envs[NEMO])), "Not the text at all."],
    }
    items, expected = [], []
    for ref, completions in answers.items():
        env, task = envs[ref], task_of(envs[ref])
        for completion in completions:
            items.append({"env": env.id, "task_id": task["id"], "completion": completion})
            grade = env.grade(task, completion)
            expected.append((str(grade.status), grade.reward))
    response = httpx.post(f"{url}/grade", json={"items": items}, timeout=300)
    assert response.status_code == 200, response.text[:2000]
    assert [(grade["status"], grade["reward"]) for grade in response.json()["grades"]] == expected
    assert all(status in ("ok", "wrong") for status, _ in expected)  # graded, none a fault


def test_openenvs_client_plays_the_gem_and_the_legacy_verifiers_games_over_the_socket(
    served: tuple[str, dict[str, verihub.Environment]],
) -> None:
    url, envs = served
    won, turns = play(url, envs[GEM_GUESS], gem_bisect)
    assert (won.reward, won.metadata["status"]) == (1.0, "ok") and turns <= 4
    won, turns = play(url, envs[VF_GUESS], vf_bisect)
    assert (won.reward, won.metadata["status"]) == (1.0, "ok") and turns <= 4
    lost, turns = play(url, envs[VF_GUESS], lambda texts: "0")  # never the number: the game's max_turns ends it
    assert (lost.reward, lost.metadata["status"], turns) == (0.0, "wrong", 6)


def test_openenvs_client_plays_a_nemo_gym_row_with_its_tool(served: tuple[str, dict[str, verihub.Environment]]) -> None:
    url, envs = served
    env = envs[NEMO_TOOLS]
    weather = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "SF"}'}}
    with GenericEnvClient(base_url=url, message_timeout_s=120).sync() as client:
        first = client.reset(env=env.id, task_id=task_of(env)["id"])
        assert [tool["function"]["name"] for tool in first.observation["tools"]] == ["get_weather"]
        called = client.step({"content": "", "tool_calls": [weather]})
        assert "The weather in SF is cold." in called.observation["messages"][0]["content"] and not called.done
        answered = client.step({"content": "It is cold."})
    assert (answered.reward, answered.done, answered.metadata["status"]) == (1.0, True, "ok")
