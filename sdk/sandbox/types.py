"""What a sandbox run takes and returns: limits, results, snapshots of a work dir."""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from verihub.spec import SandboxSpec

__all__ = ["Limits", "Request", "Result", "RunStatus", "Snapshot"]

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
    """The files of a work dir, frozen (a tar archive in memory). Restore one by passing it as ``files``."""

    __slots__ = ("tar",)

    def __init__(self, tar: bytes = b"") -> None:
        self.tar = tar

    @classmethod
    def of(cls, files: Mapping[str, str | bytes] | Snapshot | None) -> Snapshot:
        """A snapshot holding ``files`` (relative path -> text or bytes)."""
        if files is None:
            return cls()
        if isinstance(files, Snapshot):
            return files
        return cls().adding(files)

    def adding(self, files: Mapping[str, str | bytes]) -> Snapshot:
        """A new snapshot: this one plus ``files`` (which win over files of the same name)."""
        buffer = io.BytesIO()
        now = time.time()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
            names = {_safe_name(name) for name in files}
            if self.tar:
                with tarfile.open(fileobj=io.BytesIO(self.tar), mode="r:") as existing:
                    for member in existing:
                        if member.name.removeprefix("./") not in names:
                            archive.addfile(member, existing.extractfile(member) if member.isfile() else None)
            for name, content in files.items():
                data = content.encode() if isinstance(content, str) else bytes(content)
                info = tarfile.TarInfo(_safe_name(name))
                info.size, info.mode, info.mtime = len(data), 0o644, now
                archive.addfile(info, io.BytesIO(data))
        return Snapshot(buffer.getvalue())

    def files(self) -> dict[str, bytes]:
        """Regular files by relative path (read in memory: nothing is extracted on the host)."""
        if not self.tar:
            return {}
        found: dict[str, bytes] = {}
        with tarfile.open(fileobj=io.BytesIO(self.tar), mode="r:") as archive:
            for member in archive:
                if member.isfile():
                    extracted = archive.extractfile(member)
                    if extracted is not None:
                        found[member.name.removeprefix("./")] = extracted.read()
        return found

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


def _safe_name(name: str) -> str:
    parts = [part for part in name.replace("\\", "/").split("/") if part not in ("", ".")]
    if not parts or ".." in parts or name.startswith("/"):
        raise ValueError(f"file name {name!r} must be a relative path inside the work dir")
    return "/".join(parts)


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
            raise ValueError("give exactly one of command and code")
        if self.command is not None and not self.command:
            raise ValueError("command must not be empty")
        if self.files and self.files.size > self.limits.disk_mb << 20:
            raise ValueError(f"files take {self.files.size >> 20} MiB, more than disk_mb={self.limits.disk_mb}")


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
