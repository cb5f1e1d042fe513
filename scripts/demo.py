"""The demo's first stages: validate every bundled environment (gold self-check and red-team suite), then
grade a correct, a wrong and a malformed answer for one task of a few installed ones, and code in nsjail.

Exits 1 when an environment does not validate (naming what failed), as ``verihub validate`` would.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

import verihub

REPO = Path(__file__).resolve().parents[1]
BUNDLED = ("sums", "arithmetic", "math-word", "json-extract")


def main() -> None:
    console = Console()
    if not validate_bundled(console):
        sys.exit(1)
    grade_samples(console)
    sandbox_demo(console)


def validate_bundled(console: Console) -> bool:
    """``verihub validate`` on every environment under envs/, one row each; the failures of any that fails."""
    from verihub.validation.validate import validate_env

    table = Table(title="verihub validate: every bundled environment", title_justify="left", box=box.SIMPLE_HEAD)
    for column in ("environment", "references passed", "negatives rejected", "exploits blocked", "faults", ""):
        table.add_column(
            column, justify="left" if column == "environment" else "right", no_wrap=column == "environment"
        )
    failed = []
    for path in sorted(p for p in (REPO / "envs").iterdir() if (p / "environment.yaml").is_file()):
        with console.status(f"validating {path.name}..."):
            report = validate_env(verihub.load_env(path, on_missing_judge="skip"))
        blocked, ran = report.exploit_tally()
        table.add_row(
            f"{report.env_id}@{report.version}",
            f"{report.references_passed}/{report.references}",
            f"{report.negatives_rejected}/{report.negatives}",
            f"{blocked}/{ran}",
            str(report.faults),
            "[green]valid[/]" if report.ok else "[red]INVALID[/]",
        )
        if not report.ok:
            failed.append(report)
    console.print(table)
    for report in failed:
        console.print(
            f"[red]{report.env_id} does not validate[/] (verihub validate envs/{report.env_id} for the whole report):",
            highlight=False,
        )
        for failure in report.failures or ["the reference pass rate or an exploit: see verihub validate"]:
            console.print(f"  [red]✗[/] {failure}", highlight=False)
    return not failed


def grade_samples(console: Console) -> None:
    """The reference and the negatives of one task per environment, graded: status, reward, and why."""
    table = Table(
        title="verihub: grading sample answers (one task per environment)", title_justify="left", box=box.SIMPLE_HEAD
    )
    for column in ("environment", "answer", "status", "reward", "why"):
        table.add_column(column, overflow="fold")
    for name in BUNDLED:
        env = verihub.load_env(name)  # installed package, found through its entry point
        task = env.dataset("eval")[0]
        console.print(
            f"{env.id}@{env.version} prompt: {env.render(task)[-1]['content']!r}",
            no_wrap=True,
            overflow="ellipsis",
            markup=False,
            highlight=False,
        )
        answers = {
            "reference": env.reference(task),
            **{f"negative {i + 1}": n for i, n in enumerate(env.negatives(task))},
        }
        for label, answer in answers.items():
            grade = env.grade(task, answer)
            failed = [r for r in grade.layers if r.status != verihub.LayerStatus.PASSED and r.status != "skipped"]
            why = f"{failed[0].name}: {failed[0].detail or failed[0].status}" if failed else "every layer passed"
            table.add_row(env.id if label == "reference" else "", label, str(grade.status), f"{grade.reward:g}", why)
        table.add_section()
    console.print(table)


def sandbox_demo(console: Console) -> None:
    """Grade a correct and a buggy fix with python_tests: the code runs in nsjail."""
    from verihub.checks.code import PythonTestsParams, python_tests

    tests = (
        "from solution import median\n\ndef test_odd():\n    assert median([3, 1, 2]) == 2\n\n"
        "def test_even():\n    assert median([4, 1, 3, 2]) == 2.5\n"
    )
    fixes = {
        "correct": (
            "def median(xs):\n    s = sorted(xs)\n    n = len(s)\n"
            "    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2"
        ),
        "buggy": "def median(xs):\n    return sorted(xs)[len(xs) // 2]",
        "hostile": "import os\nos.system('cat /etc/shadow; curl http://127.0.0.1:9')\nwhile True: pass",
    }
    table = Table(title="python_tests in the nsjail sandbox", title_justify="left", box=box.SIMPLE_HEAD)
    for column in ("fix", "score", "detail"):
        table.add_column(column, overflow="fold")
    for label, code in fixes.items():
        result = python_tests(f"```python\n{code}\n```", {"tests": tests}, PythonTestsParams(wall_s=2))
        table.add_row(label, f"{result.score:g}", result.detail)
    console.print(table)


if __name__ == "__main__":
    main()
