"""The sandbox interface on both isolating backends: results, limits, files, snapshots, faults."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from typing import Any

import pytest

from verihub import sandbox
from verihub.errors import SandboxInfraError, SandboxUnavailable
from verihub.sandbox import Limits, RunStatus, Snapshot
from verihub.sandbox.nsjail import NsjailSandbox
from verihub.sandbox.session import SandboxSession
from verihub.sandbox.tools import SandboxTools

pytestmark = pytest.mark.nsjail
QUICK = Limits(wall_s=5)


def test_python_code_output_exit_code_and_timing(jail: Any) -> None:
    result = sandbox.run_python(
        "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)", limits=QUICK, sandbox=jail
    )
    assert (result.status, result.exit_code, result.stdout, result.stderr) == (
        RunStatus.NONZERO_EXIT,
        3,
        "out\n",
        "err\n",
    )
    assert 0 < result.wall_s < 5 and result.cpu_s is not None and result.reason == "exit code 3"


def test_command_with_files_stdin_and_kept_files(jail: Any) -> None:
    result = sandbox.run(
        ["bash", "-c", "cat in.txt; cat; mkdir -p out && echo done > out/result.txt"],
        files={"in.txt": "from file\n"},
        stdin="from stdin\n",
        limits=QUICK,
        sandbox=jail,
        keep_files=True,
    )
    assert result.ok and result.stdout == "from file\nfrom stdin\n"
    assert result.files is not None and result.files.files()["out/result.txt"] == b"done\n"


def test_the_jail_is_nobody_with_a_clean_environment(jail: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    result = sandbox.run("id -u; id -g; env", limits=QUICK, sandbox=jail)
    lines = result.stdout.splitlines()
    assert lines[:2] == ["65534", "65534"]
    assert "hf_secret_value" not in result.stdout and "HF_TOKEN" not in result.stdout
    assert {line.split("=")[0] for line in lines[2:]} <= {
        "PATH",
        "HOME",
        "LANG",
        "PWD",
        "SHLVL",
        "_",
        "PYTHONDONTWRITEBYTECODE",
        "OLDPWD",
    }


@pytest.mark.parametrize(
    ("code", "limits", "status", "reason"),
    [
        ("import time; time.sleep(30)", Limits(wall_s=1), RunStatus.TIMEOUT, "wall-clock"),
        ("while True: pass", Limits(wall_s=10, cpu_s=1), RunStatus.TIMEOUT, "CPU-time"),
        ("x = bytearray(4 << 30)", Limits(wall_s=5, memory_mb=256), RunStatus.MEMORY_LIMIT, "256 MiB"),
        (
            "print('x' * 100_000, flush=True); import time; time.sleep(30)",
            Limits(wall_s=10, max_output_kb=16),
            RunStatus.OUTPUT_LIMIT,
            "16 KiB",
        ),
        ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", QUICK, RunStatus.KILLED, "SIGSEGV"),
    ],
)
def test_limits_end_runs_with_the_right_status(
    jail: Any, code: str, limits: Limits, status: RunStatus, reason: str
) -> None:
    result = sandbox.run_python(code, limits=limits, sandbox=jail)
    assert result.status is status, (result.status, result.reason, result.stderr[-300:])
    assert reason in result.reason
    if status in (RunStatus.TIMEOUT, RunStatus.OUTPUT_LIMIT):
        assert result.exit_code is None
    if status is RunStatus.OUTPUT_LIMIT:
        assert len(result.stdout) <= 16 * 1024


def test_a_programs_own_sigkill_is_no_memory_limit_whatever_the_grading_process_weighs(jail: Any) -> None:
    """A spawned child's rusage peak starts at its parent's: in a large grading process (a trainer; the CI's
    pytest) a program's ``kill -9 $$`` read as a memory limit (on main: memory_limit at 256 MiB)."""
    ballast = b"x" * (400 << 20)  # this process's peak, for the rest of the run, past the jail's limit
    del ballast
    limits = Limits(wall_s=5, memory_mb=256)
    own = sandbox.run("kill -9 $$", limits=limits, sandbox=jail)
    assert (own.status, own.reason) == (RunStatus.KILLED, "killed by SIGKILL")
    assert own.peak_memory_mb is None or own.peak_memory_mb < 256
    small = sandbox.run_python(
        "import os, signal; x = b'y' * (100 << 20); os.kill(os.getpid(), signal.SIGKILL)", limits=limits, sandbox=jail
    )
    assert (small.status, small.reason) == (RunStatus.KILLED, "killed by SIGKILL")


def test_file_size_limit(jail: Any) -> None:
    killed = sandbox.run("head -c 3M /dev/zero > big", limits=Limits(wall_s=5, max_file_mb=1), sandbox=jail)
    assert killed.status is RunStatus.KILLED and "SIGXFSZ" in killed.reason and killed.exit_code == 153
    python = sandbox.run_python(
        "open('big', 'wb').write(b'x' * (3 << 20))", limits=Limits(wall_s=5, max_file_mb=1), sandbox=jail
    )  # Python ignores SIGXFSZ and raises instead
    assert python.status is RunStatus.NONZERO_EXIT and "File too large" in python.stderr


def test_session_keeps_state_and_snapshots_restore(jail: Any) -> None:
    session = SandboxSession(files={"notes.txt": "v1"}, limits=QUICK, sandbox=jail)
    saved = session.snapshot()
    assert session.run("echo v2 > notes.txt && touch new.txt").ok
    assert session.files()["notes.txt"] == b"v2\n" and "new.txt" in session.files()
    assert session.run_python("print(open('notes.txt').read().strip())").stdout == "v2\n"
    session.restore(saved)
    assert session.run("cat notes.txt; ls").stdout == "v1notes.txt\n"


def test_a_run_that_does_not_finish_leaves_the_state_alone(jail: Any) -> None:
    session = SandboxSession(files={"a.txt": "kept"}, limits=Limits(wall_s=1), sandbox=jail)
    result = session.run("echo changed > a.txt; sleep 30")
    assert result.status is RunStatus.TIMEOUT
    assert session.files() == {"a.txt": b"kept"}


def test_tools_report_output_and_state_carries_over(jail: Any) -> None:
    tools = SandboxTools(limits=QUICK, sandbox=jail)
    assert tools.bash("echo 21 > n.txt") == ""
    assert tools.python("print(int(open('n.txt').read()) * 2)") == "42\n"
    failing = tools.python("raise SystemExit('bad input')")
    assert "bad input" in failing and "[nonzero_exit: exit code 1]" in failing
    assert set(tools.by_name()) == {"python", "bash"}


def test_snapshot_round_trip_and_names() -> None:
    snapshot = Snapshot.of({"a.txt": "x", "dir/b.bin": b"\x00\x01"}).adding({"a.txt": "y"})
    assert snapshot.files() == {"a.txt": b"y", "dir/b.bin": b"\x00\x01"}
    assert snapshot == Snapshot.of({"dir/b.bin": b"\x00\x01", "a.txt": "y"})
    for bad in ("../escape", "/etc/passwd", "", "a/../../b"):
        with pytest.raises(ValueError, match="relative path"):
            Snapshot.of({bad: "x"})


def test_request_validation() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        sandbox.Request()
    with pytest.raises(ValueError, match="disk_mb"):
        sandbox.Request(command=["true"], files=Snapshot.of({"big": b"x" * (2 << 20)}), limits=Limits(disk_mb=1))


def test_infrastructure_faults_are_retried_then_reported(nsjail_path: str) -> None:
    broken = NsjailSandbox("/bin/false")  # "nsjail" that never starts a jail
    result = sandbox.run_python("print(1)", limits=QUICK, sandbox=broken)
    assert result.status is RunStatus.INFRA_ERROR and result.attempts == 3
    assert "failed to start" in result.reason
    with pytest.raises(SandboxInfraError):
        SandboxTools(sandbox=broken).python("print(1)")


def test_python_tests_check_fault_is_env_error(monkeypatch: pytest.MonkeyPatch, make_env: Any) -> None:
    import verihub

    spec = """\
id: fault
version: 1.0.0
domain: code
description: Broken sandbox.
dataset: {source: data/tasks.jsonl}
prompt: {user: "{question}"}
verifier:
  - {name: tests, layer: check, use: python_tests, timeout_s: 60}
gold: {reference: "{answer}"}
"""
    rows = [
        {
            "id": "c1",
            "question": "q",
            "answer": "```python\ndef f():\n    return 1\n```",
            "tests": "from solution import f\ndef test_f():\n    assert f() == 1\n",
        }
    ]
    env = verihub.load_env(make_env(spec, rows=rows))
    monkeypatch.setattr(sandbox, "default_sandbox", lambda: NsjailSandbox("/bin/false"))
    grade = env.grade(rows[0], rows[0]["answer"])
    assert grade.status == "env_error" and grade.reward is None and "sandbox failed" in grade.reason


async def test_64_concurrent_runs_without_a_failure(fresh_jail: Any) -> None:
    results = await asyncio.gather(
        *(sandbox.arun_python(f"print({i} * 2)", limits=Limits(wall_s=60), sandbox=fresh_jail) for i in range(64))
    )
    assert [r.status for r in results] == [RunStatus.OK] * 64
    assert [r.stdout for r in results] == [f"{i * 2}\n" for i in range(64)]


def test_pool_replaces_a_dead_worker(warm_pool: Any) -> None:
    worker = warm_pool._idle.get()
    os.killpg(worker.process.pid, signal.SIGKILL)  # as if it crashed
    warm_pool._idle.put(worker)
    results = [sandbox.run_python("print('alive')", limits=QUICK, sandbox=warm_pool) for _ in range(4)]
    assert all(r.ok and r.stdout == "alive\n" for r in results)
    deadline = time.monotonic() + 30  # the replacement starts in the background
    while len(warm_pool._workers) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(warm_pool._workers) == 2
    assert worker not in warm_pool._workers and all(w.process.poll() is None for w in warm_pool._workers)


def test_pool_sends_runs_it_cannot_honour_to_a_fresh_jail(warm_pool: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not warm_pool.fits(Limits(network=True))
    fresh_runs: list[Any] = []
    run_fresh = warm_pool.fresh.run
    monkeypatch.setattr(warm_pool.fresh, "run", lambda request: fresh_runs.append(request) or run_fresh(request))
    assert sandbox.run("echo pooled", limits=QUICK, sandbox=warm_pool).stdout == "pooled\n"
    assert not fresh_runs  # a run that fits stays in the pool
    assert sandbox.run("echo fresh", limits=Limits(wall_s=5, memory_mb=4096), sandbox=warm_pool).stdout == "fresh\n"
    assert len(fresh_runs) == 1 and fresh_runs[0].limits.memory_mb == 4096


def test_unsafe_local_backend_is_explicit_and_warns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("VERIHUB_SANDBOX", "unsafe-local")
    sandbox._defaults.clear()
    with caplog.at_level(logging.WARNING, logger="verihub.sandbox"):
        first = sandbox.run_python("print(6 * 7)", limits=QUICK)
        sandbox.run_python("print(1)", limits=QUICK)
    sandbox._defaults.clear()
    assert first.ok and first.stdout == "42\n"
    assert sum("WITHOUT isolation" in record.message for record in caplog.records) == 2


def test_unavailable_nsjail_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    from verihub.sandbox import probe

    monkeypatch.setattr(probe.platform, "system", lambda: "Darwin")
    with pytest.raises(SandboxUnavailable, match="needs Linux.*VERIHUB_SANDBOX=unsafe-local"):
        probe.nsjail_binary()
    monkeypatch.setenv("VERIHUB_SANDBOX", "docker")
    with pytest.raises(ValueError, match="VERIHUB_SANDBOX='docker'"):
        sandbox.default_sandbox()
