"""Decoupled asynchronous GRPO on any mix of verihub environments: TRL's ``AsyncGRPOTrainer`` learns while
a vLLM server in another process generates.

    from verihub.trainers import AsyncGRPOTrainer
    AsyncGRPOTrainer("runs/tiny", ["envs/reverse", "envs/sort"], lora=True, max_staleness=1, max_steps=50).train()

The server is started here on loopback (LoRA slots for ``max_staleness + 2`` policy versions, logprobs after
temperature, the pause/resume and adapter routes, a fresh key asked of every request on every route), unless
``vllm_server`` names one already running with those settings (and ``vllm_server_key``, its key, if it asks
one). Rollouts come from :class:`~.async_worker.RolloutWorker`, stamped with the policy version
that made them; TRL drops those more than ``max_staleness`` versions old, trains on the rest, and after each
step publishes the LoRA adapter to the server under a new name (no restart, no base weight moved), logging
``sample/staleness_mean``/``_max`` and the time it waited for rollouts (``perf/rollout_wait_s``). Every
``sync_check_every`` syncs the server's greedy answer to a fixed prompt must equal the trainer's own, or the
run stops (:class:`WeightSyncError`). The mixture, curriculum, held-out measurement, monitors and fault rule
are the synchronous trainer's. Multi-turn tool environments train synchronously only, for now.

Full-weight sync (no LoRA) is TRL's NCCL path: a CUDA GPU on both sides; on a CPU train with ``lora``.
Keyword arguments this class does not take go to ``AsyncGRPOConfig`` unchanged.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from verihub import settings
from verihub.errors import UsageError, WeightSyncError
from verihub.eval.gradelog import GradeLog
from verihub.trainers._vllm_keys import keyed
from verihub.trainers.callbacks import METRICS_FILE, Heldout, MetricsFile
from verihub.trainers.config import RunConfig, split_knobs
from verihub.trainers.curriculum import Curriculum, MixtureSampler, make_curriculum
from verihub.trainers.display import DisplayMode, check_display
from verihub.trainers.mixture import EnvRef, mixed_dataset, resolve_envs
from verihub.trainers.models import TrainerRun, device_defaults, load_tokenizer, lora_config
from verihub.trainers.monitors import MonitorKnobs, RunMonitor
from verihub.trainers.rewards import EnvReward, GradeLedger, Outcome
from verihub.trainers.runlog import TRL_LOG, RunLog

__all__ = ["AsyncGRPOTrainer", "WeightSyncError"]


class AsyncGRPOTrainer(TrainerRun):
    """Asynchronous GRPO (see the module docstring). ``model``: a local model directory or hub id, which the
    server loads too. The knobs are :class:`~verihub.trainers.config.RunConfig`'s, as for
    :class:`~.grpo.GRPOTrainer` (``lora=True`` on a CPU), with three of its own: ``max_staleness``,
    ``sync_check_every``, and ``vllm_server``, the URL of a server already running (started with
    ``--enable-lora --max-lora-rank R --max-loras N --logprobs-mode processed_logprobs`` and
    ``VLLM_SERVER_DEV_MODE=1``, ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``; to ask a key on every route, as the
    servers verihub starts do, add ``--middleware verihub_vllm_key.RequireKey`` with
    ``verihub.generation.vllm_server.KEY_PATH`` on its ``PYTHONPATH`` and the key in ``VERIHUB_VLLM_KEY``, which
    this trainer reads too, or ``vllm_server_key``); None starts one from ``VERIHUB_VLLM_PYTHON``."""

    def __init__(
        self,
        model: str | Path,
        envs: EnvRef | Sequence[EnvRef] | Mapping[EnvRef, float],
        config: RunConfig | None = None,
        *,
        tokenizer: Any = None,
        monitor: MonitorKnobs | None = None,
        callbacks: Sequence[TrainerCallback] = (),
        **keywords: Any,
    ) -> None:
        self.run_config, config_overrides = split_knobs(config, keywords)
        knobs = self.run_config
        knobs.check_for("async")
        check_display(knobs.display)
        peft = lora_config(knobs.lora)
        if peft is None and not _cuda():
            raise UsageError(
                "asynchronous GRPO without LoRA syncs full weights over NCCL, which needs a CUDA GPU; "
                "on a CPU pass lora=True (the adapter reaches the server over HTTP)"
            )
        self.graders = None  # grading runs in this process (the worker's thread)
        self.run_log = RunLog(Path(knobs.output_dir) / TRL_LOG)
        self.server: Any = None  # the vLLM server this trainer starts, when it starts one
        self._keys = contextlib.ExitStack()  # the server's key on TRL's requests to it, until close()
        self._cpu_split: tuple[list[int], list[int], set[int], int] | None = None
        self._lock = threading.Lock()  # the worker observes grades on its thread; logging reads them on this one
        self.alerts: list[str] = []
        try:
            with self.run_log:
                self._build(
                    model,
                    envs,
                    peft,
                    tokenizer,
                    monitor,
                    [*([_Heldout(self)] if knobs.heldout_every else []), *callbacks],
                    config_overrides,
                )
        except BaseException:
            self.close()  # a server already started, the cores lent to it
            raise

    def _build(
        self,
        model: str | Path,
        envs: Any,
        peft: Any,
        tokenizer: Any,
        monitor: MonitorKnobs | None,
        callbacks: list[Any],
        config_overrides: Mapping[str, Any],
    ) -> None:
        knobs = self.run_config
        self.mix = resolve_envs(envs, hub=knobs.hub)
        multi_turn = [item.name for item in self.mix if item.multi_turn]
        if multi_turn:
            raise ValueError(f"{', '.join(multi_turn)}: tool environments train synchronously only (GRPOTrainer)")
        self.tokenizer = load_tokenizer(str(model), tokenizer)
        self.config = _config(knobs.output_dir, knobs.max_staleness, config_overrides)
        vllm_server, key = knobs.vllm_server, settings.vllm_key(knobs.vllm_server_key)
        if vllm_server is None:
            self._cpu_split = _split_cpus()
            self.server = _start_server(
                str(model), self.config, getattr(peft, "r", 16), self._cpu_split[1] if self._cpu_split else None
            )
            vllm_server, key = self.server.url, self.server.api_key
        self.config.vllm_server_base_url = vllm_server
        self.server_headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._keys.enter_context(keyed(vllm_server, key))
        self.curriculum = make_curriculum(knobs.curriculum)
        self.ledger = GradeLedger()
        self.grade_log = GradeLog(knobs.output_dir)  # what `verihub regrade` reads back
        self.monitor = RunMonitor([item.name for item in self.mix], self.config.num_generations, monitor)
        dataset = mixed_dataset(self.mix, "train")
        self.sampler = _sampler(
            dataset, self.curriculum, {item.name: item.weight for item in self.mix}, self.config.seed
        )
        self.trl = _build_trl(self, str(model), dataset, peft, knobs.display, knobs.sync_check_every, callbacks)
        self._drop_printers()

    @property
    def metrics_path(self) -> Path:
        return Path(self.config.output_dir) / METRICS_FILE

    def train(self, **kwargs: Any) -> Any:
        try:
            return super().train(**kwargs)
        finally:
            self.close()

    def close(self) -> None:
        """Stop the server this trainer started (a server passed as ``vllm_server`` is left running), and give
        this process back the cores it lent the server."""
        self._keys.close()
        if self.server is not None:
            self.server.close()
            self.server = None
        if self._cpu_split is not None:
            import torch

            _, _, cores, threads = self._cpu_split
            os.sched_setaffinity(0, cores)
            torch.set_num_threads(threads)
            self._cpu_split = None

    def _observe(self, outcomes: list[Outcome | None]) -> None:
        with self._lock:
            self.curriculum.observe([outcome for outcome in outcomes if outcome is not None])
            self.monitor.observe(outcomes)
            for env, agreement in self.ledger.take_agreements().items():
                self.monitor.record_judge_agreement(env, agreement)

    def _run_metrics(self) -> dict[str, float]:
        with self._lock:
            metrics, self.alerts = self.monitor.flush()
            for (env, difficulty), weight in self.sampler.last_weights.items():
                metrics[f"verihub/curriculum/{env}/{difficulty}"] = weight
        metrics["verihub/policy_version"] = float(self.trl.model_version)
        return metrics


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _config(output_dir: str | Path, max_staleness: int, overrides: Mapping[str, Any]) -> Any:
    with warnings.catch_warnings():  # chosen knowingly: the module docstring says what is TRL's experimental API
        warnings.filterwarnings("ignore", message="You are importing from 'trl.experimental'")
        from trl.experimental.async_grpo import AsyncGRPOConfig

    # token_budget 0: a step trains on per_device_train_batch_size x gradient_accumulation_steps samples, as the
    # synchronous trainer does (TRL's default packs as many as the server's context length holds)
    defaults: dict[str, Any] = {
        **device_defaults(),
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "max_staleness": max_staleness,
        "learning_rate": 1e-5,
        "token_budget": 0,
    }
    if not _cuda():  # TRL's defaults assume a GPU: bf16 compute, and checkpointing that buys nothing on a CPU
        defaults.update(bf16=False, dtype="float32", gradient_checkpointing=False)
    return AsyncGRPOConfig(**{**defaults, "output_dir": str(output_dir), **overrides})


def _start_server(model: str, config: Any, rank: int, cpus: list[int] | None) -> Any:
    from verihub.generation.vllm_server import VLLMServer

    # logprobs after temperature: the trainer's importance ratio compares them with its own, tempered
    extra = ["--logprobs-mode", "processed_logprobs", "--dtype", "float32" if config.dtype == "float32" else "auto"]
    return VLLMServer(
        model,
        max_loras=config.max_staleness + 2,
        lora_rank=rank,
        training=True,
        cpus=cpus,
        extra_args=[*extra, *_server_args()],
    ).start()


def _split_cpus() -> tuple[list[int], list[int], set[int], int] | None:
    """On a CPU, half the cores for the server and half for this process, which trains: sharing them all,
    vLLM's spinning threads and torch's slow each other down severalfold (2.3x per step, measured on 2 cores).
    Returns (trainer's, server's, the cores and threads before) or None where there is a GPU or one core."""
    import torch

    cores = sorted(os.sched_getaffinity(0))
    if _cuda() or len(cores) < 2:
        return None
    mine, lent = cores[: len(cores) // 2], cores[len(cores) // 2 :]
    before = (set(cores), torch.get_num_threads())
    os.sched_setaffinity(0, mine)
    torch.set_num_threads(len(mine))
    return mine, lent, *before


def _server_args() -> list[str]:
    return settings.vllm_args()


def _sampler(dataset: Any, curriculum: Curriculum, weights: Mapping[str, float], seed: int) -> MixtureSampler:
    buckets: dict[tuple[str, str], list[int]] = {}
    for row, (env, difficulty) in enumerate(zip(dataset["environment"], dataset["difficulty"], strict=True)):
        buckets.setdefault((env, difficulty), []).append(row)
    curriculum.bind({bucket: len(rows) for bucket, rows in buckets.items()}, weights)
    return MixtureSampler(buckets, curriculum, mini_repeat_count=1, batch_size=1, repeat_count=1, seed=seed)


def _draws(sampler: MixtureSampler) -> Iterator[int]:
    """Rows one at a time, each drawn with the curriculum's weights of that moment, for ever."""
    while True:
        yield from sampler


def _build_trl(
    run: AsyncGRPOTrainer,
    model: str,
    dataset: Any,
    peft: Any,
    display: DisplayMode,
    sync_check_every: int,
    callbacks: list[Any],
) -> Any:
    from trl.experimental.async_grpo import AsyncGRPOTrainer as TRLAsyncGRPOTrainer

    from verihub.trainers.async_worker import RolloutWorker

    class _Trainer(TRLAsyncGRPOTrainer):
        """TRL's trainer, with our metrics in its logs and the server's answers checked after syncs."""

        def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
            if self.model.training and not any(key.startswith("eval_") for key in logs):  # type: ignore[union-attr]  # set once training runs
                logs.update(run._run_metrics())
            super().log(logs, start_time)

        def _sync_weight(self) -> None:
            super()._sync_weight()
            if self.model_version == 1 or (sync_check_every and self.model_version % sync_check_every == 0):
                check_weight_sync(self)

    config = run.config
    per_step = config.per_device_train_batch_size * config.gradient_accumulation_steps
    groups_per_step = max(1, per_step // config.num_generations)
    worker = RolloutWorker(
        server_url=config.vllm_server_base_url,
        model_name=Path(model).name or model,
        lora_name="trl-policy" if peft is not None else None,
        tokenizer=run.tokenizer,
        rows=dataset.to_list(),
        draw=_draws(run.sampler),
        rewards={item.name: EnvReward(item, run.ledger, log=run.grade_log) for item in run.mix},
        observe=run._observe,
        num_generations=config.num_generations,
        max_tokens=config.max_completion_length,
        temperature=config.temperature,
        top_p=config.top_p,
        # a step's groups generate while the previous step trains; no more is queued than staleness lets train
        inflight=groups_per_step,
        queue_size=per_step * (config.max_staleness + 1),
        request_timeout_s=config.request_timeout,
        headers=run.server_headers,
    )
    with _without_cuda_probes():
        trainer = _Trainer(
            model=model,
            args=config,
            train_dataset=dataset,
            processing_class=run.tokenizer,
            peft_config=peft,
            rollout_worker=worker,  # type: ignore[arg-type]  # TRL's protocol, by its methods
            callbacks=[*run._shown("GRPO async", display), MetricsFile(run), *callbacks],
        )
    trainer.sync_check_prompt = list(dataset[0]["prompt"])  # type: ignore[attr-defined]  # read by our _Trainer
    trainer.server_headers = run.server_headers  # type: ignore[attr-defined]  # read by check_weight_sync
    if trainer._lora_sync is False and peft is not None:
        raise WeightSyncError(
            f"the vLLM server at {config.vllm_server_base_url} does not take LoRA adapters "
            "(--enable-lora): restart it with them, or leave vllm_server unset"
        )
    if not _cuda():
        from verihub.trainers.cpu_attention import register_cpu_tree_attention

        register_cpu_tree_attention()
    return trainer


@contextlib.contextmanager
def standard_attention(model: Any) -> Iterator[None]:
    """Generation in the trainer (the sync check, held-out rollouts) uses ordinary attention: TRL's packed
    tree attention only reads the rows it builds for training."""
    current = model.config._attn_implementation
    model.set_attn_implementation("sdpa")
    try:
        yield
    finally:
        model.set_attn_implementation(current)


class _Heldout(Heldout):
    """Held-out rollouts generate in the trainer, with ordinary attention."""

    def _measure(self, step: int) -> None:
        with standard_attention(self.run.trl.accelerator.unwrap_model(self.run.trl.model)):
            super()._measure(step)


@contextlib.contextmanager
def _without_cuda_probes() -> Iterator[None]:
    """TRL's trainer asks the CUDA driver for the device's name at start (a peak-FLOPs estimate for its MFU
    metric), which raises where there is no GPU; there the estimate is None, as for an unknown device."""
    from trl.experimental.async_grpo import async_grpo_trainer

    if _cuda():
        yield
        return
    probe = async_grpo_trainer.get_peak_flops_per_device
    async_grpo_trainer.get_peak_flops_per_device = lambda *args, **kwargs: None
    try:
        yield
    finally:
        async_grpo_trainer.get_peak_flops_per_device = probe


def check_weight_sync(trainer: Any, tokens: int = 16, tie_nats: float = 0.05) -> None:
    """The server's greedy answer (from the adapter of the live version) to the trainer's check prompt (the
    mix's first task) must be the trainer's own, token for token; WeightSyncError otherwise. Where the two
    first part, the server's token may be as likely as the trainer's under the trainer's policy (within
    ``tie_nats``): a near tie that two numerical paths can break either way, and no sign of stale weights."""
    import httpx
    import torch

    tokenizer = trainer.processing_class
    prompt_ids = tokenizer.apply_chat_template(trainer.sync_check_prompt, add_generation_prompt=True, tokenize=True)
    prompt_ids = list(prompt_ids["input_ids"] if isinstance(prompt_ids, Mapping) else prompt_ids)
    name = f"{trainer._lora_name}-v{trainer.model_version}" if trainer._lora_sync else trainer.rollout_worker.model_name
    response = httpx.post(
        f"{trainer.args.vllm_server_base_url}/v1/completions",
        timeout=300,
        headers=trainer.server_headers,
        json={"model": name, "prompt": prompt_ids, "max_tokens": tokens, "temperature": 0, "return_token_ids": True},
    )
    if response.status_code != 200:
        raise WeightSyncError(
            f"the vLLM server did not answer as policy version {trainer.model_version} "
            f"({name}): HTTP {response.status_code}: {response.text[:300]}"
        )
    served = list(response.json()["choices"][0]["token_ids"])
    model = trainer.accelerator.unwrap_model(trainer.model)
    training = model.training
    model.eval()
    try:
        with torch.no_grad(), standard_attention(model):
            ids = torch.tensor([prompt_ids], device=model.device)
            output = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=len(served),
                do_sample=False,
                eos_token_id=trainer.eos_token_ids,
                pad_token_id=tokenizer.pad_token_id,
                output_logits=True,
                return_dict_in_generate=True,
            )
    finally:
        model.train(training)
    own = output.sequences[0, len(prompt_ids) :].tolist()
    for position, (theirs, ours) in enumerate(zip(served, own, strict=False)):
        if theirs != ours:
            logprobs = torch.log_softmax(output.logits[position][0].float(), dim=-1)
            if float(logprobs[ours] - logprobs[theirs]) <= tie_nats:
                return  # a near tie: the answers part here, by rounding
            break
    else:
        if len(own) >= len(served):
            return
    raise WeightSyncError(
        f"after sync {trainer.model_version} the vLLM server's greedy answer is not the "
        f"trainer's: {tokenizer.decode(served)!r} against {tokenizer.decode(own)!r}"
    )
