"""The jail's seccomp policy, in one place: what every process of every jail (fresh or warm) may not call.

It refuses at least what Docker's default profile refuses as kernel attack surface, and namespace
creation by any route: ``unshare``, ``setns``, ``clone`` with a ``CLONE_NEW*`` flag (EPERM), and
``clone3`` altogether (ENOSYS, as from an older kernel: libc then falls back to ``clone``, whose flags
a filter can see; Docker does the same). Syscalls are allowed by number up to the newest one reviewed
here; any other number (a syscall newer than this list, the x32 ABI's numbers) gets ENOSYS, and the
compiled filter kills calls made through another architecture's ABI (``int 0x80``).

The policy is written in Kafel (nsjail compiles it); :data:`POLICY` is the string jails get.
"""

from __future__ import annotations

import platform

__all__ = ["POLICY", "REFUSED"]

EPERM, ENOSYS = 1, 38
NEWEST_REVIEWED = 469  # file_setattr (Linux 6.17); numbers above it answer ENOSYS until reviewed
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET. (CLONE_NEWTIME, 0x80, exists
# only for clone3 and unshare: in clone's flags that bit is part of the exit signal.)
CLONE_NEW_ANY = 0x7E020000
# personality(2) values Docker allows: PER_LINUX, PER_LINUX32, UNAME26 (and with PER_LINUX32), and the query
PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)

REFUSED: dict[str, tuple[str, ...]] = {  # why -> syscalls refused with EPERM
    "namespaces": ("unshare", "setns"),
    "mounts and root changes": (
        "mount",
        "pivot_root",
        "chroot",
        "move_mount",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "open_tree",
        "open_tree_attr",
        "mount_setattr",
    ),
    "other processes": ("ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp", "pidfd_getfd"),
    "kernel keyrings": ("add_key", "keyctl", "request_key"),
    "kernel programs and tracing": ("bpf", "perf_event_open", "userfaultfd", "lookup_dcookie", "fanotify_init"),
    "io_uring (its own syscall surface)": ("io_uring_setup", "io_uring_enter", "io_uring_register"),
    "kernel modules and kexec": (
        "init_module",
        "finit_module",
        "delete_module",
        "create_module",
        "query_module",
        "get_kernel_syms",
        "kexec_load",
        "kexec_file_load",
    ),
    "the machine": (
        "reboot",
        "swapon",
        "swapoff",
        "syslog",
        "acct",
        "quotactl",
        "quotactl_fd",
        "nfsservctl",
        "vhangup",
        "sethostname",
        "setdomainname",
    ),
    "the clock": ("settimeofday", "clock_settime", "adjtimex", "clock_adjtime"),
    "file handles (bypass path checks)": ("open_by_handle_at", "name_to_handle_at"),
    "NUMA placement": (
        "mbind",
        "set_mempolicy",
        "get_mempolicy",
        "set_mempolicy_home_node",
        "move_pages",
        "migrate_pages",
    ),
    "obsolete": ("uselib", "ustat", "sysfs"),
}
# Kafel names umount2 "umount" on x86_64, where port I/O and segment tables are refused too.
_X86_64_REFUSED = ("umount", "iopl", "ioperm", "modify_ldt")


def _policy(machine: str) -> str:
    refused = [name for names in REFUSED.values() for name in names]
    refused += _X86_64_REFUSED if machine in ("x86_64", "amd64") else ("umount2",)
    # the kernel reads personality's argument as 32 bits: compare those only
    personality = " && ".join(f"(persona & 0xffffffff) != {value:#x}" for value in PERSONALITIES)
    allowed = ", ".join(f"SYSCALL[{number}]" for number in range(NEWEST_REVIEWED + 1))
    # Kafel takes the first rule that matches: the refusals come before the allow-list.
    return "\n".join(
        [
            "POLICY verihub {",
            f"  ERRNO({EPERM}) {{",
            f"    clone(flags) {{ (flags & {CLONE_NEW_ANY:#x}) != 0 }},",
            f"    personality(persona) {{ {personality} }},",
            "    " + ", ".join(refused),
            "  },",
            f"  ERRNO({ENOSYS}) {{ clone3 }},",
            f"  ALLOW {{ {allowed} }}",
            "}",
            f"USE verihub DEFAULT ERRNO({ENOSYS})",
        ]
    )


POLICY = _policy(platform.machine().lower())
