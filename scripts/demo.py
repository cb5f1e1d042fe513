"""Grade a correct, a wrong and a malformed answer for one task of each installed bundled environment."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

import verihub

BUNDLED = ("arithmetic", "math-word", "json-extract")


def main() -> None:
    console = Console()
    table = Table(title="verihub: grading sample answers", title_justify="left")
    for column in ("environment", "task", "answer", "status", "reward", "why"):
        table.add_column(column, overflow="fold")
    for name in BUNDLED:
        env = verihub.load_env(name)  # installed package, found through its entry point
        task = env.dataset("eval")[0]
        console.print(f"[bold]{env.id}@{env.version}[/bold] prompt: {env.render(task)[-1]['content'][:100]!r}")
        answers = {"reference": env.reference(task), **{f"negative {i + 1}": n for i, n in enumerate(env.negatives(task))}}
        for label, answer in answers.items():
            grade = env.grade(task, answer)
            failed = [r for r in grade.layers if r.status != verihub.LayerStatus.PASSED and r.status != "skipped"]
            why = f"{failed[0].name}: {failed[0].detail or failed[0].status}" if failed else "every layer passed"
            table.add_row(env.id, str(task["id"]), label, str(grade.status), f"{grade.reward:g}", why)
    console.print(table)


if __name__ == "__main__":
    main()
