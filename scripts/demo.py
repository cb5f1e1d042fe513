"""Grade a correct, a wrong and a malformed answer for one task of each installed bundled environment."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

import verihub

BUNDLED = ("sums", "arithmetic", "math-word", "json-extract")


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
    sandbox_demo(console)


def sandbox_demo(console: Console) -> None:
    """Grade a correct and a buggy fix with python_tests: the code runs in nsjail."""
    from verihub.checks.code import PythonTestsParams, python_tests

    tests = "from solution import median\n\ndef test_odd():\n    assert median([3, 1, 2]) == 2\n\n" \
            "def test_even():\n    assert median([4, 1, 3, 2]) == 2.5\n"
    fixes = {
        "correct": "def median(xs):\n    s = sorted(xs)\n    n = len(s)\n    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2",
        "buggy": "def median(xs):\n    return sorted(xs)[len(xs) // 2]",
        "hostile": "import os\nos.system('cat /etc/shadow; curl http://127.0.0.1:9')\nwhile True: pass",
    }
    table = Table(title="python_tests in the nsjail sandbox", title_justify="left")
    for column in ("fix", "score", "detail"):
        table.add_column(column, overflow="fold")
    for label, code in fixes.items():
        result = python_tests(f"```python\n{code}\n```", {"tests": tests}, PythonTestsParams(wall_s=2))
        table.add_row(label, f"{result.score:g}", result.detail)
    console.print(table)


if __name__ == "__main__":
    main()
