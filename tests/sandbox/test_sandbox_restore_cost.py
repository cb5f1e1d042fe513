"""What restoring a work dir costs is known when it is made, and a state no jail could restore is refused then,
as the run's failure (issue 39, item 3, the sandbox's side).

A jail's tmpfs holds what the answer made; the next jail must hold it too, plus what a run adds (a Python
run's main.py). Before, a state was kept whenever its tar archive was no larger than disk_mb, so a work dir
cheap to make and costly to restore (every inode of the tmpfs taken, names too long to carry) was kept, and
the next jail failed to start: ``SandboxInfraError``, which grading exempts as infrastructure, so the
answer's own state ended its episode unscored. Now such a state is refused by the run that made it
(``output_limit``: the work dir cannot be kept) and the session goes on from the state before; a state that
does reach a jail and fails there while being restored is a :class:`~verihub.errors.SandboxStateError`, for
grading to weigh by evidence; and a jail that fails before it restores anything stays infrastructure.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

import pytest

from verihub import sandbox
from verihub.errors import SandboxInfraError, SandboxStateError
from verihub.sandbox import Limits, RunStatus, Snapshot, _archive
from verihub.sandbox.nsjail import NsjailSandbox
from verihub.sandbox.pool import WarmPool
from verihub.sandbox.session import SandboxSession
from verihub.sandbox.tools import SandboxTools

LIMITS = Limits(wall_s=60, cpu_s=60, memory_mb=256, max_procs=16)


def test_a_snapshot_records_what_restoring_it_costs() -> None:
    long_target = "t" * 200  # past the 128 bytes a tmpfs keeps in the inode: a page of its own
    state = Snapshot.received(
        _archive.to_frames(
            [
                _archive.Entry(".", _archive.DIR, 0o755),
                _archive.Entry("d", _archive.DIR, 0o755),
                _archive.Entry("d/one", _archive.FILE, 0o644, 0.0, "", b"x"),
                _archive.Entry("d/big", _archive.FILE, 0o644, 0.0, "", b"y" * 5000),
                _archive.Entry("d/again", _archive.HARDLINK, 0o644, 0.0, "d/big"),
                _archive.Entry("short", _archive.SYMLINK, 0o777, 0.0, "d/one"),
                _archive.Entry("long", _archive.SYMLINK, 0o777, 0.0, long_target),
            ]
        )
    )
    cost = state.cost
    assert (cost.inodes, cost.links, cost.data_bytes, cost.depth) == (5, 3, 5001, 2)
    assert cost.disk_bytes == 4096 + 8192 + 4096  # a page for "one", two for "big", one for the long target
    assert cost.names_bytes == _archive.frames_size(state.entries()) - cost.data_bytes
    assert cost.refusal(Limits()) == ""


@pytest.mark.nsjail
def test_every_inode_of_the_tmpfs_taken_is_refused_when_made_and_the_next_run_starts(fresh_jail: Any) -> None:
    """65,535 empty files fill the work dir's tmpfs (65,536 inodes with its root): a bash run makes them in a
    second, and before, they were kept; the next Python run (main.py is one more file) could not start."""
    tools = SandboxTools(files={"a.txt": "kept"}, limits=LIMITS, sandbox=fresh_jail)
    output = tools.bash("seq 65535 | xargs touch")
    assert "[output_limit: the work dir cannot be kept: it holds 65,535 files" in output, output[-500:]
    assert tools.python("import os; print(sorted(os.listdir('.')))").strip() == "['a.txt', 'main.py']"


@pytest.mark.nsjail
def test_names_too_long_to_carry_are_refused_when_made(fresh_jail: Any) -> None:
    """A directory 245 deep and 35,000 files in it: a few MiB of tmpfs, and 17 MB of paths that every check
    and every restore walks. Before, its archive fit in disk_mb and it was kept."""
    make = "p=$(printf 'd/%.0s' $(seq 245)); mkdir -p $p && cd $p && seq 35000 | xargs touch"
    tools = SandboxTools(files={"a.txt": "kept"}, limits=LIMITS.model_copy(update={"disk_mb": 256}), sandbox=fresh_jail)
    output = tools.bash(make)
    assert "[output_limit: the work dir cannot be kept:" in output and "names and link targets" in output, output
    assert tools.bash("ls").split() == ["a.txt"]


@pytest.mark.nsjail
def test_a_state_past_the_limits_it_is_restored_under_is_refused_before_a_jail_starts(fresh_jail: Any) -> None:
    """A state made under one sandbox's limits, restored under tighter ones (a check's own): refused as the
    state's, never an infrastructure fault, whichever backend."""
    big = sandbox.run("head -c 3000000 /dev/zero > big", keep_files=True, limits=LIMITS, sandbox=fresh_jail).files
    assert big is not None and big.cost.disk_bytes > 1 << 20
    with pytest.raises(SandboxStateError, match="more than disk_mb=1") as refused:
        sandbox.run("ls", files=big, limits=Limits(disk_mb=1), sandbox=fresh_jail)
    assert not isinstance(refused.value, SandboxInfraError)
    with pytest.raises(SandboxStateError, match="more than disk_mb=1"):
        SandboxSession(files=big, limits=Limits(disk_mb=1), sandbox=fresh_jail).run("ls")


SMALL_TMPFS = """\
#!/bin/bash
# nsjail, but every tmpfs of the jail is 1 MiB whatever the limits say: the host sized the state for
# its limits, and the jail cannot hold it (a restore that fails in the jail, whatever made it fail)
quiet=()
[ "$1" = --quiet ] && quiet=(--quiet) && shift
config=$(mktemp {tmp}/config.XXXXXX)
sed 's/size=[0-9]*m,/size=1m,/g' "$2" > "$config"
exec {real} "${{quiet[@]}}" --config "$config"
"""
BROKEN = """\
#!/bin/sh
# nsjail that cannot start a jail at all: the infrastructure's failure
echo "[E][2026-01-01T00:00:00+0000][1] clone(flags=CLONE_NEWUSER) failed: Operation not permitted" >&2
exit 255
"""


def stand_in(tmp_path: Path, script: str, real: str) -> str:
    path = tmp_path / "nsjail"
    path.write_text(script.format(real=shlex.quote(os.path.realpath(real)), tmp=shlex.quote(str(tmp_path))))
    path.chmod(0o755)
    return str(path)


@pytest.mark.nsjail
def test_a_jail_that_fails_while_restoring_the_state_raises_the_states_error(nsjail_path: str, tmp_path: Path) -> None:
    """Whatever the host's arithmetic says, a jail that came up and could not restore the state it was given
    reports it as such (after retries), on every path: a command, Python code, and the warm pool."""
    state = Snapshot.of({"big": b"x" * (3 << 20)})
    jail = NsjailSandbox(stand_in(tmp_path, SMALL_TMPFS, nsjail_path))
    assert sandbox.run("echo fine", limits=LIMITS, sandbox=jail).stdout == "fine\n"  # no state: it starts
    with pytest.raises(SandboxStateError, match="restoring it failed"):
        sandbox.run("true", files=state, limits=LIMITS, sandbox=jail)
    with pytest.raises(SandboxStateError, match="restoring it failed: .*No space left on device"):
        sandbox.run_python("pass", files=state, limits=LIMITS, sandbox=jail)
    with WarmPool(1, limits=LIMITS, nsjail_path=jail.nsjail_path) as pool:
        with pytest.raises(SandboxStateError, match="restoring it failed: .*No space left on device"):
            sandbox.run_python("pass", files=state, limits=LIMITS, sandbox=pool)
        after = sandbox.run_python("print('next')", files=Snapshot.of({"a": "b"}), stdin="in", sandbox=pool)
        assert (after.status, after.stdout) == (RunStatus.OK, "next\n")  # the protocol is in step


@pytest.mark.nsjail
def test_a_jail_that_fails_before_restoring_anything_is_infrastructure(nsjail_path: str, tmp_path: Path) -> None:
    jail = NsjailSandbox(stand_in(tmp_path, BROKEN, nsjail_path))
    result = sandbox.run("true", files=Snapshot.of({"a": "b"}), limits=LIMITS, sandbox=jail)
    assert result.status is RunStatus.INFRA_ERROR and "clone" in result.reason, result
    with pytest.raises(SandboxInfraError):
        SandboxTools(files={"a": "b"}, limits=LIMITS, sandbox=jail).bash("true")


@pytest.mark.nsjail
def test_a_terminal_state_the_grading_jail_cannot_restore_is_weighed_as_the_answers(
    nsjail_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through a grade: the checker's jail cannot restore the answer's state (here its tmpfs is smaller than
    the state; whatever the cause), but restores the task's own. Before, the sandbox called that an
    infrastructure fault, which the fault rule exempts: env_error, reward None, the answer unpenalised. Now
    the rule weighs it by evidence: the answer's, wrong at 0. The right answer, whose state restores, is ok."""
    import verihub
    from conftest import REPO
    from verihub import settings
    from verihub.sandbox.tools import task_files, with_workdir

    monkeypatch.setitem(
        sandbox._defaults, settings.sandbox_backend(), NsjailSandbox(stand_in(tmp_path, SMALL_TMPFS, nsjail_path))
    )
    env = verihub.load_env(REPO / "envs" / "shell-task")
    task = env.tasks("eval")[0]
    state = Snapshot.of({**(task_files(task) or {}), "padding.bin": b"\0" * (3 << 20)})
    grade = env.verifier.grade(with_workdir(task, state), "Done.")
    assert (grade.status, grade.reward) == ("wrong", 0.0) and grade.answer_fault is not None, grade
    assert "SandboxStateError" in grade.reason, grade.reason
    right = env.grade(task, env.reference(task))
    assert right.status == "ok", right
