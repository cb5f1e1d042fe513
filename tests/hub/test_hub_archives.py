"""Release archives, as a hostile publisher builds them: a tag publishes a wheel or sdist only when every member
is a regular file, a directory or a link that stays inside it, and within the caps on unpacked bytes and
members; a refusal is a 400 naming the member, and leaves no tag and no index entry. Re-tagging a release
reads nothing again."""

from __future__ import annotations

import base64
import gzip
import io
import json
import stat
import tarfile
import time
import zipfile

import httpx
import pytest

from conftest import HubServer
from verihub.hub.errors import ErrorCode
from verihub.hub.limits import MAX_ARCHIVE_MEMBERS
from verihub.hub.storage import HubStorage
from verihub.ids import RepoId

pytestmark = pytest.mark.slow
GIB = 1 << 30


def member(
    name: str, kind: bytes = tarfile.REGTYPE, *, mode: int = 0o644, link: str = "", data: bytes = b"", **fields: int
) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname, info.size = kind, mode, link, len(data) if kind == tarfile.REGTYPE else 0
    for key, value in fields.items():
        setattr(info, key, value)
    return info, data


def sdist(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buffer.getvalue()


def wheel(*entries: tuple[str, int, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, mode, data in entries:
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            archive.writestr(info, data)
    return buffer.getvalue()


def bomb(unpacked: int, *after: tuple[tarfile.TarInfo, bytes]) -> bytes:
    """A .tar.gz of one member of ``unpacked`` zero bytes, in about unpacked/1000 bytes: gzip members
    concatenated, each 1 MiB of zeros, so it costs nothing to make."""
    head = tarfile.TarInfo("bomb-1.0.0/zeros")
    head.size = unpacked
    chunk = gzip.compress(b"\0" * (1 << 20), compresslevel=9)
    tail = b"".join(info.tobuf() + data + b"\0" * (-len(data) % 512) for info, data in after)
    return gzip.compress(head.tobuf()) + chunk * (unpacked >> 20) + gzip.compress(tail + b"\0" * 1024)


def publish(server: HubServer, name: str, files: dict[str, bytes], *, tag: bool = True) -> httpx.Response:
    """Create alice/NAME, commit ``files`` under dist/, then tag v1.0.0 (the response of the tag)."""
    headers = {"Authorization": f"Bearer {server.tokens['alice']}"}
    assert httpx.post(f"{server.url}/api/repos/create", json={"name": name}, headers=headers).status_code == 200
    lines = [{"key": "header", "value": {"summary": "release"}}] + [
        {
            "key": "file",
            "value": {"path": f"dist/{path}", "content": base64.b64encode(data).decode(), "encoding": "base64"},
        }
        for path, data in files.items()
    ]
    committed = httpx.post(
        f"{server.url}/api/models/alice/{name}/commit/main",
        headers=headers,
        timeout=120,
        content="\n".join(json.dumps(line) for line in lines).encode(),
    )
    assert committed.status_code == 200, committed.text
    if not tag:
        return committed
    return httpx.post(
        f"{server.url}/api/models/alice/{name}/tag/main", json={"tag": "v1.0.0"}, headers=headers, timeout=300
    )


def assert_refused(server: HubServer, name: str, response: httpx.Response, code: ErrorCode, *names: str) -> None:
    """A 400 with ``code`` whose message names ``names``, and nothing of the release left behind."""
    assert response.status_code == 400, (response.status_code, response.text[:400])
    assert response.headers["X-Error-Code"] == response.json()["code"] == code.value, response.text[:400]
    assert all(each in response.json()["error"] for each in names), response.text[:400]
    refs = httpx.get(f"{server.url}/api/models/alice/{name}/refs").json()
    assert refs["tags"] == [], refs
    assert httpx.get(f"{server.url}/simple/alice-{name}/").status_code == 404


HOSTILE_TAR = {
    "chr": [member("pkg/tty", tarfile.CHRTYPE, devmajor=5, devminor=0)],
    "blk": [member("pkg/disk", tarfile.BLKTYPE, devmajor=8, devminor=0)],
    "fifo": [member("pkg/pipe", tarfile.FIFOTYPE)],
    "setuid": [member("pkg/run", mode=0o4755, data=b"#!/bin/sh\n")],
    "setgid": [member("pkg/run", mode=0o2755, data=b"#!/bin/sh\n")],
    "sticky": [member("pkg/tmp", tarfile.DIRTYPE, mode=0o1777)],
    "symlink-absolute": [member("pkg/passwd", tarfile.SYMTYPE, link="/etc/passwd")],
    "symlink-escaping": [member("pkg/passwd", tarfile.SYMTYPE, link="../../etc/passwd")],
    "hardlink-escaping": [member("pkg/shadow", tarfile.LNKTYPE, link="../etc/shadow")],
    "hardlink-absolute": [member("pkg/shadow", tarfile.LNKTYPE, link="/etc/shadow")],
    # each link stays inside on paper, but pkg/here is pkg itself, so pkg/here/up is pkg/up: ../.. from it leaves
    "link-through-a-link": [
        member("pkg/here", tarfile.SYMTYPE, link="."),
        member("pkg/here/up", tarfile.SYMTYPE, link="../.."),
    ],
    "file-through-a-link": [
        member("pkg/etc", tarfile.SYMTYPE, link="."),
        member("pkg/etc/cron", data=b"* * * * * root true\n"),
    ],
}


@pytest.mark.parametrize("case", list(HOSTILE_TAR))
def test_hostile_sdist_members_are_refused(hub_server: HubServer, case: str) -> None:
    members = HOSTILE_TAR[case]
    name = f"ar-{case}"
    response = publish(hub_server, name, {f"alice_ar_{case.replace('-', '_')}-1.0.0.tar.gz": sdist(*members)})
    assert_refused(hub_server, name, response, ErrorCode.UNSAFE_ARCHIVE, members[-1][0].name)


HOSTILE_ZIP = {
    "zip-symlink": ("pkg/passwd", stat.S_IFLNK | 0o777, b"/etc/passwd"),
    "zip-fifo": ("pkg/pipe", stat.S_IFIFO | 0o644, b""),
    "zip-setuid": ("pkg/run", stat.S_IFREG | 0o4755, b"#!/bin/sh\n"),
}


@pytest.mark.parametrize("case", list(HOSTILE_ZIP))
def test_hostile_wheel_members_are_refused(hub_server: HubServer, case: str) -> None:
    entry = HOSTILE_ZIP[case]
    name = f"ar-{case}"
    archive = wheel(("pkg/__init__.py", stat.S_IFREG | 0o644, b""), entry)
    response = publish(hub_server, name, {f"alice_ar_{case.replace('-', '_')}-1.0.0-py3-none-any.whl": archive})
    assert_refused(hub_server, name, response, ErrorCode.UNSAFE_ARCHIVE, entry[0])


def test_regular_files_directories_and_links_inside_are_published(hub_server: HubServer) -> None:
    tar = sdist(
        member("alice_ar_fine-1.0.0", tarfile.DIRTYPE, mode=0o755),
        member("alice_ar_fine-1.0.0/a.py", data=b"A = 1\n"),
        member("alice_ar_fine-1.0.0/sub", tarfile.DIRTYPE, mode=0o755),
        member("alice_ar_fine-1.0.0/sub/a.py", tarfile.SYMTYPE, link="../a.py"),
        member("alice_ar_fine-1.0.0/b.py", tarfile.LNKTYPE, link="alice_ar_fine-1.0.0/a.py"),
    )
    zip_ = wheel(
        ("alice_ar_fine/__init__.py", stat.S_IFREG | 0o644, b""),
        ("alice_ar_fine/", stat.S_IFDIR | 0o755, b""),
        ("alice_ar_fine/legacy.py", 0, b""),
    )  # no mode at all, as some zip tools write
    response = publish(
        hub_server, "ar-fine", {"alice_ar_fine-1.0.0.tar.gz": tar, "alice_ar_fine-1.0.0-py3-none-any.whl": zip_}
    )
    assert response.status_code == 200, response.text
    index = httpx.get(
        f"{hub_server.url}/simple/alice-ar-fine/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    assert sorted(entry["filename"] for entry in index.json()["files"]) == [
        "alice_ar_fine-1.0.0-py3-none-any.whl",
        "alice_ar_fine-1.0.0.tar.gz",
    ]


def test_a_gzip_bomb_is_refused_at_the_cap(hub_server: HubServer) -> None:
    """8 GiB of zeros in 8 MB: refused once the cap is read, long before the whole of it would be."""
    start = time.perf_counter()
    response = publish(hub_server, "ar-bomb", {"alice_ar_bomb-1.0.0.tar.gz": bomb(8 * GIB)})
    assert_refused(hub_server, "ar-bomb", response, ErrorCode.ARCHIVE_TOO_LARGE, "alice_ar_bomb-1.0.0.tar.gz")
    assert time.perf_counter() - start < 20, "the whole archive was unpacked"


def test_a_pax_header_tarfile_parses_in_quadratic_time_is_refused_at_once(hub_server: HubServer) -> None:
    """A PAX header of 4 MB of digits (40 KB compressed): tarfile's header regex backtracks over it in time
    quadratic in its length on the Pythons before 3.12.6 (CVE-2024-6232; 0.44 s at 20 KB here, hours at 4 MB).
    The hub reads sdists in linear work: refused while the tag request is answered."""
    header = tarfile.TarInfo("././@PaxHeader")
    header.type, header.size = tarfile.XHDTYPE, 4 << 20
    digits = header.tobuf(format=tarfile.USTAR_FORMAT) + b"1" * header.size
    info, data = member("pkg/README", data=b"hi")
    tar = digits + info.tobuf(format=tarfile.USTAR_FORMAT) + data + b"\0" * (-len(data) % 512 + 1024)
    response = publish(hub_server, "ar-pax", {"alice_ar_pax-1.0.0.tar.gz": gzip.compress(tar)})
    assert_refused(hub_server, "ar-pax", response, ErrorCode.ARCHIVE_TOO_LARGE, "alice_ar_pax-1.0.0.tar.gz", "header")


def test_too_many_members_are_refused(hub_server: HubServer) -> None:
    empty = b"".join(tarfile.TarInfo(f"pkg/{index}").tobuf() for index in range(MAX_ARCHIVE_MEMBERS + 1))
    response = publish(hub_server, "ar-many", {"alice_ar_many-1.0.0.tar.gz": gzip.compress(empty + b"\0" * 1024, 1)})
    assert_refused(hub_server, "ar-many", response, ErrorCode.ARCHIVE_TOO_LARGE, f"{MAX_ARCHIVE_MEMBERS} entries")
    names = [(f"pkg/{index}", stat.S_IFREG | 0o644, b"") for index in range(MAX_ARCHIVE_MEMBERS + 1)]
    response = publish(hub_server, "ar-many-zip", {"alice_ar_many_zip-1.0.0-py3-none-any.whl": wheel(*names)})
    assert_refused(hub_server, "ar-many-zip", response, ErrorCode.ARCHIVE_TOO_LARGE, "members")


def test_tagging_a_release_again_reads_nothing(hub_server: HubServer) -> None:
    """A tag that holds a bomb with a member leaving it (a hub from before these checks tagged it): tagging
    it again is the no-op of an existing release, and neither unpacks nor judges the archive again."""
    hostile = bomb(GIB, member("../escaped", data=b"x"))
    committed = publish(hub_server, "ar-again", {"alice_ar_again-1.0.0.tar.gz": hostile}, tag=False)
    repo = RepoId("alice", "ar-again")
    HubStorage(hub_server.data).tag(repo, "v1.0.0", committed.json()["commitOid"])
    headers = {"Authorization": f"Bearer {hub_server.tokens['alice']}"}
    start = time.perf_counter()
    again = httpx.post(
        f"{hub_server.url}/api/models/alice/ar-again/tag/main", json={"tag": "v1.0.0"}, headers=headers, timeout=300
    )
    assert again.status_code == 200, again.text[:400]
    assert time.perf_counter() - start < 5
