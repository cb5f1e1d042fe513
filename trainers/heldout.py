"""Held-out pass rate per environment: the eval loop (:mod:`verihub.evaluate`) on each env's eval split.

Used between training steps (the live policy, through :meth:`HFBackend.wrap`), and before/after a run
(a saved model and adapter, through a model string).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from verihub.evaluate import aevaluate
from verihub.generation import Backend, Sampling, load_backend
from verihub.trainers.mixture import MixedEnv

__all__ = ["heldout_pass_rates", "heldout_samples", "heldout_split"]


def heldout_split(item: MixedEnv) -> str:
    """The split an environment holds out: its spec's eval split, else ``eval``/``test`` when present."""
    names = item.env.split_names
    preferred = item.env.spec.eval.split
    for name in (preferred, "eval", "test", "validation"):
        if name in names and name != "train":
            return name
    raise ValueError(f"{item.name} has no held-out split (splits: {', '.join(names)}); add one to dataset.split")


def heldout_pass_rates(model: str | Backend, mix: Sequence[MixedEnv], *, adapter: str | None = None,
                       tasks: int = 100, samples: int = 1, sampling: Sampling | None = None) -> dict[str, float]:
    """pass@1 on up to ``tasks`` held-out tasks of each environment, averaged over ``samples`` samples per
    task (greedy unless ``sampling`` says otherwise).

    ``model`` is a model string (``hf:PATH``, with ``adapter`` a LoRA adapter directory on top) or a backend.
    """
    sampling = sampling or Sampling(temperature=0.0, max_tokens=64)

    async def run() -> dict[str, float]:
        backend = load_backend(model, adapter=adapter) if isinstance(model, str) else model
        try:
            rates = {}
            for item in mix:
                report = await aevaluate(item.env, backend, n=tasks, k=samples, sampling=sampling,
                                        split=heldout_split(item))
                rates[item.name] = report.metrics["pass@1"]
            return rates
        finally:
            if isinstance(model, str):
                await backend.aclose()

    return asyncio.run(run())


def heldout_samples(mix: Sequence[MixedEnv], *, tasks: int = 100, samples: int = 1) -> dict[str, int]:
    """How many graded samples :func:`heldout_pass_rates` averages per environment with these arguments."""
    return {item.name: min(tasks, len(item.env.dataset(heldout_split(item)))) * samples for item in mix}
