"""Git-backed hub storage: commits, history, refs, immutable tags, concurrent writers."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from verihub.hub.errors import InvalidRefNameError
from verihub.hub.storage import HubStorage, RepoExistsError, RepoNotFoundError, RevisionNotFoundError, TagExistsError
from verihub.ids import RepoId

REPO = RepoId("alice", "code-repair")


@pytest.fixture
def storage(tmp_path: Path) -> HubStorage:
    hub = HubStorage(tmp_path / "hub")
    hub.create_repo(REPO)
    return hub


def test_commits_history_and_files(storage: HubStorage) -> None:
    first = storage.commit(REPO, {"environment.yaml": b"id: x\n", "data/tasks.jsonl": b"{}\n"}, "v1")
    second = storage.commit(REPO, {"README.md": b"# card\n"}, "add card", delete=("data/tasks.jsonl",))
    assert len(first) == 40 and first != second
    assert [c.message for c in storage.history(REPO)] == ["add card", "v1"]
    assert storage.history(REPO)[0].parents == (first,)
    assert [f.path for f in storage.files(REPO)] == ["README.md", "environment.yaml"]
    assert [f.path for f in storage.files(REPO, first)] == ["data/tasks.jsonl", "environment.yaml"]
    assert storage.read(REPO, "environment.yaml", first[:10]) == b"id: x\n"
    with pytest.raises(FileNotFoundError):
        storage.read(REPO, "data/tasks.jsonl")
    replaced = storage.commit(REPO, {"only.txt": b"1"}, "replace", replace=True)
    assert [f.path for f in storage.files(REPO, replaced)] == ["only.txt"]


def test_tags_are_immutable(storage: HubStorage) -> None:
    first = storage.commit(REPO, {"a": b"1"}, "one")
    assert storage.tag(REPO, "v1.0.0") is True
    assert storage.tag(REPO, "v1.0.0") is False  # same commit: a no-op
    storage.commit(REPO, {"a": b"2"}, "two")
    with pytest.raises(TagExistsError, match="tags never move"):
        storage.tag(REPO, "v1.0.0")
    assert storage.resolve(REPO, "v1.0.0") == first
    storage.create_branch(REPO, "dev", "v1.0.0")
    refs = storage.refs(REPO)
    assert refs["tags"] == {"v1.0.0": first} and set(refs["branches"]) == {"main", "dev"}


def test_errors_name_what_exists(storage: HubStorage, tmp_path: Path) -> None:
    with pytest.raises(RepoExistsError):
        storage.create_repo(REPO)
    assert storage.create_repo(REPO, exist_ok=True) is False
    with pytest.raises(RepoNotFoundError, match="did you mean alice/code-repair"):
        storage.files(RepoId("alice", "code-repiar"))
    storage.create_repo(RepoId("alice", "topsecret"), private=True)
    with pytest.raises(RepoNotFoundError) as missing:  # never a private name: the message reaches any caller
        storage.files(RepoId("bob", "topsecret"))
    assert "alice" not in str(missing.value)
    storage.commit(REPO, {"a": b"1"}, "one")
    with pytest.raises(RevisionNotFoundError, match="no revision 'v9'"):
        storage.resolve(REPO, "v9")
    for bad in ("../escape", "/abs", "a/../b", ".git/config", "a//b"):
        with pytest.raises(ValueError, match="must be relative"):
            storage.commit(REPO, {bad: b"x"}, "bad")


def test_concurrent_writers_lose_nothing(storage: HubStorage) -> None:
    errors: list[BaseException] = []

    def push(number: int) -> None:
        try:
            storage.commit(REPO, {f"file{number}.txt": str(number).encode()}, f"push {number}")
        except BaseException as error:  # noqa: BLE001 - the thread's failure is kept for the assertion
            errors.append(error)

    threads = [threading.Thread(target=push, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(storage.history(REPO)) == 12
    assert {f.path for f in storage.files(REPO)} == {f"file{n}.txt" for n in range(12)}


def test_listing_and_deleting(storage: HubStorage) -> None:
    storage.create_repo(RepoId("acme", "rules"))
    assert storage.repos() == [RepoId("acme", "rules"), REPO]
    storage.delete_repo(REPO)
    assert not storage.exists(REPO) and storage.repos() == [RepoId("acme", "rules")]


def test_repositories_of_the_layout_before_datasets_are_moved_whole(tmp_path: Path) -> None:
    """A hub directory where environments and verifier packages were models (repos/env, repos/verifier) opens
    with every repository among the datasets, history, tags and settings as they were."""
    root = tmp_path / "old"
    storage = HubStorage(root)
    storage.create_repo(REPO, private=True)
    first = storage.commit(REPO, {"environment.yaml": b"id: x"}, "one")
    storage.tag(REPO, "v1.0.0")
    rules = RepoId("acme", "rules")
    storage.create_repo(rules)
    storage.commit(rules, {"pyproject.toml": b"[project]"}, "rules")
    (root / "repos" / "env" / REPO.owner).mkdir(parents=True)
    (root / "repos" / "verifier" / "acme").mkdir(parents=True)
    (root / "repos" / "dataset" / REPO.owner / f"{REPO.name}.git").rename(
        root / "repos" / "env" / REPO.owner / f"{REPO.name}.git"
    )
    (root / "repos" / "dataset" / "acme" / "rules.git").rename(root / "repos" / "verifier" / "acme" / "rules.git")
    assert HubStorage(root).repos() == [rules, REPO]  # moved back into place by opening it
    reopened = HubStorage(root)
    assert reopened.resolve(REPO, "v1.0.0") == first and reopened.is_private(REPO)
    assert not [path for kind in ("env", "verifier") for path in (root / "repos" / kind).glob("*/*.git")]


def test_revisions_resolve_tags_first_in_one_lookup(storage: HubStorage, tmp_path: Path) -> None:
    """Tags, then branches, then hex ids; an annotated tag (a repository pushed into the directory with git)
    peels to its commit; nothing else resolves."""
    import subprocess

    first = storage.commit(REPO, {"a": b"1"}, "one")
    second = storage.commit(REPO, {"a": b"2"}, "two")
    git = storage.root / "repos" / "dataset" / REPO.owner / f"{REPO.name}.git"
    env = {"GIT_COMMITTER_NAME": "x", "GIT_COMMITTER_EMAIL": "x@x", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "tag", "-a", "-m", "annotated", "v0.9.0", first], cwd=git, check=True, env=env)
    subprocess.run(["git", "update-ref", "refs/heads/shadow", second], cwd=git, check=True)
    subprocess.run(["git", "update-ref", "refs/tags/shadow", first], cwd=git, check=True)  # from before the rule
    assert storage.resolve(REPO, "v0.9.0") == first and storage.resolve(REPO, "shadow") == first
    assert storage.resolve(REPO, "main") == second and storage.resolve(REPO, second[:8]) == second
    assert storage.resolve(REPO, first) == first and storage.commit_time(REPO, first) > 0
    for missing in ("v9", "refs/heads/main", "0" * 40, "sha*", "main^", "-h"):
        with pytest.raises(RevisionNotFoundError):
            storage.resolve(REPO, missing)


def test_no_ref_may_take_a_commit_id_for_a_name(storage: HubStorage) -> None:
    """A full commit id resolves to that commit in one git call: so no tag or branch may be named like one
    (it would be a ref that the commit id shadows)."""
    first = storage.commit(REPO, {"a": b"1"}, "one")
    second = storage.commit(REPO, {"a": b"2"}, "two")
    with pytest.raises(InvalidRefNameError, match="40-hex commit id"):
        storage.tag(REPO, first, second)
    with pytest.raises(InvalidRefNameError, match="40-hex commit id"):
        storage.create_branch(REPO, second, first)
    assert storage.refs(REPO) == {"branches": {"main": second}, "tags": {}}
    assert storage.resolve(REPO, first) == first and storage.tag(REPO, "v1.0.0", first)


def test_a_commit_id_of_a_deleted_repository_does_not_resolve_in_its_successor(storage: HubStorage) -> None:
    """Commit ids are remembered per repository directory once checked: a repository deleted and made again
    under its name is another directory, where the old commits do not resolve."""
    import subprocess

    old = storage.commit(REPO, {"a": b"1"}, "one")
    assert storage.resolve(REPO, old) == old and storage.resolve(REPO, old) == old
    git = storage.root / "repos" / "dataset" / REPO.owner / f"{REPO.name}.git"
    env = {"GIT_COMMITTER_NAME": "x", "GIT_COMMITTER_EMAIL": "x@x", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "tag", "-a", "-m", "annotated", "v0.9.0", old], cwd=git, check=True, env=env)
    tag_object = subprocess.run(
        ["git", "rev-parse", "refs/tags/v0.9.0"], cwd=git, check=True, capture_output=True, text=True
    ).stdout.strip()
    assert tag_object != old and storage.resolve(REPO, tag_object) == old == storage.resolve(REPO, tag_object)
    storage.delete_repo(REPO)
    storage.create_repo(REPO)
    for gone in (old, tag_object):
        with pytest.raises(RevisionNotFoundError):
            storage.resolve(REPO, gone)
    new = storage.commit(REPO, {"b": b"2"}, "two")
    assert storage.resolve(REPO, new) == new and storage.files(REPO, new)[0].path == "b"
