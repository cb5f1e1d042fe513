"""verihub's knobs of a GRPO run, each with its default and help text once (TRL's ``GRPOConfig`` habit).

:class:`~verihub.trainers.grpo.GRPOTrainer` and :class:`~verihub.trainers.async_grpo.AsyncGRPOTrainer` take
them as keywords (or ``config=RunConfig(...)``), ``verihub train`` makes its options from them
(:func:`cli_parameters`) and docs/training.md's table of them is :func:`knobs_table`'s (a test compares), so the
API, the CLI and the docs cannot disagree. TRL's own settings (``max_steps``, ``learning_rate``...) are not
here: the trainers pass every other keyword to TRL's config unchanged.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from verihub.errors import UsageError

if TYPE_CHECKING:
    from verihub.trainers.display import DisplayMode

__all__ = ["RunConfig", "cli_parameters", "knobs_table", "split_knobs"]

Mode = Literal["both", "sync", "async"]  # which trainer reads a knob
_ONLY = {"both": "", "sync": " Not with --async.", "async": " With --async only."}
_SECRETS = {"grader_token", "vllm_server_key"}  # never printed as a default in --help


@dataclass(frozen=True)
class _Flag:
    """How a knob shows on the command line: its option name and the type the option parses."""

    name: str
    type: Any
    help: str


def knob(
    default: Any,
    help: str,  # the field's help text, as typer and argparse name it
    *,
    flag: str | None = None,
    cli_type: Any = None,
    cli_help: str | None = None,
    mode: Mode = "both",
) -> Any:
    """A field of :class:`RunConfig`: ``flag`` names its ``verihub train`` option (None: API only), parsed as
    ``cli_type`` (default: the default's type) and shown with ``cli_help`` where the option takes less than the
    keyword (default: ``help``)."""
    shown = _Flag(flag, cli_type or type(default), cli_help or help) if flag else None
    return dataclasses.field(default=default, metadata={"help": help, "flag": shown, "mode": mode})


@dataclass(kw_only=True)
class RunConfig:
    """verihub's knobs of a GRPO run; see each field's help (``verihub train --help`` shows the same text)."""

    lora: Any = knob(
        None,
        "Train a LoRA adapter: True (peft, r=16 on all linear layers), a dict of LoraConfig fields or a peft "
        "config; None trains every weight.",
        flag="--lora",
        cli_type=bool,
        cli_help="Train a LoRA adapter (peft, r=16 on all linear layers).",
    )
    curriculum: Any = knob(
        "adaptive",
        "adaptive (favour the learning zone), none (sample by the weights alone), a dict of the adaptive "
        "curriculum's knobs or a Curriculum.",
        flag="--curriculum",
        cli_type=str,
        cli_help="adaptive (favour the learning zone) or none (sample by the weights alone).",
    )
    hub: str | None = knob(
        None,
        "Hub URL or directory to install OWNER/NAME environments from, and to read hf://datasets/ ids from.",
        flag="--hub",
        cli_type=str,
    )
    heldout_every: int = knob(
        0, "Evaluate held-out tasks every N steps, and at the start (0: never).", flag="--heldout-every"
    )
    heldout_tasks: int = knob(32, "Held-out tasks per environment in each evaluation.", flag="--heldout-tasks")
    heldout_samples: int = knob(1, "Samples per held-out task (pass@1 over them).", flag="--heldout-samples")
    heldout_temperature: float = knob(
        0.0, "Temperature of the held-out samples (0: greedy).", flag="--heldout-temperature"
    )
    output_dir: str | Path = knob(
        "runs/grpo", "Where the model or adapter, metrics.jsonl and trl.log go.", flag="--output-dir", cli_type=Path
    )
    display: DisplayMode = knob(
        "rich",
        "rich (a live panel; plain lines when stdout is no terminal), quiet (the summary only) or json (a JSON "
        "object per logging step on stdout); on the command line --quiet and --log-format json.",
    )
    use_vllm: bool = knob(
        False,
        "Generate with vLLM in TRL's colocate mode (needs verihub[vllm] and a GPU).",
        flag="--use-vllm",
        mode="sync",
    )
    graders: Any = knob(
        None,
        "URLs of `verihub serve` processes of the same environments (or a GraderPool): rewards and tool sessions "
        "run there.",
        flag="--grader",
        cli_type=list[str],
        cli_help="URL of a `verihub serve` of the same environments, repeatable: rewards and tool sessions run there.",
        mode="sync",
    )
    grader_token: str | None = knob(
        None, "The graders' --token (default: $VERIHUB_GRADER_TOKEN).", flag="--grader-token", cli_type=str, mode="sync"
    )
    max_staleness: int = knob(
        1,
        "How many policy versions old a rollout may be and still be trained on.",
        flag="--max-staleness",
        mode="async",
    )
    vllm_server: str | None = knob(
        None,
        "The URL of a vLLM server already running (default: one is started on loopback).",
        flag="--vllm-server",
        cli_type=str,
        mode="async",
    )
    vllm_server_key: str | None = knob(
        None,
        "The key vllm_server asks of every request (default: $VERIHUB_VLLM_KEY).",
        flag="--vllm-server-key",
        cli_type=str,
        mode="async",
    )
    sync_check_every: int = knob(
        10,
        "Every N weight syncs, check that the server answers as the trainer's policy does (0: never).",
        mode="async",
    )

    def __post_init__(self) -> None:
        low = {"heldout_every": 0, "heldout_tasks": 1, "heldout_samples": 1, "max_staleness": 0, "sync_check_every": 0}
        for name, least in low.items():
            if not isinstance(getattr(self, name), int) or getattr(self, name) < least:
                raise UsageError(f"{name}={getattr(self, name)!r}: use a whole number, at least {least}")
        if not self.heldout_temperature >= 0:  # NaN too
            raise UsageError(f"heldout_temperature={self.heldout_temperature!r}: use a number of 0 or more")

    def check_for(self, mode: Literal["sync", "async"]) -> None:
        """Refuse knobs set away from their defaults that the ``mode`` trainer does not read."""
        unread = [
            field.name
            for field in dataclasses.fields(self)
            if field.metadata["mode"] not in ("both", mode) and getattr(self, field.name) != field.default
        ]
        if unread:
            other = "AsyncGRPOTrainer (verihub train --async)" if mode == "sync" else "GRPOTrainer (without --async)"
            raise UsageError(f"{', '.join(unread)}: only {other} reads {'it' if len(unread) == 1 else 'them'}")


KNOBS = tuple(field.name for field in dataclasses.fields(RunConfig))


def split_knobs(config: RunConfig | None, keywords: dict[str, Any]) -> tuple[RunConfig, dict[str, Any]]:
    """The run's config (``config``, with any knob among ``keywords`` in place of its value) and the keywords
    left for TRL."""
    knobs = {name: keywords.pop(name) for name in KNOBS if name in keywords}
    return dataclasses.replace(config or RunConfig(), **knobs), keywords


def cli_parameters() -> list[inspect.Parameter]:
    """A ``verihub train`` option per knob that has a flag: name, type, help and default from the field (a list
    option defaults to empty, a flag to off)."""
    import typer

    parameters = []
    for field in dataclasses.fields(RunConfig):
        flag: _Flag | None = field.metadata["flag"]
        if flag is None:
            continue
        default = [] if flag.type == list[str] else False if flag.type is bool else field.default
        if flag.type is Path:
            default = Path(str(default))
        help_text = flag.help + _ONLY[field.metadata["mode"]]
        option = typer.Option(flag.name, help=help_text.replace("[", "\\["), show_default=field.name not in _SECRETS)
        annotation = flag.type | None if default is None else flag.type
        parameters.append(
            inspect.Parameter(
                field.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[annotation, option]
            )
        )
    return parameters


def knobs_table() -> str:
    """docs/training.md's table of the knobs: keyword, option, default, what it does."""
    rows = ["| keyword | `verihub train` | default | what it does |", "|---|---|---|---|"]
    for field in dataclasses.fields(RunConfig):
        flag: _Flag | None = field.metadata["flag"]
        option = f"`{flag.name}`" if flag else ""
        help_text = field.metadata["help"] + _ONLY[field.metadata["mode"]]
        rows.append(f"| `{field.name}` | {option} | `{field.default!r}` | {help_text} |")
    return "\n".join(rows)
