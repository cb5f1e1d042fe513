"""``verihub sandbox run``: a command in a fresh jail, as checks and tools run."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from verihub.cli.app import app, err

sandbox_app = typer.Typer(help="Run commands in the sandbox (nsjail).", no_args_is_help=True)
app.add_typer(sandbox_app, name="sandbox")


@sandbox_app.command("run")
def sandbox_run(
    command: Annotated[list[str], typer.Argument(help="The command and its arguments (after --).")],
    wall_s: Annotated[float, typer.Option(help="Wall-clock limit in seconds.")] = 20.0,
    memory_mb: Annotated[int, typer.Option(help="Memory (address space) limit in MiB.")] = 512,
    network: Annotated[bool, typer.Option("--network", help="Allow network access.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole Result as JSON.")] = False,
) -> None:
    """Run CMD in a fresh sandbox, print its output, and exit with its exit code.

    Exit codes besides the command's own: 124 timeout, 125 sandbox fault, 137 killed at a limit.
    Example: verihub sandbox run --wall-s 5 -- python3 -c 'print(1)'
    """
    from verihub import sandbox

    limits = sandbox.Limits(wall_s=wall_s, memory_mb=memory_mb, network=network)
    result = sandbox.run(command, limits=limits, stdin=None if sys.stdin.isatty() else sys.stdin.buffer.read())
    if as_json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        if result.reason and result.status is not sandbox.RunStatus.NONZERO_EXIT:
            err.print(f"[yellow]verihub sandbox: {result.status}: {result.reason}[/yellow]", highlight=False)
    codes = {sandbox.RunStatus.TIMEOUT: 124, sandbox.RunStatus.INFRA_ERROR: 125}
    raise typer.Exit(codes.get(result.status, result.exit_code if result.exit_code is not None else 137))
