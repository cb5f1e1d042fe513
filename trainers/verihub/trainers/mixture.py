"""The environments of a run, resolved from what a user names, and the mixed dataset TRL trains on.

An environment can be named by a directory, an installed name (``arithmetic``), a hub id with a version
spec (``alice/arithmetic@^1.0``: installed from the hub when the installed version does not satisfy it),
or passed as a loaded :class:`~verihub.Environment`. A list weighs them equally; a dict gives weights.

Every task of every environment becomes one row: ``prompt`` (the chat messages), ``environment`` (the
name the run uses for it, which TRL routes on), ``task`` (the task as JSON text, since environments'
columns differ), ``task_id`` and ``difficulty`` (the task's ``difficulty`` column as text, ``"all"``
without one). How often a row is drawn is the sampler's business (:mod:`verihub.trainers.curriculum`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verihub.environment import hub_refs
from verihub.environment.core import Environment
from verihub.errors import UsageError

if TYPE_CHECKING:
    from datasets import Dataset

__all__ = [
    "DIFFICULTY_COLUMN",
    "EnvRef",
    "MixedEnv",
    "load_env_ref",
    "mixed_dataset",
    "parse_env_option",
    "resolve_envs",
]

EnvRef = str | Path | Environment
DIFFICULTY_COLUMN = "difficulty"  # a task column, by convention; it buckets the curriculum's pass rates


@dataclass(frozen=True)
class MixedEnv:
    """One environment of a run: the name rows and logs use, the environment, its share of the mix."""

    name: str
    env: Environment
    weight: float  # normalised: the weights of a run sum to 1

    @property
    def multi_turn(self) -> bool:
        return self.env.spec.interaction.kind == "multi_turn"


def resolve_envs(envs: EnvRef | Sequence[EnvRef] | Mapping[EnvRef, float], *, hub: str | None = None) -> list[MixedEnv]:
    """Load every environment named, with normalised weights; names must be unique within a run."""
    if isinstance(envs, (str, Path, Environment)):
        envs = [envs]
    weighted = list(envs.items()) if isinstance(envs, Mapping) else [(ref, 1.0) for ref in envs]
    if not weighted:
        raise UsageError("envs: name at least one environment")
    for ref, weight in weighted:
        if not isinstance(weight, (int, float)) or weight <= 0:
            raise UsageError(f"envs: the weight of {ref} must be a positive number (got {weight!r})")
    total = float(sum(weight for _, weight in weighted))
    mixed: list[MixedEnv] = []
    for ref, weight in weighted:
        env = load_env_ref(ref, hub=hub)
        taken = {item.name for item in mixed}
        name = env.id if env.id not in taken else str(ref)
        if name in taken:
            raise UsageError(f"envs: {ref} is named twice")
        mixed.append(MixedEnv(name, env, weight / total))
    return mixed


def load_env_ref(ref: EnvRef, *, hub: str | None = None) -> Environment:
    """The environment ``ref`` names; a hub id is pip-installed from ``hub`` first when needed
    (:func:`verihub.environment.hub_refs.load_env_ref`, the rule ``verihub regrade --env`` reads refs by too)."""
    return ref if isinstance(ref, Environment) else hub_refs.load_env_ref(ref, hub=hub)


def parse_env_option(option: str) -> tuple[str, float]:
    """``E[:WEIGHT]`` from the command line: ``alice/arithmetic@^1.0:0.7`` -> (``alice/arithmetic@^1.0``, 0.7).
    A URL's port is not a weight: ``openenv:http://127.0.0.1:8000`` has weight 1 (a URL without a port
    takes one after a slash: ``openenv:http://host/:0.5``)."""
    ref, colon, weight = option.rpartition(":")
    if colon and not _ends_at_a_host(ref):
        try:
            return ref, float(weight)
        except ValueError:
            pass
    return option, 1.0


def _ends_at_a_host(ref: str) -> bool:
    """Whether ``ref`` is a URL cut right after its host name (so what follows the colon is its port)."""
    _, scheme, rest = ref.partition("://")
    return bool(scheme) and not any(mark in rest for mark in ":/?#")


def mixed_dataset(mix: Sequence[MixedEnv], split: str = "train") -> Dataset:
    """One row per task of every environment's ``split`` (see the module docstring for the columns)."""
    from datasets import Dataset

    rows: dict[str, list[Any]] = {"prompt": [], "environment": [], "task": [], "task_id": [], "difficulty": []}
    for item in mix:
        for task in item.env.dataset(split):
            rows["prompt"].append(item.env.render(task))
            rows["environment"].append(item.name)
            rows["task"].append(json.dumps(task, default=str))
            rows["task_id"].append(str(task["id"]))
            rows["difficulty"].append(str(task.get(DIFFICULTY_COLUMN, "all")))
    return Dataset.from_dict(rows)
