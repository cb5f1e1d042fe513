"""Multi-turn legacy verifiers environments (a ``vf.MultiTurnEnv``) played turn by turn through verihub's sessions:
the environment's own rollout on the far side, each move the assistant message, ``env_response`` the next
observation, the rollout's end the episode's, the rubric scoring its final state. vf_legacy/vf_legacy_guess.py is
a guessing game written for both of verifiers' turn loops: stop conditions (0.1.8 and later, typed messages
from 0.1.11) and ``is_completed(messages, state)`` (0.1.7 and before)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import verihub
from conftest import first_step, one_step_trainer, results_table, run_eval, use_own_environment
from verihub.adapters._verifiers_legacy import LegacyBridge
from verihub.testing import ScriptedChatServer

HERE = Path(__file__).parent / "vf_legacy"
GUESS = f"verifiers:vf_legacy_guess?paths=[{HERE}]"


@pytest.fixture(autouse=True)
def closed_bridges() -> Iterator[None]:
    yield
    for bridge in list(LegacyBridge._open.values()):
        bridge.close()


def legacy(monkeypatch: pytest.MonkeyPatch, name: str = "verifiers-legacy") -> None:
    use_own_environment(name, "VERIHUB_VERIFIERS_PYTHON", monkeypatch)


def bisect(texts: list[str]) -> str:
    """The next guess of a player halving 1-16 by the hints so far (each hint after the guess it answers)."""
    low, high = 1, 16
    for guess, hint in re.findall(r"^(\d+)\n(higher|lower)$", "\n".join(texts), re.MULTILINE):
        low, high = (int(guess) + 1, high) if hint == "higher" else (low, int(guess) - 1)
    return str((low + high) // 2)


def play(env: Any, task: dict[str, Any], player: Any) -> Any:
    session = env.session(task)
    session.reset()
    texts: list[str] = []
    while not session.done:
        texts.append(player(texts))
        result = session.step({"content": texts[-1]})
        texts += [str(message["content"]) for message in result.observation.get("messages") or []]
    return session


@pytest.mark.parametrize("interpreter", ["verifiers-legacy", "verifiers-legacy-0.1.9", "verifiers-legacy-0.1.5"])
def test_a_right_play_is_ok_and_a_wrong_one_wrong(monkeypatch: pytest.MonkeyPatch, interpreter: str) -> None:
    legacy(monkeypatch, interpreter)
    env = verihub.load_env(GUESS)
    assert env.spec.interaction.kind == "multi_turn" and env.spec.interaction.max_turns == 6
    task = env.tasks("train")[0]
    assert task["prompt"].startswith("Guess the number, from 1 to 16.") and task["prompt"].endswith("a number.")
    right = play(env, task, bisect)
    assert right.grade is not None and (right.grade.status, right.grade.reward) == ("ok", 1.0)
    assert right.turns <= 4
    wrong = play(env, task, lambda texts: "0")  # never the number: the environment's max_turns ends it
    assert wrong.grade is not None and (wrong.grade.status, wrong.grade.reward) == ("wrong", 0.0)
    assert wrong.turns == 6
    empty = env.grade(task, "")  # 0.1.8+ end the rollout on a vf.ModelError: the reply's, never a fault
    assert (empty.status, empty.reward) == ("wrong", 0.0)


@pytest.mark.parametrize("interpreter", ["verifiers-legacy", "verifiers-legacy-0.1.5"])
def test_a_raising_env_response_or_rubric_function_is_a_fault_never_a_zero(
    monkeypatch: pytest.MonkeyPatch, interpreter: str
) -> None:
    legacy(monkeypatch, interpreter)
    for fault, said in (("env_response", "the hint service is down"), ("rubric", "broken raised KeyError")):
        env = verihub.load_env(GUESS, config={"fault": fault})
        session = play(env, env.tasks("train")[0], bisect)
        assert session.done and session.grade is None and session.fault and said in session.fault


def test_a_tool_env_and_one_that_needs_a_remote_service_are_refused_at_load(monkeypatch: pytest.MonkeyPatch) -> None:
    legacy(monkeypatch)
    with pytest.raises(verihub.errors.VerihubError, match=r"ToolEnv .*does not yet offer its tools"):
        verihub.load_env(GUESS, config={"fault": "tools"})
    with pytest.raises(verihub.errors.VerihubError, match=r"SandboxEnv, whose episodes need a Prime sandbox"):
        verihub.load_env(GUESS, config={"fault": "sandbox"})


def test_verihub_eval_plays_it_and_a_raising_env_response_is_env_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    legacy(monkeypatch)

    def player(request: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"content": bisect([str(m.get("content") or "") for m in request["messages"][1:]])}]

    with ScriptedChatServer(player) as model:
        runs = {
            out: run_eval(ref, f"openai:scripted@{model.url}", tmp_path / out, "-n", "2")
            for out, ref in (("right", GUESS), ("fault", GUESS + "&config={fault: env_response}"))
        }
    for result in runs.values():
        assert result.returncode == 0, result.stderr[-2000:]
    right, fault = results_table(tmp_path / "right"), results_table(tmp_path / "fault")
    assert len(right) == 2 and set(right["status"]) == {"ok"} and set(right["reward"]) == {1.0}, right["reason"]
    assert set(fault["status"]) == {"env_error"} and set(fault["reward"]) == {None}
    assert all("the hint service is down" in reason for reason in fault["reason"])


@pytest.mark.slow
def test_one_grpo_step(tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    legacy(monkeypatch)
    trainer = one_step_trainer(tiny_model, [GUESS], tmp_path / "run")
    (item,) = trainer.mix
    trainer.train()
    record = first_step(tmp_path / "run")
    assert record["step"] == 1 and record[f"verihub/{item.name}/faults"] == 0
