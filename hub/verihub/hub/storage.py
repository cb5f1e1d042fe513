"""Git-backed repository storage: 40-hex commit ids, history, branches and immutable version tags.

One bare git repository per hub repository, driven by the ``git`` command (plumbing only, with a
temporary index, so no work tree is ever checked out). Writers to one repository serialize on a file
lock and move the branch with compare-and-swap, so two pushes never lose each other's commits.

The repository directory is the truth about a repository: it exists or not (created and deleted by an
atomic rename), and ``verihub.json`` inside it says whether it is private. Every repository is a dataset, as the
Hugging Face Hub files RL environments (what it holds, an environment, a verifier package or eval results, is
read off its files: :mod:`verihub.hub.roles`); directories of the layout before that (``repos/env``,
``repos/verifier``) are moved into place when the storage is opened.
Ref names cannot shadow each other: a branch may not take a tag's name or a release tag's (``v1.2.0``),
a tag may not take a branch's, and revisions resolve tags first.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from verihub.errors import FileMissingError, VerihubError
from verihub.hub.errors import (
    CommitConflictError,
    InvalidPathError,
    InvalidRefNameError,
    InvalidRequestError,
    RefExistsError,
    RepoExistsError,
    RepoNotFoundError,
    RevisionNotFoundError,
    TagExistsError,
)
from verihub.hub.ids import is_release_like, release_version
from verihub.ids import RepoId

__all__ = [
    "Commit",
    "FileEntry",
    "HubStorage",
    "RepoExistsError",
    "RepoNotFoundError",
    "RevisionNotFoundError",
    "TagExistsError",
]

_DATASETS = "dataset"  # repos/dataset/<owner>/<name>.git
_LEGACY_KINDS = ("env", "verifier")  # where environments and verifier packages lived when they were models
_AUTHOR = {
    "GIT_AUTHOR_NAME": "verihub",
    "GIT_AUTHOR_EMAIL": "hub@verihub.invalid",
    "GIT_COMMITTER_NAME": "verihub",
    "GIT_COMMITTER_EMAIL": "hub@verihub.invalid",
}
_SETTINGS = "verihub.json"  # inside the bare repository: {"private": bool}
_HEX = re.compile(r"^[0-9a-f]{4,40}$")
_COMMIT_ID = re.compile(r"^[0-9a-f]{40}$")
MAX_MESSAGE_CHARS = 65_536  # a commit message (summary and description)
_REF_NAME = re.compile(r"^[A-Za-z0-9._+-]+(?:/[A-Za-z0-9._+-]+)*$")


@dataclass(frozen=True)
class Commit:
    sha: str
    message: str
    timestamp: int
    parents: tuple[str, ...]


@dataclass(frozen=True)
class FileEntry:
    path: str
    size: int
    blob: str  # git blob id


class HubStorage:
    """Repositories under ``root``: ``root/repos/dataset/<owner>/<name>.git``."""

    def __init__(self, root: str | Path) -> None:
        if shutil.which("git") is None:
            raise VerihubError("the hub stores repositories with git, which is not installed (apt-get install git)")
        self.root = Path(root)
        (self.root / "repos").mkdir(parents=True, exist_ok=True)
        (self.root / "locks").mkdir(exist_ok=True)
        self._move_legacy_repos()

    # -- repositories ---------------------------------------------------------------------------------

    def create_repo(
        self,
        repo: RepoId,
        *,
        private: bool = False,
        exist_ok: bool = False,
        then: Callable[[], None] | None = None,
    ) -> bool:
        """Create ``repo``; False if it exists already (with ``exist_ok``). It appears whole, settings
        included, or not at all: it is built aside and renamed into place. ``then`` runs once it exists, under
        the repository's lock (what is derived from it, so a concurrent delete cannot come in between)."""
        with self._locked(repo):
            if self.exists(repo):
                if exist_ok:
                    return False
                raise RepoExistsError(f"{repo} already exists")
            path = self._path(repo)
            path.parent.mkdir(parents=True, exist_ok=True)
            scratch = Path(tempfile.mkdtemp(prefix=".new-", dir=self.root / "repos"))
            try:
                _git(scratch, "init", "--bare", "--quiet", "--initial-branch=main", "repo.git")
                _write_atomic(scratch / "repo.git" / _SETTINGS, json.dumps({"private": private}).encode())
                os.rename(scratch / "repo.git", path)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            if then is not None:
                then()
            return True

    def delete_repo(self, repo: RepoId, *, first: Callable[[], None] | None = None) -> None:
        """Delete ``repo`` (RepoNotFoundError if a concurrent delete came first); ``first`` runs before, under
        the repository's lock (forget what is derived from it: a crash after it leaves a repository the start
        lists again, never a listing without its repository)."""
        with self._locked(repo):
            self._require(repo)
            if first is not None:
                first()
            trash = Path(tempfile.mkdtemp(prefix=".trash-", dir=self.root / "repos"))
            os.rename(self._path(repo), trash / "repo.git")  # gone at once, then cleaned up
            shutil.rmtree(trash, ignore_errors=True)

    def is_private(self, repo: RepoId) -> bool:
        """Whether ``repo`` (which must exist) is private."""
        settings = self._require(repo) / _SETTINGS
        try:
            return bool(json.loads(settings.read_bytes()).get("private"))
        except FileNotFoundError:  # no settings (public), or a delete that moved the repository away meanwhile
            self._require(repo)
            return False

    def has_settings(self, repo: RepoId) -> bool:
        return (self._require(repo) / _SETTINGS).is_file()

    def write_settings(self, repo: RepoId, *, private: bool) -> None:
        """Record a repository's visibility (for repositories made before settings were kept here)."""
        with self._locked(repo):
            _write_atomic(self._require(repo) / _SETTINGS, json.dumps({"private": private}).encode())

    def exists(self, repo: RepoId) -> bool:
        return self._path(repo).is_dir()

    def repos(self) -> list[RepoId]:
        found = []
        for path in sorted((self.root / "repos" / _DATASETS).glob("*/*.git")):
            owner, name = path.parent.name, path.name.removesuffix(".git")
            try:
                repo = RepoId(owner, name)
            except ValueError:
                continue
            if (repo.owner, repo.name) == (owner, name):  # a directory not in canonical spelling is not one
                found.append(repo)
        return found

    # -- writing --------------------------------------------------------------------------------------

    def commit(
        self,
        repo: RepoId,
        files: Mapping[str, bytes],
        message: str,
        *,
        branch: str = "main",
        delete: tuple[str, ...] = (),
        replace: bool = False,
        parent: str | None = None,
    ) -> str:
        """Add or change ``files`` (path -> content) and remove ``delete`` on ``branch``; with ``replace``
        the commit holds exactly ``files``; with ``parent``, CommitConflictError unless the branch is still
        there. Returns the new commit's id."""
        path = self._require(repo)
        for name in [*files, *delete]:
            _check_path(name)
        _check_message(message)
        with self._locked(repo), tempfile.TemporaryDirectory(prefix="verihub-commit-") as scratch:
            env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            head = self._ref(path, f"refs/heads/{branch}")
            if parent is not None and head != parent:
                raise CommitConflictError(
                    f"{repo}: {branch} is at {(head or 'nothing')[:12]}, not {parent[:12]}: another commit came first"
                )
            if head is None:
                self._check_new_branch(path, branch)
            kept = set() if replace or head is None else {entry.path for entry in self._entries(path, head)}
            _check_layout((kept - set(delete)) | set(files))
            if head and not replace:
                _git(path, "read-tree", head, env=env)
            # Plumbing that takes every name literally and stores the bytes as sent: `git add` would read a
            # name as a pathspec ('*.txt' adds every .txt file) and apply a committed .gitattributes (eol,
            # working-tree-encoding), and a command line of every name can outgrow the kernel's limit.
            blobs = _write_blobs(path, Path(scratch), list(files.values()))
            entries = [f"100644 {blob}\t{name}" for name, blob in zip(files, blobs, strict=True)]
            entries += [f"0 {'0' * 40}\t{name}" for name in delete if name not in files]
            if entries:
                _git(path, "update-index", "--add", "-z", "--index-info", env=env, stdin="\0".join(entries) + "\0")
            tree = _git(path, "write-tree", env=env).strip()
            command = ["commit-tree", tree] + (["-p", head] if head else [])  # the message on stdin: any length
            sha = _git(path, *command, env={**env, **_AUTHOR}, stdin=message).strip()
            # compare-and-swap: fails if the branch moved under us (it cannot, under the lock)
            _git(path, "update-ref", f"refs/heads/{branch}", sha, head or "0" * 40)
            _seen_commits(path).add(sha)
            return sha

    def tag(self, repo: RepoId, tag: str, revision: str = "main") -> bool:
        """Point ``tag`` at ``revision``; False if it already points there; TagExistsError if elsewhere.
        A release tag must be normalized (``v1.0.0rc1``, not ``v1.0.0-rc1``) and name a version no other
        release tag names (``v1.0`` and ``v1.0.0`` are one version)."""
        path = self._require(repo)
        _check_ref_name(tag, "tag")
        with self._locked(repo):
            sha = self.resolve(repo, revision)
            refs = self.refs(repo)  # every ref in one git call: the tag, a branch of its name, same-version tags
            existing = refs["tags"].get(tag)
            if existing == sha:
                return False
            if existing is not None:
                raise TagExistsError(
                    f"{repo}: tag {tag!r} already exists (at {existing[:12]}) and tags never move", commit=existing
                )
            if tag in refs["branches"]:
                raise RefExistsError(f"{repo}: {tag!r} is a branch; a tag may not take a branch's name")
            if is_release_like(tag):
                version = release_version(tag)
                if Version(tag[1:]).local is not None:  # pip's ==1.0.0 would install v1.0.0+x over v1.0.0
                    raise InvalidRefNameError(f"release tag {tag!r}: a release version has no local part (+...)")
                if version is None:
                    raise InvalidRefNameError(
                        f"release tag {tag!r}: write the version normalized, as v{_normalized(tag[1:])}"
                    )
                same = [other for other in refs["tags"] if _same_version(other, version)]
                if same:
                    raise TagExistsError(f"{repo}: version {version} is already tagged {same[0]!r}")
            _git(path, "update-ref", f"refs/tags/{tag}", sha, "0" * 40)
            return True

    def create_branch(self, repo: RepoId, branch: str, revision: str = "main") -> None:
        path = self._require(repo)
        with self._locked(repo):
            if self._ref(path, f"refs/heads/{branch}") is not None:
                raise RefExistsError(f"{repo}: branch {branch!r} already exists")
            self._check_new_branch(path, branch)
            _git(path, "update-ref", f"refs/heads/{branch}", self.resolve(repo, revision), "0" * 40)

    # -- reading --------------------------------------------------------------------------------------

    def refs(self, repo: RepoId) -> dict[str, dict[str, str]]:
        """``{"branches": {name: sha}, "tags": {name: sha}}``."""
        path = self._require(repo)
        out = _git(path, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/tags")
        found: dict[str, dict[str, str]] = {"branches": {}, "tags": {}}
        for line in out.splitlines():
            name, sha = line.split()
            kind, _, short = name.removeprefix("refs/").partition("/")
            found["branches" if kind == "heads" else "tags"][short] = sha
        return found

    def tag_times(self, repo: RepoId) -> dict[str, tuple[str, int]]:
        """``{tag: (commit, commit time)}``: what a version history shows, in one git call."""
        path = self._require(repo)
        out = _git(
            path, "for-each-ref", "--format=%(refname:strip=2)%00%(objectname)%00%(committerdate:unix)", "refs/tags"
        )
        found = {}
        for line in out.splitlines():
            name, sha, stamp = line.split("\0")
            found[name] = (sha, int(stamp or 0))
        return found

    def added_at(self, repo: RepoId, name: str, revision: str = "main") -> int | None:
        """When the commit that added the file ``name`` (as of ``revision``) was made."""
        path = self._require(repo)
        _check_path(name)
        out = _git(path, "log", "--diff-filter=A", "--format=%ct", "-1", self.resolve(repo, revision), "--", name)
        return int(out.strip()) if out.strip() else None

    def resolve(self, repo: RepoId, revision: str = "main") -> str:
        """The commit id of a full commit id, a tag, a branch or an abbreviated hex commit id, in that order:
        no ref may be named like a full commit id, and a tag never moves, so nothing can shadow a tag."""
        path = self._require(repo)
        if _COMMIT_ID.match(revision):  # a full commit id, which no ref name may be: checked once per repository
            seen = _seen_commits(path)
            if revision in seen:
                return revision
            result = subprocess.run(
                ["git", "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"],
                cwd=path,
                capture_output=True,
                text=True,
            )
            if result.returncode == 0:
                commit = result.stdout.strip()
                if commit == revision:  # (an annotated tag's object id peels to another: not remembered)
                    seen.add(commit)
                return commit
        candidates = [f"refs/tags/{revision}", f"refs/heads/{revision}"] if _REF_NAME.match(revision) else []
        if candidates:  # both refs in one git call (a ref name has no glob characters: patterns match exactly)
            found: dict[str, tuple[str, str]] = {}
            out = _git(path, "for-each-ref", "--format=%(refname)%00%(objecttype)%00%(objectname)", *candidates)
            for line in out.splitlines():
                name, kind, sha = line.split("\0")
                found[name] = kind, sha
            for ref in candidates:
                if ref in found and found[ref][0] == "commit":
                    _seen_commits(path).add(found[ref][1])
                    return found[ref][1]
                if ref in found:  # an annotated tag: peeled by rev-parse below
                    break
            candidates = [ref for ref in candidates if ref in found]
        for candidate in candidates + ([revision] if _HEX.match(revision) else []):
            result = subprocess.run(
                ["git", "rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}"],
                cwd=path,
                capture_output=True,
                text=True,
            )
            if result.returncode == 0:
                return result.stdout.strip()
        raise RevisionNotFoundError(f"{repo} has no revision {revision!r}")

    def commit_time(self, repo: RepoId, revision: str = "main") -> int:
        """When the commit ``revision`` names was made (one git call, whatever the length of the history)."""
        path = self._require(repo)
        return int(_git(path, "log", "-1", "--format=%ct", self.resolve(repo, revision)).strip())

    def tag_target(self, repo: RepoId, tag: str) -> str | None:
        """The commit ``tag`` points at, None if there is no such tag (branches never count)."""
        return self._ref(self._require(repo), f"refs/tags/{tag}") if _REF_NAME.match(tag) else None

    def files(self, repo: RepoId, revision: str = "main") -> list[FileEntry]:
        path = self._require(repo)
        return self._entries(path, self.resolve(repo, revision))

    def read(self, repo: RepoId, name: str, revision: str = "main") -> bytes:
        path = self._require(repo)
        sha = self.resolve(repo, revision)
        result = subprocess.run(["git", "cat-file", "blob", f"{sha}:{name}"], cwd=path, capture_output=True)
        if result.returncode != 0:
            raise FileMissingError(f"{repo}@{revision[:12]} has no file {name!r}")
        return result.stdout

    def read_prefix(self, repo: RepoId, name: str, revision: str, limit: int) -> bytes:
        """At most the first ``limit`` bytes of a file (a preview of a file that may be large)."""
        path = self._require(repo)
        sha = self.resolve(repo, revision)
        with subprocess.Popen(
            ["git", "cat-file", "blob", f"{sha}:{name}"], cwd=path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        ) as process:
            assert process.stdout is not None
            data = process.stdout.read(limit)
            process.kill()
        return data

    def history(self, repo: RepoId, revision: str = "main") -> list[Commit]:
        path = self._require(repo)
        out = _git(path, "log", "--format=%H%x00%P%x00%ct%x00%B%x1e", self.resolve(repo, revision))
        commits = []
        for record in out.split("\x1e"):
            if record.strip():
                sha, parents, stamp, message = record.strip("\n").split("\0", 3)
                commits.append(Commit(sha, message.strip(), int(stamp), tuple(parents.split())))
        return commits

    # -- internals ------------------------------------------------------------------------------------

    def _path(self, repo: RepoId) -> Path:
        return self.root / "repos" / _DATASETS / repo.owner / f"{repo.name}.git"

    def _require(self, repo: RepoId) -> Path:
        """The directory of ``repo``; RepoNotFoundError if there is none."""
        path = self._path(repo)
        if not path.is_dir():
            # Suggest public names only: the message reaches whoever asked, who may not see private ones.
            known = [str(each) for each in self.repos() if not self.is_private(each)]
            close = repo.close_matches(known)
            raise RepoNotFoundError(f"no repository {repo}" + (f"; did you mean {', '.join(close)}?" if close else ""))
        return path

    def _move_legacy_repos(self) -> None:
        """Move the repositories of the layout where environments and verifier packages were models
        (``repos/env``, ``repos/verifier``) among the datasets: one rename each, under the repository's lock, so a
        crash leaves each repository in one place or the other, and the next open moves what is left."""
        for kind in _LEGACY_KINDS:
            for legacy in sorted((self.root / "repos" / kind).glob("*/*.git")):
                try:
                    repo = RepoId(legacy.parent.name, legacy.name.removesuffix(".git"))
                except ValueError:
                    continue
                with self._locked(repo):
                    target = self._path(repo)
                    if legacy.is_dir() and not target.exists():
                        target.parent.mkdir(parents=True, exist_ok=True)
                        os.rename(legacy, target)

    def _check_new_branch(self, path: Path, branch: str) -> None:
        _check_ref_name(branch, "branch")
        if is_release_like(branch):
            raise InvalidRefNameError(f"branch name {branch!r} is reserved: names v<version> are release tags")
        if self._ref(path, f"refs/tags/{branch}") is not None:
            raise RefExistsError(f"{branch!r} is a tag; a branch may not take a tag's name")

    @staticmethod
    def _entries(path: Path, sha: str) -> list[FileEntry]:
        """The files of the commit ``sha`` (a commit's files never change: listed once per repository)."""
        return list(_listing(path, _directory_key(path), sha))

    @staticmethod
    def _ref(path: Path, ref: str) -> str | None:
        result = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", ref], cwd=path, capture_output=True, text=True
        )
        return result.stdout.strip() if result.returncode == 0 else None

    @contextmanager
    def _locked(self, repo: RepoId) -> Iterator[None]:
        lock = self.root / "locks" / f"{repo.owner}--{repo.name}.lock"
        with lock.open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


# What is known of a repository directory's commits: which ids are commits, and each listed commit's files.
# A commit never changes and is never removed from a repository, and a deleted (or recreated) repository is
# another directory (device, inode and change time), so an entry never goes stale. It saves git processes
# on nearly every request that names a commit.
_DirectoryKey = tuple[int, int, int]
_SEEN_COMMITS: dict[_DirectoryKey, set[str]] = {}
_SEEN_LIMIT = 4096  # directories remembered; past it the memory starts over


def _directory_key(path: Path) -> _DirectoryKey:
    status = path.stat()
    return status.st_dev, status.st_ino, status.st_ctime_ns


@functools.lru_cache(maxsize=256)  # commits' file lists kept
def _listing(path: Path, directory: _DirectoryKey, sha: str) -> tuple[FileEntry, ...]:
    """``git ls-tree`` of a commit; ``directory`` (the repository directory's identity) is part of the key."""
    found = []
    for record in _git(path, "ls-tree", "-r", "-l", "-z", sha).split("\0"):
        if record:
            meta, name = record.split("\t", 1)
            _, kind, blob, size = meta.split()
            if kind == "blob":
                found.append(FileEntry(name, int(size), blob))
    return tuple(found)


def _seen_commits(path: Path) -> set[str]:
    key = _directory_key(path)
    seen = _SEEN_COMMITS.get(key)
    if seen is None:
        if len(_SEEN_COMMITS) >= _SEEN_LIMIT:
            _SEEN_COMMITS.clear()
        seen = _SEEN_COMMITS[key] = set()
    return seen


def _check_path(name: str) -> None:
    parts = name.split("/")
    if (
        not name
        or name.startswith("/")
        or any(part in ("", ".", "..") or _is_dot_git(part) for part in parts)
        or "\\" in name
        or not name.isprintable()
        or len(name) > 1024
        or any(len(part.encode()) > 255 for part in parts)
    ):
        raise InvalidPathError(
            f"file path {name[:200]!r} must be relative, without '..', '.git', empty parts or "
            "control characters, each part at most 255 bytes"
        )


def _is_dot_git(part: str) -> bool:
    """A name some file system reads as ``.git`` (git refuses them all: any case, trailing dots or spaces, the
    short name ``git~1``, an NTFS stream suffix)."""
    return part.lower().split(":")[0].rstrip(". ") in (".git", "git~1")


def _write_blobs(path: Path, scratch: Path, contents: list[bytes]) -> list[str]:
    """Store each content as a blob, unfiltered, in one git process; their ids in order."""
    if not contents:
        return []
    staged = scratch / "blobs"
    staged.mkdir()
    for number, content in enumerate(contents):
        (staged / str(number)).write_bytes(content)
    names = "".join(f"{staged / str(number)}\n" for number in range(len(contents)))
    return _git(path, "hash-object", "-w", "--no-filters", "--stdin-paths", stdin=names).split()


def _check_message(message: str) -> None:
    if "\0" in message or len(message) > MAX_MESSAGE_CHARS:
        raise InvalidRequestError(
            f"a commit message must hold no NUL character and at most {MAX_MESSAGE_CHARS:,} "
            f"characters (this one: {len(message):,})"
        )


def _check_layout(paths: set[str]) -> None:
    """No path may be a file and a folder at once (``a`` and ``a/b``)."""
    for path in paths:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            if folder in paths:
                raise InvalidPathError(f"{folder!r} cannot be both a file and the folder of {path!r}")


def _check_ref_name(name: str, what: str) -> None:
    parts = name.split("/")
    if (
        not _REF_NAME.match(name)
        or len(name) > 200
        or ".." in name
        or name == "HEAD"
        or _COMMIT_ID.match(name)
        or any(part.startswith(".") or part.endswith((".lock", ".")) for part in parts)
    ):
        raise InvalidRefNameError(
            f"{what} name {name[:200]!r}: use letters, digits and . _ + - / (no '..', no part "
            "starting with '.' or ending in '.lock', not a 40-hex commit id)"
        )


def _normalized(version: str) -> str:
    return str(Version(version))


def _same_version(tag: str, version: str) -> bool:
    other = release_version(tag)
    return other is not None and Version(other) == Version(version)


def _write_atomic(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    with temporary.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def _git(cwd: Path, *args: str, env: Mapping[str, str] | None = None, stdin: str | None = None) -> str:
    # Literal pathspecs: a name a command is given means that file, never a pattern (`log -- NAME`).
    try:
        result = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            input=stdin,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_LITERAL_PATHSPECS": "1", **(env or {})},
        )
    except FileNotFoundError:
        if cwd.is_dir():
            raise
        result = None
    if result is None or (result.returncode != 0 and not cwd.is_dir()):  # a concurrent delete moved it away
        raise RepoNotFoundError(f"no repository {cwd.parent.name}/{cwd.name.removesuffix('.git')}")
    if result.returncode != 0:
        raise VerihubError(f"git {args[0]} failed in {cwd.name}: {result.stderr.strip()[-300:]}")
    return result.stdout
