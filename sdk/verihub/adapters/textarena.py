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
whose fault follows verihub's one rule (the task's prompt played as the move is the evidence). Games run one
call at a time in a process (they draw from Python's global random generator).
"""

from __future__ import annotations

import asyncio
import random
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import Field

from verihub.adapters._openenv_wire import RemoteEnvError, RemoteSession
from verihub.adapters.openenv import SPLIT, OpenEnvEnvironment, Remote, episodes, first_step, ref_options
from verihub.checks.base import CheckResult, check
from verihub.errors import MissingDependencyError, SpecError, SpecProblem, describe_error

__all__ = ["PREFIX", "Game", "GameSession", "load_textarena"]

PREFIX = "textarena:"
OPTIONS = ("size", "seed", "max_turns", "players", "opponent", "reward_range", "timeout_s")
DEFAULT_SIZE, DEFAULT_TURNS, MIN_SIZE = 100, 20, 5
_FIELD = "message"
_ACTION = {"type": "object", "properties": {_FIELD: {"type": "string", "description": "Your move, as the game asks "
                                                     "for it (for example [5])."}}, "required": [_FIELD]}
_GAME_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,80}")
_MOVES = re.compile(r"'(\[[^'\]\n]{1,40}\])'")  # textarena lists a board game's moves as '[4]', '[e2e4]', ...
_PLAYING = threading.Lock()  # games seed and draw from the global random generator: one call at a time
_OPPONENTS: dict[str, Callable[[str], str]] = {}  # opponent functions by name, for the spec (which holds text)


class Game(Remote):
    """Which game, and how it is played (the task source's and the check's arguments)."""

    players: int = Field(1, ge=1, le=8)
    opponent: str | None = Field(None, description="'random', or the name a function was registered under.")

    def session(self) -> RemoteSession:
        return GameSession(self)


class GameSession(RemoteSession):
    """One game, in this process, behind the interface of a WebSocket session with an OpenEnv server."""

    def __init__(self, game: Game) -> None:
        super().__init__(game.url, timeout_s=game.timeout_s, reward_range=game.reward_range)
        self.game = game
        self._env: Any = None
        self._seen = ""  # what player 0 has been shown so far: each turn shows what is new
        self._random = random.Random(0)

    async def connect(self) -> None:
        """Nothing to connect to: a game starts at ``reset``."""

    async def close(self) -> None:
        self._env = None

    async def _request(self, kind: str, data: dict[str, Any] | None) -> dict[str, Any]:
        if kind == "state":
            return {"game": self.game.url, "running": self._env is not None}
        try:
            return await asyncio.wait_for(asyncio.to_thread(self._play, kind, data or {}), self.timeout_s)
        except TimeoutError:
            self._env = None  # the thread finishes on its own; its game is not used again
            raise RemoteEnvError(f"{self.url} did not answer {kind} within {self.timeout_s:g}s") from None

    def _play(self, kind: str, data: Mapping[str, Any]) -> dict[str, Any]:
        with _PLAYING:
            try:
                if kind == "reset":
                    return self._reset(data.get("seed"))
                return self._step(data.get(_FIELD))
            except RemoteEnvError:
                raise
            except Exception as error:  # noqa: BLE001 - the game's own failure: a fault, never a 0
                self._env = None
                raise RemoteEnvError(f"{self.url} raised during {kind}: {describe_error(error, 300)}") from error

    def _reset(self, seed: Any) -> dict[str, Any]:
        textarena = _textarena()
        self._env = textarena.make(self.game.url.removeprefix(PREFIX))
        self._env.reset(num_players=self.game.players, seed=seed)
        self._random = random.Random(seed)
        self._seen = ""
        self._opponents_move()
        return {"observation": {"prompt": self._shown()}, "reward": None, "done": False}

    def _step(self, move: Any) -> dict[str, Any]:
        if self._env is None:
            raise RemoteEnvError(f"{self.url}: no game is running (step before reset, or after it ended)")
        done, _ = self._env.step(action=str(move))
        if not done:
            done = self._opponents_move()
        shown = self._shown()
        if not done:
            return {"observation": {"prompt": shown}, "reward": None, "done": False}
        rewards = self._env.close()[0]
        self._env = None
        if not isinstance(rewards, Mapping) or 0 not in rewards:
            raise RemoteEnvError(f"{self.url} ended without a reward for player 0 ({str(rewards)[:80]})")
        return {"observation": {"prompt": shown}, "reward": rewards[0], "done": True}

    def _opponents_move(self) -> bool:
        """The other players' moves until it is player 0's turn; whether the game ended meanwhile."""
        for _ in range(1000):
            player, observation = self._env.get_observation()
            if player == 0:
                return False
            done, _ = self._env.step(action=self._opponent(str(observation)))
            if done:
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
        _, observation = self._env.get_observation() if self._env is not None else (0, self._seen)
        text = observation if isinstance(observation, str) else str(observation)
        new = text[len(self._seen):] if text.startswith(self._seen) else text
        self._seen = text
        return new.strip("\n") or "(the game shows nothing new)"


def _textarena() -> Any:
    try:
        import textarena
    except ImportError:
        raise MissingDependencyError("textarena games need textarena: pip install 'verihub[games]'") from None
    return textarena


def textarena_spec(ref: str, *, size: int | None = None, seed: int | None = None, max_turns: int | None = None,
                   players: int = 1, opponent: str | Callable[[str], str] | None = None,
                   reward_range: tuple[float, float] | list[float] | None = None,
                   timeout_s: float = 30.0) -> tuple[Any, Game]:
    """The :class:`~verihub.spec.loader.LoadedSpec` of ``textarena:GAME`` (see the module docstring)."""
    from verihub.spec.lines import LineMap
    from verihub.spec.loader import LoadedSpec
    from verihub.spec.models import EnvSpec

    game_id = ref.removeprefix(PREFIX).strip()
    size, seed, max_turns = DEFAULT_SIZE if size is None else size, seed or 0, max_turns or DEFAULT_TURNS
    if callable(opponent):  # the spec holds text: a function is registered by name
        name = f"{getattr(opponent, '__module__', '')}.{getattr(opponent, '__qualname__', id(opponent))}"
        _OPPONENTS[name] = opponent
        opponent = name
    rules = {
        "game": (bool(_GAME_ID.fullmatch(game_id)), "must name a textarena game, like GuessTheNumber-v0", game_id),
        "size": (isinstance(size, int) and size >= MIN_SIZE, f"must be an integer of at least {MIN_SIZE}", size),
        "seed": (isinstance(seed, int) and seed >= 0, "must be a non-negative integer", seed),
        "max_turns": (isinstance(max_turns, int) and 1 <= max_turns <= 1000, "must be an integer in [1, 1000]",
                      max_turns),
        "opponent": (players == 1 or opponent is not None,
                     f"a game of {players} players needs one: 'random' or a function of its observation", opponent),
    }
    problems = [SpecProblem(ref, None, name, f"{rule}, got {value!r}") for name, (ok, rule, value) in rules.items()
                if not ok]
    if problems:
        raise SpecError(problems)
    if game_id not in _textarena().envs.registration.ENV_REGISTRY:
        raise SpecError([SpecProblem(ref, None, "game", f"textarena has no game {game_id!r}")])
    game = Game(url=PREFIX + game_id, action_field=_FIELD, timeout_s=timeout_s, action_schema=_ACTION,
                reward_range=tuple(reward_range or ((0.0, 1.0) if players == 1 else (-1.0, 1.0))),
                players=players, opponent=opponent)
    arguments = game.model_dump()
    slug = re.sub(r"[^a-z0-9._-]+", "-", game_id.lower()).strip("-._")
    spec = EnvSpec.model_validate({
        "id": "textarena-" + slug, "version": _version(), "domain": "games",
        "description": f"The textarena game {game_id}, as player 0 of {players}.",
        "tags": ["textarena", "game"],
        "dataset": {"source": f"{__name__}:tasks", "size": size, "seed": seed, "args": arguments, "split": SPLIT},
        "prompt": {"user": "{prompt}"},
        "interaction": {"kind": "multi_turn", "max_turns": max_turns} if max_turns > 1 else {},
        "verifier": [{"name": "game", "layer": "check", "use": f"{__name__}:game_move", "args": arguments,
                      "timeout_s": 3 * timeout_s + 5}],
        "gold": {"reference": "{prompt}", "min_pass_rate": 0.0},  # a game ships no winning moves
    })
    return LoadedSpec(spec, Path(PREFIX + game_id) / "environment.yaml", LineMap()), game


def _version() -> str:
    from importlib.metadata import version

    return version("textarena")


def tasks(n: int, seed: int, **game: Any) -> list[dict[str, Any]]:
    """``n`` games, started with seeds ``seed`` .. ``seed + n - 1`` (the dataset generator)."""
    return episodes(Game(**game), n, seed, "textarena-" + game["url"].removeprefix(PREFIX))


@check(params=Game, mode="async")
async def game_move(completion: str, task: Mapping[str, Any], params: Game) -> CheckResult:
    """The game's reward for player 0 with the completion as its first move; 0 if the game goes on."""
    stepped = await first_step(params, task, completion)
    if isinstance(stepped, CheckResult):
        return stepped
    reward, done = stepped
    if not done:
        return CheckResult(0.0, "the game goes on after this move (a text grade plays one move)")
    if reward is None:
        raise RemoteEnvError(f"{params.url} ended without a reward")
    return CheckResult(reward, "" if reward >= 1.0 else f"game reward {reward:g}")


def load_textarena(ref: str, *, size: int | None = None, seed: int | None = None,
                   config: Mapping[str, Any] | None = None, **options: Any) -> OpenEnvEnvironment:
    """``verihub.load_env("textarena:GAME")``: ``options`` (or ``config``) are :func:`textarena_spec`'s keywords;
    ``judge`` and ``on_missing_judge`` go to the environment."""
    env_options = {key: options.pop(key) for key in ("judge", "on_missing_judge") if key in options}
    ref, given = ref_options(ref)  # textarena:GAME?max_turns=10&players=2 (the CLI's way to pass options)
    merged = {**given, **dict(config or {}), **options,
              **{key: value for key, value in (("size", size), ("seed", seed)) if value is not None}}
    if unknown := sorted(set(merged) - set(OPTIONS)):
        raise TypeError(f"textarena: environments take no {', '.join(unknown)} (options: {', '.join(OPTIONS)})")
    loaded, game = textarena_spec(ref, **merged)
    try:
        return OpenEnvEnvironment(loaded, game, **env_options)
    except SpecError as error:
        if isinstance(error.__cause__, RemoteEnvError):
            raise error.__cause__ from None
        raise
