"""Releases are immutable and publishing is atomic: no ref can shadow a release tag, a release tag publishes
only its own version's files, published files are written once, and a publish cut short at any step (or
raced by another publisher) ends fully published, exactly once, with the bytes the tag holds, after a
retry or a restart."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx
import pytest

from conftest import JSON_INDEX, VERIHUB, HubServer, free_port, hf, wait_until_serving
from verihub.hub.build import PackageSource, bump_version
from verihub.hub.local import LocalHub
from verihub.ids import RepoId
from verihub.spec.scaffold import init_env

pytestmark = pytest.mark.slow


def with_version(source: Path, target: Path, version: str) -> Path:
    shutil.copytree(source, target)
    for name, pattern in (("environment.yaml", "version: 0.1.0"), ("pyproject.toml", 'version = "0.1.0"')):
        path = target / name
        path.write_text(path.read_text().replace(pattern, pattern.replace("0.1.0", version)))
    return target


def assert_fully_published(root: Path, repo: RepoId, versions: list[str]) -> None:
    """Every version's dist/ files are in the index exactly once, with the tag's bytes and their sha256, and
    pip finds them in the static index; nothing is left pending."""
    hub = LocalHub(root)
    project = f"{repo.owner}-{repo.name}"
    assert hub.versions(repo) == versions
    expected: dict[str, bytes] = {}
    for version in versions:
        commit = hub.storage.tag_target(repo, f"v{version}")
        assert commit is not None
        expected |= {
            e.path[5:]: hub.storage.read(repo, e.path, commit)
            for e in hub.storage.files(repo, commit)
            if e.path.startswith("dist/")
        }
    entries = hub.files.entries(project, "")
    assert sorted(entry.filename for entry in entries) == sorted(expected)
    for entry in entries:
        assert entry.sha256 == hashlib.sha256(expected[entry.filename]).hexdigest()
        assert hub.files.read(project, entry.filename) == expected[entry.filename]
    page = (root / "simple" / project / "index.html").read_text()
    assert all(page.count(f">{name}<") == 1 for name in expected)
    assert list((root / "journal").glob("*.json")) == []
    found = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-cache-dir",
            "-q",
            "-d",
            str(root / "downloaded"),
            "--index-url",
            hub.index_url,
            f"{project}=={versions[-1]}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert found.returncode == 0, found.stderr


# -- names ---------------------------------------------------------------------------------------------


def test_nothing_can_shadow_a_release_tag(hub_server: HubServer, tmp_path: Path) -> None:
    script = f"""
        import json, pathlib
        from huggingface_hub import HfApi, hf_hub_download, snapshot_download
        api = HfApi(token={hub_server.tokens["alice"]!r})
        api.create_repo("alice/shadow")
        api.upload_file(path_or_fileobj=b"release", path_in_repo="notes.txt", repo_id="alice/shadow")
        api.create_tag("alice/shadow", tag="v1.0.0")
        api.upload_file(path_or_fileobj=b"later", path_in_repo="notes.txt", repo_id="alice/shadow")
        api.create_branch("alice/shadow", branch="dev")
        api.create_repo("alice/bare")
        out = {{}}
        for name, call in {{
            "branch_named_like_the_tag": lambda: api.create_branch("alice/shadow", branch="v1.0.0"),
            "branch_named_like_a_future_release": lambda: api.create_branch("alice/shadow", branch="v2.0.0"),
            "first_commit_to_a_release_name": lambda: api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt",
                                                                      repo_id="alice/bare", revision="v1.0.0"),
            "tag_named_like_a_branch": lambda: api.create_tag("alice/shadow", tag="dev"),
            "same_version_other_spelling": lambda: api.create_tag("alice/shadow", tag="v1.0"),
            "unnormalized_release_tag": lambda: api.create_tag("alice/shadow", tag="v1.0.1-rc1"),
            "local_version_of_the_release": lambda: api.create_tag("alice/shadow", tag="v1.0.0+evil"),
        }}.items():
            try:
                call()
                out[name] = "accepted"
            except Exception as error:
                out[name] = error.response.status_code, error.response.headers.get("X-Error-Code")
        out["resolved"] = pathlib.Path(hf_hub_download("alice/shadow", "notes.txt", revision="v1.0.0")).read_text()
        snapshot = pathlib.Path(snapshot_download("alice/shadow", revision="v1.0.0"))
        out["snapshot"] = (snapshot / "notes.txt").read_text()
        out["branches"] = sorted(b.name for b in api.list_repo_refs("alice/shadow").branches)
        print(json.dumps(out))
    """
    out = hf(hub_server, script, tmp_path)
    assert out == {
        "branch_named_like_the_tag": [400, "InvalidRefName"],
        "branch_named_like_a_future_release": [400, "InvalidRefName"],
        "first_commit_to_a_release_name": [400, "InvalidRefName"],
        "tag_named_like_a_branch": [409, "RefExists"],
        "same_version_other_spelling": [409, "TagExists"],
        "unnormalized_release_tag": [400, "InvalidRefName"],
        "local_version_of_the_release": [400, "InvalidRefName"],
        "resolved": "release",
        "snapshot": "release",
        "branches": ["dev", "main"],
    }


def test_a_release_tag_publishes_only_its_own_version(hub_server: HubServer, tmp_path: Path) -> None:
    """dist/ still holding a (rebuilt, different) 1.0.0 wheel when v1.0.1 is tagged: 1.0.0 stays as published."""
    repo = RepoId("alice", "stable")
    package = init_env("stable", "single-turn", tmp_path)
    bump_version(package, "major")  # 1.0.0
    dist = package / "dist"
    dist.mkdir()
    first = PackageSource(package).build(repo).files
    for name, data in first.items():
        (dist / name).write_bytes(data)
    upload = f"""
        import json
        from huggingface_hub import HfApi
        api = HfApi(token={hub_server.tokens["alice"]!r})
        api.create_repo("alice/stable", exist_ok=True)
        api.upload_folder(folder_path={str(package)!r}, repo_id="alice/stable")
        api.create_tag("alice/stable", tag=TAG)
        print(json.dumps({{}}))
    """
    hf(hub_server, upload.replace("TAG", "'v1.0.0'"), tmp_path)
    (package / "README.md").write_text((package / "README.md").read_text() + "\nChanged after the release.\n")
    rebuilt = PackageSource(package).build(repo).files
    assert rebuilt.keys() == first.keys() and rebuilt != first
    for name, data in rebuilt.items():  # the old version's files, different bytes under the same names
        (dist / name).write_bytes(data)
    bump_version(package, "patch")  # 1.0.1
    for name, data in PackageSource(package).build(repo).files.items():
        (dist / name).write_bytes(data)
    hf(hub_server, upload.replace("TAG", "'v1.0.1'"), tmp_path)
    index = httpx.get(f"{hub_server.url}/simple/alice-stable/", headers=JSON_INDEX).json()
    assert index["versions"] == ["1.0.0", "1.0.1"]
    published = {entry["filename"]: entry["hashes"]["sha256"] for entry in index["files"]}
    assert len(published) == 4
    for name, data in first.items():
        assert published[name] == hashlib.sha256(data).hexdigest()
        assert httpx.get(f"{hub_server.url}/files/alice-stable/{name}").content == data


def test_published_files_are_written_once(tmp_path: Path) -> None:
    """A repository deleted and made again cannot publish other bytes under a published file name."""
    from verihub.hub.errors import FileConflictError

    hub = LocalHub(tmp_path / "hub")
    package = init_env("reborn", "single-turn", tmp_path)
    first = hub.push(package, owner="alice")
    wheel = next(name for name in first.files if name.endswith(".whl"))
    original = hub.files.read("alice-reborn", wheel)
    hub.storage.delete_repo(first.repo)
    (package / "README.md").write_text("# reborn\n\nOther content, same version.\n")
    with pytest.raises(FileConflictError, match="published files never change"):
        hub.push(package, owner="alice")
    assert hub.files.read("alice-reborn", wheel) == original
    with pytest.raises(FileConflictError):
        hub.files.put("alice-reborn", "0.1.0", wheel, original + b"!")


def test_a_version_published_before_a_delete_is_tagged_again_only_on_its_files(tmp_path: Path) -> None:
    """Deleted and made again, a repository could tag v0.1.0 on a commit without dist/: the hub's tag then
    served other content than the wheel pip installs as 0.1.0."""
    from verihub.hub.errors import FileConflictError

    hub = LocalHub(tmp_path / "hub")
    package = init_env("reborn", "single-turn", tmp_path)
    first = hub.push(package, owner="alice")
    dists = {f"dist/{name}": hub.files.read("alice-reborn", name) for name in first.files}
    hub.storage.delete_repo(first.repo)
    hub.storage.create_repo(first.repo)
    other = hub.storage.commit(first.repo, {"README.md": b"# other content\n"}, "no dist/")
    with pytest.raises(FileConflictError, match="was published before with"):
        hub.releases.tag(first.repo, "v0.1.0", other)
    wheel_only = {name: data for name, data in dists.items() if name.endswith(".whl")}
    partial = hub.storage.commit(first.repo, wheel_only, "the wheel, not the sdist")
    with pytest.raises(FileConflictError, match=r"\.tar\.gz"):
        hub.releases.tag(first.repo, "v0.1.0", partial)
    assert hub.storage.refs(first.repo)["tags"] == {}
    same = hub.storage.commit(first.repo, dists, "the files it was published with")
    assert hub.releases.tag(first.repo, "v0.1.0", same)  # making a deleted repository again is no crime


def test_a_version_with_a_local_part_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """pip's ==1.0.0 matches 1.0.0+evil and prefers it: a release with a local part shadows the release."""
    from verihub.errors import VerihubError
    from verihub.hub.errors import InvalidRefNameError

    hub = LocalHub(tmp_path / "hub")
    package = with_version(init_env("local", "single-turn", tmp_path / "made"), tmp_path / "local", "1.0.0+evil")
    with pytest.raises(VerihubError, match=r"build metadata \(\+evil\).*publish 1\.0\.0"):
        hub.push(package, owner="alice")
    assert hub.storage.repos() == []
    released = hub.push(with_version(package.parent / "made" / "local", tmp_path / "rc", "1.0.0-rc1"), owner="alice")
    assert released.version == "1.0.0rc1" and hub.versions(released.repo) == ["1.0.0rc1"]
    commit = hub.storage.tag_target(released.repo, "v1.0.0rc1")
    assert commit is not None
    with pytest.raises(InvalidRefNameError, match="no local part"):
        hub.releases.tag(released.repo, "v1.0.0rc1+evil", commit)


def test_a_name_held_by_a_private_repository_is_not_named(tmp_path: Path) -> None:
    from verihub.hub.errors import NameTakenError

    hub = LocalHub(tmp_path / "hub")
    package = init_env("b-c", "single-turn", tmp_path)
    holder = RepoId("alice-b", "c")
    hub.storage.create_repo(holder, private=True)
    hub.files.claim("alice-b-c", holder)
    commit_files = {
        f"dist/{name}": data for name, data in PackageSource(package).build(RepoId("alice", "b-c")).files.items()
    }
    hub.storage.create_repo(RepoId("alice", "b-c"))
    commit = hub.storage.commit(RepoId("alice", "b-c"), commit_files, "the same distribution name")
    with pytest.raises(NameTakenError) as refused:
        hub.releases.tag(RepoId("alice", "b-c"), "v0.1.0", commit)
    assert "another repository" in str(refused.value) and "alice-b/c" not in str(refused.value)
    hub.storage.write_settings(holder, private=False)
    with pytest.raises(NameTakenError, match="which alice-b/c already uses"):
        hub.releases.tag(RepoId("alice", "b-c"), "v0.1.0", commit)


# -- crashes -------------------------------------------------------------------------------------------


class Crash(Exception):
    pass


def crash_at(monkeypatch: pytest.MonkeyPatch, where: str, *, call: int = 1) -> None:
    """Make ``module:Class.method`` raise (before doing its work) on its ``call``-th call."""
    import importlib

    module, _, attribute = where.partition(":")
    class_name, _, method = attribute.partition(".")
    owner = getattr(importlib.import_module(module), class_name)
    original = getattr(owner, method)
    calls = {"n": 0}

    def broken(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == call:
            raise Crash(f"{owner.__name__}.{method}")
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, method, broken)


STEPS = {
    "before the tag": ("verihub.hub.storage:HubStorage.tag", {}),
    "after the tag, before any file": ("verihub.hub.release:Releases.complete", {}),
    "between the wheel and the sdist": ("verihub.hub.files:PublishedFiles.put", {"call": 2}),
    "after the files, before the index pages": ("verihub.hub.files:PublishedFiles.write_static_index", {}),
    "after the index pages, before the journal entry is cleared": ("verihub.hub.release:Releases._journal_done", {}),
}


@pytest.mark.parametrize("recovery", ["retry", "restart"])
@pytest.mark.parametrize("step", list(STEPS))
def test_a_publish_cut_short_is_completed(
    step: str, recovery: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, repo = tmp_path / "hub", RepoId("alice", "crash")
    package = init_env("crash", "single-turn", tmp_path)
    where, options = STEPS[step]
    with monkeypatch.context() as patch:
        crash_at(patch, where, **options)
        with pytest.raises(Crash):
            LocalHub(root).push(package, owner="alice")
    if recovery == "restart":
        from verihub.hub.server import create_app

        create_app(root)  # what `verihub hub serve` does first
        if LocalHub(root).versions(repo):  # the tag made it: the restart alone completes the release
            assert_fully_published(root, repo, ["0.1.0"])
    result = LocalHub(root).push(package, owner="alice")
    assert result.version == "0.1.0" and result.created == (step == "before the tag")
    assert_fully_published(root, repo, ["0.1.0"])


def test_a_server_restart_completes_a_release_cut_short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data, repo = tmp_path / "data", RepoId("alice", "restarted")
    package = init_env("restarted", "single-turn", tmp_path)
    with monkeypatch.context() as patch:
        crash_at(patch, "verihub.hub.release:Releases.complete")
        with pytest.raises(Crash):
            LocalHub(data).push(package, owner="alice")
    assert LocalHub(data).versions(repo) == ["0.1.0"] and LocalHub(data).files.entries("alice-restarted", "") == []
    port = free_port()
    process = subprocess.Popen([VERIHUB, "hub", "serve", "--port", str(port), "--data", str(data)])
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(f"{url}/simple/", timeout_s=60)
        index = httpx.get(f"{url}/simple/alice-restarted/", headers=JSON_INDEX).json()
        assert index["versions"] == ["0.1.0"] and len(index["files"]) == 2
        for entry in index["files"]:
            served = httpx.get(urljoin(f"{url}/simple/alice-restarted/", entry["url"])).content  # links are relative
            assert hashlib.sha256(served).hexdigest() == entry["hashes"]["sha256"]
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert_fully_published(data, repo, ["0.1.0"])


# -- concurrent publishers -----------------------------------------------------------------------------


def test_concurrent_publishers_end_consistent(tmp_path: Path) -> None:
    """Three threads push one version, two push two others, each through its own hub handle."""
    root, repo = tmp_path / "hub", RepoId("alice", "busy")
    same = init_env("busy", "single-turn", tmp_path)
    others = [with_version(same, tmp_path / f"busy-{version}", version) for version in ("0.2.0", "0.3.0")]
    results: list[Any] = []

    def push(path: Path) -> None:
        try:
            # validation loads datasets, which is not thread-safe; what is under test here is publishing
            results.append(LocalHub(root).push(path, owner="alice", validate=False))
        except BaseException as error:  # noqa: BLE001 - the thread's failure is kept for the assertion
            results.append(error)

    threads = [threading.Thread(target=push, args=(path,)) for path in [same, same, same, *others]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not [r for r in results if isinstance(r, BaseException)], results
    assert sorted((r.version, r.created) for r in results) == [
        ("0.1.0", False),
        ("0.1.0", False),
        ("0.1.0", True),
        ("0.2.0", True),
        ("0.3.0", True),
    ]
    assert_fully_published(root, repo, ["0.1.0", "0.2.0", "0.3.0"])


def test_concurrent_pushes_through_the_server_end_consistent(hub_server: HubServer, tmp_path: Path) -> None:
    same = init_env("racing", "single-turn", tmp_path)
    other = with_version(same, tmp_path / "racing-2", "0.2.0")
    common = ["--hub", hub_server.url, "--token", hub_server.tokens["alice"]]
    processes = [
        subprocess.Popen(
            [VERIHUB, "push", str(path), *common], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for path in (same, same, other)
    ]
    outputs = [process.communicate(timeout=300) for process in processes]
    texts = [" ".join(out.split()) for out, _ in outputs]
    assert all(process.returncode == 0 for process in processes), [error[-2000:] for _, error in outputs]
    # the loser of the race for v0.1.0 either finds it tagged, or (huggingface_hub skips a commit that changes
    # nothing) tags the winner's commit itself: both say the version holds exactly its content
    assert (
        all(
            (
                "published alice/racing@0.1.0" in text
                or "alice/racing@0.1.0 is already published with this content" in text
            )
            for text in texts[:2]
        )
        and "published alice/racing@0.2.0" in texts[2]
    ), texts
    index = httpx.get(f"{hub_server.url}/simple/alice-racing/", headers=JSON_INDEX).json()
    assert index["versions"] == ["0.1.0", "0.2.0"] and len(index["files"]) == 4
    refs = httpx.get(f"{hub_server.url}/api/models/alice/racing/refs").json()
    tags = {tag["name"]: tag["targetCommit"] for tag in refs["tags"]}
    for entry in index["files"]:
        version = entry["filename"].split("-")[1].removesuffix(".tar.gz")
        tagged = httpx.get(f"{hub_server.url}/alice/racing/resolve/{tags['v' + version]}/dist/{entry['filename']}")
        served = httpx.get(urljoin(f"{hub_server.url}/simple/alice-racing/", entry["url"])).content
        assert served == tagged.content and hashlib.sha256(served).hexdigest() == entry["hashes"]["sha256"]


def test_a_push_that_loses_the_race_for_its_tag(
    hub_server: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two pushes of one version both find it untagged; the one that tags second is a no-op if its content is
    the winner's and a VersionExistsError if not, never an HTTP error."""
    from verihub.hub.errors import VersionExistsError
    from verihub.hub.remote import RemoteHub

    barrier = threading.Barrier(3)
    original = RemoteHub._published
    first_look: set[int] = set()

    def published(self: RemoteHub, repo: RepoId, tag: str) -> Any:
        if threading.get_ident() not in first_look:  # both look before either tags
            first_look.add(threading.get_ident())
            barrier.wait(timeout=120)
            return None
        return original(self, repo, tag)

    monkeypatch.setattr(RemoteHub, "_published", published)
    same = init_env("contest", "single-turn", tmp_path)
    changed = shutil.copytree(same, tmp_path / "contest-changed")
    (changed / "README.md").write_text("# contest\n\nOther words, same version.\n")
    results: dict[str, Any] = {}

    def push(name: str, path: Path) -> None:
        try:
            results[name] = RemoteHub(hub_server.url, hub_server.tokens["alice"]).push(
                path, owner="alice", validate=False
            )
        except BaseException as error:  # noqa: BLE001 - the thread's failure is kept for the assertion
            results[name] = error

    threads = [
        threading.Thread(target=push, args=item) for item in (("first", same), ("second", same), ("changed", changed))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    outcomes = sorted(
        type(result).__name__ if isinstance(result, BaseException) else f"created={result.created}"
        for result in results.values()
    )
    if isinstance(results["changed"], BaseException):  # a same-content push tagged first
        assert isinstance(results["changed"], VersionExistsError), results
        # the other is a no-op (or, when huggingface_hub skips its commit as changing nothing, tags the winner's)
        assert outcomes in (
            ["VersionExistsError", "created=False", "created=True"],
            ["VersionExistsError", "created=True", "created=True"],
        ), results
    else:
        assert outcomes == ["VersionExistsError", "VersionExistsError", "created=True"], results
    index = httpx.get(f"{hub_server.url}/simple/alice-contest/", headers=JSON_INDEX).json()
    assert index["versions"] == ["0.1.0"] and len(index["files"]) == 2


def test_a_commit_on_a_stale_parent_is_refused(hub_server: HubServer, tmp_path: Path) -> None:
    """huggingface_hub's parent_commit is a compare-and-swap: what a push that replaces a branch's content
    relies on when another push commits between its listing and its commit."""
    script = f"""
        import json
        from huggingface_hub import CommitOperationAdd, HfApi
        api = HfApi(token={hub_server.tokens["alice"]!r})
        api.create_repo("alice/cas")
        first = api.upload_file(path_or_fileobj=b"1", path_in_repo="a.txt", repo_id="alice/cas").oid
        api.upload_file(path_or_fileobj=b"2", path_in_repo="b.txt", repo_id="alice/cas")
        try:
            api.create_commit("alice/cas", [CommitOperationAdd("c.txt", b"3")], commit_message="late",
                              parent_commit=first)
            out = "committed"
        except Exception as error:
            out = [error.response.status_code, error.response.headers.get("X-Error-Code")]
        print(json.dumps({{"stale": out, "files": sorted(api.list_repo_files("alice/cas"))}}))
    """
    assert hf(hub_server, script, tmp_path) == {"stale": [412, "CommitConflict"], "files": ["a.txt", "b.txt"]}


def test_a_push_never_tags_a_commit_that_is_not_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hub may answer an upload with its branch head (huggingface_hub does, for a commit that changes
    nothing), and a concurrent push may have moved that head to other content: the push checks before tagging."""
    hub, repo = LocalHub(tmp_path / "hub"), RepoId("alice", "moved")
    original = LocalHub._upload
    calls = {"n": 0}

    def moved_on(self: LocalHub, target: RepoId, files: dict[str, bytes], message: str) -> str:
        commit = original(self, target, files, message)
        calls["n"] += 1
        if calls["n"] == 1:  # someone else commits right after, and that is the head we are told about
            return self.storage.commit(target, {"README.md": b"# someone else's\n"}, "concurrent push")
        return commit

    monkeypatch.setattr(LocalHub, "_upload", moved_on)
    result = hub.push(init_env("moved", "single-turn", tmp_path), owner="alice")
    assert calls["n"] == 2 and result.created
    tagged = hub.storage.read(repo, "README.md", "v0.1.0")
    assert b"someone else's" not in tagged
    assert_fully_published(tmp_path / "hub", repo, ["0.1.0"])


def test_a_hub_directory_from_before_is_indexed_from_its_tags(tmp_path: Path) -> None:
    """Older hub directories kept claims in dists.json and no index entries: at start the index is derived
    from the release tags, the claims kept."""
    root, repo = tmp_path / "hub", RepoId("alice", "legacy")
    LocalHub(root).push(init_env("legacy", "single-turn", tmp_path), owner="alice")
    shutil.rmtree(root / "index")
    shutil.rmtree(root / "claims")
    (root / "dists.json").write_text(json.dumps({"alice-legacy": "alice/legacy", "bob-other": "bob/other"}))
    from verihub.hub.server import create_app

    create_app(root)
    assert_fully_published(root, repo, ["0.1.0"])
    assert (root / "claims" / "bob-other").read_text() == "bob/other" and not (root / "dists.json").exists()
