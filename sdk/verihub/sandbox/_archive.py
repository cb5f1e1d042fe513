"""Work dir archives: one codec and one safety rule wherever a snapshot is packed, unpacked or read.

A snapshot is a list of entries. On the host it is kept as a tar archive (``Snapshot.tar``); between the
host and a jail's Python it travels as *frames*, a flat binary list that needs no ``tarfile`` import (an
interpreter start in a fresh jail would pay 8 ms for that). Whatever the form, every entry passes
:func:`check`, the one rule:

- names are relative and normalised: no absolute path, no ``..``, no NUL, at most MAX_NAME bytes and
  MAX_DEPTH parts; nothing lies inside a symlink or a file (refused: our packers never write that);
- only regular files, directories, symlinks and hard links; device nodes, FIFOs, sockets are dropped;
- a symlink must resolve inside the root, following the archive's own links (one that leads out is
  dropped); a hard link must name an earlier regular file of the archive (else refused);
- modes keep the permission and sticky bits only (no setuid, no setgid);
- at most MAX_ENTRIES entries (:class:`TooLarge`); file data never exceeds the archive's own bytes.

Stdlib only, Python 3.8+, no imports from verihub: the jail-side code is this file concatenated with
_jailpy.py (and _worker.py) and run under the jail's system Python.
"""

import os
import stat
import struct

MAX_ENTRIES = 65536  # also the inode limit of a jail's tmpfs: a jail's work dir always fits
MAX_NAME = 3072  # bytes of a relative path; with the root's own path it stays under PATH_MAX
MAX_DEPTH = 256
FILE, DIR, SYMLINK, HARDLINK = "file", "dir", "symlink", "hardlink"
ROOT = "."
_MODE_BITS = 0o1777  # permissions and sticky; never setuid or setgid
_MAX_HOPS = 40  # symlinks followed while resolving one, as the kernel does


class UnsafeArchive(ValueError):
    """An archive the rule refuses: a path out of the root, a link to outside, a malformed archive."""


class TooLarge(UnsafeArchive):
    """A work dir or archive past the bounds (entries, path length, depth)."""


class Entry:
    """One member: ``data`` for files, ``target`` for links (a path relative to the root for hard links)."""

    __slots__ = ("name", "kind", "mode", "mtime", "target", "data")

    def __init__(self, name, kind, mode=0o644, mtime=0.0, target="", data=b""):
        self.name, self.kind, self.mode, self.mtime, self.target, self.data = name, kind, mode, mtime, target, data

    def __repr__(self):
        return "Entry(%r, %s, %o)" % (self.name, self.kind, self.mode)


# -- the rule ----------------------------------------------------------------------------------------


def clean_name(name):
    """``name`` normalised (``./a//b`` -> ``a/b``, the root itself -> ``.``), or UnsafeArchive."""
    if not isinstance(name, str) or "\0" in name or name.startswith("/"):
        raise UnsafeArchive("file name %r must be a relative path inside the work dir" % (name,))
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchive("file name %r must be a relative path inside the work dir (no '..')" % (name,))
    if not parts:
        return ROOT
    if len(parts) > MAX_DEPTH:
        raise TooLarge("%r is more than %d directories deep" % (name[:200], MAX_DEPTH))
    clean = "/".join(parts)
    if len(clean.encode("utf-8", "surrogateescape")) > MAX_NAME:
        raise TooLarge("a path in the work dir is longer than %d bytes: %r..." % (MAX_NAME, clean[:200]))
    return clean


def check(entries):
    """The rule, applied: the entries to keep, sorted by name (a later entry of a name replaces an earlier one)."""
    kept = {}
    parents = set()  # every directory some entry lies in
    for entry in entries:
        if len(kept) >= MAX_ENTRIES:
            raise TooLarge("the work dir holds more than %d entries" % MAX_ENTRIES)
        kind = entry.kind
        if kind not in (FILE, DIR, SYMLINK, HARDLINK):
            continue  # device node, FIFO, socket: nothing a work dir needs to carry
        name = clean_name(entry.name)
        if name == ROOT and kind != DIR:
            raise UnsafeArchive("file name %r must be a relative path inside the work dir" % (entry.name,))
        if kind != DIR and name in parents:
            raise UnsafeArchive("%r is a %s, but other entries lie inside it" % (name, kind))
        earlier = kept.get(name)
        if earlier is not None and earlier.kind != kind:
            raise UnsafeArchive("%r is both a %s and a %s" % (name, earlier.kind, kind))
        _add_parents(name, kept, parents)
        target = entry.target
        if kind == HARDLINK:
            target = clean_name(target)
            linked = kept.get(target)
            if linked is None or linked.kind != FILE:
                raise UnsafeArchive("hard link %r -> %r does not name an earlier file of the archive" % (name, target))
        elif kind == SYMLINK:
            target = str(target)
        kept[name] = Entry(
            name,
            kind,
            entry.mode & _MODE_BITS,
            entry.mtime,
            target if kind in (SYMLINK, HARDLINK) else "",
            entry.data if kind == FILE else b"",
        )
    links = {name: entry.target for name, entry in kept.items() if entry.kind == SYMLINK}
    for name in [name for name in links if _resolve(name.split("/")[:-1], links[name], links, [0]) is None]:
        del kept[name]  # a link out of the root: harmless in the jail, not on a host that unpacks it
    _first_name_holds_the_data(kept)
    return [kept[name] for name in sorted(kept)]  # a canonical order: parents first, whoever packed it


def _first_name_holds_the_data(kept):
    """Of the names of a hard-linked file, the first in order is the file and the others link to it, so
    that an archive does not depend on the order its packer walked the directory."""
    groups = {}
    for name, entry in kept.items():
        if entry.kind == HARDLINK:
            groups.setdefault(entry.target, []).append(name)
    for target, names in groups.items():
        first = min(names + [target])
        data = kept[target]
        kept[first] = Entry(first, FILE, data.mode, data.mtime, "", data.data)
        for name in names + [target]:
            if name != first:
                kept[name] = Entry(name, HARDLINK, data.mode, data.mtime, first)


def _add_parents(name, kept, parents):
    cut = name.rfind("/")
    while cut > 0:
        parent = name[:cut]
        if parent in parents:
            return
        above = kept.get(parent)
        if above is not None and above.kind != DIR:
            raise UnsafeArchive("%r lies inside %r, a %s" % (name, parent, above.kind))
        parents.add(parent)
        cut = parent.rfind("/")


def _resolve(stack, target, links, hops):
    """Where ``target``, seen from directory ``stack``, leads through the archive's links: the path as a
    list, or None when it leaves the root (or loops)."""
    if not target or target.startswith("/"):
        return None
    stack = list(stack)
    for part in target.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not stack:
                return None
            stack.pop()
            continue
        stack.append(part)
        link = links.get("/".join(stack))
        if link is not None:
            hops[0] += 1
            if hops[0] > _MAX_HOPS:
                return None
            stack = _resolve(stack[:-1], link, links, hops)
            if stack is None:
                return None
    return stack


# -- forms: tar (the host's), frames (the wire to and from jails) -------------------------------------


def from_tar(data):
    """The entries of a tar archive, unchecked (pass them to :func:`check`). Never extracts anything."""
    import io
    import tarfile

    entries = []
    view = memoryview(data)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            for member in archive:
                if len(entries) >= MAX_ENTRIES:
                    raise TooLarge("the archive holds more than %d entries" % MAX_ENTRIES)
                payload = b""
                if member.issym():
                    kind = SYMLINK
                elif member.islnk():
                    kind = HARDLINK
                elif member.isdir():
                    kind = DIR
                elif member.isreg() and member.sparse is None:
                    kind = FILE
                    end = member.offset_data + member.size
                    if end > len(data):
                        raise UnsafeArchive("%r is cut short in the archive" % member.name)
                    payload = view[member.offset_data : end]
                else:
                    kind = "other"  # devices, FIFOs, sparse files: dropped by the rule
                entries.append(Entry(member.name, kind, member.mode, member.mtime, member.linkname, payload))
    except UnsafeArchive:
        raise
    except (tarfile.TarError, ValueError, EOFError, OSError) as error:
        raise UnsafeArchive("not a readable tar archive: %s" % error) from None
    return entries


def to_tar(entries):
    """A tar archive (PAX) of checked ``entries``."""
    import io
    import tarfile

    types = {DIR: tarfile.DIRTYPE, SYMLINK: tarfile.SYMTYPE, HARDLINK: tarfile.LNKTYPE}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for entry in entries:
            info = tarfile.TarInfo(entry.name)
            info.mode, info.mtime = entry.mode, entry.mtime
            if entry.kind == FILE:
                info.size = len(entry.data)
                archive.addfile(info, io.BytesIO(entry.data))
                continue
            info.type = types[entry.kind]
            info.linkname = entry.target
            archive.addfile(info)
    return buffer.getvalue()


_MAGIC, _FAILED = b"VHF1", b"VHE1"
_HEADER = struct.Struct(">BHdIIQ")  # kind, mode, mtime, then the byte lengths of name, target, data
_KINDS = (FILE, DIR, SYMLINK, HARDLINK)


def to_frames(entries):
    """``entries`` as frames: a magic, a count, then per entry a fixed header and its bytes."""
    parts = [_MAGIC, struct.pack(">I", len(entries))]
    for entry in entries:
        name = entry.name.encode("utf-8", "surrogateescape")
        target = entry.target.encode("utf-8", "surrogateescape")
        parts.append(
            _HEADER.pack(_KINDS.index(entry.kind), entry.mode, entry.mtime, len(name), len(target), len(entry.data))
        )
        parts += [name, target, entry.data]
    return b"".join(parts)


def failed_frames(reason):
    """What a jail sends instead of frames when the work dir cannot be packed (it is past the bounds)."""
    return _FAILED + reason.encode("utf-8", "replace")[:2000]


def from_frames(data):
    """The entries of frames, unchecked; TooLarge with the jail's reason if it could not pack them."""
    view = memoryview(data)
    magic = bytes(view[:4])
    if magic == _FAILED:
        raise TooLarge(bytes(view[4:]).decode("utf-8", "replace"))
    if magic != _MAGIC or len(data) < 8:
        raise UnsafeArchive("not a work dir archive (bad frames)")
    (count,) = struct.unpack_from(">I", data, 4)
    if count > MAX_ENTRIES:
        raise TooLarge("the archive holds more than %d entries" % MAX_ENTRIES)
    entries, offset = [], 8
    for _ in range(count):
        if offset + _HEADER.size > len(data):
            raise UnsafeArchive("the archive is cut short")
        code, mode, mtime, name_size, target_size, data_size = _HEADER.unpack_from(data, offset)
        offset += _HEADER.size
        end = offset + name_size + target_size + data_size
        if end > len(data) or code >= len(_KINDS):
            raise UnsafeArchive("the archive is cut short or malformed")
        name = bytes(view[offset : offset + name_size]).decode("utf-8", "surrogateescape")
        offset += name_size
        target = bytes(view[offset : offset + target_size]).decode("utf-8", "surrogateescape")
        offset += target_size
        entries.append(Entry(name, _KINDS[code], mode, mtime, target, view[offset:end]))
        offset = end
    return entries


# -- a directory: pack, unpack, empty ---------------------------------------------------------------


def pack(directory):
    """The contents of ``directory`` as checked entries, the root's own mode included. Links are never
    followed; unreadable files and directories are made readable first (by their owner, the one packing:
    the directory is thrown away afterwards). TooLarge past the bounds."""
    root = os.lstat(directory)
    entries = [Entry(ROOT, DIR, stat.S_IMODE(root.st_mode), root.st_mtime)]
    first_names = {}  # (device, inode) -> the first name of a file with several links
    pending = [""]
    while pending:
        relative = pending.pop()
        path = os.path.join(directory, relative) if relative else directory
        for name in sorted(_listdir(path)):
            child = relative + "/" + name if relative else name
            if len(entries) >= MAX_ENTRIES:
                raise TooLarge("the work dir holds more than %d entries" % MAX_ENTRIES)
            clean_name(child)  # bounds on length and depth
            full = os.path.join(directory, child)
            info = os.lstat(full)
            mode = stat.S_IMODE(info.st_mode)
            if stat.S_ISDIR(info.st_mode):
                entries.append(Entry(child, DIR, mode, info.st_mtime))
                pending.append(child)
            elif stat.S_ISLNK(info.st_mode):
                entries.append(Entry(child, SYMLINK, mode, info.st_mtime, os.readlink(full)))
            elif stat.S_ISREG(info.st_mode):
                key = (info.st_dev, info.st_ino)
                if info.st_nlink > 1 and key in first_names:
                    entries.append(Entry(child, HARDLINK, mode, info.st_mtime, first_names[key]))
                    continue
                if info.st_nlink > 1:
                    first_names[key] = child
                entries.append(Entry(child, FILE, mode, info.st_mtime, "", _read(full, mode)))
    return check(entries)


def _listdir(path):
    try:
        return os.listdir(path)
    except PermissionError:
        os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode) | 0o700)
        return os.listdir(path)


def _read(path, mode):
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except PermissionError:
        os.chmod(path, mode | 0o400)
        fd = os.open(path, flags)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def unpack(entries, directory):
    """Write ``entries`` (checked here again) into ``directory``, which must be empty. Directory modes
    and times are set last, deepest first, so that a read-only directory can still be filled."""
    made = set([directory])
    directories = []
    for entry in check(entries):
        if entry.name == ROOT:
            continue  # the root keeps its own mode: a snapshot describes what lies inside it
        path = os.path.join(directory, entry.name)
        parent = os.path.dirname(path)
        if parent not in made:
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        if entry.kind == DIR:
            if path not in made:
                os.makedirs(path, 0o700, exist_ok=True)
                made.add(path)
            directories.append((entry.name.count("/"), path, entry))
        elif entry.kind == FILE:
            fd = os.open(
                path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600
            )
            try:
                data = memoryview(entry.data)
                while data:
                    data = data[os.write(fd, data) :]
                os.fchmod(fd, entry.mode)
                os.utime(fd, (entry.mtime, entry.mtime))
            finally:
                os.close(fd)
        elif entry.kind == SYMLINK:
            os.symlink(entry.target, path)
        else:
            os.link(os.path.join(directory, entry.target), path, follow_symlinks=False)
    for _, path, entry in sorted(directories, key=lambda item: -item[0]):
        os.chmod(path, entry.mode)
        os.utime(path, (entry.mtime, entry.mtime))


def empty(directory):
    """Remove everything inside ``directory`` (it stays), whatever the modes, depth or names: one
    directory open at a time, so no tree is too deep for the fd limit or PATH_MAX, and each directory
    listed once more than it is entered, so the cost is linear in the entries. Never follows a link."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    if not os.access(directory, os.R_OK | os.W_OK | os.X_OK):
        os.chmod(directory, stat.S_IMODE(os.lstat(directory).st_mode) | 0o700)
    fd = os.open(directory, flags)
    pending = [[]]  # per level from ``directory`` down to fd: subdirectories listed but not yet removed
    names = []  # the path from ``directory`` down to where fd is
    try:
        while True:
            if not pending[-1]:  # all listed ones are gone: list again, for what appeared meanwhile
                with os.scandir(fd) as listing:
                    entries = list(listing)
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        pending[-1].append(entry.name)
                    else:
                        os.unlink(entry.name, dir_fd=fd)
            if pending[-1]:
                below = pending[-1].pop()
                os.chmod(below, 0o700, dir_fd=fd)
                inner = os.open(below, flags, dir_fd=fd)
                os.close(fd)
                fd = inner
                names.append(below)
                pending.append([])
                continue
            if not names:
                return
            outer = os.open("..", flags, dir_fd=fd)
            os.close(fd)
            fd = outer
            pending.pop()
            os.rmdir(names.pop(), dir_fd=fd)
    finally:
        os.close(fd)


def digest(entries):
    """A sha256 of checked entries: names, kinds, modes, link targets and bytes, not times. It equals
    what the verifier computed from a snapshot's tar members before there was this codec."""
    import hashlib

    types = {FILE: b"0", HARDLINK: b"1", SYMLINK: b"2", DIR: b"5"}
    state = hashlib.sha256()
    for entry in sorted(entries, key=lambda entry: entry.name):
        header = "%s\0%r\0%o\0%s\0%d\0" % (entry.name, types[entry.kind], entry.mode, entry.target, len(entry.data))
        state.update(header.encode("utf-8", "surrogateescape"))
        state.update(entry.data)
    return state.hexdigest()
