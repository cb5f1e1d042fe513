"""What both GRPO trainers add to TRL's loop: every log line to ``output_dir/metrics.jsonl``, and the held-out
pass rates measured during the run. ``run`` is the verihub trainer (:class:`~.grpo.GRPOTrainer` or
:class:`~.async_grpo.AsyncGRPOTrainer`): its ``mix``, ``monitor``, ``tokenizer``, ``trl`` and held-out knobs."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

from accelerate.utils import gather_object
from transformers import TrainerCallback

from verihub.trainers.display import finite
from verihub.trainers.heldout import heldout_rates, heldout_rollouts

__all__ = ["METRICS_FILE", "Heldout", "MetricsFile"]

logger = logging.getLogger("verihub.trainers")

METRICS_FILE = "metrics.jsonl"


class MetricsFile(TrainerCallback):
    """Every log line, TRL's metrics and ours, plus the alerts, appended to ``output_dir/metrics.jsonl``. The first
    record also says what each environment of the run is (``environments``: id, version and, when a loader pinned
    one, its source, the ``hf://datasets/ORG/NAME@<commit>`` it was loaded from)."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self._identified = False

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero:
            Path(args.output_dir).mkdir(parents=True, exist_ok=True)
            self.run.metrics_path.write_text("")
            self._identified = False

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero or not logs:
            return
        record = {"step": state.global_step, **{k: v for k, v in logs.items() if v is not None}}
        if not self._identified:
            record["environments"] = {
                item.name: {
                    "id": item.env.id,
                    "version": item.env.version,
                    "source": item.env.load_report.source if item.env.load_report is not None else None,
                }
                for item in self.run.mix
            }
            self._identified = True
        if self.run.alerts:
            record["alerts"] = self.run.alerts
        with self.run.metrics_path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(finite(record)) + "\n")


class Heldout(TrainerCallback):
    """Every ``heldout_every`` steps (and at the start), the policy's pass rate on held-out tasks.

    Every process takes part (they all reach the same step): each generates a shard of the tasks with
    the full policy (TRL's unwrapping, which also gathers ZeRO-3's parameters), then the rollouts of all
    shards are gathered, so each task is evaluated once and every process records the same rates.
    A shard that fails is logged and counted as faulted; its process still joins the gather, so the
    others never wait for it.
    """

    def __init__(self, run: Any) -> None:
        self.run = run

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._measure(state.global_step)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step % self.run.run_config.heldout_every == 0:
            self._measure(state.global_step)

    def _measure(self, step: int) -> None:
        from trl.models import unwrap_model_for_generation

        from verihub.generation.local import HFBackend

        run, trainer = self.run, self.run.trl
        accelerator = trainer.accelerator
        shard = (accelerator.process_index, accelerator.num_processes)
        began = time.perf_counter()
        try:
            with unwrap_model_for_generation(
                trainer.model_wrapped,
                accelerator,
                gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
            ) as network:
                policy = HFBackend.wrap(network, run.tokenizer, "hf:policy")
                rollouts = asyncio.run(
                    heldout_rollouts(
                        policy,
                        run.mix,
                        tasks=run.run_config.heldout_tasks,
                        samples=run.run_config.heldout_samples,
                        temperature=run.run_config.heldout_temperature,
                        shard=shard,
                    )
                )
        except Exception as error:  # noqa: BLE001 - counted as faulted below; raising here would hang the others
            logger.warning(
                "held-out evaluation failed on process %d (its tasks count as faulted): %s: %s",
                shard[0],
                type(error).__name__,
                error,
            )
            rollouts = {}
        seconds = time.perf_counter() - began
        run.run_log.write(
            f"verihub heldout step={step} shard={shard[0]}/{shard[1]} seconds={seconds:.2f} "
            + " ".join(f"{env}={','.join(sorted({r.task_id for r in found}))}" for env, found in rollouts.items())
        )
        if shard[1] > 1:
            merged: dict[str, list[Any]] = {}
            for part in gather_object([rollouts]):
                for env, found in part.items():
                    merged.setdefault(env, []).extend(found)
            rollouts = merged
        run.monitor.record_heldout(
            heldout_rates(run.mix, rollouts, tasks=run.run_config.heldout_tasks, samples=run.run_config.heldout_samples)
        )
