"""How long the CLI takes to start, side by side in one run: verihub against its floors (and a baseline).

    python bench/startup_bench.py [--runs 7] [--baseline /work/main/.venv/bin/python]

Each case is a fresh process, timed from spawn to exit; the figure is the best of --runs (start-up noise
only ever adds), wall time and, in brackets, the CPU time of the process itself (on a shared machine,
waiting for a core inflates wall time only). Rounds are interleaved, so machine noise hits every case
alike. Cases:

- ``python -c pass``: the interpreter's own floor;
- ``import verihub`` (goal <= 150 ms), ``verihub --help`` (goal <= 250 ms), ``verihub checks``,
  ``verihub validate envs/compare`` with ``--no-attacks`` and with the red-team suite;
- floors the commands cannot go under: a bare typer app's ``--help`` (typer and its rich help renderer),
  ``import datasets`` (validate loads tasks through it), and the peers ``hf version`` (huggingface_hub) and
  ``pip --help`` (the goal for ``verihub --help`` and ``verihub checks``: no slower).

With ``--baseline PYTHON`` (another environment's interpreter, e.g. main's), every verihub case also runs
there, and the table compares the two. The last line prints the ratios.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
TYPER_APP = '''\
import typer
app = typer.Typer(help="A bare app.", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
@app.command()
def one(n: int = 1) -> None:
    """One command."""
@app.command()
def two(name: str = "") -> None:
    """Another."""
app()
'''
GOALS_MS = {"import verihub": 150, "verihub --help": 250}


@dataclass
class Case:
    name: str
    argv: list[str]
    runs: list[tuple[float, float]]  # (wall, CPU) seconds

    @property
    def wall_ms(self) -> float:
        return 1000 * min(wall for wall, _ in self.runs)

    @property
    def cpu_ms(self) -> float:
        return 1000 * min(cpu for _, cpu in self.runs)


def verihub_cases(python: str) -> list[tuple[str, list[str]]]:
    cli = str(Path(python).with_name("verihub"))
    return [
        ("python -c pass", [python, "-c", "pass"]),
        ("import verihub", [python, "-c", "import verihub"]),
        ("verihub --help", [cli, "--help"]),
        ("verihub checks", [cli, "checks"]),
        ("validate --no-attacks", [cli, "validate", "envs/compare", "--no-attacks"]),
        ("validate (attacks)", [cli, "validate", "envs/compare"]),
    ]


def floor_cases(python: str, typer_app: Path) -> list[tuple[str, list[str]]]:
    cases = [
        ("typer app --help", [python, str(typer_app), "--help"]),
        ("import datasets", [python, "-c", "import datasets"]),
    ]
    hf = Path(python).with_name("hf")
    if hf.exists():
        cases.append(("hf version", [str(hf), "version"]))
    cases.append(("pip --help", [python, "-m", "pip", "--help", "--disable-pip-version-check"]))
    return cases


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process itself) of one run; a failed run measured nothing."""
    env = {**os.environ, "COLUMNS": "120"}
    start = time.perf_counter()
    with subprocess.Popen(argv, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env) as child:
        stderr = child.stderr.read() if child.stderr else b""
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - start
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {child.returncode}:\n{stderr.decode()[-2000:]}")
    return elapsed, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline", help="another environment's python to compare with (e.g. main's .venv)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        typer_app = Path(scratch) / "bare_typer_app.py"
        typer_app.write_text(TYPER_APP)
        now = [Case(name, argv, []) for name, argv in verihub_cases(sys.executable)]
        base = [Case(name, argv, []) for name, argv in verihub_cases(args.baseline)] if args.baseline else []
        floors = [Case(name, argv, []) for name, argv in floor_cases(sys.executable, typer_app)]
        every = [case for group in zip(*(g for g in (now, base) if g), strict=True) for case in group] + floors
        for case in every:  # warm the page cache and the bytecode caches; not timed
            timed(case.argv)
        for _ in range(args.runs):
            for case in every:
                case.runs.append(timed(case.argv))

    print(f"best of {args.runs} runs, ms: wall (CPU of the process) ({os.cpu_count()} cores; {sys.executable})")
    print(f"{'case':24}{'baseline':>16}{'now':>16}{'now/base':>10}  goal")
    for index, case in enumerate(now):
        before, ratio = (_ms(base[index]), f"{case.wall_ms / base[index].wall_ms:9.2f}x") if base else ("", "")
        print(f"{case.name:24}{before:>16}{_ms(case):>16}{ratio:>10}  {_goal(case)}")
    for case in floors:
        print(f"{case.name:24}{'':>16}{_ms(case):>16}{'':>10}  floor")

    named = {case.name: case for case in now + floors}
    ratios = [
        _ratio(named["import verihub"], named["python -c pass"], "python -c pass"),
        _ratio(named["verihub --help"], named["typer app --help"], "a bare typer app"),
        _ratio(named["validate --no-attacks"], named["import datasets"], "import datasets"),
        _ratio(named["verihub --help"], named["pip --help"], "pip --help"),
        _ratio(named["verihub checks"], named["pip --help"], "pip --help"),
    ]
    if base:
        ratios += [_ratio(case, base[index], "baseline") for index, case in enumerate(now) if index]
    print("; ".join(ratios))


def _ratio(case: Case, floor: Case, floor_name: str) -> str:
    return f"{case.name} {case.wall_ms / floor.wall_ms:.2f}x {floor_name} (CPU {case.cpu_ms / floor.cpu_ms:.2f}x)"


def _ms(case: Case) -> str:
    return f"{case.wall_ms:.0f} ({case.cpu_ms:.0f})"


def _goal(case: Case) -> str:
    goal = GOALS_MS.get(case.name)
    if goal is None:
        return ""
    return f"<= {goal} ms: {'met' if case.wall_ms <= goal else 'NOT met'}"


if __name__ == "__main__":
    main()
