"""Episodes of another library's environment, played in this process behind the interface of a WebSocket
session with an OpenEnv server (:class:`~verihub.adapters._openenv_wire.RemoteSession`), so that the OpenEnv
adapter's tasks, sessions, checks and fault rules serve them unchanged (textarena's games, skyrl-gym's envs).

A subclass says how an episode starts and takes a move, in text; this class runs each call on a thread of its
own (never the event loop's shared executor, which other answers' calls could fill) and turns anything the
library raises into a :class:`RemoteEnvError`: a fault with its reason, never a 0. The library itself plays
where a move can be killed: :meth:`LocalSession.hold` keeps the episode's objects in a worker process leased
for that episode alone (:class:`~verihub.grading._apart.Held`), each call bounded by the remote's
``timeout_s`` (:meth:`LocalSession.left`). A move that holds the GIL there (a game's own super-linear regex
on a crafted move) stalls nothing here: past its time its process is killed, and the episode is a fault.
Workers are reused from one episode to the next (:func:`verihub.grading._pools.lease`): the object is new
each episode, but what the library keeps in its modules carries over, Python's global random generator
included, so a library that draws from it without seeding it per episode draws what earlier episodes left.
A failure of that machinery (no worker, a library's import past its start limit) is the grader's
(:class:`~verihub.errors.GraderInfraError`), never the answer's.
Measured on a shared 2-core machine: a call to the game costs a pipe round trip, 0.3 ms, so a text grade of
TicTacToe against the random opponent (a reset and a move, about ten calls) took 8.9 ms against 1.3 ms in
process; a worker's start is 0.3 s and the game library's import comes on top (outside any call's time), so
idle workers are kept warm.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from verihub.adapters._openenv_wire import RemoteEnvError, RemoteSession
from verihub.errors import GraderInfraError, describe_error
from verihub.grading._apart import Held
from verihub.grading._pools import START_S, on_new_thread

__all__ = ["LocalSession", "Move", "Registered"]

FIELD = "message"  # the action's one field: the model's move, as text
ACTION_SCHEMA = {
    "type": "object",
    "required": [FIELD],
    "properties": {FIELD: {"type": "string", "description": "Your move or answer, as the environment asks for it."}},
}
Move = tuple[str, float | None, bool]  # what the model is shown next, the reward (at the end), whether it ended


class LocalSession(RemoteSession):
    """One episode in this process (see the module docstring)."""

    def __init__(self, url: str, timeout_s: float, reward_range: tuple[float, float]) -> None:
        super().__init__(url, timeout_s=timeout_s, reward_range=reward_range)
        self.running = False
        self._deadline = 0.0

    def hold(self, factory: Callable[..., Any], args: Sequence[Any], *, imports: Sequence[str] = ()) -> Held:
        """``factory(*args)`` made in a worker process of this episode's own (``imports`` loaded there first);
        the call's time starts once the worker is ready."""
        held = Held(factory, args, imports=imports)
        self._deadline = perf_counter() + self.timeout_s  # the worker's start is not the call's time
        try:
            held.make(self.left())
        except BaseException:
            held.close()
            raise
        return held

    def left(self) -> float:
        """The seconds the call under way may still take."""
        return max(0.0, self._deadline - perf_counter())

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
        await asyncio.wrap_future(on_new_thread(self.stop))

    async def _request(self, kind: str, data: dict[str, Any] | None) -> dict[str, Any]:
        if kind == "state":
            return {"environment": self.url, "running": self.running}
        try:  # each call bounds itself (left()); this wait only backs that up, with the infrastructure's waits
            return await asyncio.wait_for(
                asyncio.wrap_future(on_new_thread(self._call, (kind, data or {}))), _BACKSTOP_S
            )
        except TimeoutError:
            self.running = False  # the thread finishes on its own; its episode is not used again (close() kills it)
            stuck = GraderInfraError(f"{self.url}: a {kind} call stayed in the grader's machinery for {_BACKSTOP_S:g}s")
            raise RemoteEnvError(f"{self.url} did not answer {kind}: {stuck}") from stuck

    def _call(self, kind: str, data: Mapping[str, Any]) -> dict[str, Any]:
        self._deadline = perf_counter() + self.timeout_s
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
        except TimeoutError:  # a call played apart ran past its time: its process is killed, the episode gone
            self.running = False
            raise RemoteEnvError(f"{self.url} did not answer {kind} within {self.timeout_s:g}s") from None
        except Exception as error:  # noqa: BLE001 - the library's own failure: a fault, never a 0
            self.running = False
            raise RemoteEnvError(f"{self.url} raised during {kind}: {describe_error(error, 300)}") from error
        if done:
            self.running = False
            if reward is None:
                raise RemoteEnvError(f"{self.url} ended the episode without a reward")
        return {"observation": {"prompt": shown}, "reward": reward, "done": done}


# A call's own limit is the remote's timeout_s (at most 600); on top of it a call may wait for a worker to come free
# and for one to start and load its library (START_S each): past all of that only the machinery can be stuck.
_BACKSTOP_S = 600 + 3 * START_S


@dataclass(frozen=True, slots=True)
class Registered:
    """How an episode's worker process makes a library's environment ``name``: the modules to import there first
    (the library's, and the module of an entry registered outside the library), and that entry (None: the library
    ships it, so the worker's own registry has it)."""

    name: str
    entry: Any
    imports: tuple[str, ...]

    @classmethod
    def of(cls, registry: Mapping[str, Any], name: str, package: str, imports: tuple[str, ...]) -> Registered:
        """``name`` as ``registry`` (this process's, of the library ``package``) has it."""
        entry = registry.get(name)
        if entry is None or entry_module(entry).startswith(package):
            return cls(name, None, imports)
        return cls(name, entry, (*imports, entry_module(entry)))

    def adopt(self, registry: dict[str, Any]) -> None:
        """In the worker: register the entry (a user's own environment) where the library's registry lacks it."""
        if self.entry is not None and self.name not in registry:
            registry[self.name] = self.entry


def entry_module(entry: Any) -> str:
    """The module a registry entry's entry point lives in (a class, a function, or ``"module:name"``)."""
    point = getattr(entry, "entry_point", None)
    return point.partition(":")[0] if isinstance(point, str) else str(getattr(point, "__module__", "") or "")


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
            # no gold answers: the prompt is only what validate plays; the fault rule takes other evidence
            "gold": {"reference": "{prompt}", "reference_is": "placeholder", "min_pass_rate": 0.0},
        }
    )
    return LoadedSpec(spec, Path(ref.replace(":", "/", 1)) / "environment.yaml", LineMap())


async def first_move(params: Any, task: Mapping[str, Any], completion: str) -> Any:
    """A check's result: the episode's reward with the completion as its first move, 0 if it goes on. A failure
    of the grader's machinery under the episode's fault reaches the verifier as itself: the grader's, exempt."""
    from verihub.adapters.openenv import first_step
    from verihub.checks.base import CheckResult

    try:
        stepped = await first_step(params, task, completion)
    except RemoteEnvError as error:
        if isinstance(error.__cause__, GraderInfraError):
            raise error.__cause__ from None
        raise
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
