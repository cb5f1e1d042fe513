"""TextArena games (``pip install 'verihub[games]'``: textarena 0.7) as verihub environments.

>>> env = verihub.load_env("textarena:GuessTheNumber-v0", size=50, seed=0, max_turns=10)  # doctest: +SKIP
>>> env = verihub.load_env("textarena:TicTacToe-v0", players=2, opponent="random")  # doctest: +SKIP
>>> env = verihub.load_env("textarena:TicTacToe-v0?players=2&opponent=random")  # options in the ref: the CLI's way

A game plays as an OpenEnv remote does (:mod:`verihub.adapters.openenv`), in this process instead of over a
WebSocket, so tasks, sessions, grading and their faults follow the same rules:

- **tasks**: task ``i`` is the game started with ``seed + i`` (``size`` tasks, split 0.8/0.2 into ``train``
  and ``eval``); its prompt is the game's first observation (its rules and board). Loading checks that the
  game reproduces its start from the seed.
- **turns**: each of the model's turns is its move, as text (the game reads the move it wants, such as
  ``[5]``, from it); what the game says back (including an invalid move's warning) is the next user turn,
  or the output of the one tool, ``act``, whose argument ``message`` is the move (what the trainer calls).
  ``max_turns`` (default 20) bounds an episode; one the game has not ended by then scores 0.
- **the grade** is the game's reward for player 0 at its end, rescaled from ``reward_range`` (default
  ``[0, 1]`` for one player, ``[-1, 1]`` for more: a loss 0, a draw 0.5, a win 1). A text grade (``env.grade``,
  ``verihub validate``) plays the completion as the first move; a game that goes on after it scores 0.
- **opponents**: a game of ``players`` > 1 needs ``opponent``: ``"random"`` (a move drawn, with the task's
  seed, from those the game lists as available, like ``'[4]'``) or a function of the opponent's observation
  that returns its move.

A game that raises, or takes longer than ``timeout_s`` over one call, is a fault with its reason (never a 0);
whose fault follows verihub's one rule (a game has no gold move: the evidence is another move graded on the
task without a fault, :mod:`verihub.grading.faults`). Each episode's game is played in a worker process of its
own, where a move that holds the GIL can be killed (:mod:`verihub.adapters._local`); the opponent plays here.
A game registered outside textarena (``textarena.register``) is registered there too, so its class must be
importable by its module's name (not defined in ``__main__``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import Field

from verihub.adapters._local import (
    ACTION_SCHEMA,
    FIELD,
    LocalSession,
    Move,
    Registered,
    first_move,
    load_local,
    local_spec,
)
from verihub.adapters._openenv_wire import RemoteEnvError, RemoteSession
from verihub.adapters.openenv import OpenEnvEnvironment, Remote, episodes
from verihub.checks.base import CheckResult, check
from verihub.errors import MissingDependencyError, SpecProblem
from verihub.grading._apart import Held

__all__ = ["PREFIX", "Game", "GameSession", "load_textarena"]

PREFIX = "textarena:"
OPTIONS = ("size", "seed", "max_turns", "players", "opponent", "reward_range", "timeout_s")
DEFAULT_SIZE, DEFAULT_TURNS = 100, 20
_GAME_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,80}")
_MOVES = re.compile(r"'(\[[^'\]\n]{1,40}\])'")  # textarena lists a board game's moves as '[4]', '[e2e4]', ...
_OPPONENTS: dict[str, Callable[[str], str]] = {}  # opponent functions by name, for the spec (which holds text)


class Game(Remote):
    """Which game, and how it is played (the task source's and the check's arguments)."""

    players: int = Field(1, ge=1, le=8)
    opponent: str | None = Field(None, description="'random', or the name a function was registered under.")

    def session(self) -> RemoteSession:
        return GameSession(self)


class GameSession(LocalSession):
    """One game of player 0 against the game's other players, in this process."""

    def __init__(self, game: Game) -> None:
        super().__init__(game.url, game.timeout_s, game.reward_range)
        self.game = game
        self._board: Held | None = None  # the game, in a worker process of this episode's own
        self._seen = ""  # what player 0 has been shown so far: each turn shows what is new
        self._random = random.Random(0)

    def start(self, options: Mapping[str, Any]) -> str:
        self.stop()
        seed = options.get("seed")
        game_id = self.game.url.removeprefix(PREFIX)
        registered = Registered.of(_textarena().envs.registration.ENV_REGISTRY, game_id, "textarena", _IMPORTS)
        self._board = self.hold(Board, (registered, self.game.players, seed), imports=registered.imports)
        self._random, self._seen = random.Random(seed), ""
        self._opponents_move()
        return self._shown()

    def move(self, text: str) -> Move:
        done = self._play("step", text)
        done = done or self._opponents_move()
        shown = self._shown()
        if not done:
            return shown, None, False
        rewards = self._play("rewards")
        if not isinstance(rewards, Mapping) or 0 not in rewards:
            raise RemoteEnvError(f"{self.url} ended without a reward for player 0 ({str(rewards)[:80]})")
        return shown, rewards[0], True

    def stop(self) -> None:
        board, self._board = self._board, None
        if board is not None:
            board.close()

    def _play(self, method: str, *args: Any) -> Any:
        """The game's ``method(*args)``, in its worker, within what is left of the call's time."""
        if self._board is None:
            raise RemoteEnvError(f"{self.url}: no game is running")
        return self._board.call(method, args, self.left())

    def _opponents_move(self) -> bool:
        """The other players' moves until it is player 0's turn; whether the game ended meanwhile."""
        for _ in range(1000):
            player, observation = self._play("observation")
            if player == 0:
                return False
            if self._play("step", self._opponent(str(observation))):
                return True
        raise RemoteEnvError(f"{self.url}: player 0's turn never came")

    def _opponent(self, observation: str) -> str:
        if self.game.opponent == "random":
            listed = observation.rsplit("Available Moves:", 1)
            moves = _MOVES.findall(listed[1].split("\n", 1)[0]) if len(listed) == 2 else []
            if not moves:
                raise RemoteEnvError(f"{self.url}: the random opponent found no available moves listed")
            return self._random.choice(moves)
        if self.game.opponent in _OPPONENTS:
            return str(_OPPONENTS[self.game.opponent](observation))
        raise RemoteEnvError(f"{self.url} is a game of {self.game.players} players: give an opponent")

    def _shown(self) -> str:
        """What player 0 sees that it has not seen yet (textarena repeats the whole game so far)."""
        _, text = self._play("observation")
        new = text[len(self._seen) :] if text.startswith(self._seen) else text
        self._seen = text
        return new.strip("\n") or "(the game shows nothing new)"


class Board:
    """One game, kept in the worker process of its episode (:meth:`GameSession.hold`)."""

    def __init__(self, registered: Registered, players: int, seed: int | None) -> None:
        registered.adopt(_textarena().envs.registration.ENV_REGISTRY)
        self.env = _textarena().make(registered.name)
        self.env.reset(num_players=players, seed=seed)

    def step(self, action: str) -> bool:
        done, _ = self.env.step(action=action)
        return bool(done)

    def observation(self) -> tuple[int, str]:
        player, observation = self.env.get_observation()
        return int(player), observation if isinstance(observation, str) else str(observation)

    def rewards(self) -> Any:
        return self.env.close()[0]


_IMPORTS = ("textarena",)  # loaded in a game's worker before its time starts


def _textarena() -> Any:
    try:
        import textarena
    except ImportError:
        raise MissingDependencyError("textarena games need textarena: pip install 'verihub[games]'") from None
    return textarena


def textarena_spec(
    ref: str,
    *,
    size: int | None = None,
    seed: int | None = None,
    max_turns: int | None = None,
    players: int = 1,
    opponent: str | Callable[[str], str] | None = None,
    reward_range: tuple[float, float] | list[float] | None = None,
    timeout_s: float = 30.0,
) -> tuple[Any, Game]:
    """The :class:`~verihub.spec.loader.LoadedSpec` of ``textarena:GAME`` (see the module docstring)."""
    game_id = ref.removeprefix(PREFIX).strip()
    if callable(opponent):  # the spec holds text: a function is registered by name
        name = f"{getattr(opponent, '__module__', '')}.{getattr(opponent, '__qualname__', id(opponent))}"
        _OPPONENTS[name] = opponent
        opponent = name
    problems = []
    if not _GAME_ID.fullmatch(game_id):
        problems.append(
            SpecProblem(ref, None, "game", f"must name a textarena game, like GuessTheNumber-v0, got {game_id!r}")
        )
    elif game_id not in _textarena().envs.registration.ENV_REGISTRY:
        problems.append(SpecProblem(ref, None, "game", f"textarena has no game {game_id!r}"))
    if players > 1 and opponent is None:
        problems.append(
            SpecProblem(
                ref,
                None,
                "opponent",
                f"a game of {players} players needs one: 'random' or a function of its observation",
            )
        )
    game = Game(
        url=PREFIX + game_id,
        action_field=FIELD,
        timeout_s=timeout_s,
        action_schema=ACTION_SCHEMA,
        reward_range=tuple(reward_range or ((0.0, 1.0) if players == 1 else (-1.0, 1.0))),
        players=players,
        opponent=opponent,
    )
    slug = re.sub(r"[^a-z0-9._-]+", "-", game_id.lower()).strip("-._")
    loaded = local_spec(
        game,
        ref=ref,
        env_id="textarena-" + slug,
        version=_version(),
        domain="games",
        description=f"The textarena game {game_id}, as player 0 of {players}.",
        tags=["textarena", "game"],
        size=DEFAULT_SIZE if size is None else size,
        seed=seed or 0,
        max_turns=max_turns or DEFAULT_TURNS,
        source=f"{__name__}:tasks",
        check=f"{__name__}:game_move",
        problems=problems,
    )
    return loaded, game


def _version() -> str:
    from importlib.metadata import version

    return version("textarena")


def tasks(n: int, seed: int, **game: Any) -> list[dict[str, Any]]:
    """``n`` games, started with seeds ``seed`` .. ``seed + n - 1`` (the dataset generator)."""
    return episodes(Game(**game), n, seed, "textarena-" + game["url"].removeprefix(PREFIX))


@check(params=Game, mode="async")
async def game_move(completion: str, task: Mapping[str, Any], params: Game) -> CheckResult:
    """The game's reward for player 0 with the completion as its first move; 0 if the game goes on."""
    return await first_move(params, task, completion)


def load_textarena(
    ref: str,
    *,
    size: int | None = None,
    seed: int | None = None,
    config: Mapping[str, Any] | None = None,
    **options: Any,
) -> OpenEnvEnvironment:
    """``verihub.load_env("textarena:GAME")``: ``options`` (or ``config``) are :func:`textarena_spec`'s keywords;
    ``judge`` and ``on_missing_judge`` go to the environment."""
    return load_local(ref, textarena_spec, OPTIONS, size=size, seed=seed, config=config, options=options)
