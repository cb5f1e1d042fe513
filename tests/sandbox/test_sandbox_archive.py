"""Work dir snapshots: one codec, one rule, the same outcome in every backend.

Hostile archives are refused when a Snapshot is made of them (before any backend sees them), and the
jail side unpacks with the same code (``jail_source`` starts with the codec), so they are refused the
same way everywhere. What the rule neutralises (device nodes, FIFOs, setuid bits, links out of the
root) restores identically in a fresh jail, the warm pool and the unsafe local backend, through both
the command path (GNU tar in the jail) and the Python path (frames).
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from verihub import sandbox
from verihub.sandbox import Limits, RunStatus, Snapshot, _archive
from verihub.sandbox.local import UnsafeLocalSandbox
from verihub.sandbox.nsjail import jail_source
from verihub.sandbox.session import SandboxSession

LIMITS = Limits(wall_s=20, memory_mb=256, max_procs=16)
# Every entry under the work dir: path, kind, mode, link target, size, mtime (the same in every backend).
LISTING = r"""
import os, stat
for top, dirs, files in os.walk(".", followlinks=False):
    for name in sorted(dirs + files):
        path = os.path.join(top, name)
        info = os.lstat(path)
        mode = info.st_mode
        kind = "l" if stat.S_ISLNK(mode) else "d" if stat.S_ISDIR(mode) else "f" if stat.S_ISREG(mode) else "?"
        target = os.readlink(path) if kind == "l" else ""
        print(ascii(path), kind, oct(stat.S_IMODE(info.st_mode)), target, info.st_size if kind == "f" else 0,
              int(info.st_mtime), info.st_nlink if kind == "f" else "", sep="|")
"""


def member(
    name: str,
    kind: bytes = tarfile.REGTYPE,
    *,
    data: bytes = b"",
    mode: int = 0o644,
    link: str = "",
    mtime: int = 1_700_000_000,
    **fields: int,
) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname, info.mtime, info.size = kind, mode, link, mtime, len(data)
    for key, value in fields.items():
        setattr(info, key, value)
    return info, data


def tar_of(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buffer.getvalue()


HOSTILE = {
    "path traversal": ([member("../evil", data=b"x")], "relative path"),
    "traversal inside a path": ([member("a/../../evil", data=b"x")], "relative path"),
    "absolute path": ([member("/tmp/evil", data=b"x")], "relative path"),
    "a file written through a symlink to outside": (
        [member("link", tarfile.SYMTYPE, link="/tmp"), member("link/evil", data=b"x")],
        "lies inside 'link'",
    ),
    "a file written through a symlink inside": (
        [
            member("sub", tarfile.DIRTYPE, mode=0o755),
            member("link", tarfile.SYMTYPE, link="sub"),
            member("link/evil", data=b"x"),
        ],
        "lies inside 'link'",
    ),
    "a hard link to an absolute path": ([member("h", tarfile.LNKTYPE, link="/etc/passwd")], "relative path"),
    "a hard link out of the root": ([member("h", tarfile.LNKTYPE, link="../outside")], "relative path"),
    "a hard link to nothing in the archive": ([member("h", tarfile.LNKTYPE, link="missing")], "earlier file"),
    "a hard link to a symlink": (
        [member("s", tarfile.SYMTYPE, link="a"), member("h", tarfile.LNKTYPE, link="s")],
        "earlier file",
    ),
    "a file inside a file": ([member("a", data=b"x"), member("a/b", data=b"y")], "lies inside 'a'"),
    "a name that is a file and a directory": (
        [member("a/b", data=b"x"), member("a", data=b"y")],
        "other entries lie inside it",
    ),
    "a sparse file": ([member("sparse", tarfile.GNUTYPE_SPARSE, data=b"")], None),
    "not a tar archive": ([], "not a readable tar archive"),
}


@pytest.mark.parametrize(("members", "complaint"), HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_archives_are_refused_before_any_backend_sees_them(
    members: list[Any], complaint: str | None, tmp_path: Path
) -> None:
    tar = tar_of(*members) if members else b"\x00garbage" * 200
    if complaint is None:  # dropped, not refused: a sparse member could claim terabytes
        assert Snapshot(tar).files() == {}
        return
    with pytest.raises(ValueError, match=complaint):
        Snapshot(tar)
    # the jail side runs this same codec: its unpacker refuses the entries too, writing nothing
    target = tmp_path / "root"
    target.mkdir()
    if members:
        with pytest.raises(ValueError, match=complaint):
            _archive.unpack(_archive.from_tar(tar), str(target))
    assert list(target.iterdir()) == [] and not (tmp_path / "evil").exists()


def test_the_jails_unpack_with_the_hosts_codec() -> None:
    codec = Path(_archive.__file__).read_text()
    assert jail_source("_jailpy.py").startswith(codec) and jail_source("_jailpy.py", "_worker.py").startswith(codec)


def test_huge_member_counts_are_refused() -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for number in range(_archive.MAX_ENTRIES + 1):
            archive.addfile(tarfile.TarInfo(f"f{number}"))
    with pytest.raises(ValueError, match=f"more than {_archive.MAX_ENTRIES} entries"):
        Snapshot(buffer.getvalue())


NEUTRALISED = tar_of(
    member("null", tarfile.CHRTYPE, devmajor=1, devminor=3),
    member("disk", tarfile.BLKTYPE, devmajor=8, devminor=0),
    member("fifo", tarfile.FIFOTYPE),
    member("setuid", data=b"#!/bin/sh\nid\n", mode=0o4755),
    member("setgid-dir", tarfile.DIRTYPE, mode=0o2775),
    member("sticky", tarfile.DIRTYPE, mode=0o1777),
    member("locked", tarfile.DIRTYPE, mode=0o500),
    member("locked/inside", data=b"still written", mode=0o400),
    member("sub/file", data=b"target"),
    member("ok", tarfile.SYMTYPE, link="sub/file"),
    member("absolute", tarfile.SYMTYPE, link="/etc/passwd"),
    member("up", tarfile.SYMTYPE, link="../outside"),
    member("sub/parent", tarfile.SYMTYPE, link=".."),  # inside: it points at the root
    member("chained", tarfile.SYMTYPE, link="sub/parent/.."),  # through sub/parent: out of the root
    member("again", tarfile.LNKTYPE, link="sub/file"),
)
EXPECTED = {  # the times of links and of the implicit directory "sub" are the restore's own
    "'./again'|f|0o644||6|1700000000|2",
    "'./locked'|d|0o500||0|1700000000|",
    "'./ok'|l|0o777|sub/file|0|*|",
    "'./setgid-dir'|d|0o775||0|1700000000|",
    "'./setuid'|f|0o755||13|1700000000|1",
    "'./sticky'|d|0o1777||0|1700000000|",
    "'./sub'|d|0o755||0|*|",
    "'./sub/file'|f|0o644||6|1700000000|2",
    "'./sub/parent'|l|0o777|..|0|*|",
    "'./locked/inside'|f|0o400||13|1700000000|1",
}


def without_restore_times(listing: str) -> set[str]:
    lines = set()
    for line in listing.splitlines():
        fields = line.split("|")
        if fields[0] == "'./main.py'":
            continue  # the Python path's own
        if fields[1] == "l" or fields[0] == "'./sub'":
            fields[5] = "*"
        lines.add("|".join(fields))
    return lines


Backend = Callable[..., sandbox.Result]


def backends(fresh_jail: Any, warm_pool: Any) -> dict[str, Backend]:
    local = UnsafeLocalSandbox()
    return {
        f"{name} {path}": runner(jail, path)
        for name, jail in (("fresh", fresh_jail), ("pool", warm_pool), ("local", local))
        for path in ("command", "python")
    }


def runner(jail: Any, path: str) -> Backend:
    """Runs code in ``jail`` as a command (python3 -c) or through run_python."""

    def run(code: str, **options: Any) -> sandbox.Result:
        if path == "command":
            return sandbox.run(["python3", "-c", code], sandbox=jail, limits=LIMITS, **options)
        return sandbox.run_python(code, sandbox=jail, limits=LIMITS, **options)

    return run


@pytest.mark.nsjail
def test_neutralised_entries_restore_the_same_in_every_backend(fresh_jail: Any, warm_pool: Any) -> None:
    snapshot = Snapshot(NEUTRALISED)
    assert sorted(entry.name for entry in snapshot.entries()) == [
        "again",
        "locked",
        "locked/inside",
        "ok",
        "setgid-dir",
        "setuid",
        "sticky",
        "sub/file",
        "sub/parent",
    ]
    for name, run in backends(fresh_jail, warm_pool).items():
        result = run(LISTING, files=snapshot)
        assert result.ok, (name, result.reason, result.stderr[-1000:])
        listing = without_restore_times(result.stdout)
        assert listing == EXPECTED, (name, listing ^ EXPECTED)


MAKE_STATE = r"""
import os
os.makedirs("pkg/data", exist_ok=True)
open("pkg/__init__.py", "w").write("VALUE = 1\n")
open("pkg/data/table.csv", "w").write("a,b\n1,2\n")
open("run.sh", "w").write("#!/bin/sh\necho hi\n"); os.chmod("run.sh", 0o755)
open("secret.txt", "w").write("s"); os.chmod("secret.txt", 0o600)
os.symlink("pkg/data/table.csv", "table.csv")
os.link("pkg/__init__.py", "init-copy.py")
open(b"odd-\xff-name", "w").write("odd")
os.mkfifo("fifo")
os.chmod("pkg/data", 0o500)
"""


def verifier_digest_before_the_codec(state: Snapshot) -> str:
    """The verifier's work dir digest as it was computed before ``Snapshot.digest`` existed."""
    digest = hashlib.sha256()
    with tarfile.open(fileobj=io.BytesIO(state.tar), mode="r:") as archive:
        for member_ in sorted(archive.getmembers(), key=lambda m: m.name.removeprefix("./")):
            digest.update(
                f"{member_.name.removeprefix('./')}\0{member_.type!r}\0{member_.mode:o}\0{member_.linkname}\0"
                f"{member_.size}\0".encode("utf-8", "surrogateescape")
            )
            if member_.isfile():
                extracted = archive.extractfile(member_)
                digest.update(extracted.read() if extracted is not None else b"")
    return digest.hexdigest()


@pytest.mark.nsjail
def test_kept_work_dirs_are_the_same_snapshot_in_every_backend(fresh_jail: Any, warm_pool: Any) -> None:
    digests, listings = {}, {}
    for name, run in backends(fresh_jail, warm_pool).items():
        result = run(MAKE_STATE, keep_files=True)
        assert result.ok and result.files is not None, (name, result.reason, result.stderr[-1000:])
        state = result.files
        digests[name] = state.digest()
        assert digests[name] == verifier_digest_before_the_codec(state), name
        files = state.files()
        assert files["init-copy.py"] == files["pkg/__init__.py"] == b"VALUE = 1\n" and "fifo" not in files
        assert files["odd-\udcff-name"] == b"odd"
        restored = run(LISTING, files=state)
        assert restored.ok, (name, restored.stderr[-1000:])
        listings[name] = [
            line.split("|")[:5] + line.split("|")[6:] for line in restored.stdout.splitlines()
        ]  # no times
    # the same state wherever it was made (the Python path has main.py besides; the local backend's
    # root is a temporary directory of its own mode)
    for path in ("command", "python"):
        assert digests[f"fresh {path}"] == digests[f"pool {path}"], digests
        assert listings[f"fresh {path}"] == listings[f"pool {path}"] == listings[f"local {path}"], listings


def test_digest_ignores_times_but_not_content_or_modes() -> None:
    base = Snapshot(tar_of(member("a", data=b"x", mtime=1), member("d", tarfile.DIRTYPE, mode=0o755)))
    later = Snapshot(tar_of(member("a", data=b"x", mtime=2), member("d", tarfile.DIRTYPE, mode=0o755, mtime=9)))
    assert base.digest() == later.digest()
    assert base.digest() != Snapshot(tar_of(member("a", data=b"y"), member("d", tarfile.DIRTYPE, mode=0o755))).digest()
    assert (
        base.digest()
        != Snapshot(tar_of(member("a", data=b"x", mode=0o600), member("d", tarfile.DIRTYPE, mode=0o755))).digest()
    )
    assert (
        base.digest()
        != Snapshot(tar_of(member("a", tarfile.SYMTYPE, link="d"), member("d", tarfile.DIRTYPE, mode=0o755))).digest()
    )


DEEP = "import os\nfor _ in range(300):\n    os.mkdir('d'); os.chdir('d')\nopen('f', 'w').write('x')\n"


@pytest.mark.nsjail
def test_a_work_dir_past_the_bounds_cannot_be_kept_in_any_backend(fresh_jail: Any, warm_pool: Any) -> None:
    for name, run in backends(fresh_jail, warm_pool).items():
        result = run(DEEP, keep_files=True)
        assert result.status is RunStatus.OUTPUT_LIMIT and "the work dir cannot be kept" in result.reason, (
            name,
            result.status,
            result.reason,
        )
        assert result.files is None and result.exit_code is None
    session = SandboxSession(files={"a.txt": "kept"}, limits=LIMITS, sandbox=warm_pool)
    assert session.run_python(DEEP).status is RunStatus.OUTPUT_LIMIT
    assert session.files() == {"a.txt": b"kept"}  # a run whose work dir cannot be kept leaves the state alone
