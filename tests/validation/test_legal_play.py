"""`verihub validate` plays legal moves: an adapted game (or any environment that declares legal plays) whose
legal play faults instead of being graded fails validation with the move and the reason, on the real textarena
games; the games the suite already validates still pass."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import textarena  # noqa: F401 - the [games] extra, which setup.sh syncs: missing it fails, never skips

import verihub
from conftest import REPO, VERIHUB, MakeEnv
from verihub.validation.play import listed_moves
from verihub.validation.validate import validate_env

CHECKERS = "textarena:Checkers-v0?size=5&players=2&opponent=random&max_turns=4"


def test_a_game_whose_random_opponent_has_no_moves_to_draw_fails_validate() -> None:
    """Checkers lists no moves, so its random opponent has none to draw: every legal move of player 0 ends in the
    opponent's fault (a fault, or, where the fault rule finds the prompt graded cleanly, the move's fault)."""
    env = verihub.load_env(CHECKERS)
    task = env.tasks("eval")[0]
    opening = env.grade(task, "[5 0 4 1]")  # a legal opening for red: never scored as a move
    assert opening.reward is None or (opening.status, opening.answer_fault is not None) == ("wrong", True)
    assert "the random opponent found no available moves listed" in opening.reason

    result = subprocess.run(
        [VERIHUB, "validate", CHECKERS, "--json"], capture_output=True, text=True, timeout=600, cwd=REPO
    )
    report = json.loads(result.stdout)
    assert result.returncode == 1 and not report["ok"], result.stderr[-2000:]
    assert report["legal_play_faults"] == 1
    assert report["faults"] == 0 and not any(o["verdict"] in ("passed", "fault") for o in report["exploits"])
    (failure,) = [line for line in report["failures"] if line.startswith("legal play")]
    assert "played against the random opponent" in failure and "no task's first observation lists any" in failure


def centre_only(observation: str) -> str:
    """An opponent that only answers player 0's centre: every other legal first move makes it fault."""
    if "placed their symbol (O) in cell 4" not in observation:
        raise RuntimeError("this opponent only answers the centre")
    return listed_moves(observation)[0]


def test_a_game_whose_listed_moves_fault_fails_validate_with_the_move() -> None:
    env = verihub.load_env("textarena:TicTacToe-v0", size=10, players=2, opponent=centre_only, max_turns=9)
    task = env.tasks("eval")[0]
    assert env.grade(task, task["prompt"]).reward == 0.0  # the prompt plays its example, the centre: no fault
    report = validate_env(env)
    assert not report.ok and report.legal_play_faults == 3  # one per task tried
    assert report.faults == 0 and not any(outcome.failed for outcome in report.exploits)  # only legal play fails
    failure = report.failures[0]
    assert (
        failure.startswith("legal play on task") and "the listed move '[0]' faulted instead of being graded" in failure
    )
    assert "4 of the 4 tried" in failure  # [0] to [3]: none the centre
    assert "this opponent only answers the centre" in failure


def test_games_that_grade_their_legal_play_still_pass() -> None:
    tictactoe = verihub.load_env("textarena:TicTacToe-v0?size=10&players=2&opponent=random&max_turns=9")
    played: list[str] = []
    episode = tictactoe.episode

    def counted(task: Any) -> Any:  # a spy: the random episodes of listed moves are played
        played.append(task["id"])
        return episode(task)

    tictactoe.episode = counted  # type: ignore[method-assign]
    report = validate_env(tictactoe, attacks=False)
    assert report.ok and report.legal_play_faults == 0, report.failures
    assert len(played) == 3
    guess = validate_env(verihub.load_env("textarena:GuessTheNumber-v0?size=10&max_turns=10"), attacks=False)
    assert guess.ok and guess.legal_play_faults == 0  # lists no moves, has no opponent: nothing to play


# Any environment may declare the plays it must grade: here one whose check raises on a draw offer.
DECLARED = """\
id: declared
version: 0.1.0
domain: test
description: A check that raises on one legal answer.
dataset: {{source: data/tasks.jsonl, split: {{train: 0.5, eval: 0.5}}}}
prompt: {{user: "What is {{question}}?"}}
verifier:
  - {{name: answer, layer: check, use: "{module}.checks:answer"}}
gold:
  reference: "{{answer}}"
  negatives: ["{{wrong}}"]
"""

CHECKS = """
def answer(completion, task):
    if completion == "draw":
        raise ValueError("no rule for a draw")
    return completion.strip() == task["answer"]
"""


def declared_env(make_env: MakeEnv, module: str) -> Path:
    return make_env(
        DECLARED.format(module=module), files={f"{module}/__init__.py": "", f"{module}/checks.py": CHECKS}, name=module
    )


def test_declared_legal_plays_are_graded(make_env: MakeEnv) -> None:
    env = verihub.load_env(declared_env(make_env, "declared_draw"))
    assert validate_env(env, attacks=False).ok  # nothing declared: nothing to play
    env.legal_plays = lambda task: ["draw", task["answer"]]  # type: ignore[attr-defined]
    report = validate_env(env, attacks=False)
    assert not report.ok and report.legal_play_faults == 3
    assert "the declared move 'draw' faulted" in report.failures[0] and "no rule for a draw" in report.failures[0]


def test_an_environment_that_cannot_list_its_legal_plays_fails_validate(make_env: MakeEnv) -> None:
    env = verihub.load_env(declared_env(make_env, "declared_raise"))

    def unlisted(task: Any) -> list[str]:
        raise RuntimeError("the board is gone")

    env.legal_plays = unlisted  # type: ignore[attr-defined]
    report = validate_env(env, attacks=False)
    assert not report.ok and report.legal_play_faults == 3
    assert report.failures[0].endswith("listing its legal moves raised RuntimeError: the board is gone")
