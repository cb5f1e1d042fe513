"""Commands about environments: ``schema``, ``validate``, ``grade``, ``init``, ``checks``, ``envs``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from verihub.cli.app import (
    EnvArg,
    GraderOption,
    GraderTimeoutOption,
    GraderTokenOption,
    HubOption,
    TokenOption,
    app,
    err,
    grader_pool,
    load_named,
    out,
)


@app.command()
def schema(indent: Annotated[int, typer.Option(help="JSON indentation.")] = 2) -> None:
    """Print the JSON schema of environment.yaml (point your editor's YAML plugin at it)."""
    from verihub.spec.models import EnvSpec

    print(json.dumps(EnvSpec.model_json_schema(), indent=indent))


@app.command()
def validate(
    env: EnvArg,
    min_pass_rate: Annotated[
        float | None,
        typer.Option(min=0, max=1, help="Override gold.min_pass_rate (share of references that must pass)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    judge_model: Annotated[
        str | None,
        typer.Option(
            help="Model for judge layers (overrides the spec), e.g. "
            "openai:MODEL@URL. Without any, judge layers are skipped."
        ),
    ] = None,
    attacks: Annotated[
        bool,
        typer.Option(
            "--attacks/--no-attacks",
            help="Run the red-team suite: every exploit known against the verifier's checks, and gold.exploits.",
        ),
    ] = True,
    grader: GraderOption = [],  # noqa: B006 - typer copies a list default per call
    grader_token: GraderTokenOption = None,
    grader_timeout: GraderTimeoutOption = 120.0,
    hub: HubOption = None,
    token: TokenOption = None,
) -> None:
    """Check the spec, then the gold self-check: references must pass and negatives must fail; with a
    judge model, the judge's agreement with the calibration set must reach the spec's minimum. Then the
    red-team suite: every exploit known against the verifier must be rejected (one that passes, or makes
    the grade a fault, fails validation).

    Exits 0 when valid, 1 when the self-check fails, 2 when the spec is invalid.
    """
    from verihub.validation.validate import validate_env

    environment = load_named(env, hub=hub, token=token, judge_model=judge_model, on_missing_judge="skip")
    graders = grader_pool(grader, grader_token, grader_timeout)
    try:
        remote = graders.grader(environment) if graders is not None else None
        report = validate_env(environment, min_pass_rate=min_pass_rate, attacks=attacks, grader=remote)
    finally:
        if graders is not None:
            graders.close()
    if as_json:
        from dataclasses import asdict

        blocked, ran = report.exploit_tally()
        forced, forcing = report.fault_tally()
        print(
            json.dumps(
                {
                    **asdict(report),
                    "exploits_blocked": blocked,
                    "exploits_ran": ran,
                    "faults_forced": forced,
                    "fault_forcing_ran": forcing,
                    "answer_faults": report.answer_faults,
                    "max_exploit_reward": report.max_exploit_reward,
                    "ok": report.ok,
                },
                indent=2,
            )
        )
    else:
        _print_report(report)
    raise typer.Exit(0 if report.ok else 1)


def _print_report(report: Any) -> None:
    from verihub.validation.redteam import EVERY_VERIFIER, GOLD

    table = Table(title=f"{report.env_id}@{report.version}: gold self-check", title_justify="left")
    columns = (
        "layer",
        "kind",
        "gate",
        "references passed",
        "negatives failed",
        "faults",
        "mean ms",
        "exploits blocked",
        "faults forced",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in ("layer", "kind") else "right")

    def blocked(target: str) -> str:
        stopped, ran = report.exploit_tally(target)
        return f"{stopped}/{ran}" if ran else ""

    for tally in report.layers:
        mean_ms = 1000 * tally.time_s / tally.runs if tally.runs else 0.0
        table.add_row(
            tally.name,
            tally.layer,
            "yes" if tally.gate else "",
            f"{tally.references_passed}/{tally.references_ran}",
            f"{tally.negatives_failed}/{tally.negatives_ran}",
            str(tally.faults),
            f"{mean_ms:.3f}",
            blocked(tally.name),
            "",
        )
    forced, forcing = report.fault_tally()  # every fault-forcing exploit targets the whole verifier
    for target in (EVERY_VERIFIER, GOLD):
        if report.exploit_tally(target)[1]:
            table.add_row(
                target,
                "exploits",
                "",
                "",
                "",
                "",
                "",
                blocked(target),
                f"{forced}/{forcing}" if target == EVERY_VERIFIER and forcing else "",
            )
    out.print(table)
    if report.judge_skipped and any(tally.layer == "judge" for tally in report.layers):
        out.print(
            "[yellow]note:[/yellow] judge layers were skipped: no judge model is configured "
            "(eval.judge_model in the spec, or --judge-model)."
        )
    calibration = report.calibration
    if calibration is not None:
        mark = "[green]ok[/green]" if calibration.ok else "[red]TOO LOW[/red]"
        out.print(
            f"judge calibration: {calibration.agreed}/{calibration.items} agree "
            f"({calibration.agreement:.0%}, need {calibration.min_agreement:.0%}) {mark}"
        )
        for disagreement in calibration.disagreements[:5]:
            out.print(f"  [yellow]~[/yellow] {disagreement}", highlight=False)
    for failure in report.failures:
        out.print(f"  [red]✗[/red] {failure}", highlight=False)
    if report.exploits_need_judge:
        out.print(
            f"[yellow]note:[/yellow] {report.exploits_need_judge} judge-injection exploits need a judge model "
            "and were not run (--judge-model)."
        )
    if report.tasks_without_evidence:
        out.print(
            f"[yellow]note:[/yellow] {report.tasks_without_evidence} tasks have no evidence for the fault rule "
            "(no gold or canary reference, no answer graded ok): a fault there stays the environment's."
        )
    stopped, ran = report.exploit_tally()
    exploits = (
        f", exploits blocked {stopped}/{ran}, faults forced {forced}/{forcing}"
        if report.attacks
        else ", exploits not run (--no-attacks)"
    )
    if report.attacks and report.max_exploit_reward is not None:
        exploits += f" (highest reward {report.max_exploit_reward:g}, floor {report.exploit_floor:g})"
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
    environment = load_named(env)
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
    from verihub.spec.scaffold import init_env

    try:
        target = init_env(name, template, directory)
    except (ValueError, FileExistsError) as error:
        err.print(f"[red]error:[/red] {escape(str(error))}")
        raise typer.Exit(2) from None
    out.print(f"created {target}\nnext: verihub validate {target}")


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
    reasoning_gym: Annotated[
        bool,
        typer.Option(
            "--reasoning-gym",
            help='List reasoning-gym\'s datasets instead: load one with load_env("reasoning-gym:NAME", ...).',
        ),
    ] = False,
) -> None:
    """List installed environment packages (or, with --reasoning-gym, reasoning-gym's datasets)."""
    if reasoning_gym:
        _list_reasoning_gym()
        return
    from verihub.environment.installed import installed_envs

    table = Table("name", "package", "distribution")
    for name, entry_points in sorted(installed_envs().items()):
        for entry_point in entry_points:
            table.add_row(name, entry_point.value, entry_point.dist.name if entry_point.dist else "")
    out.print(table)


def _list_reasoning_gym() -> None:
    from verihub.adapters.reasoning_gym import list_datasets, rg_version, show_setting

    infos = list_datasets()
    table = Table(
        "name",
        "category",
        "difficulty levels",
        "settings (defaults)",
        title=f"reasoning-gym {rg_version()}: {len(infos)} datasets, "
        'load_env("reasoning-gym:NAME", size=, seed=, difficulty=, SETTING=...)',
        title_justify="left",
    )
    for info in infos:
        levels = ", ".join(f"{attr} 0-{count - 1}" for attr, count in info.levels.items())
        settings = ", ".join(f"{key}={show_setting(value)}" for key, value in info.settings.items())
        table.add_row(info.name, info.category, escape(levels), escape(settings))
    out.print(table)
