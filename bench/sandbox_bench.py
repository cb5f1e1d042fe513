"""Sandbox latency and throughput: bare subprocess vs a fresh nsjail vs the warm pool, side by side.

    python bench/sandbox_bench.py [--runs 60]

Two workloads: a trivial Python script, and a small unit-test task (the python_tests runner with a
solution and three tests). "bare" writes the files to a temporary directory and runs the same system
python3 there as a plain subprocess (no isolation). Rounds are interleaved so that machine noise hits
every variant alike. Latency is one run at a time; runs/s keeps one run per core in flight. Targets:
fresh jail p50 <= 1.6x bare, warm pool p50 <= 0.5x bare.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from verihub import sandbox
from verihub.checks import _harness
from verihub.grading._pools import cpu_count
from verihub.sandbox.nsjail import JAIL_ENV, NsjailSandbox
from verihub.sandbox.pool import WarmPool

TESTS = (
    "from solution import add\n\ndef test_a():\n    assert add(1, 2) == 3\n\n"
    "def test_b():\n    assert add(-1, 1) == 0\n\ndef test_c():\n    assert add(0, 0) == 0\n"
)
LIMITS = sandbox.Limits(wall_s=30)


@dataclass(frozen=True)
class Workload:
    files: dict[str, str | bytes]  # main.py is the program
    stdin: str
    expect: str  # in stdout when the run did its job


TRIVIAL = Workload({"main.py": "print(sum(range(10)))"}, "", "45")
UNIT_TESTS = Workload(
    {"main.py": _harness.program(), "solution.py": "def add(a, b):\n    return a + b\n"},
    _harness.stdin(TESTS, {"test_a", "test_b", "test_c"}, "0" * 32, LIMITS.wall_s),
    '{"test_a": ["passed", ""], "test_b": ["passed", ""], "test_c": ["passed", ""]}',
)


def bare(workload: Workload) -> None:
    directory = Path(tempfile.mkdtemp(prefix="verihub-bench-"))
    try:
        for name, content in workload.files.items():
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            (directory / name).write_bytes(content.encode() if isinstance(content, str) else content)
        done = subprocess.run(
            ["/usr/bin/python3", "main.py"],
            cwd=directory,
            env=JAIL_ENV,
            input=workload.stdin.encode(),
            capture_output=True,
            check=True,
        )
        assert workload.expect in done.stdout.decode(), done
    finally:
        shutil.rmtree(directory)


def jailed(backend: sandbox.Sandbox) -> Callable[[Workload], None]:
    def run(workload: Workload) -> None:
        extra = {name: content for name, content in workload.files.items() if name != "main.py"}
        result = sandbox.run_python(
            workload.files["main.py"], files=extra, stdin=workload.stdin, limits=LIMITS, sandbox=backend
        )
        assert result.ok and workload.expect in result.stdout, result

    return run


def throughput(run: Callable[[Workload], None], workload: Workload, count: int) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(cpu_count()) as executor:
        list(executor.map(lambda _: run(workload), range(count)))
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=60, help="timed runs per variant and workload")
    options = parser.parse_args()
    with WarmPool(cpu_count(), limits=LIMITS) as pool:
        variants = {"bare": bare, "fresh jail": jailed(NsjailSandbox()), "warm pool": jailed(pool)}
        ratios: dict[str, float] = {}
        print(f"{'workload':<12}{'variant':<12}{'p50 ms':>9}{'p95 ms':>9}{'runs/s':>9}   ({cpu_count()} cores)")
        for label, workload in (("trivial", TRIVIAL), ("unit tests", UNIT_TESTS)):
            for run in variants.values():
                run(workload)  # warm up caches and the page cache
            times: dict[str, list[float]] = {name: [] for name in variants}
            for _ in range(options.runs):
                for name, run in variants.items():
                    start = time.perf_counter()
                    run(workload)
                    times[name].append(time.perf_counter() - start)
            p50 = {name: statistics.median(values) for name, values in times.items()}
            for name, run in variants.items():
                p95 = statistics.quantiles(times[name], n=20)[-1]
                rate = throughput(run, workload, options.runs)
                print(f"{label:<12}{name:<12}{p50[name] * 1000:>9.1f}{p95 * 1000:>9.1f}{rate:>9.1f}")
            ratios[f"{label} fresh"] = p50["fresh jail"] / p50["bare"]
            ratios[f"{label} pool"] = p50["warm pool"] / p50["bare"]
    print(
        "p50 ratios vs bare: "
        + ", ".join(f"{name} {value:.2f}x" for name, value in ratios.items())
        + " (targets: fresh <= 1.6x, pool <= 0.5x)"
    )


if __name__ == "__main__":
    main()
