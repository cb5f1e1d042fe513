"""Held-out pass rate per environment: rollouts (:mod:`verihub.eval.rollout`) on each env's eval split, rated
as ``verihub eval`` rates them (:func:`verihub.eval.evaluate.metrics`).

Used between training steps (the live policy, through :meth:`HFBackend.wrap`), and before/after a run
(a saved model and adapter, through a model string). What keeps it cheap next to the training steps it
interrupts: every environment's tasks are sent at once, so an in-process model generates them as one
batch; each environment generates at most its own ``eval.max_tokens``; the set is ``tasks`` tasks per
environment. Across processes, each evaluates one shard of the tasks (:func:`heldout_rollouts` with
``shard``) and the rates come from the gathered rollouts of all of them (:func:`heldout_rates`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from verihub.errors import UsageError
from verihub.eval.evaluate import metrics
from verihub.eval.rollout import Rollout, RolloutEngine
from verihub.generation import Backend, Sampling, load_backend
from verihub.trainers.mixture import MixedEnv

__all__ = ["HeldoutRate", "heldout_pass_rates", "heldout_rates", "heldout_rollouts", "heldout_split", "heldout_tasks"]


@dataclass(frozen=True)
class HeldoutRate:
    """One environment's held-out pass@1, and what faults took out of it."""

    pass_rate: float  # over every sample asked for, one that faulted counting as failed: faults never raise it
    graded_pass_rate: float  # over the graded samples only (NaN when none was graded)
    samples: int  # samples asked for: tasks x samples per task
    faulted: int  # samples that faulted or never came back (left out of graded_pass_rate)
    tasks: int
    tasks_lost: int  # tasks none of whose samples was graded


def heldout_split(item: MixedEnv) -> str:
    """The split an environment holds out: its spec's eval split, else ``eval``/``test`` when present."""
    names = item.env.split_names
    preferred = item.env.spec.eval.split
    for name in (preferred, "eval", "test", "validation"):
        if name in names and name != "train":
            return name
    raise UsageError(f"{item.name} has no held-out split (splits: {', '.join(names)}); add one to dataset.split")


def heldout_tasks(item: MixedEnv, tasks: int) -> list[Mapping[str, Any]]:
    """The first ``tasks`` tasks of the environment's held-out split: the same set at every measurement."""
    dataset = item.env.dataset(heldout_split(item))
    return [dataset[index] for index in range(min(tasks, len(dataset)))]


def _sampling(item: MixedEnv, sampling: Sampling | None, temperature: float) -> Sampling:
    """``sampling`` as given, else ``temperature`` (default greedy) with the environment's own token budget."""
    return sampling or Sampling(temperature=temperature, max_tokens=item.env.spec.eval.max_tokens)


async def heldout_rollouts(
    backend: Backend,
    mix: Sequence[MixedEnv],
    *,
    tasks: int,
    samples: int = 1,
    sampling: Sampling | None = None,
    temperature: float = 0.0,
    shard: tuple[int, int] = (0, 1),
) -> dict[str, list[Rollout]]:
    """``samples`` rollouts of each of this shard's held-out tasks, per environment. ``shard`` is
    ``(index, count)``: this process takes every ``count``-th task from ``index``, so ``count``
    processes cover the set once between them. All of it is requested at once (an in-process backend
    batches it)."""
    index, count = shard

    async def one(item: MixedEnv) -> list[Rollout]:
        mine = heldout_tasks(item, tasks)[index::count]
        if not mine:
            return []
        engine = RolloutEngine(
            item.env, backend, _sampling(item, sampling, temperature), concurrency=len(mine) * samples
        )
        return await engine.run(mine, k=samples)

    rollouts = await asyncio.gather(*(one(item) for item in mix))
    return {item.name: found for item, found in zip(mix, rollouts, strict=True)}


def heldout_rates(
    mix: Sequence[MixedEnv], rollouts: Mapping[str, Sequence[Rollout]], *, tasks: int, samples: int = 1
) -> dict[str, HeldoutRate]:
    """Each environment's :class:`HeldoutRate` from the rollouts of every shard; a task's rollout that is
    missing (a shard that failed) counts as faulted, never as passed."""
    rates = {}
    for item in mix:
        task_ids = [str(task["id"]) for task in heldout_tasks(item, tasks)]
        given = list(rollouts.get(item.name, []))
        foreign = sorted({rollout.task_id for rollout in given} - set(task_ids))
        if foreign:  # another process's shard of another set: the processes did not load the same tasks
            raise UsageError(
                f"{item.name}: held-out rollouts of {len(foreign)} tasks outside its first {tasks} "
                f"held-out tasks ({', '.join(foreign[:3])}): every process must load the same "
                "environments, data and seed"
            )
        found = metrics(task_ids, samples, given)
        rates[item.name] = HeldoutRate(
            found["pass@1"],
            found["pass@1_graded"],
            found["rollouts"],
            found["rollouts_faulted"],
            found["tasks"],
            found["tasks_lost"],
        )
    return rates


def heldout_pass_rates(
    model: str | Backend,
    mix: Sequence[MixedEnv],
    *,
    adapter: str | None = None,
    tasks: int = 100,
    samples: int = 1,
    sampling: Sampling | None = None,
    temperature: float = 0.0,
) -> dict[str, HeldoutRate]:
    """pass@1 on up to ``tasks`` held-out tasks of each environment, averaged over ``samples`` samples per
    task, with the faults behind it. Each environment samples at ``temperature`` (default greedy) up to
    its own ``eval.max_tokens``, unless ``sampling`` sets both for every environment.

    ``model`` is a model string (``hf:PATH``, with ``adapter`` a LoRA adapter directory on top) or a backend.
    """

    async def run() -> dict[str, list[Rollout]]:
        backend = load_backend(model, adapter=adapter) if isinstance(model, str) else model
        try:
            return await heldout_rollouts(
                backend, mix, tasks=tasks, samples=samples, sampling=sampling, temperature=temperature
            )
        finally:
            if isinstance(model, str):
                await backend.aclose()

    return heldout_rates(mix, asyncio.run(run()), tasks=tasks, samples=samples)
