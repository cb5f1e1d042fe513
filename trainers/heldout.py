"""Held-out pass rate per environment: the eval loop (:mod:`verihub.evaluate`) on each env's eval split.

Used between training steps (the live policy, through :meth:`HFBackend.wrap`), and before/after a run
(a saved model and adapter, through a model string).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from verihub.evaluate import aevaluate
from verihub.generation import Backend, Sampling, load_backend
from verihub.trainers.mixture import MixedEnv

__all__ = ["HeldoutRate", "heldout_pass_rates", "heldout_split"]


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
    raise ValueError(f"{item.name} has no held-out split (splits: {', '.join(names)}); add one to dataset.split")


def heldout_pass_rates(model: str | Backend, mix: Sequence[MixedEnv], *, adapter: str | None = None,
                       tasks: int = 100, samples: int = 1, sampling: Sampling | None = None) -> dict[str, HeldoutRate]:
    """pass@1 on up to ``tasks`` held-out tasks of each environment, averaged over ``samples`` samples per
    task (greedy unless ``sampling`` says otherwise), with the faults behind it.

    ``model`` is a model string (``hf:PATH``, with ``adapter`` a LoRA adapter directory on top) or a backend.
    """
    sampling = sampling or Sampling(temperature=0.0, max_tokens=64)

    async def run() -> dict[str, HeldoutRate]:
        backend = load_backend(model, adapter=adapter) if isinstance(model, str) else model
        try:
            rates = {}
            for item in mix:
                report = await aevaluate(item.env, backend, n=tasks, k=samples, sampling=sampling,
                                        split=heldout_split(item))
                metrics = report.metrics
                rates[item.name] = HeldoutRate(metrics["pass@1"], metrics["pass@1_graded"], metrics["rollouts"],
                                               metrics["rollouts_faulted"], metrics["tasks"], metrics["tasks_lost"])
            return rates
        finally:
            if isinstance(model, str):
                await backend.aclose()

    return asyncio.run(run())
