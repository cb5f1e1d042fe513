"""``verihub regrade``: stored eval results (or a training run's grade log) graded again under another verifier
version, and what flipped (:mod:`verihub.eval.regrade`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from verihub.cli.app import HubOption, TokenOption, app, err, out

MAX_TASKS_SHOWN = 30  # rows of the per-task table (--json lists every task)


@app.command("regrade")
def regrade_command(
    results: Annotated[
        Path,
        typer.Argument(
            help="What `verihub eval --out` wrote (metadata.json, results.parquet, rollouts.jsonl), or a training "
            "run's output_dir (its grades.jsonl)."
        ),
    ],
    env: Annotated[
        str,
        typer.Option(
            "--env",
            "-e",
            help="The verifier to grade with: ENV[@VERSION], any environment ref load_env takes (a directory, an "
            "installed name, hf://datasets/ORG/NAME[@REV]); OWNER/NAME@VERSION installs that version from the hub.",
        ),
    ],
    save: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write the regraded results here (a new directory), in eval's format: metadata.json names both "
            "verifiers (graded_by, regraded_from); results.parquet keeps status_before and reward_before.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    concurrency: Annotated[int, typer.Option(min=1, help="Answers graded at once.")] = 8,
    judge_model: Annotated[str | None, typer.Option(help="Model for judge layers, overriding the spec.")] = None,
    hub: HubOption = None,
    token: TokenOption = None,
) -> None:
    """Grade stored answers again under another verifier version and show what flipped: ok → wrong (reward a
    hole paid), wrong → ok, to and from faults, the reward paid before and after, per task. Nothing in RESULTS
    is changed. A regrade under the version that graded them changes nothing (a nondeterministic judge aside)."""
    import asyncio

    from verihub.environment.hub_refs import load_env_ref
    from verihub.eval.regrade import aregrade

    environment = load_env_ref(env, hub=hub, token=token, judge_model=judge_model)
    if environment.load_report is not None:
        for line in environment.load_report.lines():
            err.print(f"[dim]{escape(line)}[/dim]", highlight=False)
    report = asyncio.run(aregrade(results, environment, concurrency=concurrency, out=save))
    summary = report.summary()
    if as_json:
        print(json.dumps(summary, indent=2, default=str))
        return
    _print(summary)
    if save is not None:
        err.print(f"saved the regraded results to {save}", highlight=False)


def _print(summary: dict[str, Any]) -> None:
    before, after = _version(summary["graded_by_before"]), _version(summary["graded_by_after"])
    table = Table(
        title=f"{summary['environment']}: {summary['rollouts']} rollouts graded by {before}, regraded by {after}",
        title_justify="left",
        caption="reward: what the rollouts of each row were paid before and after",
        caption_justify="left",
    )
    for column in ("change", "rollouts", f"reward before ({before})", f"reward after ({after})"):
        table.add_column(column, justify="left" if column == "change" else "right")
    for flip, row in summary["flips"].items():
        if row["rollouts"] or flip == "unchanged":
            table.add_row(flip, str(row["rollouts"]), _reward(row["reward_before"]), _reward(row["reward_after"]))
    table.add_section()
    table.add_row(
        "all regraded", str(summary["regraded"]), _reward(summary["reward_before"]), _reward(summary["reward_after"])
    )
    if summary["not_regraded"]:
        table.add_row("not regraded", str(summary["not_regraded"]), "", "")
        for reason, count in summary["not_regraded_by_reason"].items():
            table.add_row(f"  {escape(reason)}", str(count), "", "")
    out.print(table)
    out.print(
        f"reward withdrawn (paid under {before}, not under {after}): {_reward(summary['reward_withdrawn'])}; "
        f"added: {_reward(summary['reward_added'])}",
        highlight=False,
    )
    for name, value in summary["rates"].get("before", {}).items():
        now = summary["rates"]["after"][name]
        out.print(f"{name}: {_rate(value)} → {_rate(now)}", highlight=False)
    if summary["tasks_changed"]:
        out.print(
            f"{summary['tasks_changed']} answers were to a task that {after} changed (regraded all the same)",
            highlight=False,
        )
    if summary["tasks"]:
        _print_tasks(summary["tasks"], before, after)
    for note in summary["notes"]:
        err.print(f"[dim]note: {escape(note)}[/dim]", highlight=False)
    if summary["other_environments"]:
        shown = ", ".join(f"{name} {count}" for name, count in sorted(summary["other_environments"].items()))
        err.print(f"[dim]left alone, records of other environments: {escape(shown)}[/dim]", highlight=False)


def _print_tasks(tasks: dict[str, dict[str, Any]], before: str, after: str) -> None:
    ranked = sorted(
        tasks.items(),
        key=lambda pair: (-pair[1].get("ok → wrong", 0), -abs(pair[1]["reward_before"] - pair[1]["reward_after"])),
    )
    table = Table(title="tasks with a change, the most ok → wrong first", title_justify="left")
    for column in ("task", "changes", f"reward before ({before})", f"reward after ({after})"):
        table.add_column(column, justify="right" if column.startswith("reward") else "left")
    for task_id, row in ranked[:MAX_TASKS_SHOWN]:
        changes = ", ".join(f"{flip} {n}" for flip, n in row.items() if flip not in ("reward_before", "reward_after"))
        table.add_row(escape(task_id), changes, _reward(row["reward_before"]), _reward(row["reward_after"]))
    out.print(table)
    if len(ranked) > MAX_TASKS_SHOWN:
        out.print(f"and {len(ranked) - MAX_TASKS_SHOWN} more tasks (--json lists every one)", highlight=False)


def _version(graded_by: dict[str, Any]) -> str:
    version = graded_by.get("version") or "/".join(graded_by.get("versions") or []) or "an unknown version"
    return f"{graded_by.get('environment')}@{version}"


def _reward(value: float) -> str:
    return f"{value:.3f}"


def _rate(value: Any) -> str:
    if isinstance(value, int):
        return str(value)  # a count
    return "n/a" if not isinstance(value, float) or value != value else f"{value:.3f}"
