"""The far side of :mod:`verihub.adapters.gem`: run by the interpreter that has GEM (``gem-llm``, its own
environment: its pins conflict with verihub's lock). Episodes live here, by a random id.

Its requests (the loop and its errors: ``_serve.py``):

- ``{"op": "ready"}`` imports GEM (a bridge's first request, outside any episode's time): ``{}``.
- ``{"op": "describe", "env": ID}``: whether GEM registers ``ID``, and GEM's version.
- ``{"op": "reset", "env": ID, "seed": S}`` makes the environment and resets it with ``seed``; the answer is
  ``{"episode": ID, "observation": TEXT}``.
- ``{"op": "step", "episode": ID, "action": TEXT}``: ``{"observation": TEXT, "reward": R, "done": BOOL}``
  (done: terminated or truncated; a finished episode is dropped).
- ``{"op": "close", "episode": ID}`` drops an episode.
- ``{"op": "legal", "env": ID, "seed": S, "n": N}``: up to N distinct first moves the environment's own
  ``sample_random_action`` draws after ``reset(seed=S)`` (none where it has none): ``{"moves": [TEXT, ...]}``.
"""

from __future__ import annotations

import secrets
from typing import Any

_EPISODES: dict[str, Any] = {}  # by a random id: one this process did not make (a restarted bridge) is unknown


def _describe(request: dict[str, Any]) -> dict[str, Any]:
    from importlib.metadata import version

    from gem.envs.registration import ENV_REGISTRY

    return {"registered": request["env"] in ENV_REGISTRY, "version": version("gem-llm")}


def _ready(request: dict[str, Any]) -> dict[str, Any]:
    import gem  # noqa: F401 - loaded now, once

    return {}


def _reset(request: dict[str, Any]) -> dict[str, Any]:
    import gem

    env = gem.make(request["env"])
    observation, _ = env.reset(seed=request["seed"])
    episode = secrets.token_hex(8)
    _EPISODES[episode] = env
    return {"episode": episode, "observation": str(observation)}


def _step(request: dict[str, Any]) -> dict[str, Any]:
    env = _EPISODES.get(str(request["episode"]))
    if env is None:
        raise LookupError(f"no episode {request['episode']} (the bridge restarted since it began, or it ended)")
    observation, reward, terminated, truncated, info = env.step(str(request["action"]))
    done = bool(terminated or truncated)
    shown = str(observation)
    if done:
        del _EPISODES[str(request["episode"])]
    elif isinstance(info, dict) and info.get("suffix"):  # what GEM asks for next ("Enter your next guess.")
        shown += "\n" + str(info["suffix"])
    return {"observation": shown, "reward": float(reward), "done": done}


def _legal(request: dict[str, Any]) -> dict[str, Any]:
    import gem

    env = gem.make(request["env"])
    try:
        env.reset(seed=request["seed"])
        moves: dict[str, None] = {}
        for _ in range(4 * int(request["n"])):
            moves[str(env.sample_random_action())] = None
            if len(moves) == request["n"]:
                break
    except NotImplementedError:  # GEM's default: an environment that cannot draw a move
        return {"moves": []}
    finally:
        if hasattr(env, "close"):  # not every GEM environment has one
            env.close()
    return {"moves": list(moves)}


def _close(request: dict[str, Any]) -> dict[str, Any]:
    _EPISODES.pop(str(request["episode"]), None)
    return {}


if __name__ == "__main__":
    from _serve import serve

    serve({"ready": _ready, "describe": _describe, "reset": _reset, "step": _step, "close": _close, "legal": _legal})
