"""What verihub's GRPO layer costs per step over plain TRL.

    python bench/trainer_overhead_bench.py [--steps 12] [--rounds 3]

Same tiny model (made here), same arithmetic tasks and prompts, same GRPOConfig and LoRA, in one
run: plain ``trl.GRPOTrainer`` with a plain reward function (boxed answer == expected number), then
``verihub.trainers.GRPOTrainer`` on the arithmetic environment (its verifier as the reward, the mixture
sampler, the curriculum, the monitors, metrics.jsonl). Rounds alternate A B, B A, ... so machine noise
and warm-up order hit both; a step's time is TRL's own ``step_time`` log, the first two steps of each run left out
(warm-up). The last line prints the ratio of medians, verihub / plain; target <= 1.10.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

REPO = Path(__file__).resolve().parents[1]
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def plain_reward(completions: list[Any], answer: list[str], **_: Any) -> list[float]:
    """What a TRL user writes by hand for the same task: the last boxed number equals the answer."""
    rewards = []
    for completion, expected in zip(completions, answer, strict=True):
        found = _BOXED.findall(completion[-1]["content"])
        try:
            rewards.append(float(bool(found) and float(found[-1]) == float(expected)))
        except ValueError:
            rewards.append(0.0)
    return rewards


def config(out: Path, steps: int) -> dict[str, Any]:
    return {
        "output_dir": str(out),
        "max_steps": steps,
        "num_generations": 8,
        "per_device_train_batch_size": 16,
        "max_completion_length": 16,
        "learning_rate": 1e-3,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "bf16": False,
        "seed": 0,
    }


def step_times(trainer: Any) -> list[float]:
    return [record["step_time"] for record in trainer.state.log_history if "step_time" in record][2:]


def run_plain(model: Path, out: Path, steps: int) -> list[float]:
    import trl
    from datasets import Dataset
    from transformers import AutoTokenizer

    import verihub
    from verihub.trainers.models import lora_config

    env = verihub.load_env(REPO / "envs/arithmetic")
    tasks = env.dataset("train")
    dataset = Dataset.from_dict({"prompt": [env.render(task) for task in tasks], "answer": tasks["answer"]})
    trainer = trl.GRPOTrainer(
        model=str(model),
        reward_funcs=plain_reward,
        args=trl.GRPOConfig(**config(out, steps)),
        train_dataset=dataset,
        processing_class=AutoTokenizer.from_pretrained(model),
        peft_config=lora_config(True),
    )
    trainer.train()
    return step_times(trainer)


def run_verihub(model: Path, out: Path, steps: int) -> list[float]:
    from verihub.trainers import GRPOTrainer

    trainer = GRPOTrainer(
        str(model), [str(REPO / "envs/arithmetic")], lora=True, curriculum="adaptive", **config(out, steps)
    )
    trainer.train()
    return step_times(trainer.trl)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from transformers.utils import logging as hf_logging

    from verihub.trainers.tiny import make_tiny_model

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        model = make_tiny_model(root / "model")
        plain: list[float] = []
        ours: list[float] = []
        for round_ in range(args.rounds):  # A B, then B A: neither always runs first
            runs = [(plain, run_plain, "plain"), (ours, run_verihub, "verihub")]
            for times, run, name in runs if round_ % 2 == 0 else runs[::-1]:
                times += run(model, root / f"{name}-{round_}", args.steps)
            print(
                json.dumps(
                    {
                        "round": round_,
                        "plain_median_s": statistics.median(plain),
                        "verihub_median_s": statistics.median(ours),
                    }
                ),
                flush=True,
            )
    plain_s, ours_s = statistics.median(plain), statistics.median(ours)
    print(
        f"step time (median of {len(plain)} steps each): plain TRL {plain_s * 1000:.1f} ms, "
        f"verihub {ours_s * 1000:.1f} ms"
    )
    print(f"verihub / plain TRL step time: {ours_s / plain_s:.3f}x (target <= 1.10)")


if __name__ == "__main__":
    main()
