"""The warm pool: nothing of one run is visible to the next, and no run waits without a bound.

Each leftover test runs on a pool of one worker: run N leaves something behind, and run N+1 (on that
worker, or on the replacement of a worker that did not come back clean) must see exactly what a run on
a new worker sees.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from verihub import sandbox
from verihub.errors import SandboxUnavailable
from verihub.sandbox import Limits, Result, RunStatus
from verihub.sandbox.pool import WarmPool

pytestmark = pytest.mark.nsjail
LIMITS = Limits(wall_s=10, cpu_s=10, memory_mb=256, max_procs=16)

# What a run can see of the jail it runs in, printed in a stable form (pids and times left out).
PROBE = r"""
import ctypes, json, os, resource, subprocess
libc = ctypes.CDLL(None, use_errno=True)
def listing(path):
    try:
        return sorted(os.listdir(path))
    except OSError as error:
        return str(error)
def modes(path):
    info = os.lstat(path)
    return oct(info.st_mode), info.st_uid
report = {
    "cwd": os.getcwd(), "env": dict(os.environ),
    "work": listing("/work"), "tmp": listing("/tmp"), "mqueue": listing("/dev/mqueue"),
    "modes": [modes(path) for path in ("/work", "/tmp")],
    "sysvipc": {kind: open("/proc/sysvipc/" + kind).read().splitlines()[1:] for kind in ("shm", "msg", "sem")},
    "mq_open": libc.mq_open(b"/leftover", os.O_RDONLY) >= 0,
    "shmget": libc.shmget(0x1234, 0, 0) >= 0,
    "processes": len([name for name in os.listdir("/proc") if name.isdigit()]),
    "unix_sockets": open("/proc/net/unix").read().splitlines()[1:],
    "rlimits": {name: resource.getrlimit(getattr(resource, name)) for name in sorted(dir(resource))
                if name.startswith("RLIMIT_")
                and name not in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NPROC")},
    "nice": os.getpriority(os.PRIO_PROCESS, 0), "cpus": sorted(os.sched_getaffinity(0)),
    "umask": os.umask(0o22),
    "shell": subprocess.run(["bash", "-c", "ulimit -n; nice; pwd"], capture_output=True, text=True).stdout,
}
print(json.dumps(report, sort_keys=True))
"""

LEFTOVERS = {
    "read-only directories": "mkdir -p a/b && echo run-n > a/b/f && chmod 500 a/b && chmod 000 a; "
    "mkdir -p /tmp/c/d && echo run-n > /tmp/c/d/f && chmod 000 /tmp/c/d /tmp/c",
    "read-only files": "echo run-n > /tmp/f && chmod 000 /tmp/f && echo run-n > mine && chmod 400 mine",
    "modes of /work and /tmp": "chmod 000 /tmp; chmod 0500 /work",
    "sticky and setgid directories": "mkdir -m 3777 s && touch s/f && mkdir -m 1700 /tmp/s && touch /tmp/s/f",
    "hard links, FIFOs, sockets": "echo run-n > /tmp/h1 && ln /tmp/h1 /tmp/h2 && ln /tmp/h1 h3 && mkfifo /tmp/p && "
    "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('/tmp/sock')\"",
    "a very deep tree": "python3 -c \"import os\nos.chdir('/tmp')\n"
    "for _ in range(3000):\n    os.mkdir('d'); os.chdir('d')\n"
    "open('f', 'w').write('run-n')\"",
    "names with odd bytes": "python3 -c \"open(b'/tmp/\\xff\\xfe\\n', 'w').write('x'); open(b'\\x01 -rf', 'w')\"",
    "SysV IPC objects": 'python3 -c "import ctypes; libc = ctypes.CDLL(None)\n'
    'print(libc.shmget(0x1234, 4096, 0o1600), libc.msgget(0x1235, 0o1600), libc.semget(0x1236, 1, 0o1600))"',
    "POSIX message queues": 'python3 -c "import ctypes, os; '
    "ctypes.CDLL(None).mq_open(b'/leftover', os.O_CREAT | os.O_RDWR, 0o600, None)\"",
    "an escaped daemon with an abstract socket and a lock": (
        'python3 -c "import os, socket, fcntl, time\n'
        "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        s = socket.socket(socket.AF_UNIX); s.bind(b'\\0leftover'); s.listen()\n"
        "        lock = open('/tmp/lock', 'w'); fcntl.flock(lock, fcntl.LOCK_EX)\n        time.sleep(60)\n"
        '    os._exit(0)\ntime.sleep(0.3)"'
    ),
    "a stopped process": "sleep 60 & kill -STOP $!; sleep 0.1",
    "the worker's rlimits (prlimit on pid 1)": 'python3 -c "import resource; '
    "resource.prlimit(1, resource.RLIMIT_NOFILE, (32, 32)); "
    'resource.prlimit(1, resource.RLIMIT_CORE, (0, 0))"',
    "the worker's soft rlimit only": 'python3 -c "import resource; '
    'resource.prlimit(1, resource.RLIMIT_NOFILE, (64, 256))"',
    "the worker's priority": 'python3 -c "import os; os.setpriority(os.PRIO_USER, 0, 15)"',
    "the worker's CPU affinity": 'python3 -c "import os; os.sched_setaffinity(1, {min(os.sched_getaffinity(0))})"',
}


@pytest.fixture(scope="module")
def pool(nsjail_path: str) -> Iterator[WarmPool]:
    with WarmPool(1, limits=LIMITS, nsjail_path=nsjail_path) as one_worker:
        yield one_worker


def probe(pool: WarmPool) -> str:
    result = sandbox.run_python(PROBE, limits=LIMITS, sandbox=pool)
    assert result.ok, result
    return result.stdout


@pytest.fixture(scope="module")
def clean_view(pool: WarmPool) -> str:
    return probe(pool)


@pytest.mark.parametrize("leftover", LEFTOVERS.values(), ids=LEFTOVERS.keys())
def test_nothing_of_a_run_is_visible_to_the_next(pool: WarmPool, clean_view: str, leftover: str) -> None:
    first = sandbox.run(leftover, limits=LIMITS, sandbox=pool)
    assert first.status is not RunStatus.INFRA_ERROR, first
    assert probe(pool) == clean_view


def test_a_run_cannot_turn_its_own_result_into_an_infrastructure_fault(pool: WarmPool, clean_view: str) -> None:
    # SIGINT reaches pid 1 of a namespace only if it handles it: the worker must not.
    for code in (
        "import os, signal, time; os.kill(1, signal.SIGINT); time.sleep(0.2); print('done')",
        "import os; os.chmod('/work', 0); os.chmod('/tmp', 0); print('done')",
    ):
        result = sandbox.run_python(code, limits=LIMITS, sandbox=pool)
        assert result.ok and result.stdout == "done\n" and result.attempts == 1, result
    assert probe(pool) == clean_view


def test_what_a_run_leaves_behind_never_changes_its_result(pool: WarmPool, clean_view: str) -> None:
    """A wrong answer must not become a timeout or an infra_error (which a trainer does not count against
    it) by leaving work for the reset: clearing 30,000 sibling directories took one listing per directory."""
    code = (
        "import os\nfor root in ('/tmp', '/work'):\n    for number in range(15_000):\n"
        "        os.mkdir(f'{root}/{number}')\nprint('wrong')"
    )
    start = time.monotonic()
    result = sandbox.run_python(code, limits=LIMITS, sandbox=pool)
    assert result.ok and result.stdout == "wrong\n" and result.attempts == 1, result
    assert time.monotonic() - start < LIMITS.wall_s
    assert probe(pool) == clean_view


def test_a_jail_not_put_back_in_time_is_replaced_and_the_result_stands(nsjail_path: str, monkeypatch: Any) -> None:
    monkeypatch.setattr("verihub.sandbox.pool._RESET_S", 0.0)  # no reset finishes in time
    with WarmPool(1, limits=LIMITS, nsjail_path=nsjail_path) as one_worker:
        for number in range(3):
            result = sandbox.run_python(f"print({number})", limits=LIMITS, sandbox=one_worker)
            assert result.ok and result.stdout == f"{number}\n" and result.attempts == 1, result


# Scans its own memory for "<prefix><suffix>" knowing only the suffix's hash, so the secret is never in it.
MEMORY_SCAN = r"""
import ctypes, gc, hashlib, os
libc = ctypes.CDLL(None, use_errno=True)
libc.write.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
null = os.open("/dev/null", os.O_WRONLY)
def regions():
    try:
        with open("/proc/self/maps") as maps:
            spans = [line.split()[:2] for line in maps]
        return [tuple(int(x, 16) for x in span.split("-")) for span, perms in spans if perms.startswith("rw")]
    except OSError:  # not readable: find the pages around the heap's objects (write() says EFAULT, not SIGSEGV)
        anchors = {id(o) & ~0xFFFFF for o in gc.get_objects()[::50]}
        pages = {page for anchor in anchors for page in range(anchor - (8 << 20), anchor + (8 << 20), 4096)
                 if page > 0 and libc.write(null, page, 1) == 1}
        return [(page, page + 4096) for page in sorted(pages)]
found = set()
for start, end in regions():
    memory = ctypes.string_at(start, end - start)
    for name, prefix in PREFIXES.items():
        at = memory.find(prefix)
        while at >= 0:
            if hashlib.sha256(memory[at + len(prefix):at + len(prefix) + SIZE]).hexdigest() == DIGEST:
                found.add(name)
            at = memory.find(prefix, at + 1)
print(sorted(found))
"""


def test_no_byte_of_a_run_stays_in_the_memory_the_next_run_inherits(pool: WarmPool) -> None:
    import hashlib

    suffix = os.urandom(8).hex()
    prefixes = {"code": "code-secret-", "file": "file-secret-", "stdin": "stdin-secret-", "output": "output-secret-"}
    code = (
        f"import sys\nsecret = {prefixes['code'] + suffix!r}\nsys.stdout.write({prefixes['output']!r} + {suffix!r})\n"
        "print(open('tests.py').read(), sys.stdin.read())"
    )
    victim = sandbox.run_python(
        code,
        files={"tests.py": prefixes["file"] + suffix},
        stdin=prefixes["stdin"] + suffix,
        limits=LIMITS,
        sandbox=pool,
        keep_files=True,
    )
    assert victim.ok and victim.stdout.count(suffix) == 3
    scan = (
        f"PREFIXES = {dict((name, prefix.encode()) for name, prefix in prefixes.items())!r}\n"
        f"SIZE = {len(suffix)}\nDIGEST = {hashlib.sha256(suffix.encode()).hexdigest()!r}\n" + MEMORY_SCAN
    )
    scanned = sandbox.run_python(scan, limits=Limits(wall_s=60, memory_mb=256, max_procs=16), sandbox=pool)
    assert scanned.ok, scanned.stderr[-2000:]
    assert scanned.stdout == "[]\n"  # none of run N's code, files, stdin or output


def test_the_work_dir_is_the_same_as_in_a_fresh_jail(pool: WarmPool, fresh_jail: Any) -> None:
    code = "import os; print(os.getcwd(), os.environ['HOME'], sorted(os.listdir('.')))"
    files = {"data.txt": "x"}
    fresh = sandbox.run_python(code, files=files, limits=LIMITS, sandbox=fresh_jail)
    warm = sandbox.run_python(code, files=files, limits=LIMITS, sandbox=pool)
    assert fresh.ok and warm.stdout == fresh.stdout == "/work /work ['data.txt', 'main.py']\n"


# -- bounded waits -----------------------------------------------------------------------------------


def run_bounded(pool: WarmPool, limits: Limits, within_s: float) -> tuple[Result | None, float]:
    """The run's result and time, or None if it did not return within ``within_s`` (it hung)."""
    outcome: list[Result] = []
    start = time.monotonic()
    thread = threading.Thread(
        target=lambda: outcome.append(sandbox.run_python("print('ran')", limits=limits, sandbox=pool)), daemon=True
    )
    thread.start()
    thread.join(within_s)
    return (outcome[0] if outcome else None), time.monotonic() - start


def kill_workers(pool: WarmPool) -> None:
    for worker in list(pool._workers):
        os.killpg(worker.process.pid, signal.SIGKILL)
        worker.process.wait()


@pytest.mark.parametrize("breakage", ["python", "nsjail"])
def test_a_pool_whose_workers_cannot_start_reports_infra_error_in_bounded_time(nsjail_path: str, breakage: str) -> None:
    with WarmPool(2, limits=LIMITS, nsjail_path=nsjail_path) as pool:
        assert sandbox.run_python("print(1)", limits=LIMITS, sandbox=pool).ok
        if breakage == "python":  # the jail's interpreter is gone
            pool.python = "/nonexistent/python3"
        else:  # nsjail itself cannot start any more
            pool.fresh.nsjail_path = "/bin/false"
        kill_workers(pool)
        limits = Limits(wall_s=3, cpu_s=3, memory_mb=256, max_procs=16)
        result, took = run_bounded(pool, limits, within_s=limits.wall_s + 20)
        assert result is not None, "the run waited for a worker without a bound"
        assert result.status is RunStatus.INFRA_ERROR, result
        assert "no warm worker is alive" in result.reason and took < limits.wall_s + 5, (result.reason, took)
        if breakage == "python":
            assert "nonexistent" in result.reason, result.reason
        again, took = run_bounded(pool, limits, within_s=limits.wall_s + 20)  # and every later run too
        assert again is not None and again.status is RunStatus.INFRA_ERROR and took < limits.wall_s + 5


def test_a_pool_recovers_once_workers_can_start_again(nsjail_path: str) -> None:
    with WarmPool(1, limits=LIMITS, nsjail_path=nsjail_path) as pool:
        python = pool.python
        pool.python = "/nonexistent/python3"
        kill_workers(pool)
        limits = Limits(wall_s=2, cpu_s=2, memory_mb=256, max_procs=16)
        broken, _ = run_bounded(pool, limits, within_s=30)
        assert broken is not None and broken.status is RunStatus.INFRA_ERROR
        pool.python = python
        fixed, _ = run_bounded(pool, Limits(wall_s=20, memory_mb=256, max_procs=16), within_s=60)
        assert fixed is not None and fixed.ok and fixed.stdout == "ran\n", fixed


def test_a_pool_that_cannot_start_at_all_says_why(nsjail_path: str) -> None:
    start = time.monotonic()
    with pytest.raises(SandboxUnavailable, match="could not start any worker.*nonexistent"):
        WarmPool(1, limits=LIMITS, python="/nonexistent/python3", nsjail_path=nsjail_path)
    assert time.monotonic() - start < 30


def test_a_busy_pool_queues_runs_past_their_wall_clock(pool: WarmPool) -> None:
    # Waiting for a busy worker is not a fault: each of these waits longer than its own wall_s.
    limits = Limits(wall_s=1.5, cpu_s=1.5, memory_mb=256, max_procs=16)
    results: list[Result] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(
                sandbox.run_python("import time; time.sleep(0.4); print('ok')", limits=limits, sandbox=pool)
            )
        )
        for _ in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert [result.status for result in results] == [RunStatus.OK] * 6


@pytest.mark.parametrize("backend", ["fresh", "pool", "tools"])
def test_a_command_too_long_to_exec_is_the_programs_failure_on_every_backend(
    pool: WarmPool, nsjail_path: str, backend: str
) -> None:
    """An argument past the kernel's 128 KiB once made the jail fail to start (infra_error: nobody's fault,
    so never penalised); it fails as a shell would, exit 126, and a command just within the bound runs."""
    from verihub.sandbox.nsjail import NsjailSandbox
    from verihub.sandbox.tools import SandboxTools
    from verihub.sandbox.types import MAX_ARG_BYTES

    jail = pool if backend == "pool" else NsjailSandbox(nsjail_path)
    fits = "echo " + "x" * (MAX_ARG_BYTES - 100) + " | wc -c"
    too_long = "echo " + "é" * MAX_ARG_BYTES + " | wc -c"  # the bound is in bytes: 2 a character here
    if backend == "tools":
        tools = SandboxTools(limits=LIMITS, sandbox=jail)
        assert tools.bash(fits).strip() == str(MAX_ARG_BYTES - 99)
        assert "Argument list too long" in tools.bash(too_long)
        return
    ran = sandbox.run(fits, limits=LIMITS, sandbox=jail)
    assert ran.ok and ran.stdout.strip() == str(MAX_ARG_BYTES - 99), ran
    refused = sandbox.run(too_long, limits=LIMITS, sandbox=jail)
    assert (refused.status, refused.exit_code) == (RunStatus.NONZERO_EXIT, 126), refused
    assert "Argument list too long" in refused.stderr


@pytest.mark.parametrize("backend", ["fresh", "pool"])
def test_sparse_files_that_would_not_fit_once_restored_are_the_programs_failure(
    pool: WarmPool, nsjail_path: str, backend: str
) -> None:
    """Sparse files take no room in the jail's tmpfs but every byte in a snapshot: a session once kept such a
    state, and its next run could not start (a ValueError: the episode an environment fault)."""
    from verihub.sandbox.nsjail import NsjailSandbox
    from verihub.sandbox.session import SandboxSession

    jail = pool if backend == "pool" else NsjailSandbox(nsjail_path)
    session = SandboxSession(files={"keep.txt": "kept"}, limits=LIMITS, sandbox=jail)
    grown = session.run("for i in 1 2 3 4 5; do truncate -s 15M sparse$i; done")
    assert grown.status is RunStatus.OUTPUT_LIMIT and "sparse files in full" in grown.reason, grown
    after = session.run("ls")
    assert after.ok and after.stdout.split() == ["keep.txt"]  # the state before that run


def test_aliases_lead_into_the_work_dir_in_a_fresh_jail_and_the_pool_sends_them_there(pool: WarmPool) -> None:
    """sandbox.aliases (a container's WORKDIR, e.g. /app): symlinks the pool's jails, made once, do not
    have; such a run goes to a fresh jail and finds them."""
    limits = LIMITS.model_copy(update={"aliases": (("/app", "/work"), ("/logs", "/tmp/logs"))})
    assert pool.fits(LIMITS) and not pool.fits(limits)
    result = sandbox.run(
        "echo hi > /app/x; mkdir -p /tmp/logs && echo l > /logs/y; cat /work/x /tmp/logs/y; cd /app; pwd",
        limits=limits,
        sandbox=pool,
        keep_files=True,
    )
    assert (
        result.ok
        and result.stdout == "hi\nl\n/app\n"
        and result.files is not None
        and result.files.files() == {"x": b"hi\n"}
    )
    bare = sandbox.run("ls /app", limits=LIMITS, sandbox=pool)
    assert bare.status is RunStatus.NONZERO_EXIT  # no alias where none was asked for


def test_the_unsafe_local_backend_refuses_aliases() -> None:
    from verihub.sandbox.local import UnsafeLocalSandbox

    result = UnsafeLocalSandbox().run(sandbox.Request(command=["true"], limits=Limits(aliases={"/app": "/work"})))
    assert result.status is RunStatus.INFRA_ERROR and "sandbox.aliases" in result.reason


@pytest.mark.parametrize(
    ("aliases", "named"),
    [
        ({"/etc/app": "/work"}, "the jail's own"),
        ({"/app": "/home"}, "points into /work or /tmp"),
        ({"/app/../usr": "/work"}, "no . or .. parts"),
        ({f"/a{i}": "/work" for i in range(9)}, "at most 8"),
    ],
)
def test_an_alias_cannot_shadow_the_jails_own_paths_or_lead_out_of_it(aliases: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        Limits(aliases=aliases)
