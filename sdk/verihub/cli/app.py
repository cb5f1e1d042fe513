"""What every command of the ``verihub`` command line shares: the app, its consoles, and the options several
command groups take. Other installed parts register their commands on ``app`` (:mod:`verihub.cli`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

__all__ = [
    "EnvArg",
    "GraderOption",
    "GraderTimeoutOption",
    "GraderTokenOption",
    "HubOption",
    "TokenOption",
    "app",
    "err",
    "grader_pool",
    "load_named",
    "out",
]

app = typer.Typer(
    help="verihub: RL environments and layered verifiers as versioned packages.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

EnvArg = Annotated[
    str,
    typer.Argument(
        help="Environment directory, its environment.yaml, an installed name, an adapter's ref (textarena:GAME, ...) "
        "or a hub's RL environment dataset, hf://datasets/ORG/NAME[@REV]."
    ),
]
HubOption = Annotated[
    str | None,
    typer.Option(
        "--hub",
        help="Hub server URL, or a hub directory (default: $VERIHUB_HUB, else the embedded hub in $VERIHUB_HOME/hub; "
        "for hf://datasets/ ids $VERIHUB_HUB, else $HF_ENDPOINT, else huggingface.co).",
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token", help="Hub token (default: $VERIHUB_TOKEN, $HF_TOKEN, then the one `verihub login` stored)."
    ),
]
GraderOption = Annotated[
    list[str],
    typer.Option(
        "--grader",
        help="URL of a `verihub serve` of the same environments, "
        "repeatable: grading and tool sessions run there, spread by load, "
        "retried on another server when one fails.",
    ),
]
GraderTokenOption = Annotated[
    str | None, typer.Option(show_default=False, help="The graders' --token (default: $VERIHUB_GRADER_TOKEN).")
]
GraderTimeoutOption = Annotated[
    float,
    typer.Option(min=0.1, help="Seconds a grader may take to answer one request before the work goes to another."),
]


def load_named(name: str, *, hub: str | None = None, token: str | None = None, **options: Any) -> Any:
    """``load_env(name, **options)`` for a command: an ``hf://`` id reads the command's ``--hub`` and ``--token``,
    and what a loader from elsewhere reports (the pinned revision, what it left out) is printed on stderr."""
    from verihub.environment.core import load_env

    if name.startswith("hf://"):
        options = {**options, "hub": hub, "token": token}
    environment = load_env(name, **options)
    if environment.load_report is not None:
        for line in environment.load_report.lines():
            err.print(f"[dim]{escape(line)}[/dim]", highlight=False)
    return environment


def grader_pool(urls: list[str], token: str | None, timeout_s: float) -> Any:
    """The pool of ``--grader`` servers, or None for grading in this process."""
    if not urls:
        return None
    from verihub.serve.graders import GraderError, GraderPool

    try:
        return GraderPool(urls, token=token, timeout_s=timeout_s)
    except GraderError as error:
        raise typer.BadParameter(str(error), param_hint="--grader") from None
