"""What a ``verihub serve`` process holds: the served environments, their tasks, the live sessions."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from verihub.environment.core import Environment
from verihub.errors import UsageError
from verihub.serve.wire import ResetParams

__all__ = ["Catalog", "ServeState", "TaskNotFound"]

GRADES_IN_FLIGHT = 8  # chunks of POST /grade graded at once, over all requests


class TaskNotFound(LookupError):
    """No such environment, split or task here; the message names what exists."""


class Catalog:
    """The served environments by name, and their tasks by id (read out of Arrow on first use)."""

    def __init__(self, envs: Sequence[Environment]) -> None:
        self.envs: dict[str, Environment] = {}
        for env in envs:
            if env.id in self.envs:
                raise UsageError(f"two environments are named {env.id!r}: serve one of them")
            self.envs[env.id] = env
        self._rows: dict[tuple[str, str | None], dict[str, Mapping[str, Any]]] = {}

    def env(self, name: str | None) -> Environment:
        if name is None:
            if len(self.envs) == 1:
                return next(iter(self.envs.values()))
            raise TaskNotFound(f"several environments are served ({', '.join(self.envs)}): name one with 'env'")
        try:
            return self.envs[name]
        except KeyError:
            raise TaskNotFound(f"no environment {name!r} here; served: {', '.join(self.envs)}") from None

    def split(self, env: Environment, split: str | None) -> str:
        if split is None:
            return "train" if "train" in env.split_names else env.split_names[0]
        if split not in env.split_names:
            raise TaskNotFound(f"{env.id} has no split {split!r}; splits: {', '.join(env.split_names)}")
        return split

    def task(self, params: ResetParams) -> tuple[Environment, Mapping[str, Any]]:
        """The task a reset asks for: by id, by index in its split, or drawn with its seed."""
        env = self.env(params.env)
        if params.task_id is not None:
            return env, self.by_id(env, params.task_id, params.split)
        split = self.split(env, params.split)
        rows = env.tasks(split)
        index = params.index if params.index is not None else random.Random(params.seed).randrange(len(rows))
        if index >= len(rows):
            raise TaskNotFound(f"{env.id}/{split} has {len(rows)} tasks; index {index} is past the end")
        return env, rows[index]

    def by_id(self, env: Environment, task_id: str, split: str | None) -> Mapping[str, Any]:
        row = self.ids(env, split).get(task_id)
        if row is None:
            raise TaskNotFound(f"{env.id} has no task {task_id!r}" + (f" in split {split!r}" if split else ""))
        return row

    def ids(self, env: Environment, split: str | None) -> dict[str, Mapping[str, Any]]:
        """The tasks of ``split`` by id; with no split, of every split (an id in an earlier split first).
        Built on first use: a row lookup in Arrow costs more than a cheap grade."""
        rows = self._rows.get((env.id, split))
        if rows is None:
            if split is None:
                rows = {}
                for name in env.split_names:
                    for task_id, row in self.ids(env, name).items():
                        rows.setdefault(task_id, row)
            else:
                rows = {str(row["id"]): row for row in env.tasks(self.split(env, split))}
            self._rows[(env.id, split)] = rows  # a split that is not the env's raised above: no entry
        return rows


def listed(env: Environment, row: Mapping[str, Any], index: int) -> dict[str, Any]:
    """What a task listing shows of a task: how to ask for it and its prompt, never its answer columns."""
    shown = {"id": str(row.get("id", "")), "index": index, "prompt": env.render(row)}
    if "difficulty" in row:
        shown["difficulty"] = row["difficulty"]
    return shown


@dataclass
class ServeState:
    """Shared by the routes (``app.state.serve``): one event loop, so no locks."""

    catalog: Catalog
    max_sessions: int
    idle_timeout_s: float  # a session without a reset or step for this long is closed
    max_session_s: float  # and one open this long, however busy: a slot is not held forever
    sessions: set[Any] = field(default_factory=set)  # one entry per open WebSocket connection
    grading: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(GRADES_IN_FLIGHT))
