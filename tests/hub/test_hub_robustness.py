"""Server robustness, tried as a hostile user would: nothing is parsed before authorization, every body is
bounded, every bad input gets a 4xx with a machine-readable code (never a 500), blocking work stays off the
event loop, and the client maps the codes back to verihub's exceptions."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import HubServer, free_port
from verihub.hub.errors import ErrorCode

pytestmark = pytest.mark.slow
CODES = {code.value for code in ErrorCode} - {ErrorCode.INTERNAL.value, ErrorCode.CORRUPT_FILE.value}


@pytest.fixture(scope="module")
def repo(hub_server: HubServer) -> str:
    """alice/sturdy, with one commit on main; its commit URL."""
    headers = {"Authorization": f"Bearer {hub_server.tokens['alice']}"}
    created = httpx.post(f"{hub_server.url}/api/repos/create", json={"name": "sturdy"}, headers=headers)
    assert created.status_code == 200, created.text
    first = ndjson(
        {"key": "header", "value": {"summary": "first"}},
        {"key": "file", "value": {"path": "README.md", "content": b64(b"# sturdy\n"), "encoding": "base64"}},
    )
    assert (
        httpx.post(f"{hub_server.url}/api/models/alice/sturdy/commit/main", content=first, headers=headers).status_code
        == 200
    )
    return f"{hub_server.url}/api/models/alice/sturdy"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def ndjson(*lines: Any) -> bytes:
    return "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines).encode()


def refused(response: httpx.Response, status: int, code: str | None = None) -> None:
    """A refusal: the status, a known machine-readable code in the header and the body."""
    assert response.status_code == status, (response.status_code, response.text[:300])
    assert response.headers["X-Error-Code"] in CODES and response.json()["code"] == response.headers["X-Error-Code"]
    if code is not None:
        assert response.headers["X-Error-Code"] == code, response.text[:300]


def alice(server: HubServer) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.tokens['alice']}"}


# -- bodies ---------------------------------------------------------------------------------------------

BAD_JSON = [
    b"{",
    b"[]",
    b'"text"',
    b"42",
    b"null",
    b"\xff\xfe",
    b'{"name": 5}',
    b'{"name": ["x"]}',
    b"[" * 100_000 + b"]" * 100_000,
    b'{"tag": {"nested": true}}',
    b'{"files": "all"}',
    b'{"files": [{"path": 1}]}',
    b'{"private": "maybe", "name": "x"}',
    b'{"startingPoint": []}',
]


@pytest.mark.parametrize(
    "route",
    [
        "/api/repos/create",
        "DELETE /api/repos/delete",
        "/api/validate-yaml",
        "REPO/tag/main",
        "REPO/branch/feature",
        "REPO/preupload/main",
    ],
)
def test_malformed_json_is_a_400_with_a_code(hub_server: HubServer, repo: str, route: str) -> None:
    method, _, path = route.rpartition(" ")
    url = path.replace("REPO", repo) if path.startswith("REPO") else f"{hub_server.url}{path}"
    for body in BAD_JSON:
        response = httpx.request(method or "POST", url, content=body, headers=alice(hub_server), timeout=60)
        if (
            response.status_code == 200
        ):  # a body that happens to be valid for this route (e.g. {} where all is optional)
            continue
        assert response.status_code in (400, 404, 409), (route, body[:40], response.status_code, response.text[:200])
        refused(response, response.status_code)


COMMIT_LINES = {
    "not json": "{nope",
    "an array": [1, 2],
    "a string": "just text",
    "a number": 7,
    "null": None,
    "no key": {"value": {}},
    "a key that is not a string": {"key": 5, "value": {}},
    "an LFS file": {"key": "lfsFile", "value": {"path": "x", "algo": "sha256", "oid": "0" * 64}},
    "no value": {"key": "file"},
    "a value that is a list": {"key": "file", "value": ["x"]},
    "no path": {"key": "file", "value": {"content": b64(b"x")}},
    "a path that is a number": {"key": "file", "value": {"path": 3, "content": b64(b"x")}},
    "no content": {"key": "file", "value": {"path": "x"}},
    "content that is a number": {"key": "file", "value": {"path": "x", "content": 12}},
    "bad base64": {"key": "file", "value": {"path": "x", "content": "!!!not base64!!!", "encoding": "base64"}},
    "an unknown encoding": {"key": "file", "value": {"path": "x", "content": "eA==", "encoding": "rot13"}},
    "a header that is a string": {"key": "header", "value": "summary"},
    "a summary that is a list": {"key": "header", "value": {"summary": ["a"]}},
    "a deleted folder without a path": {"key": "deletedFolder", "value": {}},
    "nested past the parser's depth": "[" * 100_000 + "]" * 100_000,
    "content that is not ASCII": {
        "key": "file",
        "value": {"path": "x", "content": "\u00e9t\u00e9", "encoding": "base64"},
    },
    "a NUL in the summary": {"key": "header", "value": {"summary": "one\u0000two"}},
    "a summary of 300,000 characters": {"key": "header", "value": {"summary": "s" * 300_000}},
}
TRAVERSALS = [
    "../escape.txt",
    "/etc/passwd",
    "a/../../b",
    ".git/config",
    "a/.git/hooks/x",
    "a\\..\\b",
    "a//b",
    ".",
    "a/./b",
    "nul\x00byte",
    "new\nline",
    "x" * 300,
    "a/" * 600 + "b",
    "",
    ".GIT/config",
    "GIT~1/config",
    "a/.Git./hooks/x",
    ".git /x",
    ".git::$INDEX_ALLOCATION/x",
]  # .git elsewhere


@pytest.mark.parametrize("shape", list(COMMIT_LINES))
def test_every_wrong_commit_line_is_a_400(hub_server: HubServer, repo: str, shape: str) -> None:
    body = ndjson({"key": "header", "value": {"summary": "bad"}}, COMMIT_LINES[shape])
    refused(httpx.post(f"{repo}/commit/main", content=body, headers=alice(hub_server)), 400, "InvalidRequest")


def test_paths_that_leave_the_repository_are_refused(hub_server: HubServer, repo: str) -> None:
    for path in TRAVERSALS:
        body = ndjson({"key": "file", "value": {"path": path, "content": b64(b"x"), "encoding": "base64"}})
        refused(httpx.post(f"{repo}/commit/main", content=body, headers=alice(hub_server)), 400, "InvalidPath")
    both = ndjson({"key": "file", "value": {"path": "README.md/inside", "content": b64(b"x")}})  # a file and a folder
    refused(httpx.post(f"{repo}/commit/main", content=both, headers=alice(hub_server)), 400, "InvalidPath")
    missing = ndjson({"key": "deletedFile", "value": {"path": "../../hub.db"}})
    refused(httpx.post(f"{repo}/commit/main", content=missing, headers=alice(hub_server)), 404, "EntryNotFound")
    refused(httpx.post(f"{repo}/commit/main", content=b"\xff\xfe\x00garbage", headers=alice(hub_server)), 400)
    files = httpx.get(f"{repo}/tree/main", params={"recursive": "true"}).json()
    assert [entry["path"] for entry in files] == ["README.md"]  # nothing was half-written


def test_a_commit_stores_each_name_literally_and_each_byte_as_sent(hub_server: HubServer) -> None:
    """Names that are git pathspecs ('*.txt' matched every .txt file and deleted them, ':!x' every file) and
    a committed .gitattributes (which rewrote line ends and text encodings) change nothing of what is stored."""
    headers = alice(hub_server)
    assert (
        httpx.post(f"{hub_server.url}/api/repos/create", json={"name": "literal"}, headers=headers).status_code == 200
    )
    repo = f"{hub_server.url}/api/models/alice/literal"

    def commit(files: dict[str, bytes]) -> None:
        body = ndjson(
            {"key": "header", "value": {"summary": "add"}},
            *({"key": "file", "value": {"path": path, "content": b64(data)}} for path, data in files.items()),
        )
        response = httpx.post(f"{repo}/commit/main", content=body, headers=headers, timeout=120)
        assert response.status_code == 200, response.text[:300]

    def stored() -> dict[str, bytes]:
        paths = [entry["path"] for entry in httpx.get(f"{repo}/tree/main", params={"recursive": "true"}).json()]
        return {path: httpx.get(f"{hub_server.url}/alice/literal/resolve/main/{path}").content for path in paths}

    expected = {
        "README.md": b"# literal\n",
        "a.txt": b"a",
        "keep/c.txt": b"c",
        ".gitattributes": b"*.txt text eol=crlf\n*.u16 working-tree-encoding=UTF-16\n* filter=lfs\n",
    }
    commit(expected)
    for name in ["*.txt", ":!nothing", ":(glob)**", ":/y", "[ak]*"]:
        commit({name: b"x"})
        expected[name] = b"x"
    odd = {"crlf.txt": b"line1\r\nline2\n", "lf.txt": b"one\ntwo\n", "text.u16": "hi".encode("utf-16")}
    commit(odd)
    assert stored() == {**expected, **odd}
    many = {f"many/{number:05d}-{'n' * 180}": b"m" for number in range(12_000)}  # 2.3 MB of names: past argv's limit
    commit(many)
    listed = httpx.get(f"{repo}/tree/main", params={"recursive": "true"}, timeout=60).json()
    assert len(listed) == len(expected) + len(odd) + len(many)


def test_front_matter_nested_past_the_parser_is_no_card_not_a_500(hub_server: HubServer) -> None:
    deep = "---\n" + "[" * 20_000 + "]" * 20_000 + "\n---\n# deep\n"
    checked = httpx.post(
        f"{hub_server.url}/api/validate-yaml", json={"content": deep, "repoType": "model"}, headers=alice(hub_server)
    )
    assert checked.status_code == 400 and checked.json()["errors"], checked.text[:200]
    headers = alice(hub_server)
    assert httpx.post(f"{hub_server.url}/api/repos/create", json={"name": "deep"}, headers=headers).status_code == 200
    body = ndjson({"key": "file", "value": {"path": "README.md", "content": b64(deep.encode())}})
    assert (
        httpx.post(f"{hub_server.url}/api/models/alice/deep/commit/main", content=body, headers=headers).status_code
        == 200
    )
    for path in ("/api/models/alice/deep", "/api/datasets/alice/deep", "/datasets/alice/deep"):
        assert httpx.get(f"{hub_server.url}{path}", timeout=60).status_code == 200, path


def test_a_card_renders_a_bounded_part_whatever_its_size(hub_server: HubServer) -> None:
    """A 4 MiB README rendered whole took 10 s of the server on every anonymous GET of its page."""
    from verihub.hub.pages import MAX_CARD_CHARS

    headers = alice(hub_server)
    card = "# big\n\n" + "Some *words* and `code`.\n\n" * (4 << 20 >> 5)
    for kind, name, path in (("model", "bigcard", "README.md"), ("dataset", "bigcard-results", "README.md")):
        created = httpx.post(f"{hub_server.url}/api/repos/create", json={"name": name, "type": kind}, headers=headers)
        assert created.status_code == 200, created.text
        body = ndjson({"key": "file", "value": {"path": path, "content": b64(card.encode())}})
        plural = "models" if kind == "model" else "datasets"
        assert (
            httpx.post(
                f"{hub_server.url}/api/{plural}/alice/{name}/commit/main", content=body, headers=headers, timeout=60
            ).status_code
            == 200
        )
        page = httpx.get(f"{hub_server.url}/datasets/alice/{name}", timeout=60)  # every repository's page
        assert page.status_code == 200, page.text[:200]
        assert "more characters; the README holds all of it" in page.text
        assert page.text.count("<em>words</em>") < MAX_CARD_CHARS // 20


def test_paths_info_costs_one_lookup_a_path(hub_server: HubServer) -> None:
    """60,000 asked paths against 5,000 files, anonymously: it scanned every file per path (about a minute)."""
    headers = alice(hub_server)
    assert httpx.post(f"{hub_server.url}/api/repos/create", json={"name": "wide"}, headers=headers).status_code == 200
    body = ndjson(
        *(
            {"key": "file", "value": {"path": f"d{number % 50}/f{number}", "content": b64(b"x")}}
            for number in range(5_000)
        )
    )
    assert (
        httpx.post(
            f"{hub_server.url}/api/models/alice/wide/commit/main", content=body, headers=headers, timeout=120
        ).status_code
        == 200
    )
    asked = "&".join([f"paths=n/{number}" for number in range(60_000)] + ["paths=d7", "paths=d7/f7"])
    start = time.perf_counter()
    found = httpx.post(
        f"{hub_server.url}/api/models/alice/wide/paths-info/main",
        content=asked,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        timeout=600,
    )
    assert found.status_code == 200, found.text[:200]
    assert [(entry["type"], entry["path"]) for entry in found.json()] == [("directory", "d7"), ("file", "d7/f7")]
    assert time.perf_counter() - start < 10  # a fraction of a second now; the scan took about a minute


def test_urls_that_climb_out_are_404s(hub_server: HubServer, repo: str) -> None:
    for path in [
        "/files/..%2F..%2Fhub.db",
        "/files/alice-x/..%2F..%2Fhub.db",
        "/files/alice-x/.hidden",
        "/files/alice-x/x.whl.json",
        "/files/..%2Findex/x",
        "/files/%2e%2e/%2e%2e",
        "/simple/..%2F/",
        "/simple/%2e%2e/",
        "/alice/sturdy/resolve/main/..%2F..%2F..%2Fhub.db",
        "/alice/sturdy/resolve/main/%2e%2e/%2e%2e/hub.db",
        "/alice/sturdy/resolve/..%2F..%2Frefs/README.md",
        "/api/models/alice/sturdy/tree/main/..%2F..",
        "/api/models/alice/..%2Fsturdy/refs",
        "/alice/sturdy/resolve/%00/README.md",
        "/nothing/here/at/all",
        "/simple/%00/",
        "/api/models/alice/sturdy/tree/main/%00",
        "/alice/sturdy/resolve/main/x%00",
    ]:  # NULs echoed back
        response = httpx.get(f"{hub_server.url}{path}")
        if 300 <= response.status_code < 400:  # the index normalizing a project name: nothing served
            continue
        assert response.status_code in (400, 404), (path, response.status_code, response.text[:200])
        refused(response, response.status_code)


def test_malformed_queries_and_credentials_are_4xx(hub_server: HubServer, repo: str) -> None:
    for query in ({"limit": "abc"}, {"limit": "-1"}, {"limit": "9" * 40}):
        refused(httpx.get(f"{hub_server.url}/api/models", params=query), 400, "InvalidRequest")
    refused(httpx.get(f"{repo}/tree/main", params={"recursive": "maybe"}), 400, "InvalidRequest")
    for header in ("Basic !!!", "Basic " + b64(b"\xff\xfe"), "Bearer", "Digest abc", "Bearer vh_not-a-token"):
        refused(httpx.get(f"{hub_server.url}/api/whoami-v2", headers={"Authorization": header}), 401, "Unauthorized")
        refused(httpx.get(f"{hub_server.url}/simple/", headers={"Authorization": header}), 401, "Unauthorized")
    refused(httpx.put(f"{hub_server.url}/api/models"), 405, "MethodNotAllowed")


def test_oversized_bodies_are_413(hub_server: HubServer, repo: str) -> None:
    big = b'{"name": "' + b"x" * (2 << 20) + b'"}'
    refused(
        httpx.post(f"{hub_server.url}/api/repos/create", content=big, headers=alice(hub_server)), 413, "BodyTooLarge"
    )

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(40):
            yield b" " * (64 << 10)

    refused(httpx.post(f"{repo}/tag/main", content=chunks(), headers=alice(hub_server)), 413, "BodyTooLarge")
    status, headers = raw_request(
        hub_server.url,
        "POST",
        "/api/models/alice/sturdy/commit/main",
        10 << 30,
        {"Authorization": f"Bearer {hub_server.tokens['alice']}"},
    )
    assert status == 413 and headers["x-error-code"] == "BodyTooLarge"


def raw_request(
    url: str, method: str, path: str, declared: int, headers: dict[str, str], sent: bytes = b"{", timeout_s: float = 10
) -> tuple[int, dict[str, str]]:
    """Send the request line, headers that declare ``declared`` bytes of body, and only ``sent`` of them;
    the server must answer without waiting for the rest."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout_s) as connection:
        lines = [
            f"{method} {path} HTTP/1.1",
            f"Host: {host}",
            f"Content-Length: {declared}",
            "Content-Type: application/json",
            *(f"{k}: {v}" for k, v in headers.items()),
        ]
        connection.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + sent)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = connection.recv(65536)
            if not chunk:
                break
            answer += chunk
    head = answer.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    return int(head[0].split()[1]), {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:])}


def test_writes_are_refused_before_their_bodies_are_read(hub_server: HubServer, repo: str) -> None:
    """Anonymous or foreign writes get 401/403 at once, whatever the body says and however big it claims to be."""
    bob = {"Authorization": f"Bearer {hub_server.tokens['bob']}"}
    for path in (
        "/api/models/alice/sturdy/commit/main",
        "/api/models/alice/sturdy/tag/main",
        "/api/models/alice/sturdy/preupload/main",
        "/api/repos/create",
    ):
        start = time.perf_counter()
        status, headers = raw_request(hub_server.url, "POST", path, 10 << 30, {})
        assert status == 401 and headers["x-error-code"] == "Unauthorized", path
        assert time.perf_counter() - start < 5
        if path != "/api/repos/create":
            status, headers = raw_request(hub_server.url, "POST", path, 10 << 30, bob)
            assert status == 403 and headers["x-error-code"] == "Forbidden", path
    for body in (b"{broken", b"\xff" * 100, b"[" * 50_000):  # malformed: still 401, not 400 (never parsed)
        refused(httpx.post(f"{hub_server.url}/api/repos/create", content=body), 401, "Unauthorized")
        refused(httpx.post(f"{repo}/tag/main", content=body), 401, "Unauthorized")
        refused(httpx.post(f"{repo}/tag/main", content=body, headers=bob), 403, "Forbidden")


def test_garbage_never_gets_a_500(hub_server: HubServer, repo: str) -> None:
    import random

    rng = random.Random(12)
    httpx.post(
        f"{hub_server.url}/api/repos/create", json={"name": "sturdy-data", "type": "dataset"}, headers=alice(hub_server)
    )
    routes = [
        ("POST", "/api/repos/create"),
        ("DELETE", "/api/repos/delete"),
        ("POST", "/api/validate-yaml"),
        ("POST", "/api/models/alice/sturdy/tag/main"),
        ("POST", "/api/models/alice/sturdy/branch/x"),
        ("POST", "/api/models/alice/sturdy/preupload/main"),
        ("POST", "/api/models/alice/sturdy/commit/main"),
        ("POST", "/api/models/alice/sturdy/paths-info/main"),
        ("GET", "/api/models/alice/sturdy/tree/main"),
        ("GET", "/simple/"),
        ("GET", "/api/models"),
        ("GET", "/api/datasets"),
        ("GET", "/"),
        ("POST", "/api/datasets/alice/sturdy-data/commit/main"),
        ("GET", "/api/datasets/alice/sturdy-data/tree/main"),
        ("GET", "/datasets/alice/sturdy-data"),
        ("GET", "/alice/sturdy"),
    ]
    for query in ("\0abc", "ab\0c", '"\0"', "NEAR(a", "*" * 300):  # what a search index's query syntax would choke on
        for path in ("/api/models", "/api/datasets", "/"):
            response = httpx.get(f"{hub_server.url}{path}", params={"search" if path != "/" else "q": query})
            assert response.status_code == 200, (path, query, response.text[:200])
    for _ in range(160):
        method, path = rng.choice(routes)
        body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300)))
        params = {rng.choice(["limit", "search", "recursive", "author", "filter"]): body[:20].decode("latin-1")}
        response = httpx.request(
            method,
            f"{hub_server.url}{path}",
            content=body,
            params=params,
            headers=alice(hub_server) if rng.random() < 0.8 else {},
        )
        assert response.status_code < 500, (method, path, body, response.text[:200])
        if response.status_code >= 400:
            refused(response, response.status_code)


# -- the event loop -------------------------------------------------------------------------------------


def test_slow_git_work_does_not_stall_other_requests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    from verihub.hub.server import create_app
    from verihub.hub.storage import HubStorage

    app = create_app(tmp_path / "data")
    original = HubStorage.refs

    def slow_refs(self: HubStorage, repo: Any) -> Any:
        time.sleep(2)  # a git call on a busy disk
        return original(self, repo)

    monkeypatch.setattr(HubStorage, "refs", slow_refs)
    app.state.hub.storage.create_repo(__import__("verihub.ids", fromlist=["RepoId"]).RepoId("alice", "slow"))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 30
        while not server.started and time.time() < deadline:
            time.sleep(0.05)
        slow = threading.Thread(target=lambda: httpx.get(f"{url}/api/models/alice/slow/refs", timeout=30))
        slow.start()
        time.sleep(0.3)
        start = time.perf_counter()
        assert httpx.get(f"{url}/simple/", timeout=30).status_code == 200
        assert time.perf_counter() - start < 1.0  # answered while the git call is still running
        slow.join()
    finally:
        server.should_exit = True
        thread.join(timeout=30)


# -- the client's side of the codes ----------------------------------------------------------------------


def test_the_client_raises_verihub_errors_from_the_codes(hub_server: HubServer, repo: str, tmp_path: Path) -> None:
    from verihub.hub.errors import ForbiddenError, RepoNotFoundError, UnauthorizedError
    from verihub.hub.remote import RemoteHub
    from verihub.ids import RepoId
    from verihub.spec.scaffold import init_env

    package = init_env("sturdy", "single-turn", tmp_path)
    with pytest.raises(ForbiddenError, match="bob cannot create repositories under alice"):
        RemoteHub(hub_server.url, hub_server.tokens["bob"]).push(package, owner="alice")
    with pytest.raises(UnauthorizedError):
        RemoteHub(hub_server.url, None).push(package, owner="alice")
    with pytest.raises(RepoNotFoundError):
        RemoteHub(hub_server.url, hub_server.tokens["bob"]).versions(RepoId("alice", "nowhere"))
