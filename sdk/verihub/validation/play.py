"""Legal play behind ``verihub validate``: an adapted game or taskset must grade the moves it allows.

An adapted environment ships no gold answer: its reference is the task's prompt sent as the move (a
placeholder), so validate's reference check shows only that the environment handles an illegal move. A game
whose every legal move faults passes that check (seen: a textarena game played against the random opponent,
which draws its move from those the game lists and finds none listed, so every legal move of player 0 ends
in the opponent's fault), and the fault rule, seeing the prompt graded without a fault, then blames every
legal move on the answer: ``wrong``, however good. So validate plays legal moves on a few tasks:

- the moves the environment declares for a task, when it declares any: ``env.legal_plays(task)`` (a hook an
  adapter may define: a taskset's own answer, a dataset row's ground truth, a game's legal moves, such as those
  GEM's ``sample_random_action`` draws), else
- the moves the game lists in the task's first observation (textarena's ``Available Moves: '[4]', '[5]'``,
  the listing its random opponent draws from), for an environment graded by its remote;

each graded as an answer (its first move), then, where those grade cleanly in a multi-turn environment with an
episode API, one random episode of listed moves to its end or its turn limit. A grade that faults
(``env_error``, ``timeout``) or that the fault rule rules the answer's fault, and an episode that faults, fail
validation with the move and the reason (one failure per task). A game against the random opponent must list
its moves: where no first observation lists any, the opponent has nothing to draw, and every legal move ends in
its fault.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from verihub.errors import describe_error
from verihub.grading.grade import Grade

if TYPE_CHECKING:
    from verihub.environment.core import Environment

__all__ = ["LegalPlays", "PlayFault", "legal_play_faults", "listed_moves"]

TASKS = 3  # tasks whose legal play is tried
MOVES = 4  # legal moves graded per task
_LISTING = "Available Moves:"
_MOVE = re.compile(r"'(\[[^'\]\n]{1,40}\])'")  # a listed move, as textarena writes it: '[4]', '[e2e4]'
_SHOWN = 80  # characters of a move kept in a message


class LegalPlays(Protocol):
    """What an environment may define to declare, per task, answers it must grade without a fault."""

    def legal_plays(self, task: Mapping[str, Any]) -> Sequence[str]: ...


@dataclass(frozen=True)
class PlayFault:
    """A legal play the environment could not grade: on which task, what was played, where the play came from
    (``declared``, ``listed``, ``random episode``, ``random opponent``) and why it failed."""

    task: str
    play: str
    source: str
    reason: str

    def message(self) -> str:
        if self.source == "random opponent" or not self.play:
            return f"legal play on task {self.task}: {self.reason}"
        what = "a random episode of listed moves" if self.source == "random episode" else f"the {self.source} move"
        return (
            f"legal play on task {self.task}: {what} {self.play[:_SHOWN]!r} faulted instead of being graded "
            f"({self.reason[:300]}); an environment that cannot grade legal play grades right answers wrong"
        )


def listed_moves(observation: str) -> list[str]:
    """The moves a game lists as available in ``observation`` (its last listing), in order."""
    listed = observation.rsplit(_LISTING, 1)
    return _MOVE.findall(listed[1].split("\n", 1)[0]) if len(listed) == 2 else []


def legal_play_faults(env: Environment, tasks: Iterable[Mapping[str, Any]]) -> list[PlayFault]:
    """The legal plays of a few of ``tasks`` that ``env`` faults on, and, for a game against the random
    opponent, a game that lists no moves to draw from (see the module docstring)."""
    declare = getattr(env, "legal_plays", None)
    listing = env.graded_remotely
    if declare is None and not listing:
        return []
    faults: list[PlayFault] = []
    listed_any = False
    chosen = [task for task, _ in zip(tasks, range(TASKS), strict=False)]
    for index, task in enumerate(chosen):
        task_id = str(task.get("id"))
        try:
            declared = list(declare(task)) if declare is not None else []
        except Exception as error:  # noqa: BLE001 - an environment that cannot say its legal moves: reported
            faults.append(PlayFault(task_id, "", "declared", f"listing its legal moves raised {describe_error(error)}"))
            continue
        source, plays = ("declared", declared) if declared else ("listed", listed_moves(str(task.get("prompt", ""))))
        listed_any = listed_any or source == "listed" and bool(plays)
        plays = plays[:MOVES]
        grades = env.verifier.grade_many([task] * len(plays), plays) if plays else []
        faulted = [(play, why) for play, grade in zip(plays, grades, strict=True) if (why := _fault(grade))]
        if faulted:
            play, why = faulted[0]
            faults.append(PlayFault(task_id, play, source, f"{len(faulted)} of the {len(plays)} tried; {why}"))
        elif source == "listed" and plays and env.spec.interaction.kind == "multi_turn" and hasattr(env, "episode"):
            fault = _random_episode(env, task, random.Random(index))
            if fault is not None:
                faults.append(fault)
    opponent = getattr(getattr(env, "remote", None), "opponent", None)
    if opponent == "random" and chosen and not listed_any:
        faults.append(
            PlayFault(
                str(chosen[0].get("id")),
                "",
                "random opponent",
                "the game is played against the random opponent, which draws its move from those the game lists "
                f"({_LISTING} '[4]', ...), and no task's first observation lists any: every legal move hands the "
                "turn to an opponent with nothing to draw, a fault (give a function as the opponent, or play a "
                "game that lists its moves)",
            )
        )
    return faults


def _fault(grade: Grade) -> str:
    """Why ``grade`` is no grade of a legal move: a fault, or a fault the rule blamed on the move ('' if neither)."""
    if grade.reward is None:
        return f"{grade.status}: {grade.reason}"
    blamed = grade.answer_fault
    if blamed is not None:
        return f"the fault rule ruled it the answer's: layer {blamed.name!r}: {blamed.detail}"
    return ""


def _random_episode(env: Environment, task: Mapping[str, Any], draw: random.Random) -> PlayFault | None:
    """One episode of ``task``, each move drawn from those the game lists, to its end or the turn limit."""
    played: list[str] = []
    episode: Any = env.episode(task)  # type: ignore[attr-defined]  # checked by the caller: an episode API
    try:
        observation = episode.reset()
        for _ in range(env.spec.interaction.max_turns):
            moves = listed_moves(observation)
            if not moves:
                return None  # nothing listed to draw from: the first moves were graded above
            played.append(draw.choice(moves))
            observation, _, done, info = episode.step(played[-1])
            if info.get("status") == "env_error":
                return PlayFault(str(task.get("id")), " ".join(played), "random episode", str(info.get("reason")))
            if done:
                return None
    except Exception as error:  # noqa: BLE001 - an episode API that raises is a fault of the play, reported
        return PlayFault(str(task.get("id")), " ".join(played), "random episode", describe_error(error, 300))
    finally:
        episode.close()
    return None
