"""GEM's own environments (gem-llm 0.1.0, unmodified, in .venv-gem: its pins conflict with the lock) as verihub
environments: seeded episodes as tasks, an action a turn, the reward of the step that ends the episode as the
grade, ``verihub eval``, ``verihub validate`` and a GRPO step on two of its games, and GEM's failures (its
bridge dying among them) as faults."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest

import verihub
from conftest import (
    REPO,
    first_step,
    one_step_trainer,
    results_table,
    run_eval,
    use_own_environment,
    validate_report,
)
from verihub.errors import SpecError
from verihub.testing import ScriptedChatServer

VENV = REPO / ".venv-gem"
GUESS = "gem:game:GuessTheNumber-v0-easy?size=10"
MASTERMIND = "gem:game:Mastermind-v0-easy?size=10"
CODES = [f"{a} {b}" for a, b in itertools.permutations(range(1, 7), 2)]  # Mastermind easy: 2 digits of 1-6


@pytest.fixture(autouse=True)
def gem_python(monkeypatch: pytest.MonkeyPatch) -> None:
    use_own_environment("gem", "VERIHUB_GEM_PYTHON", monkeypatch)


def next_action(texts: list[str]) -> str:
    """A player of both games from what they said so far: bisection for GuessTheNumber (1-10), candidate
    elimination for Mastermind."""
    if "Guess The Number" in texts[0]:
        low, high = 1, 10
        for guess, way in re.findall(r"you guessed (\d+), and the target number is (higher|lower)", "\n".join(texts)):
            low, high = (max(low, int(guess) + 1), high) if way == "higher" else (low, min(high, int(guess) - 1))
        return f"\\boxed{{{(low + high) // 2}}}"
    candidates = CODES
    for first, second, black, white in re.findall(
        r"you guessed \[(\d), (\d)\]\. This guess receives (\d) black "
        r"peg\(s\) and (\d) white",
        "\n".join(texts),
    ):
        candidates = [code for code in candidates if pegs(code, f"{first} {second}") == (int(black), int(white))]
    return f"\\boxed{{{candidates[0]}}}"


def pegs(code: str, guess: str) -> tuple[int, int]:
    black = sum(c == g for c, g in zip(code.split(), guess.split(), strict=True))
    return black, len(set(code.split()) & set(guess.split())) - black


def test_tasks_are_seeded_episodes_and_a_player_wins_both_games() -> None:
    for ref, name in ((GUESS, "Guess The Number"), (MASTERMIND, "Mastermind")):
        env = verihub.load_env(ref)
        assert env.spec.interaction.kind == "multi_turn" and (len(env.tasks("train")), len(env.tasks("eval"))) == (8, 2)
        for task in env.tasks("eval"):
            assert name in task["prompt"]
            session = env.session(task)
            session.reset()
            texts = [task["prompt"]]
            while not session.done:
                action = next_action(texts)
                result = session.step({"content": action})
                texts += [action] + [message["content"] for message in result.observation["messages"]]
            assert session.grade is not None and (session.grade.status, session.grade.reward) == ("ok", 1.0), texts


def test_the_grade_is_the_last_steps_reward_and_an_invalid_action_a_loss() -> None:
    env = verihub.load_env(MASTERMIND)
    task = env.tasks("train")[0]
    secret = next(code for code in CODES if env.grade(task, f"\\boxed{{{code}}}").reward == 1.0)  # one move wins
    wrong = next(code for code in CODES if pegs(secret, code) == (1, 0))
    shaped = env.grade(task, f"\\boxed{{{wrong}}}")  # GEM's 0.5 for a black peg is shaping: the game goes on
    assert (shaped.status, shaped.reward) == ("wrong", 0.0) and "goes on" in shaped.layers[0].detail
    session = env.session(task)
    session.reset()
    session.step({"content": "no guess at all"})  # GEM ends the game with its -0.1 penalty
    assert session.done and session.grade is not None and (session.grade.status, session.grade.reward) == ("wrong", 0.0)


def test_an_unknown_environment_is_refused_and_a_dead_bridge_is_a_fault_that_comes_back() -> None:
    from verihub.adapters.gem import bridge

    with pytest.raises(SpecError, match="GEM registers no environment 'game:NoSuchGame-v0'"):
        verihub.load_env("gem:game:NoSuchGame-v0")
    env = verihub.load_env(GUESS)
    task = env.tasks("train")[0]
    session = env.session(task)
    session.reset()
    wrong = next(n for n in range(1, 11) if env.grade(task, f"\\boxed{{{n}}}").reward == 0.0)
    session.step({"content": f"\\boxed{{{wrong}}}"})  # the episode begins at its first step; it goes on
    process = bridge(str(VENV / "bin" / "python"), 30.0)._process
    assert process is not None
    process.kill()
    process.wait()
    result = session.step({"content": f"\\boxed{{{wrong}}}"})
    assert result.done and result.reward is None and session.fault and "GEM: step raised LookupError" in session.fault
    assert {env.grade(task, f"\\boxed{{{n}}}").reward for n in range(1, 11)} == {0.0, 1.0}  # a new bridge plays


def player(request: dict[str, Any]) -> list[dict[str, Any]]:
    texts = [str(message.get("content") or "") for message in request["messages"]]
    return [{"content": next_action(texts)}]


def test_verihub_eval_plays_two_gem_games(tmp_path: Path) -> None:
    with ScriptedChatServer(player) as model:
        runs = {
            name: run_eval(ref, f"openai:scripted@{model.url}", tmp_path / name, "-n", "2")
            for name, ref in (("guess", GUESS), ("mastermind", MASTERMIND))
        }
    for name, result in runs.items():
        assert result.returncode == 0, (name, result.stderr[-2000:])
        table = results_table(tmp_path / name)
        assert len(table) == 2 and set(table["status"]) == {"ok"} and set(table["reward"]) == {1.0}, table["reason"]


@pytest.mark.parametrize("ref", [GUESS, MASTERMIND])
def test_validate_runs_the_red_team_suite_on_a_gem_game(ref: str) -> None:
    result, report = validate_report(ref)
    assert result.returncode == 0 and report["ok"], report["failures"]
    assert report["faults"] == 0 and report["faults_forced"] == 0 and report["fault_forcing_ran"] >= 20
    assert report["max_exploit_reward"] == 0.0


def test_validate_grades_the_moves_gems_own_sampler_calls_legal() -> None:
    from verihub.validation.play import legal_play_faults

    env = verihub.load_env(GUESS)
    task = env.tasks("eval")[0]
    moves = env.legal_plays(task)  # type: ignore[attr-defined]  # OpenEnvEnvironment's
    assert len(moves) == len(set(moves)) >= 2 and all(re.fullmatch(r"\\boxed\{\d+\}", move) for move in moves)
    graded: list[str] = []
    grade_many = env.verifier.grade_many

    def spied(tasks: Any, answers: list[str]) -> Any:
        graded.extend(answers)
        return grade_many(tasks, answers)

    env.verifier.grade_many = spied  # type: ignore[method-assign]
    assert legal_play_faults(env, env.tasks("eval")) == []  # GuessTheNumber grades every guess in range
    assert len(graded) >= 6 and all(move.startswith("\\boxed{") for move in graded)  # 3 tasks, 2+ guesses each


@pytest.mark.slow
def test_one_grpo_step_on_a_gem_game(tiny_model: Path, tmp_path: Path) -> None:
    trainer = one_step_trainer(tiny_model, [GUESS], tmp_path / "run")
    (item,) = trainer.mix
    trainer.train()
    record = first_step(tmp_path / "run")
    assert record["step"] == 1 and record[f"verihub/{item.name}/fault_rate"] == 0.0
