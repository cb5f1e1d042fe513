"""bench/peer_eval_bench.py keeps running: its endpoint and its verihub half on a few rollouts, and its
verifiers half with .venv-verifiers' verifiers 0.4 (scripts/setup.sh --verifiers)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO, use_own_environment

BENCH = [
    sys.executable,
    str(REPO / "bench" / "peer_eval_bench.py"),
    "--tasks",
    "4",
    "-k",
    "2",
    "--concurrency",
    "4",
    "--latency-s",
    "0.01",
    "--repeat",
    "1",
]


def run_bench(*options: str, verifiers_python: str | None = None) -> list[str]:
    environ = {name: value for name, value in os.environ.items() if name != "VERIFIERS_PYTHON"}
    if verifiers_python:
        environ["VERIFIERS_PYTHON"] = verifiers_python
    result = subprocess.run([*BENCH, *options], cwd=REPO, capture_output=True, text=True, timeout=900, env=environ)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()


def test_the_bench_runs_verihub_against_its_endpoint_and_says_when_verifiers_is_missing() -> None:
    lines = run_bench()
    ours = next(line for line in lines if line.startswith("verihub 0."))
    assert "8 rollouts in" in ours and "faulted 0" in ours and "pass@1 " in ours
    assert "no --verifiers-python" in lines[-2]
    assert lines[-1].startswith("verihub ") and lines[-1].endswith("verifiers 0.4 not installed: no ratio")


@pytest.mark.slow
def test_the_bench_runs_verifiers_on_the_same_completions(monkeypatch: pytest.MonkeyPatch) -> None:
    venv = use_own_environment("verifiers", "VERIFIERS_PYTHON", monkeypatch)  # verifiers 0.4
    lines = run_bench(verifiers_python=str(venv / "bin" / "python"))
    assert any(line.startswith("verifiers 0.4") and "8 rollouts in" in line and "faulted 0" in line for line in lines)
    assert lines[-2].startswith("same completions, same verdicts per task: yes")
    assert lines[-1].startswith("verihub ") and "rollouts/s, ratio " in lines[-1]
