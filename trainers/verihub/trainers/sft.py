"""The stage before RL: supervised fine-tuning on the environments' reference answers, with TRL's SFTTrainer.

    from verihub.trainers import SFTTrainer
    SFTTrainer("runs/tiny", ["envs/arithmetic", "envs/json-extract"], max_steps=100).train()

Each task of each environment's train split becomes a prompt-completion pair: the rendered prompt and
the spec's gold ``reference`` (so the model learns the format the verifier expects; loss on the
completion only). ``trajectories=`` adds shipped conversations instead (JSONL files, one
``{"messages": [...]}`` per line, tool calls included): the messages up to the first assistant turn are
the prompt, the rest the completion. ``demos=N`` keeps the first N tasks' references per environment
(demonstrations are scarce; RL then trains on every task). Environments are interleaved by weight.
``display`` is the GRPO trainer's (:mod:`.display`: "rich", "quiet" or "json"; TRL's log lines go to
``output_dir/trl.log``). Keyword arguments that are not this class's go to ``trl.SFTConfig``
(``max_steps``, ``learning_rate``, ``num_train_epochs``, ...).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trl

from verihub.errors import DataError, UsageError
from verihub.trainers.display import DisplayMode, check_display
from verihub.trainers.mixture import EnvRef, MixedEnv, resolve_envs
from verihub.trainers.models import TrainerRun, device_defaults, load_tokenizer, lora_config
from verihub.trainers.runlog import TRL_LOG, RunLog

__all__ = ["SFTTrainer", "reference_pairs", "trajectory_pairs"]


class SFTTrainer(TrainerRun):
    def __init__(
        self,
        model: Any,
        envs: EnvRef | Sequence[EnvRef] | Mapping[EnvRef, float],
        *,
        lora: bool | Mapping[str, Any] | Any | None = None,
        trajectories: str | Path | Sequence[str | Path] = (),
        demos: int | None = None,
        tokenizer: Any = None,
        hub: str | None = None,
        seed: int = 0,
        display: DisplayMode = "rich",
        output_dir: str | Path = "runs/sft",
        **sft_config_overrides: Any,
    ) -> None:
        from datasets import Dataset, interleave_datasets

        check_display(display)
        self.run_log = RunLog(Path(output_dir) / TRL_LOG)
        with self.run_log:  # the dependencies' notices while TRL sets up (tokenizing, model loading) go there too
            self.mix = resolve_envs(envs, hub=hub)
            self.tokenizer = load_tokenizer(model, tokenizer)
            parts = [Dataset.from_list(reference_pairs(item)[:demos]) for item in self.mix]
            weights = [item.weight for item in self.mix]
            paths = [trajectories] if isinstance(trajectories, (str, Path)) else list(trajectories)
            if paths:
                parts.append(Dataset.from_list([pair for path in paths for pair in trajectory_pairs(Path(path))]))
                weights = [w * len(self.mix) / (len(self.mix) + 1) for w in weights] + [1 / (len(self.mix) + 1)]
            empty = [item.name for item, part in zip(self.mix, parts, strict=False) if len(part) == 0]
            if empty:
                raise UsageError(f"no reference answers to learn from in {', '.join(empty)} (its train split is empty)")
            self.dataset = (
                parts[0]
                if len(parts) == 1
                else interleave_datasets(parts, probabilities=weights, seed=seed, stopping_strategy="all_exhausted")
            )
            self.config = trl.SFTConfig(
                **{
                    **device_defaults(),
                    "logging_steps": 10,
                    "save_strategy": "no",
                    "report_to": "none",
                    "seed": seed,
                    "output_dir": str(output_dir),
                    **sft_config_overrides,
                }
            )
            self.trl = trl.SFTTrainer(
                model=model,
                args=self.config,
                train_dataset=self.dataset,
                processing_class=self.tokenizer,
                peft_config=lora_config(lora),
                callbacks=self._shown("SFT", display),
            )
            self._drop_printers()


def reference_pairs(item: MixedEnv, split: str = "train") -> list[dict[str, Any]]:
    """Prompt-completion pairs from an environment's tasks and its gold reference answer. An environment whose
    reference is no right answer (``gold.reference_is``: a canary, or an adapter's placeholder such as the task's
    prompt) has nothing to teach: refused, rather than trained to echo it."""
    kind = item.env.spec.gold.reference_is
    if kind != "gold":
        raise UsageError(
            f"{item.name}'s reference is a {kind}, not a right answer, so it has nothing to teach: leave it out of the "
            "SFT mix (its trajectories can still come in with --trajectories FILE; GRPO trains on it as it is)"
        )
    return [
        {"prompt": item.env.render(task), "completion": [{"role": "assistant", "content": item.env.reference(task)}]}
        for task in item.env.dataset(split)
    ]


def trajectory_pairs(path: Path) -> list[dict[str, Any]]:
    """Prompt-completion pairs from a JSONL file of conversations (``{"messages": [...]}`` per line)."""
    pairs = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                messages = json.loads(line)["messages"]
                first = next(i for i, message in enumerate(messages) if message["role"] == "assistant")
            except (json.JSONDecodeError, KeyError, TypeError, StopIteration):
                raise DataError(f'{path}:{number}: expected {{"messages": [...]}} with an assistant message') from None
            pairs.append({"prompt": messages[:first], "completion": messages[first:]})
    return pairs
