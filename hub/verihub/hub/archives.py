"""The one safety rule for a release's archives (a wheel's zip, an sdist's tar.gz), for both formats.

A member is accepted when it is a regular file, a directory or (tar only) a symbolic or hard link, its path
is relative and stays inside the archive, it has no setuid, setgid or sticky bit, a link's target stays
inside too, and no path runs through a symbolic link of the archive (so where a path leads on paper is where
it leads on disk). An sdist is read as a stream with a cap on the bytes it unpacks to and on its members; a
wheel's sizes and members are counted from its central directory, which is all a zip reader unpacks.
"""

from __future__ import annotations

import gzip
import io
import posixpath
import stat
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from typing import Literal

from verihub.hub.errors import ArchiveTooLargeError, InvalidReleaseError, UnsafeArchiveError
from verihub.hub.limits import MAX_ARCHIVE_BYTES, MAX_ARCHIVE_MEMBERS

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
    except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError, zlib.error, ValueError) as error:
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
    members: list[_Member] = []
    stream = _Capped(gzip.GzipFile(fileobj=io.BytesIO(data)), max_bytes, filename)
    with tarfile.open(fileobj=stream, mode="r|") as archive:  # a stream: read once, never seeked
        for info in archive:
            if len(members) == max_members:
                raise ArchiveTooLargeError(f"{filename} is refused: it holds more than {max_members} members")
            kind: Kind = (
                "file"
                if info.isreg()
                else "dir"
                if info.isdir()
                else "symlink"
                if info.issym()
                else "hardlink"
                if info.islnk()
                else "other"
            )
            members.append(_Member(info.name, kind, info.mode & 0o7777, info.linkname))
    return members


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


class _Capped(io.RawIOBase):
    """The unpacked bytes of a stream, refused once past ``limit`` (tarfile reads it in blocks)."""

    def __init__(self, source: gzip.GzipFile, limit: int, filename: str) -> None:
        self._source, self._left, self._filename, self._limit = source, limit, filename, limit

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        chunk = self._source.read(min(size, self._left + 1) if size >= 0 else self._left + 1)
        self._left -= len(chunk)
        if self._left < 0:
            raise ArchiveTooLargeError(f"{self._filename} is refused: it unpacks to more than {self._limit >> 20} MiB")
        return chunk
