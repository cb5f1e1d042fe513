"""What both trainers need around TRL's: the tokenizer, the LoRA config, device defaults, vLLM, the display."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verihub.errors import MissingDependencyError, UsageError
from verihub.trainers.display import DisplayMode, RunDisplay
from verihub.trainers.runlog import RunLog, TRLLogLines

__all__ = ["LORA_DEFAULTS", "TrainerRun", "device_defaults", "load_tokenizer", "lora_config", "require_vllm"]

LORA_DEFAULTS: dict[str, Any] = {
    "r": 16,
    "lora_alpha": 32,
    "lora_dropout": 0.0,
    "target_modules": "all-linear",
    "task_type": "CAUSAL_LM",
}


def lora_config(lora: bool | Mapping[str, Any] | Any | None) -> Any:
    """peft's ``LoraConfig`` for ``lora=True`` (the defaults above), a dict of overrides, or one passed as is.

    ``target_modules="all-linear"`` adapts every linear layer but the output head (TRL computes
    log-probabilities from the head's weight directly, so an adapter there would never train).
    """
    if lora is None or lora is False:
        return None
    from peft import LoraConfig, PeftConfig

    if isinstance(lora, PeftConfig):
        return lora
    if lora is True:
        return LoraConfig(**LORA_DEFAULTS)
    if isinstance(lora, Mapping):
        try:
            return LoraConfig(**{**LORA_DEFAULTS, **lora})
        except TypeError as error:
            raise UsageError(f"lora: {error}") from None
    raise TypeError(f"lora must be True, a dict of LoraConfig fields or a peft config (got {type(lora).__name__})")


def load_tokenizer(model: Any, tokenizer: Any = None) -> Any:
    """``tokenizer`` as given, or loaded from the model's id/path (a model object: its ``name_or_path``)."""
    if tokenizer is not None and not isinstance(tokenizer, str):
        return tokenizer
    from transformers import AutoTokenizer

    source = tokenizer or (model if isinstance(model, str) else getattr(model, "name_or_path", None))
    if not source:
        raise UsageError("the model object has no name_or_path to load its tokenizer from; pass tokenizer=")
    loaded = AutoTokenizer.from_pretrained(source)
    if loaded.pad_token is None:
        loaded.pad_token = loaded.eos_token
    return loaded


def device_defaults() -> dict[str, Any]:
    """bf16 where a GPU supports it, float32 on CPU (TRL's bf16 default refuses to start there); pinned
    memory only with a GPU (on CPU it buys nothing, and torch warns at every data loader); ``use_cpu``
    where there is no accelerator at all."""
    import torch

    cuda = torch.cuda.is_available()
    # use_cpu: without it, processes launched by torchrun/accelerate on a machine with no accelerator are
    # not set up as one distributed run (accelerate sees no GPU): each trains alone and nothing is gathered
    cpu_only = not cuda and not torch.backends.mps.is_available()
    return {"bf16": bool(cuda and torch.cuda.is_bf16_supported()), "dataloader_pin_memory": cuda, "use_cpu": cpu_only}


def require_vllm() -> None:
    """A clear error, not a deep ImportError from TRL, when ``use_vllm=True`` and vLLM is missing."""
    if importlib.util.find_spec("vllm") is None:
        raise MissingDependencyError(
            'use_vllm=True needs vLLM, which is not installed: pip install "verihub[vllm]" on a machine with a CUDA '
            "GPU. TRL then generates with vLLM on the training GPUs (vllm_mode='colocate', the default) or asks a "
            "server on other GPUs (vllm_mode='server', started with `trl vllm-serve --model MODEL`). Without vLLM, "
            "leave use_vllm off: generation runs in transformers."
        )


class TrainerRun:
    """What both trainers do around TRL's: a display in place of TRL's printer, the dependencies' output
    in the run's ``trl.log`` (:mod:`.runlog`), train, then save weights (only the adapter, with LoRA) and
    tokenizer."""

    trl: Any  # the TRL trainer
    tokenizer: Any
    config: Any  # its TRL config
    run_log: RunLog
    display: RunDisplay

    def train(self, **kwargs: Any) -> Any:
        """TRL's ``train()``; then the model (or the LoRA adapter) and tokenizer are saved to ``output_dir``."""
        with self.run_log:
            try:
                result = self.trl.train(**kwargs)
            finally:
                self.display.close()
            self.save()
        return result

    def save(self, output_dir: str | Path | None = None) -> Path:
        target = Path(output_dir or self.config.output_dir)
        with self.run_log:
            self.trl.save_model(str(target))  # TRL's: the process that should save does
            if self.trl.args.should_save:
                self.tokenizer.save_pretrained(str(target))
        return target

    @property
    def main_process(self) -> bool:
        """Whether this is the process that displays and saves (the only one, unless accelerate/torchrun)."""
        return bool(self.trl.is_world_process_zero())

    def _shown(self, stage: str, display: DisplayMode) -> list[Any]:
        """The callbacks that show the run (first, so the display is up before anything slow at the start)."""
        self.display = RunDisplay(stage, display, log_path=self.run_log.path)
        return [TRLLogLines(self.run_log), self.display]

    def _drop_printers(self) -> None:
        """TRL's trainer adds its printer or progress bar; our display and log file take their place."""
        from transformers import trainer as hf_trainer
        from transformers.trainer_callback import PrinterCallback

        for printer in {PrinterCallback, hf_trainer.DEFAULT_PROGRESS_CALLBACK}:
            self.trl.remove_callback(printer)
