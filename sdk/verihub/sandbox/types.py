"""What a sandbox run takes and returns: limits, results, snapshots of a work dir."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from verihub.errors import SandboxStateError, UsageError
from verihub.sandbox import _archive
from verihub.sandbox._archive import UnsafeArchive
from verihub.spec.models import SandboxSpec

__all__ = [
    "MAX_ARG_BYTES",
    "Limits",
    "Request",
    "RestoreCost",
    "Result",
    "RunStatus",
    "Snapshot",
    "UnsafeArchive",
    "exec_refusal",
]

Limits = SandboxSpec
"""Run limits: the ``sandbox:`` section of environment.yaml, used as is."""


class RunStatus(StrEnum):
    OK = "ok"  # exited 0
    NONZERO_EXIT = "nonzero_exit"  # exited with another code: the program's own failure
    TIMEOUT = "timeout"  # wall-clock or CPU limit
    MEMORY_LIMIT = "memory_limit"  # an allocation failed at the memory limit
    OUTPUT_LIMIT = "output_limit"  # stopped after max_output_kb of output
    KILLED = "killed"  # ended by a signal (crash, file size limit)
    INFRA_ERROR = "infra_error"  # the sandbox itself failed: never the program's fault


INODE_ROOM = 16  # inodes a restored work dir leaves free in a jail's tmpfs (a Python run's main.py among them)


@dataclass(frozen=True)
class RestoreCost:
    """What restoring a snapshot takes, recorded when it is made: a state is only as cheap as its dearest
    restore, not as the run that made it (a sparse file costs the jail nothing and its restore every byte)."""

    inodes: int  # files, directories and symlinks (hard links share their file's)
    links: int  # symlinks and hard links
    data_bytes: int  # the files' bytes, each file once, sparse ones in full
    disk_bytes: int  # what the jail's tmpfs charges: file data by the page, a page for each long symlink
    names_bytes: int  # names, link targets and headers: what restoring walks besides the data
    depth: int  # the deepest path, in directories

    def refusal(self, limits: Limits, adding: int = 0) -> str:
        """Why a jail with ``limits`` cannot restore this state (with a file of ``adding`` bytes more: a Python
        run's main.py), or "" when it can."""
        disk = self.disk_bytes + -(-adding // _archive.PAGE) * _archive.PAGE
        if disk > limits.disk_mb << 20:
            return (
                f"its files take {disk / (1 << 20):.1f} MiB once restored (sparse files in full, "
                f"{_archive.PAGE} bytes a page), more than disk_mb={limits.disk_mb}"
            )
        if self.inodes > _archive.MAX_ENTRIES - INODE_ROOM:
            return (
                f"it holds {self.inodes:,} files, directories and links; a jail's work dir holds "
                f"{_archive.MAX_ENTRIES:,}, {INODE_ROOM} of them kept free"
            )
        return ""


class Snapshot:
    """The files of a work dir, frozen: checked entries in memory (a tar archive of them once one is asked for),
    with what restoring them costs (:attr:`cost`). Restore one by passing it as ``files``.

    A snapshot only ever holds what the one rule of :mod:`verihub.sandbox._archive` allows (relative
    names, files, directories, links that stay inside, no setuid), whichever backend made it, so it
    unpacks the same way everywhere. ``Snapshot(tar)`` raises :class:`UnsafeArchive` (a ``ValueError``)
    naming what it refuses, and drops what the rule drops (device nodes, FIFOs, links out of the root).
    """

    __slots__ = ("_cost", "_entries", "_tar")

    def __init__(self, tar: bytes = b"") -> None:
        self._entries: list[_archive.Entry] | None = None
        self._cost: RestoreCost | None = None
        self._tar: bytes | None = _archive.to_tar(_archive.check(_archive.from_tar(tar))) if tar else b""

    @property
    def tar(self) -> bytes:
        """The work dir as a tar archive (GNU format), made when first asked for: a fresh jail's command
        restores from it; everything else reads the entries."""
        if self._tar is None:
            self._tar = _archive.to_tar(self.entries())
        return self._tar

    @classmethod
    def of(cls, files: Mapping[str, str | bytes] | Snapshot | None) -> Snapshot:
        """A snapshot holding ``files`` (relative path -> text or bytes)."""
        if files is None:
            return cls()
        if isinstance(files, Snapshot):
            return files
        return cls().adding(files)

    @classmethod
    def received(cls, data: bytes, *, tar: bool = False) -> Snapshot:
        """A work dir a jail sent back (frames, or a tar archive); :class:`UnsafeArchive` past the rule, and
        :class:`~verihub.sandbox._archive.TooLarge` when reading and checking it take past ``_archive.WALK_S``
        seconds of CPU (the work is linear in its bytes: only a pathological archive or machine gets there)."""
        clock = _archive.Clock("checking the work dir")
        return cls.from_entries(_archive.from_tar(data, clock) if tar else _archive.from_frames(data, clock), clock)

    @classmethod
    def from_entries(cls, entries: list[_archive.Entry], clock: _archive.Clock | None = None) -> Snapshot:
        """A snapshot of ``entries`` (``verihub.sandbox._archive.Entry``), as the rule keeps them, with its
        :attr:`cost` recorded."""
        checked = _archive.check(entries, clock)
        snapshot = cls()
        snapshot._tar, snapshot._entries = None, checked
        snapshot._cost = RestoreCost(**_archive.cost(checked))
        return snapshot

    def adding(self, files: Mapping[str, str | bytes]) -> Snapshot:
        """A new snapshot: this one plus ``files`` (which win over files of the same name)."""
        now = time.time()
        added = [
            _archive.Entry(
                _archive.clean_name(name),
                _archive.FILE,
                0o644,
                now,
                "",
                content.encode() if isinstance(content, str) else bytes(content),
            )
            for name, content in files.items()
        ]
        replaced = {entry.name for entry in added}
        kept = [entry for entry in self.entries() if entry.name not in replaced]
        return Snapshot.from_entries(kept + added)

    def entries(self) -> list[_archive.Entry]:
        """The archive's entries (name, kind, mode, mtime, target, data), as the rule keeps them."""
        if self._entries is None:
            self._entries = _archive.check(_archive.from_tar(self._tar)) if self._tar else []
        return self._entries

    def files(self) -> dict[str, bytes]:
        """Regular files by relative path, hard links included (read in memory: nothing is extracted)."""
        found: dict[str, bytes] = {}
        for entry in self.entries():
            if entry.kind == _archive.FILE:
                found[entry.name] = bytes(entry.data)
            elif entry.kind == _archive.HARDLINK:
                found[entry.name] = found[entry.target]
        return found

    @property
    def cost(self) -> RestoreCost:
        """What restoring this state takes (computed once, in one pass over its entries)."""
        if self._cost is None:
            self._cost = RestoreCost(**_archive.cost(self.entries()))
        return self._cost

    def digest(self) -> str:
        """A sha256 of the content: names, kinds, modes, link targets and bytes (not times), so that
        equal work dirs share a digest and different ones never do."""
        return _archive.digest(self.entries())

    def text(self, name: str) -> str:
        return self.files()[name].decode("utf-8", "replace")

    @property
    def size(self) -> int:
        return len(self.tar)

    def __bool__(self) -> bool:
        return bool(self._entries) if self._tar is None else bool(self._tar)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Snapshot) and self.files() == other.files()

    def __repr__(self) -> str:
        return f"<Snapshot {len(self.files())} files, {self.size} bytes>"


@dataclass(frozen=True)
class Request:
    """One run: a command (argv) or Python code (run as main.py), with its files and limits."""

    command: Sequence[str] | None = None
    code: str | None = None
    files: Snapshot | None = None
    limits: Limits = field(default_factory=Limits)
    stdin: bytes | None = None
    keep_files: bool = False  # return the work dir afterwards as Result.files

    def __post_init__(self) -> None:
        if (self.command is None) == (self.code is None):
            raise UsageError("give exactly one of command and code")
        if self.command is not None and not self.command:
            raise UsageError("command must not be empty")
        code = len(self.code.encode("utf-8", "surrogateescape")) if self.code is not None else 0
        if self.files and (why := self.files.cost.refusal(self.limits, adding=code)):
            raise SandboxStateError(why)  # before any jail starts: no backend could restore it


@dataclass(frozen=True)
class Result:
    """The outcome of one sandboxed run."""

    status: RunStatus
    exit_code: int | None
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float | None = None
    peak_memory_mb: float | None = None  # None where it cannot be told apart from the sandbox's own
    reason: str = ""  # why, for anything but ok and nonzero_exit
    files: Snapshot | None = field(default=None, repr=False)  # the work dir afterwards, when asked for
    attempts: int = 1  # more than one when infrastructure faults were retried

    @property
    def ok(self) -> bool:
        return self.status is RunStatus.OK

    @property
    def infra_error(self) -> bool:
        return self.status is RunStatus.INFRA_ERROR

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["files"] = sorted(self.files.files()) if self.files is not None else None
        return data


# What execve(2) takes: one argument of at most MAX_ARG_STRLEN bytes (32 pages), and every argument and
# environment string within a quarter of the stack limit (8 MiB by default); past either, it fails E2BIG.
MAX_ARG_BYTES = 32 * 4096
MAX_ARGV_BYTES = (8 << 20) // 4 - (64 << 10)  # what the jail's own environment leaves


def exec_refusal(request: Request) -> Result | None:
    """The result of a command the kernel would refuse to start (an argument too long): the program's
    failure, as a shell reports it (``Argument list too long``, exit 126), never the sandbox's. None when
    it can start. Every backend asks before it starts anything."""
    if request.command is None:
        return None
    sizes = [len(arg.encode("utf-8", "surrogateescape")) + 1 for arg in request.command]
    if max(sizes) <= MAX_ARG_BYTES and sum(sizes) <= MAX_ARGV_BYTES:
        return None
    longest = max(sizes) - 1
    return Result(
        RunStatus.NONZERO_EXIT,
        126,
        "",
        f"{request.command[0]}: Argument list too long (an argument of "
        f"{longest:,} bytes; at most {MAX_ARG_BYTES - 1:,} each, {MAX_ARGV_BYTES:,} in all)\n",
        0.0,
    )
