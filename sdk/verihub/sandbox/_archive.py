"""Work dir archives: one codec and one safety rule wherever a snapshot is packed, unpacked or read.

A snapshot is a list of entries. On the host it is kept as a tar archive (``Snapshot.tar``); between the
host and a jail's Python it travels as *frames*, a flat binary list that needs no ``tarfile`` import (an
interpreter start in a fresh jail would pay 8 ms for that). Whatever the form, every entry passes
:func:`check`, the one rule:

- names are relative and normalised: no absolute path, no ``..``, no NUL, at most MAX_NAME bytes,
  MAX_DEPTH parts and MAX_PART bytes a part; nothing lies inside a symlink or a file (refused: our packers
  never write that);
- only regular files, directories, symlinks and hard links; device nodes, FIFOs, sockets are dropped;
- a symlink's target is at most MAX_TARGET bytes, without NUL, and must resolve inside the root, following
  the archive's own links (one that leads out, loops or passes MAX_HOPS links is dropped); a hard link must
  name an earlier regular file of the archive (else refused);
- modes keep the permission and sticky bits only (no setuid, no setgid);
- at most MAX_ENTRIES entries and MAX_NAMES characters of names and targets (:class:`TooLarge`); file
  data never exceeds the archive's own bytes.

Everything the host does with an archive a jail sent (and so an answer made) is bounded by construction:
reading tar or frames, checking, resolving links, costing a restore all take work linear in the archive's
bytes, and each walk stops at WALK_S seconds of its own CPU time with :class:`TooLarge` (the work dir is
refused, as one past the bounds is). :func:`cost` says what restoring an archive takes (bytes and pages once
written, inodes, links, the names' bytes), so that a state no jail could restore is refused when it is made.

Stdlib only, Python 3.8+, no imports from verihub: the jail-side code is this file concatenated with
_jailpy.py (and _worker.py) and run under the jail's system Python.
"""

import os
import stat
import struct
import time

MAX_ENTRIES = 65536  # also the inode limit of a jail's tmpfs: a jail's work dir always fits
MAX_NAME = 3072  # bytes of a relative path; with the root's own path it stays under PATH_MAX
MAX_DEPTH = 256
MAX_PART = 255  # bytes of one part of a path: NAME_MAX, what a file system takes
MAX_TARGET = 4095  # bytes of a symlink's target: PATH_MAX - 1, what the kernel takes
MAX_HOPS = 40  # symlinks followed while resolving one, as the kernel does
MAX_NAMES = 16 << 20  # characters of all names and link targets together: what a walk over them takes
WALK_S = 20.0  # CPU seconds one walk over an archive may take: the bounded work takes a few at most
FILE, DIR, SYMLINK, HARDLINK = "file", "dir", "symlink", "hardlink"
ROOT = "."
_MODE_BITS = 0o1777  # permissions and sticky; never setuid or setgid
PAGE = 4096  # what tmpfs charges a file's data by, page by page
SHORT_SYMLINK = 128  # a target this long (with its NUL) lives in the inode; a longer one takes a page


class UnsafeArchive(ValueError):
    """An archive the rule refuses: a path out of the root, a link to outside, a malformed archive."""


class TooLarge(UnsafeArchive):
    """A work dir or archive past the bounds (entries, path length, depth, link targets, time to walk it)."""


class Entry:
    """One member: ``data`` for files, ``target`` for links (a path relative to the root for hard links)."""

    __slots__ = ("name", "kind", "mode", "mtime", "target", "data")

    def __init__(self, name, kind, mode=0o644, mtime=0.0, target="", data=b""):
        self.name, self.kind, self.mode, self.mtime, self.target, self.data = name, kind, mode, mtime, target, data

    def __repr__(self):
        return "Entry(%r, %s, %o)" % (self.name, self.kind, self.mode)


class Clock:
    """A walk's time limit, in the CPU time of the thread walking (the work's own time: a busy machine does not
    stretch it): :meth:`tick` once per step (it looks at the clock every 256), :meth:`check` at the end;
    past ``seconds`` either raises :class:`TooLarge` naming the walk."""

    __slots__ = ("end", "seconds", "what", "steps")

    def __init__(self, what, seconds=None):
        self.seconds = WALK_S if seconds is None else seconds
        self.end, self.what, self.steps = time.thread_time() + self.seconds, what, 0

    def tick(self):
        self.steps += 1
        if not self.steps & 255:
            self.check()

    def check(self):
        if time.thread_time() > self.end:
            raise TooLarge("%s took longer than %gs of CPU time: it costs too much to keep" % (self.what, self.seconds))


# -- the rule ----------------------------------------------------------------------------------------


def clean_name(name):
    """``name`` normalised (``./a//b`` -> ``a/b``, the root itself -> ``.``), or UnsafeArchive."""
    if not isinstance(name, str) or "\0" in name or name.startswith("/"):
        raise UnsafeArchive("file name %r must be a relative path inside the work dir" % (name[:200],))
    if _is_clean(name):  # what every packer writes: no part to drop, checked without a loop in Python
        parts = None
        clean = name
    else:
        parts = [part for part in name.split("/") if part not in ("", ".")]
        if ".." in parts:
            raise UnsafeArchive("file name %r must be a relative path inside the work dir (no '..')" % (name[:200],))
        if not parts:
            return ROOT
        clean = "/".join(parts)
    if clean.count("/") >= MAX_DEPTH:
        raise TooLarge("%r is more than %d directories deep" % (name[:200], MAX_DEPTH))
    if len(clean) * 4 > MAX_NAME and len(_bytes(clean)) > MAX_NAME:
        raise TooLarge("a path in the work dir is longer than %d bytes: %r..." % (MAX_NAME, clean[:200]))
    if len(clean) * 4 > MAX_PART:  # 4 bytes a character at most: only a long name can have a long part
        for part in parts or clean.split("/"):
            if len(part) * 4 > MAX_PART and len(_bytes(part)) > MAX_PART:
                raise TooLarge("a name in the work dir is longer than %d bytes: %r..." % (MAX_PART, part[:200]))
    return clean


def _is_clean(name):
    edges = ("./", "../", "/")
    return (
        name not in ("", ".", "..")
        and "//" not in name
        and "/./" not in name
        and "/../" not in name
        and not name.startswith(edges)
        and not name.endswith(("/.", "/..", "/"))
    )


def _bytes(text):
    return text.encode("utf-8", "surrogateescape")


def check(entries, clock=None):
    """The rule, applied: the entries to keep, sorted by name (a later entry of a name replaces an earlier
    one). Linear in the entries' bytes; TooLarge past ``clock`` (default: WALK_S from now)."""
    clock = clock or Clock("checking the work dir")
    kept = {}
    tree = _Tree()
    links = {}  # node -> the parts of its target, for the symlinks kept
    for entry in entries:
        clock.tick()
        if len(kept) >= MAX_ENTRIES:
            raise TooLarge("the work dir holds more than %d entries" % MAX_ENTRIES)
        tree.spend(len(entry.name) + len(entry.target))
        kind = entry.kind
        if kind not in (FILE, DIR, SYMLINK, HARDLINK):
            continue  # device node, FIFO, socket: nothing a work dir needs to carry
        name = clean_name(entry.name)
        if name == ROOT and kind != DIR:
            raise UnsafeArchive("file name %r must be a relative path inside the work dir" % (entry.name,))
        node = tree.add(name, kind)
        target = entry.target
        if kind == HARDLINK:
            target = clean_name(target)
            linked = kept.get(target)
            if linked is None or linked.kind != FILE:
                raise UnsafeArchive("hard link %r -> %r does not name an earlier file of the archive" % (name, target))
        elif kind == SYMLINK:
            links[node] = _link_target(name, target).split("/")
        kept[name] = Entry(
            name,
            kind,
            entry.mode & _MODE_BITS,
            entry.mtime,
            target if kind in (SYMLINK, HARDLINK) else "",
            entry.data if kind == FILE else b"",
        )
    for node in _links_out(links, tree, clock):
        del kept[tree.names[node]]  # a link out of the root: harmless in the jail, not on a host that unpacks it
    _first_name_holds_the_data(kept)
    clock.check()
    return [kept[name] for name in sorted(kept)]  # a canonical order: parents first, whoever packed it


class _Tree:
    """Every path of an archive as a node, the directories its names imply included, so that a step from a
    directory to a name in it is one lookup (never a join or a slice of the path so far). Building it takes
    work linear in the names; the directories implied but not listed count towards MAX_ENTRIES (each is an
    inode once restored) and their paths towards MAX_NAMES."""

    def __init__(self):
        self.node_of = {ROOT: 0}  # path -> node
        self.child = {}  # (node, name in it) -> node
        self.parent = [0]
        self.kinds = [DIR]  # a node's entry kind; None for a directory only implied so far
        self.full = [False]  # whether something lies inside the node
        self.names = [ROOT]
        self.spent = 0

    def spend(self, characters):
        self.spent += characters
        if self.spent > MAX_NAMES:
            raise TooLarge("the work dir's names and link targets take more than %d MiB" % (MAX_NAMES >> 20))

    def add(self, name, kind):
        """The node of ``name``, an entry of ``kind``; UnsafeArchive where it conflicts with another."""
        node = self.node_of.get(name)
        if node is None:
            node = self._make(name)
        earlier = self.kinds[node]
        if earlier is not None and earlier != kind:
            raise UnsafeArchive("%r is both a %s and a %s" % (name, earlier, kind))
        if kind != DIR and self.full[node]:
            raise UnsafeArchive("%r is a %s, but other entries lie inside it" % (name, kind))
        self.kinds[node] = kind
        return node

    def _make(self, name):
        missing = [name]  # the path and the directories above it that are not nodes yet, deepest first
        cut = name.rfind("/")
        above = name[:cut] if cut > 0 else ROOT
        while above not in self.node_of:
            self.spend(len(above))
            missing.append(above)
            cut = above.rfind("/")
            above = above[:cut] if cut > 0 else ROOT
        node = self.node_of[above]
        for path in reversed(missing):
            kind = self.kinds[node]
            if kind not in (None, DIR):
                raise UnsafeArchive("%r lies inside %r, a %s" % (name, self.names[node], kind))
            self.full[node] = True
            made = len(self.parent)
            if made > MAX_ENTRIES:
                raise TooLarge(
                    "the work dir holds more than %d entries (the directories it implies included)" % MAX_ENTRIES
                )
            self.child[(node, path[path.rfind("/") + 1 :])] = made
            self.node_of[path] = made
            self.parent.append(node)
            self.kinds.append(None)
            self.full.append(False)
            self.names.append(path)
            node = made
        return node


def _link_target(name, target):
    """A symlink's target as the kernel would take it, or UnsafeArchive (TooLarge past MAX_TARGET bytes)."""
    if not isinstance(target, str) or "\0" in target:
        raise UnsafeArchive("symlink %r has a target with NUL, which no file system takes" % (name,))
    if len(target) * 4 > MAX_TARGET and len(_bytes(target)) > MAX_TARGET:
        raise TooLarge("symlink %r has a target longer than %d bytes" % (name[:200], MAX_TARGET))
    return target


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


def _links_out(links, tree, clock):
    """The nodes of the symlinks ``links`` (node -> target parts) that lead out of the root, loop, or pass
    MAX_HOPS links, in work linear in the targets: each link is resolved once, and its outcome (where it
    leads, through how many links) kept for every other link that passes through it."""
    resolved = {}  # link node -> (node, depth below it that the archive does not hold, links followed), or None
    for first in links:
        if first not in resolved:
            _resolve(first, links, tree.child, tree.parent, resolved, clock)
    return [node for node, where in resolved.items() if where is None]


def _resolve(first, links, children, parent_of, resolved, clock):
    """Resolve ``first`` and every link it passes through, without recursion (a chain may be as long as the
    archive): a stack of walks, each a link's target part by part from the directory the link lies in."""
    walks = [[first, 0, parent_of[first], 0, 0]]  # link, next part, node, depth beyond the tree, hops
    active = {first}  # links being resolved: meeting one again is a loop
    while walks:
        clock.tick()
        walk = walks[-1]
        link, index, node, beyond, hops = walk
        parts = links[link]
        waiting = None
        out = not parts[0]  # absolute (a first part of ""), or empty
        while not out and index < len(parts):
            part = parts[index]
            if part in ("", "."):
                index += 1
            elif part == "..":
                if beyond:
                    beyond -= 1
                elif node == 0:
                    out = True
                else:
                    node = parent_of[node]
                index += 1
            elif beyond:
                beyond, index = beyond + 1, index + 1
            else:
                child = children.get((node, part))
                if child is None:
                    beyond, index = 1, index + 1  # a path the archive does not hold: no link lies below it
                elif child not in links:
                    node, index = child, index + 1
                elif child in resolved:
                    where = resolved[child]
                    if where is None or hops + 1 + where[2] > MAX_HOPS:
                        out = True
                    else:
                        node, beyond, hops, index = where[0], where[1], hops + 1 + where[2], index + 1
                elif child in active:
                    out = True  # a loop
                else:
                    waiting = child
                    break
        if waiting is not None:
            walk[1:] = [index, node, beyond, hops]
            walks.append([waiting, 0, parent_of[waiting], 0, 0])
            active.add(waiting)
            continue
        resolved[link] = None if out else (node, beyond, hops)
        active.discard(link)
        walks.pop()


# -- forms: tar (the host's), frames (the wire to and from jails) -------------------------------------

_BLOCK = 512
_ZEROS = bytes(_BLOCK)
_POSIX_MAGIC = b"ustar\x0000"
_LONG_META = MAX_TARGET + _BLOCK  # the most a GNU long name or long link may take
_PAX_MAX = 64 << 10  # bytes of one PAX header: a path, a link path and a few numbers need far less
_LOW = bytes(range(128))


def from_tar(data, clock=None, max_entries=MAX_ENTRIES):
    """The entries of a tar archive (ustar, GNU or PAX, as GNU tar and :func:`to_tar` write them), unchecked
    (pass them to :func:`check`), at most ``max_entries`` of them (:class:`TooLarge`). Never extracts anything.
    Read here rather than by ``tarfile``: a crafted PAX header costs ``tarfile`` time quadratic in its length on
    the Pythons before 3.12.6 (CVE-2024-6232); this reader takes each byte once (the hub's sdists too)."""
    clock = clock or Clock("reading the work dir's archive")
    view = memoryview(data)
    entries, offset, size = [], 0, len(data)
    pax, long_name, long_link = {}, None, None
    while offset < size:
        clock.tick()
        block = bytes(view[offset : offset + _BLOCK])
        if block == _ZEROS:
            break  # the end-of-archive blocks
        if len(block) < _BLOCK or not _checksum_ok(block):
            raise UnsafeArchive("not a readable tar archive: a bad header at byte %d" % offset)
        kind_flag, length = block[156:157], _number(block[124:136])
        offset += _BLOCK
        has_data = kind_flag in (b"0", b"\0", b"7", b"S") or kind_flag not in b"123456LKxg"
        if kind_flag == b"S" and block[482]:  # old GNU sparse: extension blocks of the map come first
            offset = _skip_sparse_map(data, offset)
        if kind_flag in (b"L", b"K", b"x", b"g"):
            if length > (_PAX_MAX if kind_flag in (b"x", b"g") else _LONG_META):
                raise TooLarge("the archive has a header of %d bytes" % length)
            payload = bytes(view[offset : offset + length])
            if len(payload) < length:
                raise UnsafeArchive("the archive is cut short")
            offset += -(-length // _BLOCK) * _BLOCK
            if kind_flag == b"L":
                long_name = _text(payload)
            elif kind_flag == b"K":
                long_link = _text(payload)
            elif kind_flag == b"x":
                pax.update(_pax_records(payload))
            continue  # a global PAX header ('g') sets nothing a work dir holds
        name = long_name if long_name is not None else _text(block[0:100])
        if long_name is None and block[257:265] == _POSIX_MAGIC and block[345] != 0:
            name = _text(block[345:500]) + "/" + name
        name = _decoded(pax["path"]) if "path" in pax else name
        target = _decoded(pax["linkpath"]) if "linkpath" in pax else long_link or _text(block[157:257])
        if "size" in pax:
            length = _pax_number(pax["size"], int)
        mtime = _pax_number(pax["mtime"], float) if "mtime" in pax else _number(block[136:148])
        sparse = kind_flag == b"S" or any(key.startswith("GNU.sparse.") for key in pax)
        pax, long_name, long_link = {}, None, None
        payload = b""
        if has_data:
            end = offset + length
            if length < 0 or end > size:
                raise UnsafeArchive("%r is cut short in the archive" % name[:200])
            payload = view[offset:end]
            offset += -(-length // _BLOCK) * _BLOCK
        if len(entries) >= max_entries:
            raise TooLarge("the archive holds more than %d entries" % max_entries)
        kind = {b"0": FILE, b"\0": FILE, b"7": FILE, b"1": HARDLINK, b"2": SYMLINK, b"5": DIR}.get(kind_flag, "other")
        if kind_flag == b"\0" and name.endswith("/"):
            kind = DIR  # the old V7 form of a directory
        if sparse:
            kind, payload = "other", b""  # the map and the holes are not worth a reader: dropped by the rule
        entries.append(Entry(name, kind, _number(block[100:108]), mtime, target, payload if kind == FILE else b""))
    clock.check()
    return entries


def _checksum_ok(block):
    """Whether ``block``'s checksum field holds its sum (unsigned, or signed as old tars wrote it)."""
    try:
        expected = _number(block[148:156])
    except UnsafeArchive:
        return False
    unsigned = sum(block) - sum(block[148:156]) + 8 * 32
    high = len(block[:148].translate(None, _LOW)) + len(block[156:].translate(None, _LOW))  # bytes of 128 and up
    return expected in (unsigned, unsigned - 256 * high)


def _number(field):
    """A number field of a tar header: octal text, or base-256 (GNU) for large values."""
    if field[:1] in (b"\x80", b"\xff"):
        value = int.from_bytes(field[1:], "big")
        return value - 256 ** (len(field) - 1) if field[:1] == b"\xff" else value
    digits = field.split(b"\0", 1)[0].strip()
    try:
        return int(digits or b"0", 8)
    except ValueError:
        raise UnsafeArchive("not a readable tar archive: a malformed number %r" % digits[:20]) from None


def _text(field):
    return field.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _decoded(value):
    return value.decode("utf-8", "surrogateescape")


def _pax_number(value, kind):
    try:
        return kind(value.decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        raise UnsafeArchive("not a readable tar archive: a malformed PAX number %r" % value[:20]) from None


def _pax_records(buffer):
    """The records of a PAX header (``LENGTH key=value\\n`` each), read once from start to end."""
    records, position, size = {}, 0, len(buffer)
    while position < size and buffer[position] != 0:
        space = buffer.find(b" ", position, position + 12)
        digits = buffer[position:space] if space > position else b""
        if not digits.isdigit():
            raise UnsafeArchive("not a readable tar archive: a malformed PAX header")
        end = position + int(digits)
        if end <= space or end > size or buffer[end - 1] != 10:
            raise UnsafeArchive("not a readable tar archive: a malformed PAX record")
        key, _, value = buffer[space + 1 : end - 1].partition(b"=")
        records[key.decode("utf-8", "surrogateescape")] = value
        position = end
    return records


def _skip_sparse_map(data, offset):
    """Past the extension blocks of an old GNU sparse header (each says whether another follows)."""
    while True:
        block = data[offset : offset + _BLOCK]
        if len(block) < _BLOCK:
            raise UnsafeArchive("the archive is cut short")
        offset += _BLOCK
        if not block[504]:
            return offset


def to_tar(entries):
    """A tar archive of checked ``entries`` in the GNU format (long names and targets in ``././@LongLink``
    members), as GNU tar reads it in a jail: a header or three per entry, nothing walked twice."""
    types = {FILE: b"0", HARDLINK: b"1", SYMLINK: b"2", DIR: b"5"}
    parts = []
    for entry in entries:
        name, target = _bytes(entry.name), _bytes(entry.target)
        if entry.kind == DIR and name != b".":
            name += b"/"
        data = entry.data if entry.kind == FILE else b""
        if len(name) > 100:
            parts += _gnu_long(b"L", name)
        if len(target) > 100:
            parts += _gnu_long(b"K", target)
        parts.append(_tar_header(name[:100], entry.mode, len(data), entry.mtime, types[entry.kind], target[:100]))
        if data:
            parts += [data, bytes(-len(data) % _BLOCK)]
    parts.append(bytes(2 * _BLOCK))
    return b"".join(parts)


def _gnu_long(kind, value):
    value += b"\0"
    return [_tar_header(b"././@LongLink", 0o644, len(value), 0, kind, b""), value, bytes(-len(value) % _BLOCK)]


_OWNERS = b"0000000\0" * 2  # uid and gid: the jail's tar restores as its own user anyway
_MAGIC_GNU = b"ustar  \0"


def _tar_header(name, mode, size, mtime, kind, target):
    fields = b"".join(
        (
            name.ljust(100, b"\0"),
            _octal(mode & 0o7777, 8),
            _OWNERS,
            _octal(size, 12),
            _octal(max(0, int(mtime)), 12),
            b"        ",
            kind,
            target.ljust(100, b"\0"),
            _MAGIC_GNU,
        )
    )
    checksum = sum(fields)
    return b"".join((fields[:148], b"%06o\0 " % checksum, fields[156:], bytes(_BLOCK - len(fields))))


def _octal(value, width):
    """A number field: octal text, or base-256 (GNU) where octal does not fit."""
    if value < 8 ** (width - 1):
        return b"%0*o\0" % (width - 1, value)
    return b"\x80" + value.to_bytes(width - 1, "big")


_MAGIC, _FAILED = b"VHF1", b"VHE1"
_HEADER = struct.Struct(">BHdIIQ")  # kind, mode, mtime, then the byte lengths of name, target, data
_KINDS = (FILE, DIR, SYMLINK, HARDLINK)


def to_frames(entries):
    """``entries`` as frames: a magic, a count, then per entry a fixed header and its bytes."""
    parts = [_MAGIC, struct.pack(">I", len(entries))]
    for entry in entries:
        name = _bytes(entry.name)
        target = _bytes(entry.target)
        parts.append(
            _HEADER.pack(_KINDS.index(entry.kind), entry.mode, entry.mtime, len(name), len(target), len(entry.data))
        )
        parts += [name, target, entry.data]
    return b"".join(parts)


def failed_frames(reason):
    """What a jail sends instead of frames when the work dir cannot be packed (it is past the bounds)."""
    return _FAILED + reason.encode("utf-8", "replace")[:2000]


def from_frames(data, clock=None):
    """The entries of frames, unchecked; TooLarge with the jail's reason if it could not pack them."""
    clock = clock or Clock("reading the work dir's frames")
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
        clock.tick()
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
    clock.check()
    return entries


def archive_cap(disk_bytes, tar=False):
    """The most bytes a jail whose work dir is a tmpfs of ``disk_bytes`` sends back within the rule, as
    frames or (``tar``) as GNU tar writes it: its data, MAX_NAMES of names (4 bytes a character at most),
    and each entry's headers and padding. A host reads no more than that of a jail's reply."""
    if tar:
        return disk_bytes + 4 * MAX_NAMES + MAX_ENTRIES * 5 * _BLOCK + 20 * _BLOCK
    return disk_bytes + 4 * MAX_NAMES + MAX_ENTRIES * _HEADER.size + 8


def frames_size(entries):
    """The bytes of ``to_frames(entries)``, without making them."""
    return 8 + sum(
        _HEADER.size + len(_bytes(entry.name)) + len(_bytes(entry.target)) + len(entry.data) for entry in entries
    )


class Stream:
    """Exact reads from a descriptor, buffered, never past ``limit`` bytes (what follows them belongs to
    someone else: the run's stdin on the warm pool's pipe). :attr:`left` is what was not read."""

    def __init__(self, fd, limit=None):
        self.fd, self.left, self.buffer = fd, limit, b""

    def read(self, size):
        chunks, have = [self.buffer], len(self.buffer)
        while have < size:
            want = max(size - have, 1 << 16)
            if self.left is not None:
                want = min(want, self.left)
            chunk = os.read(self.fd, want) if want else b""
            if not chunk:
                raise UnsafeArchive("the archive is cut short")
            if self.left is not None:
                self.left -= len(chunk)
            chunks.append(chunk)
            have += len(chunk)
        data = b"".join(chunks) if len(chunks) > 1 else self.buffer
        data, self.buffer = data[:size], data[size:]
        return data

    def pieces(self, size):
        """``size`` bytes, a megabyte at a time."""
        while size:
            piece = self.read(min(size, 1 << 20))
            size -= len(piece)
            yield piece


# -- a directory: pack, unpack, empty ---------------------------------------------------------------


def pack(directory):
    """The contents of ``directory`` as checked entries, the root's own mode included. Links are never
    followed; unreadable files and directories are made readable first (by their owner, the one packing:
    the directory is thrown away afterwards). TooLarge past the bounds."""
    clock = Clock("packing the work dir")
    root = os.lstat(directory)
    entries = [Entry(ROOT, DIR, stat.S_IMODE(root.st_mode), root.st_mtime)]
    first_names = {}  # (device, inode) -> the first name of a file with several links
    pending = [""]
    while pending:
        relative = pending.pop()
        path = os.path.join(directory, relative) if relative else directory
        for name in sorted(_listdir(path)):
            clock.tick()
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
    return check(entries, clock)


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
    """Write ``entries`` (checked here again) into ``directory``, which must be empty."""
    writer = _Writer(directory)
    for entry in check(entries):
        writer.add(entry, (entry.data,))
    writer.finish()


def unpack_frames(stream, directory):
    """Frames read from ``stream`` (a :class:`Stream`) straight into ``directory``, which must be empty:
    one entry at a time, file data a megabyte at a time, so that restoring takes memory for the longest
    name, never for the archive. The frames are a snapshot's (checked on the host, in its order: parents
    first, the first name of a hard-linked file before the others); names are checked again here."""
    magic = stream.read(4)
    if magic != _MAGIC:
        raise UnsafeArchive("not a work dir archive (bad frames)")
    (count,) = struct.unpack(">I", stream.read(4))
    if count > MAX_ENTRIES:
        raise TooLarge("the archive holds more than %d entries" % MAX_ENTRIES)
    writer = _Writer(directory)
    for _ in range(count):
        code, mode, mtime, name_size, target_size, data_size = _HEADER.unpack(stream.read(_HEADER.size))
        if code >= len(_KINDS) or name_size > MAX_NAME or target_size > MAX_TARGET:
            raise UnsafeArchive("the archive is malformed")
        name = clean_name(stream.read(name_size).decode("utf-8", "surrogateescape"))
        target = stream.read(target_size).decode("utf-8", "surrogateescape")
        kind = _KINDS[code]
        if kind == HARDLINK:
            target = clean_name(target)
        pieces = stream.pieces(data_size)
        writer.add(Entry(name, kind, mode & _MODE_BITS, mtime, target), pieces if kind == FILE else ())
        for _ in pieces:
            pass  # the data of anything but a file is no one's
    writer.finish()


class _Writer:
    """Entries into a directory, in order. Directory modes and times are set last, deepest first, so that
    a read-only directory can still be filled."""

    def __init__(self, directory):
        self.directory, self.made, self.directories = directory, set([directory]), []

    def add(self, entry, pieces):
        if entry.name == ROOT:
            return  # the root keeps its own mode: a snapshot describes what lies inside it
        path = os.path.join(self.directory, entry.name)
        parent = os.path.dirname(path)
        if parent not in self.made:
            os.makedirs(parent, exist_ok=True)
            self.made.add(parent)
        if entry.kind == DIR:
            if path not in self.made:
                os.makedirs(path, 0o700, exist_ok=True)
                self.made.add(path)
            self.directories.append((entry.name.count("/"), path, entry.mode, entry.mtime))
        elif entry.kind == FILE:
            fd = os.open(
                path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600
            )
            try:
                for piece in pieces:
                    data = memoryview(piece)
                    while data:
                        data = data[os.write(fd, data) :]
                os.fchmod(fd, entry.mode)
                os.utime(fd, (entry.mtime, entry.mtime))
            finally:
                os.close(fd)
        elif entry.kind == SYMLINK:
            os.symlink(entry.target, path)
        else:
            os.link(os.path.join(self.directory, entry.target), path, follow_symlinks=False)

    def finish(self):
        for _, path, mode, mtime in sorted(self.directories, key=lambda item: -item[0]):
            os.chmod(path, mode)
            os.utime(path, (mtime, mtime))


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


def cost(entries):
    """What restoring checked ``entries`` takes: ``inodes`` (every entry but hard links and the root, and
    every directory the names imply), ``links`` (symlinks and hard links), ``data_bytes`` (each file's bytes
    once, sparse ones in full), ``disk_bytes`` (what a tmpfs charges: file data by the page, a page per long
    symlink target), ``names_bytes`` (the frames' headers, names and targets: what restoring walks besides
    the data) and ``depth`` (the deepest path)."""
    found = {"inodes": 0, "links": 0, "data_bytes": 0, "disk_bytes": 0, "names_bytes": 8, "depth": 0}
    directories = set(entry.name for entry in entries if entry.kind == DIR)
    for entry in entries:  # the directories names imply without listing them are inodes once restored too
        cut = entry.name.rfind("/")
        while cut > 0 and entry.name[:cut] not in directories:
            directories.add(entry.name[:cut])
            found["inodes"] += 1
            cut = entry.name.rfind("/", 0, cut)
    for entry in entries:
        target = len(_bytes(entry.target))
        found["names_bytes"] += _HEADER.size + len(_bytes(entry.name)) + target
        found["depth"] = max(found["depth"], entry.name.count("/") + 1 if entry.name != ROOT else 0)
        if entry.kind == HARDLINK:
            found["links"] += 1
            continue
        if entry.name != ROOT:
            found["inodes"] += 1
        if entry.kind == FILE:
            size = len(entry.data)
            found["data_bytes"] += size
            found["disk_bytes"] += -(-size // PAGE) * PAGE
        elif entry.kind == SYMLINK:
            found["links"] += 1
            found["disk_bytes"] += PAGE if target + 1 > SHORT_SYMLINK else 0
    return found
