"""The one safety rule for a release's archives (a wheel's zip, an sdist's tar.gz), for both formats.

A member is accepted when it is a regular file, a directory or (tar only) a symbolic or hard link, its path
is relative and stays inside the archive, it has no setuid, setgid or sticky bit, a link's target stays
inside too, and no path runs through a symbolic link of the archive (so where a path leads on paper is where
it leads on disk). An sdist is unpacked with a cap on its bytes and read in linear work with a cap on its members; a
wheel's sizes and members are counted from its central directory, which is all a zip reader unpacks.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import mmap
import posixpath
import stat
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Literal

from verihub.hub.errors import ArchiveTooLargeError, InvalidReleaseError, UnsafeArchiveError
from verihub.hub.limits import MAX_ARCHIVE_BYTES, MAX_ARCHIVE_MEMBERS
from verihub.sandbox._archive import DIR, FILE, HARDLINK, SYMLINK, Clock, TooLarge, from_tar

__all__ = ["check_archive"]

Kind = Literal["file", "dir", "symlink", "hardlink", "other"]
_SPECIAL_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX


@dataclass(frozen=True)
class _Member:
    name: str
    kind: Kind
    mode: int  # permission bits and setuid/setgid/sticky
    link: str = ""


def check_archive(
    filename: str, data: bytes, *, max_bytes: int = MAX_ARCHIVE_BYTES, max_members: int = MAX_ARCHIVE_MEMBERS
) -> None:
    """Refuse the release file ``filename`` (UnsafeArchiveError, ArchiveTooLargeError, InvalidReleaseError)
    unless every member passes the rule, within the caps."""
    try:
        members = (_zip_members if filename.endswith(".whl") else _tar_members)(filename, data, max_bytes, max_members)
    except InvalidReleaseError:  # a cap, raised from inside the reader
        raise
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error, ValueError) as error:  # UnsafeArchive too
        raise InvalidReleaseError(f"{filename} is refused: it is not a valid archive ({error})") from None
    symlinks = {_normal(member.name) for member in members if member.kind == "symlink"}
    for member in members:
        problem = _problem(member, symlinks)
        if problem is not None:
            raise UnsafeArchiveError(f"{filename} is refused: its member {member.name!r} {problem}")


def _problem(member: _Member, symlinks: set[str]) -> str | None:
    """What is wrong with one member, or None: the rule itself, for every format."""
    if member.kind == "other":
        return "is not a regular file, directory or link (a device, FIFO or the like)"
    if member.mode & _SPECIAL_BITS:
        return f"has the setuid, setgid or sticky bit (mode {member.mode:o})"
    if _escapes(member.name):
        return "has a path that points outside the archive"
    if member.kind in ("symlink", "hardlink"):
        # a symlink's target is read from its directory, a hardlink's from the archive's root
        target = (
            posixpath.join(posixpath.dirname(member.name), member.link) if member.kind == "symlink" else member.link
        )
        if member.link.startswith("/") or _escapes(target, dotdot_ok=True):
            return f"is a link to {member.link!r}, which points outside the archive"
        if _through(posixpath.dirname(_normal(target)) if member.kind == "symlink" else _normal(target), symlinks):
            return f"is a link to {member.link!r} through a symbolic link of the archive"
    if _through(posixpath.dirname(_normal(member.name)), symlinks):
        return "has a path through a symbolic link of the archive"
    return None


def _normal(path: str) -> str:
    return posixpath.normpath(path.replace("\\", "/")).lstrip("/")


def _escapes(path: str, *, dotdot_ok: bool = False) -> bool:
    """Absolute, a Windows drive, or (without ``dotdot_ok``) any '..'; with it, only one that climbs out."""
    path = path.replace("\\", "/")
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        return True
    if not dotdot_ok:
        return ".." in path.split("/")
    normal = posixpath.normpath(path)
    return normal == ".." or normal.startswith("../")


def _through(directory: str, symlinks: set[str]) -> bool:
    """Whether ``directory`` or one of its parents is a symbolic link of the archive."""
    while directory not in ("", ".", "/"):
        if directory in symlinks:
            return True
        directory = posixpath.dirname(directory)
    return False


def _tar_members(filename: str, data: bytes, max_bytes: int, max_members: int) -> list[_Member]:
    # Unpacked within the cap to a file of its own (mapped, not held: an sdist may unpack to MAX_ARCHIVE_BYTES),
    # then read by the sandbox's tar reader, which takes each byte once and stops at a time limit: tarfile parses
    # a crafted PAX header in time quadratic in its length on the Pythons before 3.12.6 (CVE-2024-6232), and an
    # upload is a hostile user's to craft.
    with tempfile.TemporaryFile() as spill:
        _gunzip(data, spill, max_bytes, filename)
        tar = mmap.mmap(spill.fileno(), 0, access=mmap.ACCESS_READ)  # (an empty one: ValueError)
        try:
            return _read_tar(tar, filename, max_members)
        finally:
            with contextlib.suppress(BufferError):  # views a raised error's frames still hold: it closes with them
                tar.close()


def _read_tar(tar: mmap.mmap, filename: str, max_members: int) -> list[_Member]:
    try:
        entries = from_tar(tar, Clock(f"reading {filename}"), max_members)
    except TooLarge as error:
        raise ArchiveTooLargeError(f"{filename} is refused: {error}") from None
    kinds: dict[str, Kind] = {FILE: "file", DIR: "dir", SYMLINK: "symlink", HARDLINK: "hardlink"}
    return [_Member(e.name, kinds.get(e.kind, "other"), e.mode & 0o7777, e.target) for e in entries]


def _zip_members(filename: str, data: bytes, max_bytes: int, max_members: int) -> list[_Member]:
    # Each central directory entry starts with this signature, so its count bounds the entries before
    # zipfile parses them all into memory.
    if data.count(b"PK\x01\x02") > max_members:
        raise ArchiveTooLargeError(f"{filename} is refused: it holds more than {max_members} members")
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        infos = archive.infolist()
    if len(infos) > max_members:
        raise ArchiveTooLargeError(f"{filename} is refused: it holds more than {max_members} members")
    if sum(info.file_size for info in infos) > max_bytes:  # a zip reader stops at the declared sizes
        raise ArchiveTooLargeError(f"{filename} is refused: it unpacks to more than {max_bytes >> 20} MiB")
    return [_zip_member(info) for info in infos]


def _zip_member(info: zipfile.ZipInfo) -> _Member:
    mode = info.external_attr >> 16  # the Unix mode, where the zip tool wrote one (0 where it did not)
    kind: Kind = (
        "other"
        if stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR)  # symlinks included
        else "dir"
        if info.is_dir()
        else "file"
    )
    return _Member(info.filename, kind, stat.S_IMODE(mode))


def _gunzip(data: bytes, into: BinaryIO, limit: int, filename: str) -> None:
    """The gzip stream ``data`` unpacked into ``into``, refused once past ``limit`` bytes."""
    left = limit
    with gzip.GzipFile(fileobj=io.BytesIO(data)) as source:
        while chunk := source.read(min(1 << 20, left + 1)):
            left -= len(chunk)
            if left < 0:
                raise ArchiveTooLargeError(f"{filename} is refused: it unpacks to more than {limit >> 20} MiB")
            into.write(chunk)
    into.flush()
