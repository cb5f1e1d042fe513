"""textarena's own games (textarena 0.7.4, unmodified) as verihub environments: seeded episodes as tasks, a
move a turn (text or the ``act`` tool), the game's reward for player 0 as the grade, a random opponent for
a two-player game, ``verihub eval`` and ``verihub validate`` on them, and the game's failures as faults."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import textarena  # noqa: F401 - the [games] extra, which setup.sh syncs: missing it fails, never skips

import verihub
from conftest import first_step, one_step_trainer, results_table, run_eval, validate_report
from verihub.errors import SpecError
from verihub.testing import ScriptedChatServer

GUESS = "textarena:GuessTheNumber-v0?size=10&max_turns=10"
TICTACTOE = "textarena:TicTacToe-v0?size=10&players=2&opponent=random&max_turns=9"


def bisect(history: list[str]) -> int:
    """The next guess of a bisection on 1..20, from the game's replies so far."""
    low, high, guess = 1, 20, None
    for text in history:
        if text.startswith("My guess"):
            guess = int(re.findall(r"\[(\d+)\]", text)[-1])
        elif guess is not None and "is higher" in text:
            low = guess + 1
        elif guess is not None and "is lower" in text:
            high = guess - 1
    return (low + high) // 2


def test_tasks_are_seeded_games_and_a_bisection_wins_every_one() -> None:
    env = verihub.load_env(GUESS)
    assert env.id == "textarena-guessthenumber-v0" and env.spec.interaction.kind == "multi_turn"
    assert (len(env.tasks("train")), len(env.tasks("eval"))) == (8, 2)
    assert [tool["function"]["name"] for tool in env.tool_schemas] == ["act"]
    for task in env.tasks("eval"):
        assert "Guess The Number" in task["prompt"] and "between 1 and 20" in task["prompt"]
        session = env.session(task)
        session.reset()
        history: list[str] = []
        while not session.done:
            move = f"My guess is [{bisect(history)}]"
            history.append(move)
            result = session.step({"content": move})
            history += [message["content"] for message in result.observation["messages"]]
        assert session.grade is not None and (session.grade.status, session.grade.reward) == ("ok", 1.0)
        assert session.turns <= 5


def test_a_lost_game_scores_the_games_own_reward_and_the_turn_limit_a_zero() -> None:
    env = verihub.load_env("textarena:GuessTheNumber-v0?size=5&max_turns=12")
    task = env.tasks("train")[0]
    target = next(n for n in range(1, 21) if env.grade(task, f"[{n}]").reward == 1.0)  # a text grade: one move
    wrong = 1 if target != 1 else 2
    session = env.session(task)
    session.reset()
    for wrong_guess in (n for n in range(1, 21) if n != target):
        if session.step({"content": f"[{wrong_guess}]"}).done:
            break
    assert session.done and session.grade is not None
    assert session.grade.status == "wrong" and 0.0 <= session.grade.reward < 1.0  # textarena's partial credit
    short = verihub.load_env("textarena:GuessTheNumber-v0?size=5&max_turns=2").session(task)
    short.reset()
    short.step({"content": f"[{wrong}]"})
    short.step({"content": f"[{wrong}]"})
    assert short.grade is not None and (short.grade.reward, short.grade.status) == (0.0, "wrong")
    assert "did not end within 2 turns" in short.grade.layers[0].detail
    one_move = env.grade(task, f"[{wrong}]")
    assert (one_move.status, one_move.reward) == ("wrong", 0.0) and "goes on" in one_move.layers[0].detail


def test_a_two_player_game_needs_an_opponent_and_plays_against_it() -> None:
    with pytest.raises(SpecError, match="opponent"):
        verihub.load_env("textarena:TicTacToe-v0?size=5&players=2")
    with pytest.raises(SpecError, match="no game 'NoSuchGame-v0'"):
        verihub.load_env("textarena:NoSuchGame-v0")
    seen: list[str] = []

    def first_move(observation: str) -> str:
        seen.append(observation)
        return re.findall(r"'(\[\d\])'", observation.rsplit("Available Moves:", 1)[-1])[0]

    for opponent in ("random", first_move):
        env = verihub.load_env("textarena:TicTacToe-v0", size=5, players=2, opponent=opponent, max_turns=9)
        session = env.session(env.tasks("train")[0])
        session.reset()
        while not session.done:
            board = session.messages[-1]["content"].rsplit("Available Moves:", 1)[-1]
            session.step({"content": re.findall(r"'(\[\d\])'", board)[-1]})  # the last free cell
        assert session.grade is not None and session.grade.reward in (0.0, 0.5, 1.0), session.grade
    assert seen and "Available Moves" in seen[0]


def test_a_game_that_raises_is_a_fault_never_a_zero() -> None:
    def broken(observation: str) -> str:
        raise RuntimeError("the opponent crashed")

    env = verihub.load_env("textarena:TicTacToe-v0", size=5, players=2, opponent=broken, max_turns=9)
    task = env.tasks("train")[0]
    session = env.session(task)
    session.reset()
    result = session.step({"content": "[4]"})
    assert result.done and result.reward is None and session.fault and "the opponent crashed" in session.fault
    grade = env.grade(task, "[4]")  # the task's prompt as the move fails the same way: the environment's fault
    assert grade.status == "env_error" and grade.reward is None and "the opponent crashed" in grade.reason


def player(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Bisects GuessTheNumber (as text); takes TicTacToe's last free cell (through the act tool)."""
    texts = [str(message.get("content") or "") for message in request["messages"]]
    if "Tic Tac Toe" in texts[0]:
        board = texts[-1].rsplit("Available Moves:", 1)[-1]
        move = re.findall(r"'(\[\d\])'", board)[-1]
        return [{"content": "", "tool_calls": [{"name": "act", "arguments": {"message": move}}]}]
    return [{"content": f"My guess is [{bisect(texts)}]"}]


def test_verihub_eval_plays_two_textarena_games(tmp_path: Path) -> None:
    with ScriptedChatServer(player) as model:
        runs = {
            name: run_eval(ref, f"openai:scripted@{model.url}", tmp_path / name, "-n", "2", "-k", "2")
            for name, ref in (("guess", GUESS), ("tictactoe", TICTACTOE))
        }
    for name, result in runs.items():
        assert result.returncode == 0, (name, result.stderr[-2000:])
    guess = results_table(tmp_path / "guess")
    assert len(guess) == 4 and set(guess["status"]) == {"ok"} and set(guess["reward"]) == {1.0}
    board = results_table(tmp_path / "tictactoe")
    assert len(board) == 4 and set(board["reward"]) <= {0.0, 0.5, 1.0} and None not in board["reward"]
    assert all(any(m["role"] == "tool" for m in json.loads(messages)) for messages in board["messages"])
    metadata = json.loads((tmp_path / "guess" / "metadata.json").read_text())
    assert metadata["environment"] == "textarena-guessthenumber-v0" and metadata["metrics"]["pass@1"] == 1.0


@pytest.mark.parametrize("ref", [GUESS, TICTACTOE])
def test_validate_runs_the_red_team_suite_on_a_game(ref: str) -> None:
    result, report = validate_report(ref)
    assert result.returncode == 0 and report["ok"], report["failures"]
    assert report["faults"] == 0 and report["faults_forced"] == 0 and report["fault_forcing_ran"] >= 20
    assert report["max_exploit_reward"] == 0.0


@pytest.mark.slow
def test_one_grpo_step_on_a_game(tiny_model: Path, tmp_path: Path) -> None:
    trainer = one_step_trainer(tiny_model, [GUESS], tmp_path / "run")
    (item,) = trainer.mix
    (act,) = trainer.trl._env_tools[item.name]
    assert act.__name__ == "act"
    trainer.train()
    record = first_step(tmp_path / "run")
    assert record["step"] == 1 and record[f"rewards/{item.name}/mean"] is not None
    assert record[f"verihub/{item.name}/fault_rate"] == 0.0
