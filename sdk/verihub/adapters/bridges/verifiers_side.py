"""The far side of :mod:`verihub.adapters.verifiers`: run by the interpreter that has Prime Intellect's
``verifiers`` (its own environment: its pins conflict with verihub's lock).

Its requests (the loop and its errors: ``_serve.py``):

- ``{"op": "load", "taskset": ID, "config": {...}, "limit": N, "paths": [...]}`` loads the taskset (a
  module exporting one ``vf.Taskset`` in ``__all__``) and answers its first ``N`` tasks
  (``{"id", "prompt", "system"}``), its reward functions, those that need a runtime, and versions.
- ``{"op": "score", "index": I, "completion": TEXT}`` scores the completion as the final reply of task ``I``
  with the task's own ``score`` (its ``@vf.reward`` functions and judges) on a trace that ends in it; the
  answer is ``{"rewards": {NAME: [SCORE, WEIGHT] or null}}``.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import sys
from pathlib import Path
from typing import Any

_TASKS: list[Any] = []


def _load(request: dict[str, Any]) -> dict[str, Any]:
    sys.path[:0] = [str(path) for path in request.get("paths") or []]
    import verifiers.v1 as vf

    taskset_id = request["taskset"]
    try:
        config = vf.taskset_config_type(taskset_id)(id=taskset_id, **(request.get("config") or {}))
        taskset = vf.load_taskset(config)
    except Exception:
        _refuse_legacy(taskset_id)
        raise
    _TASKS[:] = list(itertools.islice(iter(taskset), int(request["limit"])))
    if not _TASKS:
        raise ValueError(f"taskset {taskset_id!r} has no tasks")
    first = _TASKS[0]
    if type(first).NEEDS_CONTAINER:
        raise ValueError(f"taskset {taskset_id!r}'s tasks need a container, which verihub does not run")
    rewards = [fn.__name__ for fn in first.hooks("reward")] + [judge.reward_name for judge in first.plugged_judges()]
    runtime = [fn.__name__ for fn in first.hooks("reward") if _needs_runtime(fn)]
    tasks = [
        {
            "id": str(task.data.id if task.data.id is not None else task.data.idx),
            "prompt": task.data.prompt_text,
            "system": task.data.system_prompt or "",
        }
        for task in _TASKS
    ]
    return {"tasks": tasks, "rewards": rewards, "runtime_rewards": runtime, "versions": _versions(taskset)}


def _refuse_legacy(module_id: str) -> None:
    """Say so when the module is a legacy environment (it defines ``load_environment``), which this verifiers
    cannot load: its import may fail here, so its source is read, not run."""
    import importlib.util
    from importlib.metadata import version

    try:
        spec = importlib.util.find_spec(module_id)
        source = Path(spec.origin).read_text(encoding="utf-8") if spec and spec.origin else ""
    except (ImportError, OSError, ValueError):
        return
    if "def load_environment(" in source:
        raise ImportError(
            f"{module_id!r} is a legacy verifiers environment (load_environment), an API verifiers "
            f"{version('verifiers')} no longer has (0.4.0 deleted it): load it with an interpreter whose verifiers "
            "is 0.3.1 or older (scripts/setup.sh --verifiers makes .venv-verifiers-legacy: "
            "VERIHUB_VERIFIERS_PYTHON=.venv-verifiers-legacy/bin/python)"
        )


def _needs_runtime(fn: Any) -> bool:
    parameter = inspect.signature(fn).parameters.get("runtime")
    return parameter is not None and parameter.default is inspect.Parameter.empty


def _versions(taskset: Any) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, packages_distributions, version

    module = type(taskset).__module__.split(".")[0]
    versions = {"verifiers": version("verifiers")}
    for name in packages_distributions().get(module, []):
        try:
            versions[module] = version(name)
        except PackageNotFoundError:
            pass
    return versions


def _score(request: dict[str, Any]) -> dict[str, Any]:
    import verifiers.v1 as vf
    from verifiers.v1.graph import MessageNode
    from verifiers.v1.trace import Trace, TraceTask

    task = _TASKS[int(request["index"])]
    trace = Trace(
        task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        agent=vf.AgentInfo(config=vf.AgentConfig(), name="verihub", trainable=False),
    )
    if task.data.system_prompt:
        trace.nodes.append(MessageNode(message=vf.SystemMessage(content=task.data.system_prompt)))
    trace.nodes.append(
        MessageNode(
            parent=len(trace.nodes) - 1 if trace.nodes else None, message=vf.UserMessage(content=task.data.prompt_text)
        )
    )
    trace.nodes.append(
        MessageNode(
            parent=len(trace.nodes) - 1, sampled=True, message=vf.AssistantMessage(content=str(request["completion"]))
        )
    )
    asyncio.run(task.score(trace))
    return {
        "rewards": {
            name: None if reward is None else [reward.score, reward.weight] for name, reward in trace.rewards.items()
        }
    }


if __name__ == "__main__":
    from _serve import serve

    serve({"load": _load, "score": _score})
