"""The training demo, CPU only: hub -> install -> tiny model -> SFT warm start -> GRPO with LoRA -> before/after.

    python scripts/train_demo.py [--out runs/demo] [--seed 0] [--sft-demos 48] [--sft-steps 300]
                                 [--grpo-steps 400] [--heldout-tasks N]

1. Publish the bundled environments to an embedded hub (a directory under --out) as ``demo/<name>``
   and install them back with pip from its index, into a venv of the demo's own (it sees this one's
   packages, so nothing is downloaded, and this one is left as it was); the rest runs in that venv.
2. Build a tiny Qwen2-style model here (nothing downloaded) and warm it up with SFT on a few
   reference answers per environment (``--sft-demos``): demonstrations are the costly part, so
   the warm start sees few; it learns the answer format and part of the skill.
3. GRPO with LoRA on a mix of two environments (``demo/reverse`` and ``demo/sort``: write a 4- or
   5-digit number backwards, sort its digits; tens of thousands and hundreds of possible answers, so
   chance is below 5% even for a guess among the digits' orderings) over all of their training
   prompts, rewarded by the verifiers alone; adaptive curriculum, held-out pass rate measured during
   training.
4. Held-out pass rate per environment (greedy, every held-out task) of the SFT checkpoint and of the
   SFT checkpoint + the GRPO adapter; the difference is what RL bought, beside its measurement noise
   (twice the standard error of a difference of two rates on that many samples, as the monitors'
   held-out alert uses). Curves go to PNG files; the numbers, and the whole demo's wall and CPU
   time, to summary.json.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
BUNDLED = ("reverse", "sort")
MIX = {"demo/reverse@^1.0": 0.4, "demo/sort@^1.0": 0.6}  # what SFT and GRPO train on; sort learns slower

console = Console(soft_wrap=True)  # paths stay whole, even in a narrow terminal or a log


def publish_and_install(hub_dir: Path, python: str) -> None:
    from verihub.hub.local import LocalHub

    hub = LocalHub(hub_dir)
    for name in BUNDLED:
        result = hub.push(REPO / "envs" / name, owner="demo")
        state = "published" if result.created else "already published"
        console.print(
            f"hub: {state} {result.repo}@{result.version} ({len(result.files)} files) in {hub_dir}", highlight=False
        )
    for name in BUNDLED:
        repo, version = hub.install(f"demo/{name}@^1.0", python=python)
        console.print(
            f"pip: installed {repo}@{version} from the hub's index into {Path(python).parents[1]}", highlight=False
        )


def measure(model: str, adapter: str | None, mix: list, tasks: int, what: str) -> dict[str, dict[str, Any]]:
    """Held-out pass@1 of every environment (a HeldoutRate, faults counted as failed and counted):
    greedy, and with the environment's own eval sampling."""
    from verihub.generation import Sampling
    from verihub.trainers.heldout import heldout_pass_rates

    began = time.perf_counter()
    with console.status(f"held-out pass@1 of {what}: {tasks} tasks per environment..."):
        rates = {
            "greedy": heldout_pass_rates(
                model, mix, adapter=adapter, tasks=tasks, sampling=Sampling(temperature=0.0, max_tokens=32)
            )
        }
        for item in mix:
            spec = item.env.spec.eval
            mode = f"T={spec.temperature:g} x{spec.k}"  # k samples per task at the spec's temperature
            sampled = heldout_pass_rates(
                model,
                [item],
                adapter=adapter,
                tasks=tasks,
                samples=spec.k,
                sampling=Sampling(temperature=spec.temperature, max_tokens=32, seed=0),
            )
            rates.setdefault(mode, {}).update(sampled)
    greedy = ", ".join(f"{env} {rate.pass_rate:.1%}" for env, rate in rates["greedy"].items())
    console.print(f"held-out pass@1 of {what} (greedy): {greedy} ({time.perf_counter() - began:.0f}s)", highlight=False)
    return rates


def demo_venv(target: Path) -> str:
    """A venv that sees this interpreter's packages (torch, TRL, verihub) but installs into its own."""
    import site
    import venv

    if not (target / "bin" / "python").exists():
        venv.create(target, with_pip=False)
    purelib = next((target / "lib").glob("python3.*/site-packages"))
    # addsitedir also runs that directory's .pth files (verihub is installed editable through one)
    (purelib / "_parent.pth").write_text(
        "".join(f"import site; site.addsitedir({path!r})\n" for path in site.getsitepackages())
    )
    return str(target / "bin" / "python")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "demo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sft-steps", type=int, default=300)
    parser.add_argument("--grpo-steps", type=int, default=400)
    parser.add_argument("--sft-demos", type=int, default=48, help="reference answers per environment for SFT (0: all)")
    parser.add_argument("--heldout-tasks", type=int, default=1000, help="held-out tasks per environment to measure")
    parser.add_argument("--in-venv", action="store_true", help=argparse.SUPPRESS)  # stage 2-4, in the demo venv
    args = parser.parse_args()
    out: Path = args.out.resolve()
    began = time.perf_counter()
    if not args.in_venv:
        console.rule("1. publish to the hub, install back")
        python = demo_venv(out / "venv")
        publish_and_install(out / "hub", python)
        completed = subprocess.run([python, __file__, *sys.argv[1:], "--out", str(out), "--in-venv"])
        if completed.returncode == 0:
            _record_time(out / "summary.json", time.perf_counter() - began)
        sys.exit(completed.returncode)
    train(out, args)


def train(out: Path, args: argparse.Namespace) -> None:
    seed = args.seed
    for stale in ("model", "sft", "grpo"):
        shutil.rmtree(out / stale, ignore_errors=True)
    start = time.perf_counter()

    from verihub.trainers.runlog import TRL_LOG, RunLog

    # what transformers and TRL print outside the trainers (model loads, the tiny model's save) goes here
    with RunLog(out / TRL_LOG):
        mix, before, after, sft_s = _stages(out, args, seed)

    console.rule("4. held-out pass@1, SFT checkpoint vs SFT + GRPO adapter")
    from verihub.trainers.heldout import heldout_split
    from verihub.trainers.monitors import measurement_noise
    from verihub.trainers.plot import plot_run

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)  # fits 80 columns
    for column in ("environment", "tasks", "decoding", "SFT", "SFT+GRPO", "change", "noise", "faulted"):
        table.add_column(
            column,
            justify="left" if column in ("environment", "decoding") else "right",
            no_wrap=column in ("environment", "decoding"),
        )
    noise: dict[str, dict[str, float]] = {}
    for item in mix:
        held = str(min(args.heldout_tasks, len(item.env.dataset(heldout_split(item)))))
        for row, mode in enumerate(mode for mode in before if item.name in before[mode]):
            first, last = before[mode][item.name], after[mode][item.name]
            change = last.pass_rate - first.pass_rate
            margin = noise.setdefault(mode, {})[item.name] = measurement_noise(
                first.pass_rate, last.pass_rate, first.samples
            )
            colour = "green" if change > margin else "red" if change < -margin else "yellow"
            table.add_row(
                item.name if row == 0 else "",
                held if row == 0 else "",
                mode,
                f"{first.pass_rate:.1%}",
                f"{last.pass_rate:.1%}",
                f"[{colour}]{change * 100:+.1f}[/]",
                f"±{margin * 100:.1f}",
                f"{first.faulted}/{last.faulted} of {first.samples}",
            )
    console.print(table)
    console.print(
        "tasks: held-out tasks per environment; T=t xk: k samples per task at temperature t (the spec's "
        "eval settings); change: "
        "points of pass@1 (green: beyond the noise, twice the standard error of the difference); faulted: "
        "samples whose grade faulted (SFT/SFT+GRPO), counted as failed in these rates",
        highlight=False,
    )
    curves = plot_run(out / "grpo")
    if curves:
        console.print(f"curves in {curves[0].parent}: {', '.join(path.name for path in curves)}", highlight=False)
    summary = {
        **_by_stage(before, after, "pass_rate"),
        "faulted": _by_stage(before, after, "faulted"),
        "noise": noise,
        "sft_s": round(sft_s, 1),
        "total_s": round(time.perf_counter() - start, 1),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    console.print(
        f"done in {summary['total_s']:.0f}s; {out / 'summary.json'}, metrics in {out / 'grpo' / 'metrics.jsonl'}",
        highlight=False,
    )


Rates = dict[str, dict[str, Any]]  # decoding mode -> environment -> HeldoutRate


def _stages(out: Path, args: argparse.Namespace, seed: int) -> tuple[list[Any], Rates, Rates, float]:
    """Stages 2 and 3: the mix, the tiny model, SFT, held-out before, GRPO, held-out after."""
    start = time.perf_counter()
    from verihub.trainers import GRPOTrainer, SFTTrainer
    from verihub.trainers.mixture import resolve_envs
    from verihub.trainers.tiny import make_tiny_model

    mix = resolve_envs(MIX)  # installed now: loads them from the demo venv's site-packages
    console.print(
        "mix: "
        + ", ".join(f"{item.env.id}@{item.env.version} (weight {item.weight:.2f})" for item in mix)
        + f", loaded from {out / 'venv'}",
        highlight=False,
    )

    console.rule("2. tiny model, SFT warm start")
    model = make_tiny_model(out / "model", seed=seed, hidden_size=128, layers=2, heads=4)
    cpu = {"activation_checkpointing": False}  # a tiny model: recomputing activations buys nothing
    SFTTrainer(
        str(model),
        MIX,
        demos=args.sft_demos or None,
        output_dir=out / "sft",
        seed=seed,
        max_steps=args.sft_steps,
        learning_rate=1e-3,
        per_device_train_batch_size=32,
        lr_scheduler_type="cosine",
        warmup_steps=20,
        logging_steps=10,
        **cpu,
    ).train()
    sft_s = time.perf_counter() - start
    before = measure(f"hf:{out / 'sft'}", None, mix, args.heldout_tasks, "the SFT checkpoint")

    console.rule("3. GRPO with LoRA on the mix, adaptive curriculum")
    GRPOTrainer(
        str(out / "sft"),
        MIX,
        lora={"r": 16, "lora_alpha": 32},
        curriculum="adaptive",
        heldout_every=100,
        heldout_tasks=min(200, args.heldout_tasks),
        output_dir=out / "grpo",
        seed=seed,
        max_steps=args.grpo_steps,
        learning_rate=1e-3,
        beta=0.04,
        lr_scheduler_type="constant",
        num_generations=8,
        per_device_train_batch_size=64,
        max_completion_length=20,
        logging_steps=5,
        **cpu,
    ).train()
    after = measure(f"hf:{out / 'sft'}", str(out / "grpo"), mix, args.heldout_tasks, "SFT + the GRPO adapter")
    return mix, before, after, sft_s


def _record_time(summary_path: Path, wall_s: float) -> None:
    """The whole demo's wall and CPU time (set-up stage included; CPU: user + system of this process and
    every process it waited for), printed and added to summary.json."""
    cpu_s = sum(
        getattr(resource.getrusage(who), field)
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        for field in ("ru_utime", "ru_stime")
    )
    summary = json.loads(summary_path.read_text())
    summary.update(demo_wall_s=round(wall_s, 1), demo_cpu_s=round(cpu_s, 1))
    summary_path.write_text(json.dumps(summary, indent=2))
    console.print(
        f"whole demo, set-up stage included: {wall_s:.0f}s wall, {cpu_s:.0f}s CPU (user + system)", highlight=False
    )


def _by_stage(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]], field: str) -> dict[str, Any]:
    """``{"before": {mode: {env: rate.<field>}}, "after": ...}`` for summary.json."""
    return {
        stage: {mode: {env: getattr(rate, field) for env, rate in rates.items()} for mode, rates in measured.items()}
        for stage, measured in (("before", before), ("after", after))
    }


if __name__ == "__main__":
    main()
