"""The jail's seccomp policy, from inside both isolating backends: namespaces cannot be created by any
syscall, Docker's refusals hold, and ordinary programs (subprocesses, threads, fork) still work.

The syscalls are made raw, through ``libc.syscall(number, ...)``, so that no libc wrapper or fallback
stands between the test and the filter. Numbers are x86_64's.
"""

from __future__ import annotations

import json
import platform
from typing import Any

import pytest

from verihub import sandbox
from verihub.sandbox import Limits
from verihub.sandbox._seccomp import POLICY, REFUSED

pytestmark = [
    pytest.mark.nsjail,
    pytest.mark.skipif(platform.machine() != "x86_64", reason="syscall numbers below are x86_64's"),
]
LIMITS = Limits(wall_s=20, memory_mb=256, max_procs=16)
EPERM, ENOSYS = 1, 38
SIGCHLD = 17
CLONE_NEW = {
    "NEWNS": 0x20000,
    "NEWCGROUP": 0x2000000,
    "NEWUTS": 0x4000000,
    "NEWIPC": 0x8000000,
    "NEWUSER": 0x10000000,
    "NEWPID": 0x20000000,
    "NEWNET": 0x40000000,
}
X32 = 0x40000000

# name -> (number, arguments): each with the arguments that would do harm if the call went through
REFUSED_CALLS: dict[str, tuple[int, tuple[int, ...]]] = {
    **{f"clone({flag})": (56, (bit | SIGCHLD, 0, 0, 0, 0)) for flag, bit in CLONE_NEW.items()},
    "clone(all CLONE_NEW*)": (56, (sum(CLONE_NEW.values()) | SIGCHLD, 0, 0, 0, 0)),
    "unshare(NEWUSER)": (272, (CLONE_NEW["NEWUSER"],)),
    "unshare(NEWNS)": (272, (CLONE_NEW["NEWNS"],)),
    "keyctl": (250, (0, -3, 1)),
    "add_key": (248, (0, 0, 0, 0, -3)),
    "request_key": (249, (0, 0, 0, -3)),
    "bpf": (321, (0, 0, 0)),
    "userfaultfd": (323, (0,)),
    "perf_event_open": (298, (0, 0, -1, -1, 0)),
    "kexec_load": (246, (0, 0, 0, 0)),
    "kexec_file_load": (320, (-1, -1, 0, 0, 0)),
    "init_module": (175, (0, 0, 0)),
    "finit_module": (313, (-1, 0, 0)),
    "delete_module": (176, (0, 0)),
    "open_by_handle_at": (304, (-100, 0, 0)),
    "name_to_handle_at": (303, (-100, 0, 0, 0, 0)),
    "iopl": (172, (3,)),
    "ioperm": (173, (0, 1024, 1)),
    "swapon": (167, (0, 0)),
    "swapoff": (168, (0,)),
    "syslog": (103, (10, 0, 0)),
    "acct": (163, (0,)),
    "settimeofday": (164, (0, 0)),
    "clock_settime": (227, (0, 0)),
    "adjtimex": (159, (0,)),
    "clock_adjtime": (305, (0, 0)),
    "mount": (165, (0, 0, 0, 0, 0)),
    "umount2": (166, (0, 0)),
    "pivot_root": (155, (0, 0)),
    "chroot": (161, (0,)),
    "open_tree": (428, (-100, 0, 0)),
    "move_mount": (429, (-1, 0, -1, 0, 0)),
    "fsopen": (430, (0, 0)),
    "fsconfig": (431, (-1, 0, 0, 0, 0)),
    "fsmount": (432, (-1, 0, 0)),
    "fspick": (433, (-100, 0, 0)),
    "mount_setattr": (442, (-100, 0, 0, 0, 0)),
    "ptrace": (101, (16, 1, 0, 0)),
    "process_vm_readv": (310, (1, 0, 1, 0, 1, 0)),
    "process_vm_writev": (311, (1, 0, 1, 0, 1, 0)),
    "kcmp": (312, (1, 1, 0, 0, 0)),
    "pidfd_getfd": (438, (-1, 0, 0)),
    "personality(ADDR_NO_RANDOMIZE)": (135, (0x0040000,)),
    "personality(READ_IMPLIES_EXEC)": (135, (0x0400000,)),
    "lookup_dcookie": (212, (0, 0, 0)),
    "quotactl": (179, (0, 0, 0, 0)),
    "uselib": (134, (0,)),
    "ustat": (136, (0, 0)),
    "sysfs": (139, (1, 0)),
    "modify_ldt": (154, (0, 0, 0)),
    "io_uring_setup": (425, (1, 0)),
    "io_uring_enter": (426, (-1, 0, 0, 0, 0, 0)),
    "io_uring_register": (427, (-1, 0, 0, 0)),
    "reboot": (169, (0, 0, 0, 0)),
}
ENOSYS_CALLS = {
    "x32 unshare": (X32 | 272, (CLONE_NEW["NEWUSER"],)),
    "x32 getpid": (X32 | 39, ()),
    "a number past the reviewed ones": (600, ()),
}

PROBE = r"""
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def namespaces():
    return {name: os.readlink("/proc/self/ns/" + name) for name in sorted(os.listdir("/proc/self/ns"))}
def call(number, *args):
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(number), *(ctypes.c_long(arg) for arg in args))
    if result == 0 and number in (56, 435):  # a child: it lives in whatever the flags made; leave quietly
        os._exit(0)
    if result > 0 and number in (56, 435):
        os.waitpid(result, 0)
    return [result, ctypes.get_errno()]
before = namespaces()
outcomes = {name: call(number, *args) for name, (number, args) in CALLS.items()}
user_ns = os.open("/proc/self/ns/user", os.O_RDONLY)
outcomes["setns(user)"] = call(308, user_ns, 0)
clone_args = (ctypes.c_uint64 * 11)(0x10000000, 0, 0, 0, 17)  # flags=CLONE_NEWUSER, exit_signal=SIGCHLD
outcomes["clone3(NEWUSER)"] = call(435, ctypes.addressof(clone_args), ctypes.sizeof(clone_args))
print(json.dumps({"outcomes": outcomes, "same_namespaces": namespaces() == before}))
"""


def probe(jail: Any, calls: dict[str, tuple[int, tuple[int, ...]]]) -> dict[str, Any]:
    result = sandbox.run_python(f"CALLS = {calls!r}\n" + PROBE, limits=LIMITS, sandbox=jail)
    assert result.ok, (result.status, result.reason, result.stderr[-2000:])
    return json.loads(result.stdout)


def test_namespaces_cannot_be_created_by_any_syscall(jail: Any) -> None:
    report = probe(jail, {name: call for name, call in REFUSED_CALLS.items() if name.startswith(("clone", "unshare"))})
    outcomes = report["outcomes"]
    assert outcomes.pop("clone3(NEWUSER)") == [-1, ENOSYS]  # libc falls back to clone, whose flags we see
    assert outcomes == {name: [-1, EPERM] for name in outcomes}
    assert report["same_namespaces"]


def test_dockers_refusals_hold(jail: Any) -> None:
    outcomes = probe(jail, REFUSED_CALLS)["outcomes"]
    assert {name: outcome for name, outcome in outcomes.items() if outcome[0] != -1 or outcome[1] != EPERM} == {
        "clone3(NEWUSER)": [-1, ENOSYS]
    }


def test_unreviewed_syscall_numbers_and_the_x32_abi_answer_enosys(jail: Any) -> None:
    outcomes = probe(jail, ENOSYS_CALLS)["outcomes"]
    assert all(outcomes[name] == [-1, ENOSYS] for name in ENOSYS_CALLS), outcomes


def test_ordinary_programs_still_work(jail: Any) -> None:
    code = r"""
import concurrent.futures, ctypes, os, subprocess, threading
shell = subprocess.run(["bash", "-c", "echo $((6 * 7)) | cat; (sleep 0.01 &); wait; ls / | wc -l"],
                       capture_output=True, text=True).stdout.split()
seen = []
thread = threading.Thread(target=seen.append, args=("thread",))
thread.start(); thread.join()
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    doubled = sum(pool.map(lambda x: 2 * x, range(10)))
child = os.fork()
if child == 0:
    os._exit(7)
_, status = os.waitpid(child, 0)
spawned = os.posix_spawn("/bin/true", ["true"], {})
_, spawn_status = os.waitpid(spawned, 0)
persona = ctypes.CDLL(None).personality(0xFFFFFFFF)  # the query is allowed
print(shell[0], seen, doubled, os.waitstatus_to_exitcode(status), spawn_status, persona)
"""
    result = sandbox.run_python(code, limits=LIMITS, sandbox=jail)
    assert result.ok, result.stderr[-2000:]
    assert result.stdout.split()[:6] == ["42", "['thread']", "90", "7", "0", "0"]


def test_the_policy_refuses_at_least_what_dockers_default_profile_does() -> None:
    # Docker's default profile refuses these (without added capabilities) as kernel attack surface.
    docker = {
        "acct",
        "add_key",
        "bpf",
        "clock_adjtime",
        "clock_settime",
        "delete_module",
        "finit_module",
        "get_kernel_syms",
        "get_mempolicy",
        "init_module",
        "ioperm",
        "iopl",
        "kcmp",
        "kexec_file_load",
        "kexec_load",
        "keyctl",
        "lookup_dcookie",
        "mbind",
        "mount",
        "move_pages",
        "name_to_handle_at",
        "nfsservctl",
        "open_by_handle_at",
        "perf_event_open",
        "pivot_root",
        "process_vm_readv",
        "process_vm_writev",
        "ptrace",
        "query_module",
        "quotactl",
        "reboot",
        "request_key",
        "set_mempolicy",
        "setns",
        "settimeofday",
        "swapoff",
        "swapon",
        "sysfs",
        "umount",
        "unshare",
        "uselib",
        "userfaultfd",
        "ustat",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "syslog",
        "create_module",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "move_mount",
        "open_tree",
        "mount_setattr",
        "adjtimex",
        "chroot",
        "vhangup",
        "sethostname",
        "setdomainname",
        "pidfd_getfd",
        "modify_ldt",
    }
    refused = set(POLICY.split("ERRNO(1) {", 1)[1].split("}", 2)[2].split("},")[0].replace(",", " ").split())
    assert docker <= refused, docker - refused
    assert {name for names in REFUSED.values() for name in names} <= refused
    assert "ERRNO(38) { clone3 }" in POLICY and POLICY.rstrip().endswith("DEFAULT ERRNO(38)")
