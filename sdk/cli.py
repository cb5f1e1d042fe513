"""The ``verihub`` command line. Commands that do not train never import torch."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from verihub.errors import VerihubError
from verihub.hub import open_hub

app = typer.Typer(
    help="verihub: RL environments and layered verifiers as versioned packages.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

EnvArg = Annotated[str, typer.Argument(help="Environment directory, its environment.yaml, or an installed name.")]


def main() -> None:
    try:
        app()
    except VerihubError as error:
        err.print(f"[red]error:[/red] {escape(str(error))}", highlight=False, markup=True, soft_wrap=True)
        sys.exit(2)


@app.command()
def schema(indent: Annotated[int, typer.Option(help="JSON indentation.")] = 2) -> None:
    """Print the JSON schema of environment.yaml (point your editor's YAML plugin at it)."""
    from verihub.spec import EnvSpec

    print(json.dumps(EnvSpec.model_json_schema(), indent=indent))


@app.command()
def validate(
    env: EnvArg,
    min_pass_rate: Annotated[
        float | None, typer.Option(min=0, max=1, help="Override gold.min_pass_rate (share of references that must pass).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    judge_model: Annotated[str | None, typer.Option(help="Model for judge layers (overrides the spec), e.g. "
                                                    "openai:MODEL@URL. Without any, judge layers are skipped.")] = None,
    attacks: Annotated[bool, typer.Option("--attacks/--no-attacks", help="Run the red-team suite: every exploit "
                                          "known against the verifier's checks, and gold.exploits.")] = True,
) -> None:
    """Check the spec, then the gold self-check: references must pass and negatives must fail; with a
    judge model, the judge's agreement with the calibration set must reach the spec's minimum. Then the
    red-team suite: every exploit known against the verifier must be rejected (one that passes, or makes
    the grade a fault, fails validation).

    Exits 0 when valid, 1 when the self-check fails, 2 when the spec is invalid.
    """
    from verihub.environment import load_env
    from verihub.validate import validate_env

    environment = load_env(env, judge_model=judge_model, on_missing_judge="skip")
    report = validate_env(environment, min_pass_rate=min_pass_rate, attacks=attacks)
    if as_json:
        from dataclasses import asdict

        blocked, ran = report.exploit_tally()
        print(json.dumps({**asdict(report), "exploits_blocked": blocked, "exploits_ran": ran, "ok": report.ok},
                         indent=2))
    else:
        _print_report(report)
    raise typer.Exit(0 if report.ok else 1)


def _print_report(report: Any) -> None:
    from verihub.redteam import EVERY_VERIFIER, GOLD

    table = Table(title=f"{report.env_id}@{report.version}: gold self-check", title_justify="left")
    columns = ("layer", "kind", "gate", "references passed", "negatives failed", "faults", "mean ms", "exploits blocked")
    for column in columns:
        table.add_column(column, justify="left" if column in ("layer", "kind") else "right")

    def blocked(target: str) -> str:
        stopped, ran = report.exploit_tally(target)
        return f"{stopped}/{ran}" if ran else ""

    for tally in report.layers:
        mean_ms = 1000 * tally.time_s / tally.runs if tally.runs else 0.0
        table.add_row(
            tally.name, tally.layer, "yes" if tally.gate else "",
            f"{tally.references_passed}/{tally.references_ran}", f"{tally.negatives_failed}/{tally.negatives_ran}",
            str(tally.faults), f"{mean_ms:.3f}", blocked(tally.name),
        )
    for target in (EVERY_VERIFIER, GOLD):
        if report.exploit_tally(target)[1]:
            table.add_row(target, "exploits", "", "", "", "", "", blocked(target))
    out.print(table)
    if report.judge_skipped and any(tally.layer == "judge" for tally in report.layers):
        out.print("[yellow]note:[/yellow] judge layers were skipped: no judge model is configured "
                  "(eval.judge_model in the spec, or --judge-model).")
    calibration = report.calibration
    if calibration is not None:
        mark = "[green]ok[/green]" if calibration.ok else "[red]TOO LOW[/red]"
        out.print(f"judge calibration: {calibration.agreed}/{calibration.items} agree "
                  f"({calibration.agreement:.0%}, need {calibration.min_agreement:.0%}) {mark}")
        for disagreement in calibration.disagreements[:5]:
            out.print(f"  [yellow]~[/yellow] {disagreement}", highlight=False)
    for failure in report.failures:
        out.print(f"  [red]✗[/red] {failure}", highlight=False)
    if report.exploits_need_judge:
        out.print(f"[yellow]note:[/yellow] {report.exploits_need_judge} judge-injection exploits need a judge model "
                  "and were not run (--judge-model).")
    stopped, ran = report.exploit_tally()
    exploits = f", exploits blocked {stopped}/{ran}" if report.attacks else ", exploits not run (--no-attacks)"
    verdict = "[green]valid[/green]" if report.ok else "[red]INVALID[/red]"
    out.print(
        f"{verdict}: references passed {report.references_passed}/{report.references} "
        f"(need {report.min_pass_rate:.0%}), negatives rejected {report.negatives_rejected}/{report.negatives}, "
        f"environment faults {report.faults}{exploits}"
    )


@app.command()
def grade(
    env: EnvArg,
    completion: Annotated[str, typer.Option(help="The answer to grade; '-' reads it from stdin.")],
    task: Annotated[str | None, typer.Option(help="Task id (default: the first task of the split).")] = None,
    split: Annotated[str, typer.Option(help="Split to take the task from.")] = "eval",
    as_json: Annotated[bool, typer.Option("--json", help="Print the grade as JSON.")] = False,
) -> None:
    """Grade one completion for one task and show every layer's verdict. Exits 1 unless it passes."""
    from verihub.environment import load_env

    environment = load_env(env)
    tasks = environment.dataset(split)
    if task is None:
        chosen = tasks[0]
    else:
        matches = tasks.filter(lambda row: str(row["id"]) == task)
        if len(matches) == 0:
            raise typer.BadParameter(f"no task {task!r} in split {split!r}", param_hint="--task")
        chosen = matches[0]
    text = sys.stdin.read() if completion == "-" else completion
    result = environment.grade(chosen, text)
    if as_json:
        print(json.dumps({"task": chosen["id"], **result.to_dict()}, indent=2, default=str))
    else:
        table = Table(title=f"{environment.id} task {chosen['id']}: {result.status} reward {result.reward}")
        for column in ("layer", "kind", "status", "score", "weight", "detail"):
            table.add_column(column)
        for layer in result.layers:
            score = "" if layer.score is None else f"{layer.score:g}"
            table.add_row(layer.name, layer.layer, layer.status, score, f"{layer.weight:g}", layer.detail)
        out.print(table)
    raise typer.Exit(0 if result.passed else 1)


@app.command()
def init(
    name: Annotated[str, typer.Argument(help="Name of the new environment (lowercase, digits, '-').")],
    template: Annotated[str, typer.Option(help="single-turn, tool or judge.")] = "single-turn",
    directory: Annotated[Path, typer.Option("--dir", help="Where to create it.")] = Path("."),
) -> None:
    """Create a new environment package from a template; it validates and pip-installs as it is."""
    from verihub.scaffold import init_env

    try:
        target = init_env(name, template, directory)
    except (ValueError, FileExistsError) as error:
        err.print(f"[red]error:[/red] {escape(str(error))}")
        raise typer.Exit(2) from None
    out.print(f"created {target}\nnext: verihub validate {target}")


@app.command("eval")
def eval_command(
    envs: Annotated[list[str], typer.Argument(help="Environments (directories, installed names, reasoning-gym:NAME), "
                                              "or `all`: every installed one. Several give a per-domain table.")],
    model: Annotated[str, typer.Option("--model", "-m", help="openai:MODEL@URL (any OpenAI-compatible endpoint), "
                                       "hf:PATH_OR_ID (local transformers) or vllm:PATH_OR_ID.")],
    n: Annotated[int | None, typer.Option("-n", help="Tasks to evaluate (default: the spec's eval.n).")] = None,
    k: Annotated[int | None, typer.Option("-k", help="Samples per task (default: the spec's eval.k).")] = None,
    concurrency: Annotated[int, typer.Option(help="Generation requests in flight.")] = 32,
    split: Annotated[str | None, typer.Option(help="Split (default: the spec's eval.split).")] = None,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature (default: the spec's).")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Most tokens per turn (default: the spec's).")] = None,
    seed: Annotated[int | None, typer.Option(help="Sampling seed, where the server supports one.")] = None,
    out: Annotated[Path | None, typer.Option(help="Directory for results.parquet, metadata.json, rollouts.jsonl "
                                             "(one subdirectory per environment when there are several).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in --out: keep its graded rollouts, rerun "
                                         "missing and faulted ones; refused unless model, sampling, tasks and "
                                         "environment (version and content) are the same.")] = False,
    judge_model: Annotated[str | None, typer.Option(help="Model for judge layers, overriding the spec.")] = None,
    adapter: Annotated[Path | None, typer.Option(help="A LoRA adapter directory (from `verihub train --lora`) "
                                                 "on top of an hf: or vllm: model.")] = None,
    push: Annotated[bool, typer.Option("--push", help="Upload the results (results.parquet, metadata.json) to the "
                                       "hub as a dataset linked to the environment's version: a row of its "
                                       "leaderboard.")] = False,
    results_for: Annotated[str | None, typer.Option(help="With --push: the environment's hub repository OWNER/NAME "
                                                    "(default: the ENV argument when it is one, else "
                                                    "YOUR_NAMESPACE/ENV_ID).")] = None,
    hub: HubOption = None,
    token: TokenOption = None,
    grader: Annotated[list[str], typer.Option("--grader", help="URL of a `verihub serve` of the same environments, "
                                              "repeatable: grading and tool sessions run there, spread by load, "
                                              "retried on another server when one fails.")] = [],  # noqa: B006
    grader_token: Annotated[str | None, typer.Option(envvar="VERIHUB_GRADER_TOKEN", show_default=False,
                                                     help="The graders' --token.")] = None,
    grader_timeout: Annotated[float, typer.Option(min=0.1, help="Seconds a grader may take to answer one request "
                                                  "before the work goes to another.")] = 120.0,
) -> None:
    """Evaluate environments against a model: rollouts, grades, pass@k, saved results.

    With several environments (or `all`), each is evaluated in turn with the same model and a table
    compares them by domain: the before/after check for general capability around a training run."""
    import asyncio
    import shutil
    import tempfile

    from verihub.environment import load_env
    from verihub.generation import load_backend
    from verihub.installed import installed_envs

    if resume and out is None:
        raise typer.BadParameter("--resume needs --out (where the earlier results are)", param_hint="--resume")
    names = sorted(installed_envs()) if envs == ["all"] else envs
    if results_for is not None and (not push or len(names) > 1):
        raise typer.BadParameter("takes --push and one environment", param_hint="--results-for")
    environments = [load_env(name, judge_model=judge_model) for name in names]
    if adapter is not None and not (adapter / "adapter_config.json").is_file():
        raise typer.BadParameter(f"{adapter} holds no adapter_config.json (a peft adapter directory)",
                                 param_hint="--adapter")
    try:
        backend = load_backend(model, adapter=str(adapter) if adapter else None, concurrency=concurrency)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--adapter" if adapter else "--model") from None
    graders = _grader_pool(grader, grader_token, grader_timeout)
    options = {"n": n, "k": k, "concurrency": concurrency, "split": split, "temperature": temperature,
               "max_tokens": max_tokens, "seed": seed, "resume": resume, "graders": graders}

    async def run_all() -> list[Any]:
        try:  # one event loop for every environment: an endpoint's connection pool belongs to one
            return [await _evaluate_one(environment, backend, model,
                                        out / environment.id if out is not None and len(environments) > 1 else out,
                                        options) for environment in environments]
        finally:
            await backend.aclose()
            if graders is not None:
                await graders.aclose()

    scratch = push and out is None  # the results are pushed from the files eval writes
    if scratch:
        out = Path(tempfile.mkdtemp(prefix="verihub-eval-"))
    reports = asyncio.run(run_all())
    if len(reports) > 1:
        _print_domains(reports)
    if push:
        assert out is not None
        try:
            _push_results(names, environments, out, results_for, open_hub(hub, token))
        except VerihubError as error:
            if not scratch:
                raise
            raise VerihubError(f"{error}\n(the results are kept in {out})") from None
        if scratch:
            shutil.rmtree(out, ignore_errors=True)


def _grader_pool(urls: list[str], token: str | None, timeout_s: float) -> Any:
    """The pool of ``--grader`` servers, or None for grading in this process."""
    if not urls:
        return None
    from verihub.graders import GraderError, GraderPool

    try:
        return GraderPool(urls, token=token, timeout_s=timeout_s)
    except GraderError as error:
        raise typer.BadParameter(str(error), param_hint="--grader") from None


def _push_results(names: list[str], environments: list[Any], directory: Path, results_for: str | None,
                  hub: Any) -> None:
    from verihub.hub.ids import RepoId

    for name, environment in zip(names, environments, strict=True):
        target = results_for or (name if "/" in name and not Path(name).exists() else None)
        pushed = hub.push_results(directory / environment.id if len(environments) > 1 else directory,
                                  RepoId.parse(target) if target else None)
        where = f"{hub.url}/{pushed.environment}" if hasattr(hub, "url") else str(pushed.environment)
        done = "pushed" if pushed.created else "already on the hub:"
        out.print(f"{done} results of {pushed.environment}@{pushed.version} to the dataset {pushed.dataset} "
                  f"(run {pushed.run}{', private' if pushed.private else ''}); leaderboard: {where}", highlight=False)


async def _evaluate_one(environment: Any, backend: Any, model: str, out: Path | None, options: dict[str, Any]) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from verihub.evaluate import aevaluate
    from verihub.generation import Sampling

    defaults = environment.spec.eval
    temperature, max_tokens = options["temperature"], options["max_tokens"]
    sampling = Sampling(
        temperature=defaults.temperature if temperature is None else temperature, top_p=defaults.top_p,
        max_tokens=defaults.max_tokens if max_tokens is None else max_tokens, seed=options["seed"],
    )
    split = options["split"]
    tasks = min(options["n"] or defaults.n, len(environment.dataset(split or defaults.split)))
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=False) as progress:
        bar = progress.add_task(f"{environment.id} x {model}", total=tasks * (options["k"] or defaults.k))
        if options["resume"]:
            progress.update(bar, description=f"{environment.id} x {model} (resuming)")
        report = await aevaluate(
            environment, backend, n=options["n"], k=options["k"], sampling=sampling, split=split,
            concurrency=options["concurrency"], out=out, resume=options["resume"], graders=options["graders"],
            on_rollout=lambda _: progress.advance(bar),
        )
        progress.update(bar, completed=len(report.rollouts))
    _print_metrics(report)
    if out is not None:
        err.print(f"saved {out / 'results.parquet'} and metadata.json", highlight=False)
    return report


def _print_domains(reports: list[Any]) -> None:
    table = Table(title=f"{reports[0].model}: every environment, by domain", title_justify="left",
                  caption="pass@1 and mean reward count a faulted rollout as failed; pass@1 graded leaves out the "
                          "faulted rollouts and lost tasks (none graded) shown", caption_justify="left")
    for column in ("domain", "environment", "tasks x k", "pass@1", "pass@1 graded", "mean reward",
                   "faulted rollouts", "tasks lost"):
        table.add_column(column, justify="left" if column in ("domain", "environment") else "right")
    for report in sorted(reports, key=lambda r: (r.domain, r.env_id)):
        metrics = report.metrics
        table.add_row(report.domain, f"{report.env_id}@{report.env_version}", f"{report.tasks} x {report.k}",
                      _rate(metrics["pass@1"]), _rate(metrics["pass@1_graded"]), _rate(metrics["mean_reward"]),
                      f"{metrics['rollouts_faulted']}/{metrics['rollouts']}", f"{metrics['tasks_lost']}/{metrics['tasks']}")
    out.print(table)


def _print_metrics(report: Any) -> None:
    metrics, k = report.metrics, report.k
    table = Table(title=f"{report.env_id}@{report.env_version} x {report.model}: {report.tasks} tasks x {k}",
                  title_justify="left")
    table.add_column("metric")
    table.add_column("faults count as failed", justify="right")
    table.add_column("graded only", justify="right")
    table.add_column("faults left out of graded only", justify="right")
    left_out = (f"{metrics['rollouts_faulted']}/{metrics['rollouts']} rollouts, "
                f"{metrics['tasks_lost']}/{metrics['tasks']} tasks")
    rates = [("pass@1", metrics["pass@1"], metrics["pass@1_graded"])]
    if k > 1:
        rates.append((f"pass@{k}", metrics[f"pass@{k}"], metrics[f"pass@{k}_graded"]))
    rates.append(("mean reward", metrics["mean_reward"], metrics["mean_reward_graded"]))
    rates += [(f"layer {name} pass rate", rate, metrics["layer_pass_rate_graded"][name])
              for name, rate in metrics["layer_pass_rate"].items()]
    for name, headline, graded in rates:
        table.add_row(name, _rate(headline), _rate(graded), left_out)
    table.add_section()
    table.add_row("faulted rollouts", str(metrics["rollouts_faulted"]), "", f"{metrics['env_error_rate']:.1%} of asked")
    for reason, count in metrics["env_errors_by_reason"].items():
        table.add_row(f"  {escape(reason)}", str(count), "", "")
    table.add_row("tasks with a fault", str(metrics["tasks_with_faults"]), "",
                  f"{metrics['tasks_lost']} with no rollout graded")
    table.add_row("tokens (prompt / completion)", f"{metrics['prompt_tokens']} / {metrics['completion_tokens']}", "", "")
    table.add_row("wall time", f"{report.wall_s:.1f}s", "", f"{report.rerun} rollouts run now")
    out.print(table)


def _rate(value: float) -> str:
    return "n/a" if value != value else f"{value:.3f}"  # NaN: nothing graded to take a rate of


HubOption = Annotated[str | None, typer.Option("--hub", help="Hub server URL, or a hub directory (default: "
                                               "$VERIHUB_HUB, else the embedded hub in $VERIHUB_HOME/hub).")]
TokenOption = Annotated[str | None, typer.Option("--token", help="Hub token (default: $VERIHUB_TOKEN, $HF_TOKEN, "
                                                 "then the one `verihub login` stored).")]


@app.command("serve")
def serve_command(
    envs: Annotated[list[str], typer.Argument(help="Environments to serve (directories or installed names).")],
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: a free one, printed at start).")] = 8000,
    max_sessions: Annotated[int, typer.Option(min=1, help="WebSocket sessions held at once; past it, "
                                              "CAPACITY_REACHED.")] = 64,
    idle_timeout: Annotated[float, typer.Option(min=0.1, help="Seconds without a reset or step before a session "
                                                "is closed and its work dir dropped.")] = 300.0,
    max_session_time: Annotated[float, typer.Option(min=1, help="Seconds a WebSocket session may last, however "
                                                    "busy; then it is closed (the client connects again).")] = 3600.0,
    body_timeout: Annotated[float, typer.Option(min=0.1, help="Seconds a request's body has, in all, to arrive "
                                                "once its head is in; then 408.")] = 60.0,
    token: Annotated[str | None, typer.Option(envvar="VERIHUB_SERVE_TOKEN", show_default=False,
                                              help="Require 'Authorization: Bearer TOKEN' (all but /health); "
                                              "prefer the environment variable, which `ps` does not show.")] = None,
    no_token: Annotated[bool, typer.Option("--no-token", help="Serve beyond loopback without a token: only behind "
                                           "an authenticating proxy of your own (grades state answers).")] = False,
) -> None:
    """Serve environments over OpenEnv's HTTP/WebSocket protocol (WS /ws, POST /reset|/step), plus POST /grade."""
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
        import websockets  # noqa: F401
    except ImportError as error:
        err.print(f"verihub serve needs {error.name}: pip install 'verihub[hub]'")
        raise typer.Exit(2) from None
    from verihub.environment import load_env
    from verihub.serve import run

    run([load_env(env) for env in envs], host=host, port=port, max_sessions=max_sessions,
        idle_timeout_s=idle_timeout, max_session_s=max_session_time,
        body_s=body_timeout, token=token, no_token=no_token)


@app.command()
def login(token: Annotated[str, typer.Option(prompt=True, hide_input=True, help="A hub token.")]) -> None:
    """Store a hub token for later commands (in $VERIHUB_HOME/token, readable by you only)."""
    import os

    from verihub import settings

    path = settings.token_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(token.strip() + "\n")
    out.print(f"token stored in {path}")


@app.command()
def push(
    path: Annotated[Path, typer.Argument(help="The package directory (an environment or a verifier package).")],
    owner: Annotated[str | None, typer.Option(help="Namespace to publish under (default: $VERIHUB_OWNER or your login).")] = None,
    bump: Annotated[str | None, typer.Option(help="Raise the version first: patch, minor or major.")] = None,
    private: Annotated[bool, typer.Option("--private", help="Create the repository private: only your namespace "
                                                      "sees it, its page, files and pip index entries.")] = False,
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


@app.command()
def install(
    requirement: Annotated[str, typer.Argument(help="OWNER/NAME\\[@SPEC]: 1.2.0, ^1.2, ~=1.2 or latest.")],
    hub: HubOption = None,
    token: TokenOption = None,
) -> None:
    """pip-install a published package from the hub (hashes checked); then load_env("OWNER/NAME") works."""
    repo, version = open_hub(hub, token).install(requirement)
    out.print(f"installed {repo}@{version}")


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="Words to look for in names and cards.")] = "",
    kind: Annotated[str | None, typer.Option(help="env or verifier.")] = None,
    hub: HubOption = None,
    token: TokenOption = None,
) -> None:
    """Find published packages."""
    table = Table("repository", "kind", "latest", "summary")
    for found in open_hub(hub, token).search(query, kind):
        table.add_row(found["repo"], found["kind"], found["latest"] or "", found["summary"])
    out.print(table)


@app.command()
def info(
    repository: Annotated[str, typer.Argument(help="OWNER/NAME")],
    hub: HubOption = None,
    token: TokenOption = None,
) -> None:
    """Versions, card and install command of a published package."""
    from rich.markdown import Markdown

    from verihub.hub.ids import RepoId
    from verihub.hub.local import card_body

    details = open_hub(hub, token).info(RepoId.parse(repository))
    out.print(f"[bold]{details['repo']}[/bold] ({details['kind']}, distribution {details['distribution']})")
    out.print(f"versions: {', '.join(details['versions']) or 'none'}")
    out.print(f"install: {details['install']}")
    if details["card"]:
        out.print(Markdown(card_body(details["card"])))


hub_app = typer.Typer(help="Run a hub server.", no_args_is_help=True)
app.add_typer(hub_app, name="hub")
token_app = typer.Typer(help="Hub tokens.", no_args_is_help=True)
hub_app.add_typer(token_app, name="token")
DataOption = Annotated[Path, typer.Option("--data", help="The hub's data directory.")]


@hub_app.command("serve")
def hub_serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    data: DataOption = Path("hubdata"),
) -> None:
    """Serve the Hugging Face Hub API subset, the pip simple index and the files (set HF_ENDPOINT to it)."""
    import uvicorn

    from verihub.hub.server import create_app

    uvicorn.run(create_app(data), host=host, port=port, log_level="warning")


@token_app.command("create")
def token_create(
    user: Annotated[str, typer.Argument(help="The user (namespace) the token acts as.")],
    role: Annotated[str, typer.Option(help="read or write.")] = "write",
    data: DataOption = Path("hubdata"),
) -> None:
    """Print a new token for USER (only its hash is stored: copy it now)."""
    from verihub.hub.accounts import Accounts

    data.mkdir(parents=True, exist_ok=True)
    print(Accounts(data / "hub.db").create_token(user, role))  # type: ignore[arg-type]


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


models_app = typer.Typer(help="Models for tests and demos.", no_args_is_help=True)
app.add_typer(models_app, name="models")


@models_app.command("tiny")
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


from verihub.trainers.cli import plot_command, sft_command, train_command  # noqa: E402 - after the app exists

app.command("train")(train_command)
app.command("sft")(sft_command)
app.command("plot")(plot_command)


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


@app.command("checks")
def list_checks() -> None:
    """List the checks verifier layers can `use:` (built in and published by installed packages)."""
    from verihub.checks.registry import BUILTIN_CHECKS, available_check_names, resolve_check

    table = Table("name", "runs", "source", "description")
    for name in available_check_names():
        found = resolve_check(name)
        table.add_row(name, found.mode, "built in" if name in BUILTIN_CHECKS else "package", found.description)
    out.print(table)


@app.command("envs")
def list_envs(
    reasoning_gym: Annotated[bool, typer.Option("--reasoning-gym", help="List reasoning-gym's datasets instead: "
                                                "load one with load_env(\"reasoning-gym:NAME\", ...).")] = False,
) -> None:
    """List installed environment packages (or, with --reasoning-gym, reasoning-gym's datasets)."""
    if reasoning_gym:
        _list_reasoning_gym()
        return
    from verihub.installed import installed_envs

    table = Table("name", "package", "distribution")
    for name, entry_points in sorted(installed_envs().items()):
        for entry_point in entry_points:
            table.add_row(name, entry_point.value, entry_point.dist.name if entry_point.dist else "")
    out.print(table)


def _list_reasoning_gym() -> None:
    from verihub.adapters.reasoning_gym import list_datasets, rg_version, show_setting

    infos = list_datasets()
    table = Table("name", "category", "difficulty levels", "settings (defaults)",
                  title=f"reasoning-gym {rg_version()}: {len(infos)} datasets, "
                        "load_env(\"reasoning-gym:NAME\", size=, seed=, difficulty=, SETTING=...)",
                  title_justify="left")
    for info in infos:
        levels = ", ".join(f"{attr} 0-{count - 1}" for attr, count in info.levels.items())
        settings = ", ".join(f"{key}={show_setting(value)}" for key, value in info.settings.items())
        table.add_row(info.name, info.category, escape(levels), escape(settings))
    out.print(table)


if __name__ == "__main__":
    main()
