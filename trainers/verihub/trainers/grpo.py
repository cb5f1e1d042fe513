"""GRPO on any mix of verihub environments: a thin layer over TRL's ``GRPOTrainer``.

    from verihub.trainers import GRPOTrainer
    trainer = GRPOTrainer("Qwen/Qwen2.5-1.5B-Instruct", {"alice/gsm8k@1": 0.5, "envs/arithmetic": 0.5},
                          lora=True, curriculum="adaptive", max_steps=200, learning_rate=5e-6)
    trainer.train()                  # the adapter (or model) and metrics.jsonl land in output_dir

What this layer adds to TRL, and where: the mixed dataset (:mod:`.mixture`), one reward function per
environment from its verifier with faults as ``None`` (:mod:`.rewards`), sandboxed tool environments
for multi-turn ones (:mod:`.toolenv`), weighted or adaptive sampling (:mod:`.curriculum`), per-domain
metrics and reward-hacking alerts (:mod:`.monitors`) logged with TRL's own and to ``metrics.jsonl``,
held-out pass rates during training (:mod:`.heldout`). Everything else is TRL: keyword arguments that
are not this class's go to ``trl.GRPOConfig`` unchanged (``max_steps``, ``learning_rate``,
``num_generations``, ``vllm_mode``, ...), and ``trainer.trl`` is the TRL trainer itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trl
from accelerate.utils import gather_object
from transformers import TrainerCallback

from verihub.eval.gradelog import GradeLog
from verihub.serve.graders import GraderPool
from verihub.trainers.callbacks import METRICS_FILE, Heldout, MetricsFile
from verihub.trainers.config import RunConfig, split_knobs
from verihub.trainers.curriculum import MixtureSampler, make_curriculum
from verihub.trainers.display import check_display
from verihub.trainers.mixture import EnvRef, mixed_dataset, resolve_envs
from verihub.trainers.models import TrainerRun, device_defaults, load_tokenizer, lora_config, require_vllm
from verihub.trainers.monitors import MonitorKnobs, RunMonitor
from verihub.trainers.rewards import EnvReward, GradeLedger
from verihub.trainers.runlog import TRL_LOG, RunLog
from verihub.trainers.toolenv import environment_class

__all__ = ["GRPOTrainer"]


class GRPOTrainer(TrainerRun):
    """GRPO with LoRA (peft), optional vLLM generation and a curriculum, on a weighted mix of environments.

    ``model``: a hub id, a local path or a model object (then pass ``tokenizer=`` unless the model knows
    its ``name_or_path``). ``envs``: directories, installed names, hub ids with version specs
    (``alice/arithmetic@^1.0``, installed from ``hub`` when needed) or loaded environments, as a list
    (equal weights) or a dict of weights. verihub's knobs (``lora``, ``curriculum``, ``heldout_every``,
    ``graders``...: :class:`~verihub.trainers.config.RunConfig`, each with its default and help) come as
    ``config=`` or as keywords; ``monitor``: the reward-hacking alerts' knobs (:mod:`.monitors`); the other
    keywords go to ``trl.GRPOConfig``. Held-out evaluation: every ``heldout_every`` steps, pass@1 on
    ``heldout_tasks`` held-out tasks per environment up to each environment's ``eval.max_tokens``, a faulted
    sample counting as failed; each process evaluates a share of the tasks, always in this process (also with
    ``graders``). TRL's own log lines go to ``output_dir/trl.log``.
    """

    def __init__(
        self,
        model: Any,
        envs: EnvRef | Sequence[EnvRef] | Mapping[EnvRef, float],
        config: RunConfig | None = None,
        *,
        tokenizer: Any = None,
        monitor: MonitorKnobs | None = None,
        callbacks: Sequence[TrainerCallback] = (),
        **keywords: Any,
    ) -> None:
        self.run_config, grpo_config_overrides = split_knobs(config, keywords)
        knobs = self.run_config
        knobs.check_for("sync")
        check_display(knobs.display)
        if knobs.use_vllm:
            require_vllm()
        # grading and tool sessions on `verihub serve` processes (verihub.serve.graders); None: in this process
        self.graders: GraderPool | None = (
            knobs.graders
            if isinstance(knobs.graders, GraderPool)
            else GraderPool(list(knobs.graders), token=knobs.grader_token)
            if knobs.graders
            else None
        )
        self.run_log = RunLog(Path(knobs.output_dir) / TRL_LOG)
        with self.run_log:  # the dependencies' notices while TRL sets up (model loading, config) go there too
            self.mix = resolve_envs(envs, hub=knobs.hub)
            self.tokenizer = load_tokenizer(model, tokenizer)
            self.config = trl.GRPOConfig(
                **{
                    **self._defaults(),
                    "output_dir": str(knobs.output_dir),
                    "use_vllm": knobs.use_vllm,
                    **grpo_config_overrides,
                }
            )
            self.curriculum = make_curriculum(knobs.curriculum)
            self.ledger = GradeLedger()
            self.grade_log = GradeLog(knobs.output_dir)  # what `verihub regrade` reads back
            self.monitor = RunMonitor([item.name for item in self.mix], self.config.num_generations, monitor)
            self.alerts: list[str] = []
            dataset = mixed_dataset(self.mix, "train")
            sizes: dict[tuple[str, str], int] = {}
            for env, difficulty in zip(dataset["environment"], dataset["difficulty"], strict=True):
                sizes[(env, difficulty)] = sizes.get((env, difficulty), 0) + 1
            self.curriculum.bind(sizes, {item.name: item.weight for item in self.mix})
            self.trl = _TRLTrainer(
                run=self,
                model=model,
                reward_funcs=[EnvReward(item, self.ledger, self._grader(item), self.grade_log) for item in self.mix],
                args=self.config,
                train_dataset=dataset,
                processing_class=self.tokenizer,
                peft_config=lora_config(knobs.lora),
                environment_factory=self._environment_factories(),
                callbacks=[
                    *self._shown("GRPO", knobs.display),
                    MetricsFile(self),
                    *([Heldout(self)] if knobs.heldout_every else []),
                    *callbacks,
                ],
            )
            self._drop_printers()

    @property
    def metrics_path(self) -> Path:
        return Path(self.config.output_dir) / METRICS_FILE

    def _defaults(self) -> dict[str, Any]:
        """What differs from TRL's defaults: settings that work on CPU, per-step logs, tool turns by spec."""
        defaults: dict[str, Any] = {**device_defaults(), "logging_steps": 1, "save_strategy": "no", "report_to": "none"}
        # a session whose every tool call is a turn (a grader's, a remote's episode) needs one more for the answer
        turns = [
            item.env.spec.interaction.max_turns - int(self.graders is not None or item.env.graded_remotely)
            for item in self.mix
            if item.multi_turn
        ]
        if turns:
            defaults["max_tool_calling_iterations"] = max(turns)
        return defaults

    def _environment_factories(self) -> dict[str, Any] | None:
        """TRL routes rows by the ``environment`` column when any environment has tools; None otherwise."""
        if not any(item.multi_turn for item in self.mix):
            return None
        return {item.name: environment_class(item, self._grader(item)) for item in self.mix}

    def _grader(self, item: Any) -> Any:
        return self.graders.grader(item.env, "train") if self.graders is not None else None

    def _observe(self, outcomes: list[Any]) -> None:
        self.curriculum.observe([outcome for outcome in outcomes if outcome is not None])
        self.monitor.observe(outcomes)
        for env, agreement in self.ledger.take_agreements().items():
            self.monitor.record_judge_agreement(env, agreement)

    def _run_metrics(self) -> dict[str, float]:
        metrics, alerts = self.monitor.flush()
        self.alerts = alerts
        sampler = self.trl.sampler
        for (env, difficulty), weight in (sampler.last_weights if sampler else {}).items():
            metrics[f"verihub/curriculum/{env}/{difficulty}"] = weight
        return metrics


class _TRLTrainer(trl.GRPOTrainer):
    """TRL's trainer with our sampler, our view of each scored batch, and our metrics in its logs."""

    args: trl.GRPOConfig  # what TRL's GRPOTrainer holds (its base class declares TrainingArguments)
    num_generations: int

    def __init__(self, *, run: GRPOTrainer, **kwargs: Any) -> None:
        self.verihub_run = run
        self.sampler: MixtureSampler | None = None
        super().__init__(**kwargs)

    def _get_train_sampler(self, dataset: Any = None) -> MixtureSampler:
        dataset = self.train_dataset if dataset is None else dataset
        buckets: dict[tuple[str, str], list[int]] = {}
        for row, (env, difficulty) in enumerate(zip(dataset["environment"], dataset["difficulty"], strict=True)):
            buckets.setdefault((env, difficulty), []).append(row)
        self._task_ids = list(dataset["task_id"])
        self.sampler = MixtureSampler(
            buckets,
            self.verihub_run.curriculum,
            mini_repeat_count=self.num_generations,
            batch_size=self.args.generation_batch_size // self.num_generations,  # type: ignore[operator]  # set by GRPOConfig
            repeat_count=self.num_iterations * self.args.steps_per_generation,  # type: ignore[operator]  # set by GRPOConfig
            seed=self.args.seed,
        )
        return self.sampler

    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> Any:
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        outcomes = self.verihub_run.ledger.take(len(inputs))
        drawn = self._drawn()
        if self.accelerator.num_processes > 1:  # every process learns from every process's grades, in order
            parts = gather_object([(drawn, outcomes)])
            _check_same_draw([part[0] for part in parts])
            outcomes = [outcome for _, part in parts for outcome in part]
        if self.model.training:  # type: ignore[union-attr]  # set once training runs
            self.verihub_run.run_log.write(f"verihub draw step={self.state.global_step} {json.dumps(drawn)}")
            self.verihub_run._observe(outcomes)
        return rewards

    def _drawn(self) -> dict[str, Any]:
        """The sampler's latest draw with the task ids of its rows: a dataset that differs between processes
        (a generator that ignores its seed) shows here even where the row numbers agree."""
        if self.sampler is None:
            return {}
        drawn = self.sampler.drawn()
        return {**drawn, "task_ids": [self._task_ids[row] for row in drawn["rows"]]}

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if self.model.training and not any(key.startswith("eval_") for key in logs):  # type: ignore[union-attr]  # the model is set once training runs
            logs.update(self.verihub_run._run_metrics())
        super().log(logs, start_time)


def _check_same_draw(draws: list[dict[str, Any]]) -> None:
    """Every process must have drawn the same prompts with the same curriculum weights (TRL hands each its
    slice of one batch); otherwise groups mix prompts and the curricula drift apart. All processes see the
    same gathered draws, so all of them raise together rather than one hanging at the next collective."""
    for rank, draw in enumerate(draws[1:], start=1):
        if draw != draws[0]:
            raise RuntimeError(
                f"process {rank} drew other prompts than process 0 (draw {draw.get('chunk')}: tasks "
                f"{draw.get('task_ids')} vs {draws[0].get('task_ids')}; curriculum weights "
                f"{'differ' if draw.get('weights') != draws[0].get('weights') else 'agree'}): every "
                "process must load the same environments, data and seed"
            )
