"""What other installed parts add to ``verihub``, found through entry points (the way Flask finds
``flask.commands``), so that the SDK imports none of them:

- ``verihub.cli``: ``register(app)``, a callable that adds commands to the app. verihub-hub adds
  ``login``, ``push``, ``install``, ``search``, ``info`` and ``hub``; verihub-trainers ``train``, ``sft``,
  ``plot`` and ``models``. Any package may add its own::

      [project.entry-points."verihub.cli"]
      my-tools = "my_tools.cli:register"

- ``verihub.hubs``: ``open_hub(location, token)``, the hub a command publishes to (verihub-hub's), for
  ``verihub eval --push``.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any

import typer
from rich.markup import escape

from verihub.cli.app import err
from verihub.errors import describe_error

__all__ = ["COMMANDS", "HUBS", "add_commands", "open_hub"]

COMMANDS = "verihub.cli"
HUBS = "verihub.hubs"  # (verihub.environment.installed opens it)


def add_commands(app: typer.Typer) -> None:
    """Let every installed ``verihub.cli`` entry point add its commands, in the order of their names."""
    for entry in _sorted(COMMANDS):
        try:
            register = entry.load()
            register(app)
        except Exception as error:  # noqa: BLE001 - a broken part costs its own commands, not the whole CLI
            err.print(
                f"[yellow]warning:[/yellow] the commands of {escape(entry.value)} did not load: "
                f"{escape(describe_error(error))}",
                highlight=False,
            )


def open_hub(location: str | None, token: str | None) -> Any:
    """The hub at ``location`` (a server URL or a directory; None: the configured one), through the
    installed hub client."""
    from verihub.environment.installed import open_installed_hub

    return open_installed_hub(location, token)


def _sorted(group: str) -> list[EntryPoint]:
    return sorted(entry_points(group=group), key=lambda entry: entry.name)
