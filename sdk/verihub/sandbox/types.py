"""What a sandbox run takes and returns: limits, results, snapshots of a work dir."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from verihub.errors import UsageError
from verihub.sandbox import _archive
from verihub.sandbox._archive import UnsafeArchive
from verihub.spec.models import SandboxSpec

__all__ = ["MAX_ARG_BYTES", "Limits", "Request", "Result", "RunStatus", "Snapshot", "UnsafeArchive", "exec_refusal"]

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


class Snapshot:
    """The files of a work dir, frozen: a tar archive in memory. Restore one by passing it as ``files``.

    A snapshot only ever holds what the one rule of :mod:`verihub.sandbox._archive` allows (relative
    names, files, directories, links that stay inside, no setuid), whichever backend made it, so it
    unpacks the same way everywhere. ``Snapshot(tar)`` raises :class:`UnsafeArchive` (a ``ValueError``)
    naming what it refuses, and drops what the rule drops (device nodes, FIFOs, links out of the root).
    """

    __slots__ = ("_entries", "tar")

    def __init__(self, tar: bytes = b"") -> None:
        self._entries: list[_archive.Entry] | None = None
        self.tar = _archive.to_tar(_archive.check(_archive.from_tar(tar))) if tar else b""

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
        """A work dir a jail sent back (frames, or a tar archive); :class:`UnsafeArchive` past the rule."""
        return cls.from_entries(_archive.from_tar(data) if tar else _archive.from_frames(data))

    @classmethod
    def from_entries(cls, entries: list[_archive.Entry]) -> Snapshot:
        """A snapshot of ``entries`` (``verihub.sandbox._archive.Entry``), as the rule keeps them."""
        checked = _archive.check(entries)
        snapshot = cls()
        snapshot.tar, snapshot._entries = _archive.to_tar(checked), checked
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
            self._entries = _archive.check(_archive.from_tar(self.tar)) if self.tar else []
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
        return bool(self.tar)

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
        if self.files and self.files.size > self.limits.disk_mb << 20:
            raise UsageError(f"files take {self.files.size >> 20} MiB, more than disk_mb={self.limits.disk_mb}")


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
