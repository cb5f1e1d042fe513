"""The hub's commands: ``login``, ``push``, ``install``, ``search``, ``info``, and ``hub`` (``serve``, ``token
create``, ``org add``) to run a hub server. Registered on ``verihub`` through the ``verihub.cli`` entry point."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from verihub import settings
from verihub.cli.app import HubOption, TokenOption, out
from verihub.hub import open_hub

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the hub's commands to ``app``."""
    for command in (login, push, install, search, info):
        app.command()(command)
    app.add_typer(hub_app, name="hub")


def login(token: Annotated[str, typer.Option(prompt=True, hide_input=True, help="A hub token.")]) -> None:
    """Store a hub token for later commands (in $VERIHUB_HOME/token, readable by you only)."""
    path = settings.token_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(token.strip() + "\n")
    out.print(f"token stored in {path}")


def push(
    path: Annotated[Path, typer.Argument(help="The package directory (an environment or a verifier package).")],
    owner: Annotated[
        str | None, typer.Option(help="Namespace to publish under (default: $VERIHUB_OWNER or your login).")
    ] = None,
    bump: Annotated[str | None, typer.Option(help="Raise the version first: patch, minor or major.")] = None,
    private: Annotated[
        bool,
        typer.Option(
            "--private",
            help="Create the repository private: only your namespace sees it, its page, files and pip index entries.",
        ),
    ] = False,
    hub: HubOption = None,
    token: TokenOption = None,
) -> None:
    """Validate (red-team suite included: an environment that lets an exploit through is refused, naming
    it), build (wheel + sdist) and publish a new immutable version, tagged v{version}."""
    if bump not in (None, "patch", "minor", "major"):
        raise typer.BadParameter("use patch, minor or major", param_hint="--bump")
    result = open_hub(hub, token).push(path, owner=owner, bump=bump, private=private)
    if result.created:
        out.print(f"published {result.repo}@{result.version} (commit {result.commit[:12]}): {', '.join(result.files)}")
    else:
        out.print(f"{result.repo}@{result.version} is already published with this content; nothing to do")


def install(
    requirement: Annotated[str, typer.Argument(help="OWNER/NAME\\[@SPEC]: 1.2.0, ^1.2, ~=1.2 or latest.")],
    allow_moved_tag: Annotated[
        bool,
        typer.Option(
            "--allow-moved-tag",
            help="Install even if a release tag points elsewhere than when it was last installed from this hub "
            "(a hub that lets tags move, as huggingface.co does); warns instead of refusing.",
        ),
    ] = False,
    hub: HubOption = None,
    token: TokenOption = None,
) -> None:
    """pip-install a published package and its hub dependencies from the wheels at their release tags (sha256
    checked against the release's record; no pip index needed); then load_env("OWNER/NAME") works."""
    repo, version = open_hub(hub, token).install(requirement, allow_moved_tag=allow_moved_tag)
    out.print(f"installed {repo}@{version}")


def search(
    query: Annotated[str, typer.Argument(help="Words to look for in names and cards.")] = "",
    kind: Annotated[str | None, typer.Option(help="env or verifier.")] = None,
    rl_environments: Annotated[
        bool,
        typer.Option(
            "--rl-environments",
            help="List the hub's RL environment datasets (tagged rl-environment: verihub's and other frameworks') "
            "instead; the hub is --hub, $VERIHUB_HUB, $HF_ENDPOINT or huggingface.co, as for hf://datasets/ ids.",
        ),
    ] = False,
    framework: Annotated[
        str | None,
        typer.Option(help="With --rl-environments: only those of this framework (verihub, harbor, verifiers, ...)."),
    ] = None,
    hub: HubOption = None,
    token: TokenOption = None,
) -> None:
    """Find published packages, or (--rl-environments) the RL environment datasets of a hub."""
    if framework is not None and not rl_environments:
        raise typer.BadParameter("goes with --rl-environments", param_hint="--framework")
    if rl_environments:
        table = Table("dataset", "frameworks", "load_env", "summary")
        for found in open_hub(settings.dataset_hub(hub), token).rl_environments(framework, query):
            loads = f"hf://datasets/{found['repo']}" if found["loads"] else "(not by verihub)"
            table.add_row(found["repo"], ", ".join(found["frameworks"]), loads, found["summary"])
        out.print(table)
        return
    table = Table("repository", "kind", "latest", "summary")
    for found in open_hub(hub, token).search(query, kind):
        table.add_row(found["repo"], found["kind"], found["latest"] or "", found["summary"])
    out.print(table)


def info(
    repository: Annotated[str, typer.Argument(help="OWNER/NAME")],
    hub: HubOption = None,
    token: TokenOption = None,
) -> None:
    """Versions, card and install command of a published package."""
    from rich.markdown import Markdown

    from verihub.hub.cards import body
    from verihub.ids import RepoId

    details = open_hub(hub, token).info(RepoId.parse(repository))
    out.print(f"[bold]{details['repo']}[/bold] ({details['kind']}, distribution {details['distribution']})")
    out.print(f"versions: {', '.join(details['versions']) or 'none'}")
    out.print(f"install: {details['install']}")
    if details["card"]:
        out.print(Markdown(body(details["card"])))


hub_app = typer.Typer(help="Run a hub server.", no_args_is_help=True)
token_app = typer.Typer(help="Hub tokens.", no_args_is_help=True)
hub_app.add_typer(token_app, name="token")
DataOption = Annotated[Path, typer.Option("--data", help="The hub's data directory.")]


@hub_app.command("serve")
def hub_serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    data: DataOption = Path("hubdata"),
    pip_index: Annotated[
        bool,
        typer.Option(
            "--pip-index/--no-pip-index",
            help="Serve the pip index (/simple/) and its files; off, only the Hub API (as huggingface.co).",
        ),
    ] = True,
) -> None:
    """Serve the Hugging Face Hub API subset, the pip simple index and the files (set HF_ENDPOINT to it)."""
    import uvicorn

    from verihub.hub.server import create_app
    from verihub.serve.shutdown import serve

    # stops within seconds of SIGTERM, whatever a request waits on (a client that never sends its body)
    serve(uvicorn.Config(create_app(data, pip_index=pip_index), host=host, port=port, log_level="warning"))


@token_app.command("create")
def token_create(
    user: Annotated[str, typer.Argument(help="The user (namespace) the token acts as.")],
    role: Annotated[str, typer.Option(help="read or write.")] = "write",
    data: DataOption = Path("hubdata"),
) -> None:
    """Print a new token for USER (only its hash is stored: copy it now)."""
    from verihub.hub.accounts import Accounts

    data.mkdir(parents=True, exist_ok=True)
    print(Accounts(data / "hub.db").create_token(user, role))  # type: ignore[arg-type]  # typer checked the role against its choices


org_app = typer.Typer(help="Hub organizations.", no_args_is_help=True)
hub_app.add_typer(org_app, name="org")


@org_app.command("add")
def org_add(
    org: Annotated[str, typer.Argument(help="The organization (a namespace; created on first use).")],
    user: Annotated[str, typer.Argument(help="The user who becomes a member (and may write to it).")],
    data: DataOption = Path("hubdata"),
) -> None:
    """Add USER to the organization ORG."""
    from verihub.hub.accounts import Accounts

    data.mkdir(parents=True, exist_ok=True)
    Accounts(data / "hub.db").add_member(org, user)
    out.print(f"{user} is a member of {org}")
