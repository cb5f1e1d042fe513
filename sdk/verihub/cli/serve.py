"""``verihub serve``: environments as an OpenEnv-compatible service."""

from __future__ import annotations

from typing import Annotated

import typer

from verihub import settings
from verihub.cli.app import app, err


@app.command("serve")
def serve_command(
    envs: Annotated[list[str], typer.Argument(help="Environments to serve (directories or installed names).")],
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: a free one, printed at start).")] = 8000,
    max_sessions: Annotated[
        int, typer.Option(min=1, help="WebSocket sessions held at once; past it, CAPACITY_REACHED.")
    ] = 64,
    idle_timeout: Annotated[
        float,
        typer.Option(
            min=0.1, help="Seconds without a reset or step before a session is closed and its work dir dropped."
        ),
    ] = 300.0,
    max_session_time: Annotated[
        float,
        typer.Option(
            min=1,
            help="Seconds a WebSocket session may last, however busy; then it is closed (the client connects again).",
        ),
    ] = 3600.0,
    body_timeout: Annotated[
        float,
        typer.Option(min=0.1, help="Seconds a request's body has, in all, to arrive once its head is in; then 408."),
    ] = 60.0,
    token: Annotated[
        str | None,
        typer.Option(
            show_default=False,
            help="Require 'Authorization: Bearer TOKEN' (all but /health; default: "
            "$VERIHUB_SERVE_TOKEN); prefer the environment variable, which `ps` "
            "does not show.",
        ),
    ] = None,
    no_token: Annotated[
        bool,
        typer.Option(
            "--no-token",
            help="Serve beyond loopback without a token: only behind "
            "an authenticating proxy of your own (grades state answers).",
        ),
    ] = False,
    judge_model: Annotated[
        str | None, typer.Option(help="Model for judge layers (openai:MODEL@URL), overriding the specs'.")
    ] = None,
    skip_judge: Annotated[
        bool,
        typer.Option(
            "--skip-judge",
            help="With no judge model, skip judge layers (a grade "
            "from the other layers, as `verihub validate` grades) instead of "
            "faulting each grade: for checking a server, not for training.",
        ),
    ] = False,
) -> None:
    """Serve environments over OpenEnv's HTTP/WebSocket protocol (WS /ws, POST /reset|/step), plus POST /grade."""
    try:
        import fastapi  # noqa: F401 - only whether the serving extra is installed
        import uvicorn  # noqa: F401 - only whether the serving extra is installed
        import websockets  # noqa: F401 - only whether the serving extra is installed
    except ImportError as error:
        err.print(f"verihub serve needs {error.name}: pip install 'verihub[hub]'")
        raise typer.Exit(2) from None
    from verihub.environment.core import load_env
    from verihub.serve.server import run

    loaded = [
        load_env(env, judge_model=judge_model, on_missing_judge="skip" if skip_judge else "error") for env in envs
    ]
    run(
        loaded,
        host=host,
        port=port,
        max_sessions=max_sessions,
        idle_timeout_s=idle_timeout,
        max_session_s=max_session_time,
        body_s=body_timeout,
        token=settings.serve_token(token),
        no_token=no_token,
    )
