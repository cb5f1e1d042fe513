"""Games whose own work explodes on a crafted move, for the tests of evidence gathered apart from the answer:
a textarena game and a skyrl-gym environment that parse a move with a backtracking regex, ``(a+)+$``, which
holds the GIL for seconds on ``"a" * 26 + "!"`` (2**26 steps inside ``re``, never interruptible in a
process), raise on a move that starts with ``RAISE`` (a parser strict about its input), and otherwise pay 1 for
the move ``[ok]`` and 0 for any other. Registered on import, as a user's own game is; a worker process that
plays them imports this module by name."""

from __future__ import annotations

import re
from typing import Any

import skyrl_gym
import textarena
from skyrl_gym.envs.base_text_env import BaseTextEnv

STALL = "a" * 26 + "!"  # the crafted move
GAME = "HostileParse-v0"
SKYRL_ENV = "hostile_parse"
_PARSE = re.compile(r"(a+)+$")


def _score(move: str) -> float:
    if move.startswith("RAISE"):
        raise ValueError("cannot parse this move")
    _PARSE.match(move)  # the game's own super-linear work: seconds on STALL, with the GIL held
    return 1.0 if move.strip() == "[ok]" else 0.0


class HostileParse:
    """A one-player textarena game of one move (textarena's interface: reset, step, get_observation, close)."""

    def reset(self, num_players: int, seed: int | None = None) -> None:
        self.reward: dict[int, float] | None = None
        self.shown = f"Game {seed}: answer with the move [ok]."

    def get_observation(self) -> tuple[int, str]:
        return 0, self.shown

    def step(self, action: str) -> tuple[bool, dict[str, Any]]:
        self.reward = {0: _score(action)}
        self.shown += "\nThe game is over."
        return True, {}

    def close(self) -> tuple[dict[int, float] | None, dict[str, Any]]:
        return self.reward, {}


class HostileParseEnv(BaseTextEnv):
    """The same game as a skyrl-gym environment (one step)."""

    def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None) -> None:
        super().__init__()

    def step(self, action: str) -> dict[str, Any]:
        return {"observations": [], "reward": _score(action), "done": True, "metadata": {}}


if GAME not in textarena.envs.registration.ENV_REGISTRY:
    textarena.register(GAME, entry_point=HostileParse)
if SKYRL_ENV not in skyrl_gym.envs.registration.registry:
    skyrl_gym.register(id=SKYRL_ENV, entry_point="hostile_games:HostileParseEnv")
