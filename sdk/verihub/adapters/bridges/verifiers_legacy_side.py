"""The far side of :mod:`verihub.adapters._verifiers_legacy`: run by an interpreter whose ``verifiers`` still has
the legacy API (0.1.x to 0.3.1: a module's ``load_environment(**kwargs)`` returning a ``vf.SingleTurnEnv`` whose
``vf.Rubric`` scores). Its requests (the loop and its errors: ``_serve.py``):

- ``{"op": "load", "module": ID, "args": {...}, "limit": N, "paths": [...]}`` imports the module; one without
  ``load_environment`` answers ``{"legacy": false}`` (a v1 taskset, for the other far side). Otherwise the
  environment's first ``N`` rows (its eval dataset, else its dataset) as ``{"id", "prompt", "system"}``, its
  reward functions as ``[NAME, WEIGHT]`` and versions.
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
    if not isinstance(env, vf.SingleTurnEnv):
        raise TypeError(
            f"load_environment() returned a {type(env).__name__}: verihub plays single-turn legacy environments "
            "(vf.SingleTurnEnv) only, so far"
        )
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
    return {"legacy": True, "tasks": tasks, "rewards": named, "versions": versions}


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
    reward, metrics = asyncio.run(_scored(env, row, _completion(env, str(request["completion"]))))
    scores = {name: None if name in _FAULTS else metrics.get(name) for name, _ in _STATE["named"]}
    return {"reward": reward, "scores": scores, "faults": dict(_FAULTS)}


def _completion(env: Any, text: str) -> Any:
    """The reply in the form this verifiers passes its rubric: a string for a completion-format environment,
    else one assistant message, typed from 0.1.11 (``vf.AssistantMessage``), a dict before."""
    import verifiers as vf

    if getattr(env, "message_type", "chat") == "completion":
        return text
    if hasattr(vf, "AssistantMessage"):
        return [vf.AssistantMessage(content=text)]
    return [{"role": "assistant", "content": text}]


async def _scored(env: Any, row: dict[str, Any], completion: Any) -> tuple[float, dict[str, Any]]:
    """The rubric's own ``score_rollout``, in each of its three signatures: 0.1.2-0.1.7 take the rollout's parts
    and return the score; 0.1.8-0.1.9 take a state and a semaphore; 0.1.10-0.3.1 take a state."""
    rubric = env.rubric
    parameters = inspect.signature(rubric.score_rollout).parameters
    if "prompt" in parameters:
        state: dict[str, Any] = {"timing": {"generation_ms": 0.0, "scoring_ms": 0.0, "total_ms": 0.0}}
        score = await rubric.score_rollout(
            row["prompt"], completion, row.get("answer", ""), state, row.get("task", "default"), row.get("info") or {}
        )
        if not isinstance(score, dict):  # a RolloutScore model, before it became a TypedDict
            score = {"reward": score.reward, "metrics": score.metrics}
        return float(score["reward"]), dict(score["metrics"])
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

    serve({"load": _load, "score": _score})
