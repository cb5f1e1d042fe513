"""The ``verihub`` command line. Commands that do not train never import torch.

The SDK's own commands live here, one module per group: :mod:`.envs` (``schema``, ``validate``,
``grade``, ``init``, ``checks``, ``envs``), :mod:`.eval`, :mod:`.regrade`, :mod:`.serve` and :mod:`.sandbox`,
all on the app of :mod:`.app`. The hub's and the trainers' commands come from their own packages, through the
``verihub.cli`` entry points (:mod:`.plugins`): :func:`main` adds them, except when the command line
names one of the SDK's own commands (reading every installed package's entry points costs ~20 ms).
"""

from __future__ import annotations

import sys

from rich.markup import escape

from verihub.cli import envs, eval, regrade, sandbox, serve  # noqa: F401 - each adds its commands to the app
from verihub.cli.app import app, err
from verihub.cli.plugins import add_commands
from verihub.errors import VerihubError

__all__ = ["app", "main"]


def main() -> None:
    named = next((arg for arg in sys.argv[1:] if not arg.startswith("-")), None)
    if named not in _own_commands():
        add_commands(app)
    try:
        app()
    except VerihubError as error:
        err.print(f"[red]error:[/red] {escape(str(error))}", highlight=False, markup=True, soft_wrap=True)
        sys.exit(2)


def _own_commands() -> set[str]:
    """The names of the SDK's commands and command groups, as typer spells them."""
    commands = {
        command.name or command.callback.__name__.replace("_", "-")
        for command in app.registered_commands
        if command.callback is not None
    }
    return commands | {group.name for group in app.registered_groups if group.name}
