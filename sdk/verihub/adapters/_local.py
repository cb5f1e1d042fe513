"""Episodes of another library's environment, played in this process behind the interface of a WebSocket
session with an OpenEnv server (:class:`~verihub.adapters._openenv_wire.RemoteSession`), so that the OpenEnv
adapter's tasks, sessions, checks and fault rules serve them unchanged (textarena's games, skyrl-gym's envs).

A subclass says how an episode starts and takes a move, in text; this class runs each call on a thread under
the remote's ``timeout_s``, one call at a time in the process (such libraries seed and draw from Python's
global random generator), and turns anything the library raises into a :class:`RemoteEnvError`: a fault
with its reason, never a 0.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any

from verihub.adapters._openenv_wire import RemoteEnvError, RemoteSession
from verihub.errors import describe_error

__all__ = ["LocalSession", "Move"]

FIELD = "message"  # the action's one field: the model's move, as text
ACTION_SCHEMA = {
    "type": "object",
    "required": [FIELD],
    "properties": {FIELD: {"type": "string", "description": "Your move or answer, as the environment asks for it."}},
}
Move = tuple[str, float | None, bool]  # what the model is shown next, the reward (at the end), whether it ended
_PLAYING = threading.Lock()


class LocalSession(RemoteSession):
    """One episode in this process (see the module docstring)."""

    def __init__(self, url: str, timeout_s: float, reward_range: tuple[float, float]) -> None:
        super().__init__(url, timeout_s=timeout_s, reward_range=reward_range)
        self.running = False

    def start(self, options: Mapping[str, Any]) -> str:
        """Start the episode ``reset(**options)`` names; what the model is shown first."""
        raise NotImplementedError

    def move(self, text: str) -> Move:
        """The model's move."""
        raise NotImplementedError

    def stop(self) -> None:
        """Drop the episode (it may be running or over)."""

    async def connect(self) -> None:
        """Nothing to connect to: an episode starts at ``reset``."""

    async def close(self) -> None:
        self.running = False
        self.stop()

    async def _request(self, kind: str, data: dict[str, Any] | None) -> dict[str, Any]:
        if kind == "state":
            return {"environment": self.url, "running": self.running}
        try:
            return await asyncio.wait_for(asyncio.to_thread(self._call, kind, data or {}), self.timeout_s)
        except TimeoutError:
            self.running = False  # the thread finishes on its own; its episode is not used again
            raise RemoteEnvError(f"{self.url} did not answer {kind} within {self.timeout_s:g}s") from None

    def _call(self, kind: str, data: Mapping[str, Any]) -> dict[str, Any]:
        with _PLAYING:
            try:
                if kind == "reset":
                    shown = self.start(data)
                    self.running = True
                    return {"observation": {"prompt": shown}, "reward": None, "done": False}
                if not self.running:
                    raise RemoteEnvError(f"{self.url}: no episode is running (a step before reset, or after its end)")
                shown, reward, done = self.move(str(data.get(FIELD, "")))
            except RemoteEnvError:
                self.running = False
                raise
            except Exception as error:  # noqa: BLE001 - the library's own failure: a fault, never a 0
                self.running = False
                raise RemoteEnvError(f"{self.url} raised during {kind}: {describe_error(error, 300)}") from error
        if done:
            self.running = False
            if reward is None:
                raise RemoteEnvError(f"{self.url} ended the episode without a reward")
        return {"observation": {"prompt": shown}, "reward": reward, "done": done}


def local_spec(
    remote: Any,
    *,
    ref: str,
    env_id: str,
    version: str,
    domain: str,
    description: str,
    tags: list[str],
    size: int,
    seed: int,
    max_turns: int,
    source: str,
    check: str,
    problems: list[Any],
) -> Any:
    """The :class:`~verihub.spec.loader.LoadedSpec` of an in-process environment: tasks from ``source`` (a
    generator ``module:function``), one check layer ``check`` scoring the first move; ``problems`` found by
    the adapter are raised with those of the common options."""
    from pathlib import Path

    from verihub.adapters.openenv import SPLIT
    from verihub.errors import SpecError, SpecProblem
    from verihub.spec.lines import LineMap
    from verihub.spec.loader import LoadedSpec
    from verihub.spec.models import EnvSpec

    rules = {
        "size": (
            isinstance(size, int) and not isinstance(size, bool) and size >= 5,
            "must be an integer of at least 5 (the train and eval splits each need a task)",
            size,
        ),
        "seed": (
            isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0,
            "must be a non-negative integer",
            seed,
        ),
        "max_turns": (
            isinstance(max_turns, int) and 1 <= max_turns <= 1000,
            "must be an integer in [1, 1000] (the model's turns in an episode; 1: single-turn)",
            max_turns,
        ),
    }
    problems = problems + [
        SpecProblem(ref, None, name, f"{rule}, got {value!r}") for name, (ok, rule, value) in rules.items() if not ok
    ]
    if problems:
        raise SpecError(problems)
    arguments = remote.model_dump()
    spec = EnvSpec.model_validate(
        {
            "id": env_id,
            "version": version,
            "domain": domain,
            "description": description,
            "tags": tags,
            "dataset": {"source": source, "size": size, "seed": seed, "args": arguments, "split": SPLIT},
            "prompt": {"user": "{prompt}"},
            "interaction": {"kind": "multi_turn", "max_turns": max_turns} if max_turns > 1 else {},
            "verifier": [
                {
                    "name": "outcome",
                    "layer": "check",
                    "use": check,
                    "args": arguments,
                    "timeout_s": 3 * remote.timeout_s + 5,
                }
            ],
            "gold": {"reference": "{prompt}", "min_pass_rate": 0.0},  # no gold answers: the prompt as a move
        }
    )
    return LoadedSpec(spec, Path(ref.replace(":", "/", 1)) / "environment.yaml", LineMap())


async def first_move(params: Any, task: Mapping[str, Any], completion: str) -> Any:
    """A check's result: the episode's reward with the completion as its first move, 0 if it goes on."""
    from verihub.adapters.openenv import first_step
    from verihub.checks.base import CheckResult

    stepped = await first_step(params, task, completion)
    if isinstance(stepped, CheckResult):
        return stepped
    reward, done = stepped
    if not done or reward is None:
        return CheckResult(0.0, "the episode goes on after this move (a text grade plays one move)")
    return CheckResult(reward, "" if reward >= 1.0 else f"reward {reward:g}")


def load_local(
    ref: str,
    spec_of: Any,
    known: tuple[str, ...],
    *,
    size: int | None,
    seed: int | None,
    config: Mapping[str, Any] | None,
    options: dict[str, Any],
) -> Any:
    """``load_env(PREFIX:WHAT[?OPTIONS])`` for an in-process adapter whose ``spec_of(ref, **options)`` gives
    (LoadedSpec, remote); ``judge`` and ``on_missing_judge`` go to the environment."""
    from verihub.adapters.openenv import OpenEnvEnvironment, ref_options
    from verihub.errors import SpecError

    env_options = {key: options.pop(key) for key in ("judge", "on_missing_judge") if key in options}
    ref, given = ref_options(ref)  # PREFIX:WHAT?max_turns=10&... (the CLI's way to pass options)
    merged = {
        **given,
        **dict(config or {}),
        **options,
        **{key: value for key, value in (("size", size), ("seed", seed)) if value is not None},
    }
    if unknown := sorted(set(merged) - set(known)):
        prefix = ref.partition(":")[0]
        raise TypeError(f"{prefix}: environments take no {', '.join(unknown)} (options: {', '.join(known)})")
    loaded, remote = spec_of(ref, **merged)
    try:
        return OpenEnvEnvironment(loaded, remote, **env_options)
    except SpecError as error:  # the task source's failure, said plainly
        if isinstance(error.__cause__, RemoteEnvError):
            raise error.__cause__ from None
        raise
