"""Attacks from inside the sandbox. Each must be contained, and the next run must work as usual.

Network attacks aim only at listeners these tests start on the host's loopback, which the jail
(in its own network namespace) must not reach.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO
from verihub import sandbox
from verihub.sandbox import Limits, RunStatus

pytestmark = pytest.mark.nsjail
LIMITS = Limits(wall_s=5, cpu_s=5, memory_mb=256, max_procs=16, max_file_mb=4, max_output_kb=64)


@pytest.fixture(autouse=True)
def host_still_works(jail: Any) -> Iterator[None]:
    """After every attack the sandbox must serve a normal run."""
    yield
    after = sandbox.run_python("print('still fine')", limits=Limits(wall_s=20), sandbox=jail)
    assert after.ok and after.stdout == "still fine\n", after


def run(jail: Any, command: str, limits: Limits = LIMITS) -> sandbox.Result:
    result = sandbox.run(["bash", "-c", command], limits=limits, sandbox=jail)
    assert result.status is not RunStatus.INFRA_ERROR, result
    return result


@pytest.mark.parametrize(
    "path",
    ["/etc/shadow", f"{REPO}/pyproject.toml", f"{Path.home()}/.ssh", "/root", "/home", "/var/log", "/etc/hostname"],
)
def test_host_files_are_not_visible(jail: Any, path: str) -> None:
    result = run(jail, f"ls -la {path}; cat {path}")
    assert result.exit_code != 0 and "No such file or directory" in result.stderr


def test_proc_shows_only_the_jail(jail: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-from-host")
    result = run(
        jail,
        "ls /proc | grep -E '^[0-9]+$' | wc -l; cat /proc/1/environ | tr '\\0' '\\n'; echo; "
        "cat /proc/1/cmdline | tr '\\0' ' '",
    )
    assert "sk-secret-from-host" not in result.stdout
    process_count = int(result.stdout.splitlines()[0])
    assert process_count < 10  # the jail's own few processes, not the host's hundreds
    assert "pytest" not in result.stdout


@pytest.mark.parametrize("target", ["/usr/evil", "/etc/passwd", "/bin/evil", "/evil", "/proc/sys/kernel/hostname"])
def test_writes_outside_the_work_dir_fail(jail: Any, target: str) -> None:
    result = run(jail, f"echo pwned > {target}")
    assert result.exit_code != 0
    assert not Path(target).exists() or "pwned" not in Path(target).read_text(errors="replace")


def test_tmp_is_the_jails_own(jail: Any, tmp_path: Path) -> None:
    marker = f"verihub-attack-{os.getpid()}"
    written = run(jail, f"echo x > /tmp/{marker} && cat /tmp/{marker}")
    assert written.stdout == "x\n"  # the jail could write its /tmp...
    assert not (Path("/tmp") / marker).exists()  # ...which is not the host's


@pytest.fixture
def tcp_listener() -> Iterator[tuple[int, list[bytes]]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    received: list[bytes] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            received.append(connection.recv(100) or b"connected")
            connection.close()

    thread = threading.Thread(target=accept)
    thread.start()
    yield server.getsockname()[1], received
    stop.set()
    thread.join()
    server.close()


@pytest.fixture
def udp_listener() -> Iterator[tuple[int, socket.socket]]:
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    server.settimeout(0.5)
    yield server.getsockname()[1], server
    server.close()


def test_tcp_egress_to_the_host_is_blocked(jail: Any, tcp_listener: tuple[int, list[bytes]]) -> None:
    port, received = tcp_listener
    result = sandbox.run_python(
        f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\ns.sendall(b'exfil')",
        limits=LIMITS,
        sandbox=jail,
    )
    assert result.status is RunStatus.NONZERO_EXIT and "Connection refused" in result.stderr
    assert received == []


def test_udp_and_dns_egress_to_the_host_are_blocked(jail: Any, udp_listener: tuple[int, socket.socket]) -> None:
    port, server = udp_listener
    code = f"""
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(b'exfil', ('127.0.0.1', {port}))
# a DNS query for a name, sent to the host's listener as if it were a resolver
query = b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x07example\\x03com\\x00\\x00\\x01\\x00\\x01'
s.sendto(query, ('127.0.0.1', {port}))
try:
    socket.getaddrinfo('verihub-test.invalid', 80)
    print('resolved')
except OSError as error:
    print('no dns:', error)
"""
    result = sandbox.run_python(code, limits=LIMITS, sandbox=jail)
    assert "resolved" not in result.stdout
    with pytest.raises(TimeoutError):
        server.recvfrom(100)


def test_no_network_interfaces_but_loopback(jail: Any) -> None:
    result = sandbox.run_python(
        "import socket; print(sorted(n for _, n in socket.if_nameindex()))", limits=LIMITS, sandbox=jail
    )
    assert result.stdout.strip() in ("['lo']", "[]")


def test_fork_bomb_is_contained(jail: Any) -> None:
    # max_procs is what stops it (the wall clock would end any bomb): fork sleepers until refused.
    count = sandbox.run_python(
        "import os, time\nchildren = 0\ntry:\n    for _ in range(64):\n        if os.fork() == 0:\n"
        "            time.sleep(30)\n            os._exit(0)\n        children += 1\nexcept OSError as error:\n"
        "    print(children, type(error).__name__)\nelse:\n    print(children, 'never refused')",
        limits=Limits(wall_s=10, max_procs=16),
        sandbox=jail,
    )
    children, outcome = count.stdout.split()
    assert outcome == "BlockingIOError" and 8 <= int(children) < 16, count.stdout
    result = run(jail, ":(){ :|:& };:", Limits(wall_s=3, max_procs=16))
    assert result.status in (RunStatus.TIMEOUT, RunStatus.NONZERO_EXIT, RunStatus.OK, RunStatus.KILLED)


def test_memory_bomb_is_contained(jail: Any) -> None:
    result = sandbox.run_python(
        "chunks = []\nwhile True:\n    chunks.append(bytearray(64 << 20))", limits=LIMITS, sandbox=jail
    )
    assert result.status is RunStatus.MEMORY_LIMIT


def test_cpu_spin_is_stopped(jail: Any) -> None:
    result = sandbox.run_python("while True: pass", limits=Limits(wall_s=2), sandbox=jail)
    assert result.status is RunStatus.TIMEOUT and result.wall_s < 4


def test_output_flood_is_cut(jail: Any) -> None:
    result = run(jail, "yes flood")
    assert result.status is RunStatus.OUTPUT_LIMIT and len(result.stdout) <= 64 * 1024


def test_disk_fill_stops_at_the_quota(jail: Any) -> None:
    free_before = os.statvfs("/tmp").f_bavail
    result = run(
        jail,
        "for i in $(seq 1 200); do head -c 1M /dev/zero > f$i || break; done; du -sm . | cut -f1; "
        "head -c 1M /dev/zero > /tmp/more || echo tmp-full",
    )
    assert result.status is not RunStatus.TIMEOUT
    used_mb = int(result.stdout.split()[0])
    assert used_mb <= LIMITS.disk_mb + 1
    assert os.statvfs("/tmp").f_bavail >= free_before - (64 << 20) // os.statvfs("/tmp").f_frsize


def test_host_processes_cannot_be_listed_or_signalled(jail: Any) -> None:
    me = os.getpid()
    result = run(jail, f"ps aux 2>/dev/null | grep -c '[p]ytest'; kill -9 {me}; kill -9 1; echo survived")
    assert result.stdout.split() == ["0", "survived"], result.stdout
    os.kill(me, 0)  # still here


def test_ptrace_is_refused(jail: Any) -> None:
    code = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
pid = os.fork()
if pid == 0:
    import time; time.sleep(5); os._exit(0)
print('attach', libc.ptrace(16, pid, 0, 0), ctypes.get_errno())   # PTRACE_ATTACH to our own child
print('attach-1', libc.ptrace(16, 1, 0, 0), ctypes.get_errno())   # to the jail's init
os.kill(pid, 9)
"""
    result = sandbox.run_python(code, limits=LIMITS, sandbox=jail)
    assert "attach -1 1" in result.stdout and "attach-1 -1 1" in result.stdout  # EPERM both times


def test_setuid_and_privilege_gain_fail(jail: Any) -> None:
    result = sandbox.run_python(
        "import os\ntry:\n    os.setuid(0)\n    print('root!')\nexcept OSError as e:\n    print('refused')",
        limits=LIMITS,
        sandbox=jail,
    )
    assert result.stdout.strip() == "refused"
    # A setuid binary cannot raise privileges: no_new_privs is set and the jail holds no capabilities.
    # (Running one and then asking the shell's own uid would prove nothing.)
    status = run(
        jail,
        "grep -E '^(NoNewPrivs|CapEff|CapPrm):' /proc/self/status; "
        "/usr/bin/newgrp -h 2>/dev/null < /dev/null; su -c 'id -u' 2>/dev/null < /dev/null || echo no-su",
    )
    assert "NoNewPrivs:\t1" in status.stdout
    assert "CapEff:\t0000000000000000" in status.stdout and "CapPrm:\t0000000000000000" in status.stdout
    assert "\n0\n" not in f"\n{status.stdout}"  # su never ran anything as root
    unshare = run(jail, "unshare -r id -u || echo refused")
    assert "refused" in unshare.stdout


def test_symlink_and_hardlink_escapes(jail: Any) -> None:
    result = sandbox.run(
        [
            "bash",
            "-c",
            "ln -s /etc/shadow s1; ln -s ../../../../root/.ssh s2; ln /etc/passwd h1; "
            "ln /usr/bin/python3 h2; cat s1 s2/id_rsa; ls -la",
        ],
        limits=LIMITS,
        sandbox=jail,
        keep_files=True,
    )
    assert "Operation not permitted" in result.stderr or "Invalid cross-device link" in result.stderr
    assert result.files is not None
    files = result.files.files()  # read in memory: links are not followed on the host
    assert "h1" not in files and "h2" not in files
    assert all(not content.startswith(b"root:") for content in files.values())
    # restoring a snapshot with links into a new run keeps them inside the jail
    again = sandbox.run(["bash", "-c", "cat s1 2>&1; readlink s2"], files=result.files, limits=LIMITS, sandbox=jail)
    assert "root:" not in again.stdout or "x:0:0::/:/usr/sbin/nologin" in again.stdout


def test_runs_in_the_pool_cannot_see_each_other(warm_pool: Any, fresh_jail: Any) -> None:
    first = sandbox.run(
        "echo secret > /tmp/left-behind; echo secret > mine.txt; (sleep 30 &) ; echo ok",
        limits=LIMITS,
        sandbox=warm_pool,
    )
    assert first.ok
    for _ in range(warm_pool.size):  # whichever worker it ran on
        second = sandbox.run(
            "cat /tmp/left-behind ../*/mine.txt 2>&1; ps -e -o comm= 2>/dev/null | grep -c sleep",
            limits=LIMITS,
            sandbox=warm_pool,
        )
        assert "secret" not in second.stdout
        assert second.stdout.strip().splitlines()[-1] == "0"
