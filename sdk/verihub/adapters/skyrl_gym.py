"""skyrl-gym's environments (``pip install 'verihub[games]'``: skyrl-gym 0.4) as verihub environments, their
tasks from a dataset in SkyRL's format.

>>> env = verihub.load_env("skyrl-gym:gsm8k", data="gsm8k.jsonl")  # doctest: +SKIP
>>> env = verihub.load_env("skyrl-gym:gsm8k_multi_turn?data=gsm8k.jsonl&max_turns=5")  # doctest: +SKIP

An episode plays as an OpenEnv remote's does (:mod:`verihub.adapters.openenv`), in this process
(:mod:`verihub.adapters._local`), so tasks, sessions, grading and their faults follow the same rules:

- **tasks**: the rows of ``data`` (JSON lines, a JSON list, or parquet) in SkyRL's dataset format: ``prompt``
  (chat messages, or text), ``reward_spec`` (``ground_truth`` and what else the environment reads) and
  ``extra_info``; the environment loaded plays every row, whatever its ``env_class``. Task ``i`` is row ``i``
  (the first ``size``, default all; 80/20 into ``train`` and ``eval``).
- **prompt**: what the environment's ``init`` makes of the row's prompt, its messages' contents in order.
- **turns**: each turn's text (or the ``act`` tool's ``message``) is the environment's ``step`` action; its
  observations come back. ``max_turns`` (default 1: single-turn) bounds an episode (it reaches the
  environment too, as SkyRL's ``max_turns``); one it has not ended by then scores 0.
- **the grade** is the reward of the step that ends the episode (rewards of earlier turns are the
  environment's shaping: not the grade), rescaled from ``reward_range`` (default ``[0, 1]``).
- ``env_config``: the environment's configuration (SkyRL's ``env_config``, e.g. a database path for
  ``text2sql``).

An environment that raises or takes longer than ``timeout_s`` over a call is a fault with its reason, never
a 0 (whose fault follows verihub's one rule). Each episode plays in a worker process of its own, where a step
that holds the GIL can be killed (:mod:`verihub.adapters._local`); an environment registered outside
skyrl-gym (``skyrl_gym.register``) is registered there too, so its entry point must be importable by name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
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
from verihub.errors import MissingDependencyError, SpecError, SpecProblem
from verihub.grading._apart import Held
from verihub.grading._pools import waiting

__all__ = ["PREFIX", "SkyRLEnv", "SkyRLSession", "load_skyrl_gym"]

PREFIX = "skyrl-gym:"
OPTIONS = ("data", "size", "seed", "max_turns", "env_config", "reward_range", "timeout_s")
_ENV_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,80}")


class SkyRLEnv(Remote):
    """Which environment, its tasks' file and configuration (the task source's and the check's arguments)."""

    data: str = Field(description="The dataset file (JSON lines, JSON or parquet) in SkyRL's format.")
    max_turns: int = Field(1, ge=1, le=1000)
    env_config: dict[str, Any] = Field(default_factory=dict)

    def session(self) -> RemoteSession:
        return SkyRLSession(self)


class SkyRLSession(LocalSession):
    """One episode of a skyrl-gym environment, in a worker process of its own."""

    def __init__(self, remote: SkyRLEnv) -> None:
        super().__init__(remote.url, remote.timeout_s, remote.reward_range)
        self.remote = remote
        self._episode: Held | None = None

    def start(self, options: Mapping[str, Any]) -> str:
        self.stop()
        name = self.remote.url.removeprefix(PREFIX)
        registered = Registered.of(_skyrl_gym().envs.registration.registry, name, "skyrl_gym", _IMPORTS)
        with waiting():  # read once a process (cached), never by a worker: each gets its own row, not the dataset
            row = dict(_rows(self.remote.data)[int(options["index"])])
        made = (registered, row, self.remote.env_config, self.remote.max_turns)
        self._episode = self.hold(Episode, made, imports=registered.imports)
        return str(self._episode.call("init", (), self.left()))

    def move(self, text: str) -> Move:
        if self._episode is None:
            raise RemoteEnvError(f"{self.url}: no episode is running")
        shown, reward, done = self._episode.call("step", (text,), self.left())
        return shown, reward, done

    def stop(self) -> None:
        episode, self._episode = self._episode, None
        if episode is not None:
            episode.close()  # the environment's own close() runs there


class Episode:
    """One skyrl-gym environment on one row (read by this process, sent whole: the worker never loads the
    dataset), kept in the worker process of its episode (:meth:`SkyRLSession.hold`)."""

    def __init__(self, registered: Registered, row: dict[str, Any], env_config: dict[str, Any], max_turns: int) -> None:
        from omegaconf import OmegaConf

        registered.adopt(_skyrl_gym().envs.registration.registry)
        self.row = row
        extras = {"max_turns": max_turns, **self.row}
        self.env = _skyrl_gym().make(registered.name, env_config=OmegaConf.create(env_config), extras=extras)

    def init(self) -> str:
        prompt, _ = self.env.init(_messages(self.row.get("prompt")))
        return _text(prompt)

    def step(self, text: str) -> Move:
        result = self.env.step(text)
        done = bool(result["done"])
        return _text(result.get("observations") or []), result["reward"] if done else None, done

    def close(self) -> None:
        self.env.close()


_IMPORTS = ("skyrl_gym", "omegaconf")  # loaded in an episode's worker before its time starts


def _skyrl_gym() -> Any:
    try:
        import skyrl_gym
    except ImportError:
        raise MissingDependencyError("skyrl-gym environments need skyrl-gym: pip install 'verihub[games]'") from None
    return skyrl_gym


def _messages(prompt: Any) -> list[dict[str, str]]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, list) and all(isinstance(m, Mapping) and isinstance(m.get("content"), str) for m in prompt):
        return [{"role": str(m.get("role", "user")), "content": m["content"]} for m in prompt]
    raise ValueError("a row's prompt must be text or chat messages ({role, content})")


def _text(messages: Any) -> str:
    return "\n\n".join(message["content"] for message in _messages(messages)) or "(nothing new)"


@cache
def _rows(data: str) -> list[dict[str, Any]]:
    """The rows of a dataset file (read once a process)."""
    path = Path(data)
    if path.suffix == ".parquet":
        import datasets

        return list(datasets.load_dataset("parquet", data_files=str(path), split="train"))
    text = path.read_text()
    if path.suffix == ".json":
        rows = json.loads(text)
    else:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise ValueError(f"{data} does not hold rows (JSON objects)")
    return rows


def skyrl_gym_spec(
    ref: str,
    *,
    data: str | Path | None = None,
    size: int | None = None,
    seed: int | None = None,
    max_turns: int = 1,
    env_config: Mapping[str, Any] | None = None,
    reward_range: tuple[float, float] | list[float] = (0.0, 1.0),
    timeout_s: float = 30.0,
) -> tuple[Any, SkyRLEnv]:
    """The :class:`~verihub.spec.loader.LoadedSpec` of ``skyrl-gym:ENV`` (see the module docstring)."""
    name = ref.removeprefix(PREFIX).strip()
    problems, rows = [], 0
    if not _ENV_ID.fullmatch(name):
        problems.append(SpecProblem(ref, None, "env", f"must name a skyrl-gym environment, like gsm8k, got {name!r}"))
    elif name not in _skyrl_gym().envs.registration.registry:
        problems.append(SpecProblem(ref, None, "env", f"skyrl-gym has no environment {name!r}"))
    if data is None:
        problems.append(SpecProblem(ref, None, "data", "name the tasks' file: data=PATH (SkyRL's dataset format)"))
    else:
        data = str(Path(data).resolve())
        try:
            rows = len(_rows(data))
        except (OSError, ValueError) as error:
            problems.append(SpecProblem(ref, None, "data", f"cannot read {data}: {error}"[:300]))
    if problems:
        raise SpecError(problems)
    remote = SkyRLEnv(
        url=PREFIX + name,
        action_field=FIELD,
        timeout_s=timeout_s,
        action_schema=ACTION_SCHEMA,
        reward_range=tuple(reward_range),
        data=str(data),
        max_turns=max_turns,
        env_config=dict(env_config or {}),
    )
    loaded = local_spec(
        remote,
        ref=ref,
        env_id="skyrl-gym-" + re.sub(r"[^a-z0-9._-]+", "-", name.lower()),
        version=_version(),
        domain="skyrl-gym",
        description=f"The skyrl-gym environment {name}, on the tasks of {Path(str(data)).name}.",
        tags=["skyrl-gym"],
        size=rows if size is None else min(size, rows),
        seed=seed or 0,
        max_turns=max_turns,
        source=f"{__name__}:tasks",
        check=f"{__name__}:episode_reward",
        problems=[],
    )
    return loaded, remote


def _version() -> str:
    from importlib.metadata import version

    return version("skyrl-gym")


def tasks(n: int, seed: int, **remote: Any) -> list[dict[str, Any]]:
    """The first ``n`` rows of the dataset as tasks (the dataset generator; ``seed`` is the loader's)."""
    env = SkyRLEnv(**remote)
    name = env.url.removeprefix(PREFIX)
    return episodes(env, n, 0, f"skyrl-gym-{name}", reset=lambda index: {"index": index})


@check(params=SkyRLEnv, mode="async")
async def episode_reward(completion: str, task: Mapping[str, Any], params: SkyRLEnv) -> CheckResult:
    """The environment's reward with the completion as its first step; 0 if the episode goes on."""
    return await first_move(params, task, completion)


def load_skyrl_gym(
    ref: str,
    *,
    size: int | None = None,
    seed: int | None = None,
    config: Mapping[str, Any] | None = None,
    **options: Any,
) -> OpenEnvEnvironment:
    """``verihub.load_env("skyrl-gym:ENV", data=PATH)``: ``options`` (or ``config``) are
    :func:`skyrl_gym_spec`'s keywords; ``judge`` and ``on_missing_judge`` go to the environment."""
    return load_local(ref, skyrl_gym_spec, OPTIONS, size=size, seed=seed, config=config, options=options)
