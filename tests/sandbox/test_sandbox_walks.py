"""The host's walks over what a jail hands back are bounded by construction (issue 39, item 5).

Every work dir a tool call leaves is checked on the host before it becomes a snapshot: symlinks are resolved
there, tar or frames read, the restore costed. An answer controls all of it. Before, a chain of symlinks
with long targets (the resolver joined the whole path at every part and started again at every hop) cost
cubic time: a 400 KB work dir held one tool call for minutes of host CPU, with no time limit. Now each link
is resolved once, in work linear in its target, and every walk has a time limit past which the work dir is
refused as the run's (``output_limit``: the work dir cannot be kept), never a hang or an environment fault.

CPU time is measured on the host's own thread (the jail's is not counted): a busy machine stretches wall
time, not the work a walk does.
"""

from __future__ import annotations

import io
import struct
import tarfile
import time
from typing import Any

import pytest

import verihub
from conftest import REPO
from verihub import sandbox
from verihub.sandbox import Limits, RunStatus, Snapshot, _archive
from verihub.sandbox.session import SandboxSession
from verihub.sandbox.tools import SandboxTools, with_workdir

LIMITS = Limits(wall_s=30, cpu_s=30, memory_mb=256, max_procs=16)

# The work dir: links each leading to the next through a target of ~4 KB that climbs down 790
# directories and back up. 300 of them: 1.2 MB, where the old walk took minutes of host CPU.
LINKS = 300
KEPT = _archive.MAX_HOPS + 1  # the links a chain keeps: those the kernel resolves in at most 40 hops
CHAIN = f"""python3 -c '
import os
climb = "a/" * 790 + "../" * 790
for i in range({LINKS}):
    os.symlink(climb + "l%d" % (i + 1), "l%d" % i)
'"""


def host_cpu(call: Any) -> tuple[Any, float]:
    start = time.thread_time()
    result = call()
    return result, time.thread_time() - start


@pytest.mark.nsjail
def test_a_chain_of_long_links_is_checked_in_linear_work_in_a_tool_call(jail: Any) -> None:
    """Through a session's tool call in each isolating backend: the work dir is checked in a fraction of a
    second of host CPU (the old walk: minutes) and kept as the kernel would follow it (the links within 40
    hops of the chain's end; the others are dropped, as ones that loop are), and the next call restores it."""
    tools = SandboxTools(limits=LIMITS, sandbox=jail)
    output, spent = host_cpu(lambda: tools.bash(CHAIN))
    assert output == "", output
    assert spent < 10, f"the host spent {spent:.1f}s of CPU checking a {LINKS}-link work dir"
    entries = tools.session.snapshot().entries()
    assert {entry.name for entry in entries} == {".", *(f"l{i}" for i in range(LINKS - KEPT, LINKS))}
    assert tools.bash("ls | wc -l").strip() == str(KEPT)


@pytest.mark.nsjail
def test_a_terminal_state_grade_of_that_work_dir_is_wrong_not_a_fault() -> None:
    """The same state, left by a rollout and graded: a wrong answer, graded in bounded time."""
    env = verihub.load_env(REPO / "envs" / "shell-task")
    task = env.tasks("eval")[0]
    climb = "a/" * 790 + "../" * 790
    links = [_archive.Entry(f"l{i}", _archive.SYMLINK, 0o777, 0.0, f"{climb}l{i + 1}") for i in range(LINKS)]
    state, spent = host_cpu(lambda: Snapshot.received(_archive.to_frames(links)))
    assert spent < 10 and len(state.entries()) == KEPT
    grade = env.verifier.grade(with_workdir(task, state), "Done.")
    assert (grade.status, grade.reward) == ("wrong", 0.0), grade


def chain(count: int, target: Any) -> list[_archive.Entry]:
    return [_archive.Entry(f"l{i}", _archive.SYMLINK, 0o777, 0.0, target(i)) for i in range(count)]


def kept_links(entries: list[_archive.Entry]) -> set[str]:
    return {entry.name for entry in Snapshot.received(_archive.to_frames(entries)).entries()}


def test_links_resolve_as_the_kernel_does_in_linear_work() -> None:
    """A chain longer than the kernel follows (40 links) keeps the links within 40 of its end; a loop and a
    link out of the root are dropped; a chain as long as the archive allows needs no recursion."""
    assert kept_links(chain(5000, lambda i: f"l{i + 1}")) == {f"l{i}" for i in range(5000 - 41, 5000)}
    assert kept_links(chain(2, lambda i: f"l{1 - i}")) == set()  # l0 -> l1 -> l0
    assert kept_links(chain(3, lambda i: f"l{i + 1}" if i < 2 else "../out")) == set()
    assert kept_links(chain(3, lambda i: f"x/../l{i + 1}" if i < 2 else ".")) == {"l0", "l1", "l2"}
    many, spent = host_cpu(lambda: kept_links(chain(60000, lambda i: f"l{(i + 1) % 60000}")))
    assert many == set() and spent < 10  # one loop through every link: each resolved once


def test_a_target_past_the_kernels_bound_or_a_huge_header_is_refused_at_once() -> None:
    """What a jail's tar could claim but no file system holds: a 64 KB link target (GNU long link), and a
    PAX header of digits that costs ``tarfile`` (before Python 3.12.6) time quadratic in its length."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        info = tarfile.TarInfo("long")
        info.type, info.linkname = tarfile.SYMTYPE, "x/" * 32768
        archive.addfile(info)
    with pytest.raises(_archive.TooLarge, match="header of"):
        Snapshot(buffer.getvalue())
    digits = b"9" * 200_000  # tarfile of Python 3.12.1: about a minute; here refused unread
    header = tarfile.TarInfo("././@PaxHeader")
    header.type, header.size = tarfile.XHDTYPE, len(digits)
    crafted = header.tobuf(tarfile.USTAR_FORMAT) + digits + bytes(-len(digits) % 512) + bytes(1024)
    _, spent = host_cpu(lambda: pytest.raises(_archive.UnsafeArchive, Snapshot, crafted))
    assert spent < 5


def test_frames_that_lie_about_their_counts_are_refused() -> None:
    lying = b"VHF1" + struct.pack(">I", 10**9)
    with pytest.raises(_archive.TooLarge, match="more than"):
        Snapshot.received(lying)


@pytest.mark.nsjail
def test_a_walk_past_its_time_limit_is_the_runs_failure_and_the_state_stays(
    fresh_jail: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The time limit holds whatever the work costs (here, none at all): the tool call reports the work dir
    cannot be kept, as for one past the size bounds, and the session keeps its state from before."""
    tools = SandboxTools(files={"a.txt": "kept"}, limits=LIMITS, sandbox=fresh_jail)
    monkeypatch.setattr(_archive, "WALK_S", 0.0)
    output = tools.bash("touch b.txt")
    assert "[output_limit: the work dir cannot be kept:" in output and "took longer than 0s" in output, output
    monkeypatch.undo()
    assert tools.bash("ls").split() == ["a.txt"]


@pytest.mark.nsjail
def test_a_text_grade_whose_commands_leave_an_uncheckable_work_dir_is_wrong_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The terminal-state check of a plain text grade runs the answer's commands and keeps their work dir:
    one it cannot keep grades wrong, naming why (never env_error or timeout, reward None)."""
    env = verihub.load_env(REPO / "envs" / "shell-task")
    task = env.tasks("eval")[0]
    monkeypatch.setattr(_archive, "WALK_S", 0.0)
    grade = env.grade(task, "```bash\ntouch anything\n```")
    assert (grade.status, grade.reward) == ("wrong", 0.0), grade
    assert "the work dir cannot be kept" in grade.layers[0].detail, grade


@pytest.mark.nsjail
def test_a_session_made_from_the_chain_restores_it_on_the_python_path_too(fresh_jail: Any) -> None:
    climb = "a/" * 790 + "../" * 790
    state = Snapshot.received(_archive.to_frames(chain(30, lambda i: f"{climb}l{i + 1}")))
    session = SandboxSession(files=state, limits=LIMITS, sandbox=fresh_jail)
    result = session.run_python("import os; print(len([n for n in os.listdir('.') if os.path.islink(n)]))")
    assert result.status is RunStatus.OK and result.stdout.strip() == "30", result
    assert sandbox.run("ls | wc -l", files=state, limits=LIMITS, sandbox=fresh_jail).stdout.strip() == "30"
