"""The far side of :mod:`verihub.adapters._verifiers_legacy`: run by an interpreter whose ``verifiers`` still has
the legacy API (0.1.x to 0.3.1: a module's ``load_environment(**kwargs)`` returning a ``vf.SingleTurnEnv`` or a
``vf.MultiTurnEnv`` whose ``vf.Rubric`` scores). Its requests (the loop and its errors: ``_serve.py``):

- ``{"op": "load", "module": ID, "args": {...}, "limit": N, "paths": [...]}`` imports the module; one without
  ``load_environment`` answers ``{"legacy": false}`` (a v1 taskset, for the other far side). Otherwise the
  environment's first ``N`` rows (its eval dataset, else its dataset) as ``{"id", "prompt", "system"}``, its
  reward functions as ``[NAME, WEIGHT]`` and versions.
- A multi-turn environment (a ``vf.MultiTurnEnv``; its load answers its ``max_turns``, 1 for a single-turn one)
  plays episodes (:mod:`_verifiers_legacy_play`): ``{"op": "reset", "index": I}`` starts row ``I``'s,
  ``{"episode": ID, "observation": TEXT, "done": false}``; ``{"op": "step", "episode": ID, "action": TEXT}``
  answers the next observation, or, the rollout over, its final state as ``score`` answers and ``"done": true``;
  ``{"op": "close", "episode": ID}`` drops one. A ``vf.ToolEnv``, a completion-format multi-turn environment
  and one whose episodes need a remote service (a sandbox, a server) are refused at load, saying why.
- ``{"op": "score", "index": I, "completion": TEXT}`` scores the completion as the reply to row ``I`` by the
  rubric's own ``score_rollout``: ``{"reward": SUM, "scores": {NAME: SCORE or null}, "faults": {NAME: FAULT}}``,
  a fault ``[WHAT, TYPE, DETAIL]``: ``raised`` and the exception's type and message, or ``returned`` and the
  value's type and text.

A legacy Rubric logs a reward function that raises and scores it 0.0; so every function is wrapped
(``functools.wraps``: ``inspect.signature`` sees the original, so the Rubric passes it the same arguments)
and what it raised or returned that is no finite number is answered in ``faults``, never as a score.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import importlib
import inspect
import math
import os
import sys
from typing import Any

import _verifiers_legacy_play as play

_STATE: dict[str, Any] = {}  # env, rows
_UNUSED_KEY = "BRIDGE_UNUSED_API_KEY"  # a variable this process sets for a client that never calls out
_FAULTS: dict[str, list[str]] = {}  # of the score in progress (one at a time per process)


def _load(request: dict[str, Any]) -> dict[str, Any]:
    sys.path[:0] = [str(path) for path in request.get("paths") or []]
    module = importlib.import_module(request["module"])
    if not callable(getattr(module, "load_environment", None)):
        return {"legacy": False}
    import verifiers as vf

    if not hasattr(vf, "SingleTurnEnv"):
        raise ImportError(f"verifiers {_version('verifiers')} has no legacy API (it ends at 0.3.1)")
    env = module.load_environment(**(request.get("args") or {}))
    multi_turn = _refused_or_multi_turn(env)
    rows = _rows(env, int(request["limit"]))
    if not rows:
        raise ValueError(f"environment {request['module']!r} has no rows")
    named = _intercept(env.rubric)
    _STATE.update(env=env, rows=rows, named=named)
    tasks = [_posed(env, row, index) for index, row in enumerate(rows)]
    versions = {"verifiers": _version("verifiers")}
    top = request["module"].split(".")[0]
    from importlib.metadata import packages_distributions

    for name in packages_distributions().get(top, []):
        versions[top] = _version(name)
    turns = int(getattr(env, "max_turns", 1) or -1) if multi_turn else 1
    return {"legacy": True, "tasks": tasks, "rewards": named, "versions": versions, "max_turns": turns}


# verifiers' environment classes whose episodes need what an offline machine has not (by name, found in the
# environment's MRO: verifiers moved them between modules from release to release), and what that is:
_OFFLINE = {
    "SandboxEnv": "a Prime sandbox (Prime's remote service)",
    "PythonEnv": "a Prime sandbox (Prime's remote service)",
    "CliAgentEnv": "a Prime sandbox (Prime's remote service)",
    "OpenEnvEnv": "a Prime sandbox running an OpenEnv server (load the server itself as openenv:URL)",
    "BrowserEnv": "a remote browser (Browserbase)",
    "MCPEnv": "MCP servers it starts or reaches",
}


def _refused_or_multi_turn(env: Any) -> bool:
    """Whether ``env`` is multi-turn (a ``vf.MultiTurnEnv`` played turn by turn) or single-turn; TypeError for
    one verihub does not play, with the reason."""
    import verifiers as vf

    classes = [cls.__name__ for cls in type(env).__mro__]
    for name, needs in _OFFLINE.items():
        if name in classes:
            raise TypeError(f"load_environment() returned a {type(env).__name__}, whose episodes need {needs}")
    if isinstance(env, vf.SingleTurnEnv):
        return False
    if isinstance(env, vf.ToolEnv):
        raise TypeError(
            f"load_environment() returned a {type(env).__name__} (a vf.ToolEnv): verihub does not yet offer its "
            "tools to the answer, so its episodes are not played"
        )
    if getattr(env, "message_type", "chat") == "completion":  # its model calls are no chat turns to take
        raise TypeError(f"load_environment() returned a multi-turn {type(env).__name__} in completion format")
    if isinstance(env, vf.MultiTurnEnv):
        return True
    raise TypeError(f"load_environment() returned a {type(env).__name__}, neither a SingleTurnEnv nor a MultiTurnEnv")


def _version(distribution: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "0.0.0"


def _rows(env: Any, limit: int) -> list[dict[str, Any]]:
    """The environment's own rows: its eval dataset, else its dataset (what ``vf-eval`` plays)."""
    has_eval = getattr(env, "eval_dataset", None) is not None or getattr(env, "eval_dataset_source", None)
    dataset = env.get_eval_dataset(n=limit) if has_eval else env.get_dataset(n=limit)
    return [dict(row) for row in list(dataset)[:limit]]


def _posed(env: Any, row: dict[str, Any], index: int) -> dict[str, str]:
    """The row as verihub poses it: its system prompt and one user message (the package's own text)."""
    prompt = row.get("prompt")
    ident = str(row.get("example_id", row.get("id", index)))
    if isinstance(prompt, str):  # a completion-format environment
        return {"id": ident, "prompt": prompt, "system": ""}
    messages = [_plain(message) for message in prompt or []]
    system = [m for m in messages if m.get("role") == "system"]
    rest = [m for m in messages if m.get("role") != "system"]
    if len(rest) != 1 or rest[0].get("role") != "user" or not isinstance(rest[0].get("content"), str):
        raise ValueError(
            f"row {ident}'s prompt is {[m.get('role') for m in messages]}: verihub poses a system prompt and one "
            "text user message (few-shot or multimodal prompts are not posed)"
        )
    if any(not isinstance(m.get("content"), str) for m in system):
        raise ValueError(f"row {ident}'s system prompt is not text")
    return {"id": ident, "prompt": rest[0]["content"], "system": "\n\n".join(m["content"] for m in system)}


def _plain(message: Any) -> dict[str, Any]:
    return message if isinstance(message, dict) else message.model_dump()


def _intercept(rubric: Any) -> list[list[Any]]:
    """Wrap every reward function of ``rubric`` (and of a RubricGroup's rubrics) in place; their names and
    weights, in order."""
    named: list[list[Any]] = []
    for part in getattr(rubric, "rubrics", None) or [rubric]:
        for funcs, weights in (("funcs", "weights"), ("reward_funcs", "reward_weights")):  # 0.1.8+, before
            if isinstance(getattr(part, funcs, None), list):
                functions = getattr(part, funcs)
                functions[:] = [_watched(function) for function in functions]
                named += [[_name(f), float(w)] for f, w in zip(functions, getattr(part, weights), strict=True)]
                break
    return named


def _name(function: Any) -> str:
    return getattr(function, "__name__", repr(function))


def _watched(function: Any) -> Any:
    """``function``, its faults recorded in ``_FAULTS`` (then raised or returned as they were: the Rubric goes
    on as it would, and its 0.0 is never read)."""
    if getattr(function, "_verihub_watched", False):
        return function
    name = _name(function)

    def seen(value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            _FAULTS.setdefault(name, ["returned", type(value).__name__, repr(str(value)[:200])])
        return value

    def failed(error: BaseException) -> None:
        _FAULTS.setdefault(name, ["raised", type(error).__name__, str(error).strip()[:500]])

    async def settled(pending: Any) -> Any:
        try:
            return seen(await pending)
        except Exception as error:
            failed(error)
            raise

    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def watched_async(*args: Any, **kwargs: Any) -> Any:
            return await settled(function(*args, **kwargs))

        watched: Any = watched_async
    else:

        @functools.wraps(function)
        def watched(*args: Any, **kwargs: Any) -> Any:
            try:
                value = function(*args, **kwargs)
            except Exception as error:
                failed(error)
                raise
            return settled(value) if inspect.isawaitable(value) else seen(value)

    watched._verihub_watched = True
    return watched


def _score(request: dict[str, Any]) -> dict[str, Any]:
    env, row = _STATE["env"], copy.deepcopy(_STATE["rows"][int(request["index"])])
    _FAULTS.clear()
    return _answer(*asyncio.run(_scored(env, row, _completion(env, str(request["completion"])))))


def _answer(reward: float, metrics: dict[str, Any]) -> dict[str, Any]:
    """A score as the near side takes it: each function's score, or its fault."""
    scores = {name: None if name in _FAULTS else metrics.get(name) for name, _ in _STATE["named"]}
    return {"reward": reward, "scores": scores, "faults": dict(_FAULTS)}


def _reset(request: dict[str, Any]) -> dict[str, Any]:
    """A new episode of row ``index`` of a multi-turn environment: ``{"episode": ID, "observation": TEXT}``."""
    row = copy.deepcopy(_STATE["rows"][int(request["index"])])
    episode, event = play.start(_STATE["env"], row)
    return {"episode": episode, **_event(episode, row, event)}


def _step(request: dict[str, Any]) -> dict[str, Any]:
    """The answer's move: ``{"observation": TEXT}`` while the episode goes on, else the rubric's score of its
    final state (as ``score`` answers), ``"done": true``."""
    _FAULTS.clear()
    episode = str(request["episode"])
    row = play.EPISODES[episode].row if episode in play.EPISODES else {}
    return _event(episode, row, play.move(episode, str(request["action"])))


def _event(episode: str, row: dict[str, Any], event: tuple[str, Any]) -> dict[str, Any]:
    kind, value = event
    if kind == "ask":
        return {"observation": value, "done": False}
    if kind == "raised":
        raise value
    completion, state = value
    error = state.get("error")  # a vf.Error the rollout caught
    # a vf.ModelError is the reply's own (an empty one: this client fails no other way), scored as it stands
    if error is not None and not isinstance(error, getattr(_vf(), "ModelError", ())):
        raise error  # the rollout ended on it: reported as its type and message, as any other
    reward, metrics = play.call(_scored(_STATE["env"], row, completion, state))
    return {"done": True, **_answer(reward, metrics)}


def _vf() -> Any:
    import verifiers as vf

    return vf


def _close(request: dict[str, Any]) -> dict[str, Any]:
    play.stop(str(request["episode"]))
    return {}


def _completion(env: Any, text: str) -> Any:
    """The reply in the form this verifiers passes its rubric: a string for a completion-format environment,
    else one assistant message, typed from 0.1.11 (``vf.AssistantMessage``), a dict before."""
    import verifiers as vf

    if getattr(env, "message_type", "chat") == "completion":
        return text
    if hasattr(vf, "AssistantMessage"):
        return [vf.AssistantMessage(content=text)]
    return [{"role": "assistant", "content": text}]


async def _scored(env: Any, row: dict[str, Any], completion: Any, state: Any = None) -> tuple[float, dict[str, Any]]:
    """The rubric's own ``score_rollout`` of the completion (and of a played episode's final ``state``), in each
    of its three signatures: 0.1.2-0.1.7 take the rollout's parts and return the score; 0.1.8-0.1.9 take a state
    and a semaphore; 0.1.10-0.3.1 take a state."""
    rubric = env.rubric
    parameters = inspect.signature(rubric.score_rollout).parameters
    if "prompt" in parameters:
        state = state or {"timing": {"generation_ms": 0.0, "scoring_ms": 0.0, "total_ms": 0.0}}
        score = await rubric.score_rollout(
            row["prompt"], completion, row.get("answer", ""), state, row.get("task", "default"), row.get("info") or {}
        )
        if not isinstance(score, dict):  # a RolloutScore model, before it became a TypedDict
            score = {"reward": score.reward, "metrics": score.metrics}
        return float(score["reward"]), dict(score["metrics"])
    if state is None:
        state = await env.init_state(row, _client(), "verihub")
        state["completion"] = completion
    if "score_sem" in parameters:
        await rubric.score_rollout(state, asyncio.Semaphore(1))
    else:
        await rubric.score_rollout(state)
    return float(state["reward"]), dict(state["metrics"] or {})


def _client() -> Any:
    """A model client that ``init_state`` stores and scoring never calls (a judge has its own): the config of
    0.1.11+, an AsyncOpenAI before. It names a closed loopback port, so a call is a fault, never a request."""
    import verifiers as vf

    os.environ.setdefault(_UNUSED_KEY, "unused")
    if hasattr(vf, "ClientConfig"):
        return vf.ClientConfig(api_key_var=_UNUSED_KEY, api_base_url="http://127.0.0.1:9/v1")
    from openai import AsyncOpenAI

    return AsyncOpenAI(api_key="unused", base_url="http://127.0.0.1:9/v1")


if __name__ == "__main__":
    from _serve import serve

    serve({"load": _load, "score": _score, "reset": _reset, "step": _step, "close": _close})
