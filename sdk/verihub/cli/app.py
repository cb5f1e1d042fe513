"""What every command of the ``verihub`` command line shares: the app, its consoles, and the options several
command groups take. Other installed parts register their commands on ``app`` (:mod:`verihub.cli`)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

__all__ = ["EnvArg", "HubOption", "TokenOption", "app", "err", "out"]

app = typer.Typer(
    help="verihub: RL environments and layered verifiers as versioned packages.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

EnvArg = Annotated[str, typer.Argument(help="Environment directory, its environment.yaml, or an installed name.")]
HubOption = Annotated[str | None, typer.Option("--hub", help="Hub server URL, or a hub directory (default: "
                                               "$VERIHUB_HUB, else the embedded hub in $VERIHUB_HOME/hub).")]
TokenOption = Annotated[str | None, typer.Option("--token", help="Hub token (default: $VERIHUB_TOKEN, $HF_TOKEN, "
                                                 "then the one `verihub login` stored).")]
