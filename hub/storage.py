"""Git-backed repository storage: 40-hex commit ids, history, branches and immutable version tags.

One bare git repository per hub repository, driven by the ``git`` command (plumbing only, with a
temporary index, so no work tree is ever checked out). Writers to one repository serialize on a file
lock and move the branch with compare-and-swap, so two pushes never lose each other's commits.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from verihub.errors import VerihubError
from verihub.hub.ids import RepoId

__all__ = ["Commit", "FileEntry", "HubStorage", "RepoExistsError", "RepoNotFoundError", "RevisionNotFoundError",
           "TagExistsError"]

RepoKind = Literal["env", "verifier"]
KINDS: tuple[RepoKind, ...] = ("env", "verifier")
_AUTHOR = {"GIT_AUTHOR_NAME": "verihub", "GIT_AUTHOR_EMAIL": "hub@verihub.invalid",
           "GIT_COMMITTER_NAME": "verihub", "GIT_COMMITTER_EMAIL": "hub@verihub.invalid"}


class RepoNotFoundError(VerihubError, LookupError):
    pass


class RepoExistsError(VerihubError, FileExistsError):
    pass


class RevisionNotFoundError(VerihubError, LookupError):
    pass


class TagExistsError(VerihubError, ValueError):
    """A tag (a published version) already points elsewhere; tags never move."""


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
    """Repositories under ``root``: ``root/repos/<kind>/<owner>/<name>.git``."""

    def __init__(self, root: str | Path) -> None:
        if shutil.which("git") is None:
            raise VerihubError("the hub stores repositories with git, which is not installed (apt-get install git)")
        self.root = Path(root)
        (self.root / "repos").mkdir(parents=True, exist_ok=True)
        (self.root / "locks").mkdir(exist_ok=True)

    # -- repositories ---------------------------------------------------------------------------------

    def create_repo(self, repo: RepoId, kind: RepoKind = "env", *, exist_ok: bool = False) -> None:
        if kind not in KINDS:
            raise ValueError(f"repository kind {kind!r}: use one of {', '.join(KINDS)}")
        existing = self.kind_of(repo)
        if existing is not None:
            if exist_ok and existing == kind:
                return
            raise RepoExistsError(f"{repo} already exists (a {existing})")
        path = self._path(repo, kind)
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._locked(repo):
            _git(path.parent, "init", "--bare", "--quiet", "--initial-branch=main", path.name)

    def delete_repo(self, repo: RepoId) -> None:
        kind = self._require(repo)
        with self._locked(repo):
            shutil.rmtree(self._path(repo, kind))

    def kind_of(self, repo: RepoId) -> RepoKind | None:
        for kind in KINDS:
            if self._path(repo, kind).is_dir():
                return kind
        return None

    def repos(self, kind: RepoKind | None = None) -> list[tuple[RepoId, RepoKind]]:
        found = []
        for each in (kind,) if kind else KINDS:
            for path in sorted((self.root / "repos" / each).glob("*/*.git")):
                found.append((RepoId(path.parent.name, path.name.removesuffix(".git")), each))
        return found

    # -- writing --------------------------------------------------------------------------------------

    def commit(self, repo: RepoId, files: Mapping[str, bytes], message: str, *, branch: str = "main",
               delete: tuple[str, ...] = (), replace: bool = False) -> str:
        """Add or change ``files`` (path -> content) and remove ``delete`` on ``branch``; with ``replace``
        the commit holds exactly ``files``. Returns the new commit's id."""
        path = self._path(repo, self._require(repo))
        for name in [*files, *delete]:
            _check_path(name)
        with self._locked(repo), tempfile.TemporaryDirectory(prefix="verihub-commit-") as scratch:
            env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            parent = self._ref(path, f"refs/heads/{branch}")
            if parent and not replace:
                _git(path, "read-tree", parent, env=env)
            work = Path(scratch) / "work"
            for name, content in files.items():
                target = work / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
            if files:
                _git(path, f"--work-tree={work}", "add", "--force", "--", *files, env=env)
            if delete:
                _git(path, "rm", "--cached", "--quiet", "--ignore-unmatch", "--", *delete, env=env)
            tree = _git(path, "write-tree", env=env).strip()
            command = ["commit-tree", tree, "-m", message] + (["-p", parent] if parent else [])
            sha = _git(path, *command, env={**env, **_AUTHOR}).strip()
            # compare-and-swap: fails if the branch moved under us (it cannot, under the lock)
            _git(path, "update-ref", f"refs/heads/{branch}", sha, parent or "0" * 40)
            return sha

    def tag(self, repo: RepoId, tag: str, revision: str = "main") -> bool:
        """Point ``tag`` at ``revision``; False if it already points there; TagExistsError if elsewhere."""
        path = self._path(repo, self._require(repo))
        with self._locked(repo):
            sha = self.resolve(repo, revision)
            existing = self._ref(path, f"refs/tags/{tag}")
            if existing == sha:
                return False
            if existing is not None:
                raise TagExistsError(f"{repo}: tag {tag!r} already exists (at {existing[:12]}) and tags never move")
            _git(path, "update-ref", f"refs/tags/{tag}", sha, "0" * 40)
            return True

    def create_branch(self, repo: RepoId, branch: str, revision: str = "main") -> None:
        path = self._path(repo, self._require(repo))
        with self._locked(repo):
            _git(path, "update-ref", f"refs/heads/{branch}", self.resolve(repo, revision), "0" * 40)

    # -- reading --------------------------------------------------------------------------------------

    def refs(self, repo: RepoId) -> dict[str, dict[str, str]]:
        """``{"branches": {name: sha}, "tags": {name: sha}}``."""
        path = self._path(repo, self._require(repo))
        out = _git(path, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/tags")
        found: dict[str, dict[str, str]] = {"branches": {}, "tags": {}}
        for line in out.splitlines():
            name, sha = line.split()
            kind, _, short = name.removeprefix("refs/").partition("/")
            found["branches" if kind == "heads" else "tags"][short] = sha
        return found

    def resolve(self, repo: RepoId, revision: str = "main") -> str:
        """The commit id of a branch, tag or (abbreviated) commit id."""
        path = self._path(repo, self._require(repo))
        for candidate in (f"refs/heads/{revision}", f"refs/tags/{revision}", revision):
            result = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}"],
                                    cwd=path, capture_output=True, text=True)
            if result.returncode == 0:
                return result.stdout.strip()
        raise RevisionNotFoundError(f"{repo} has no revision {revision!r}")

    def files(self, repo: RepoId, revision: str = "main") -> list[FileEntry]:
        path = self._path(repo, self._require(repo))
        sha = self.resolve(repo, revision)
        out = _git(path, "ls-tree", "-r", "-l", "-z", sha)
        entries = []
        for record in out.split("\0"):
            if record:
                meta, name = record.split("\t", 1)
                _, kind, blob, size = meta.split()
                if kind == "blob":
                    entries.append(FileEntry(name, int(size), blob))
        return entries

    def read(self, repo: RepoId, name: str, revision: str = "main") -> bytes:
        path = self._path(repo, self._require(repo))
        sha = self.resolve(repo, revision)
        result = subprocess.run(["git", "cat-file", "blob", f"{sha}:{name}"], cwd=path, capture_output=True)
        if result.returncode != 0:
            raise FileNotFoundError(f"{repo}@{revision[:12]} has no file {name!r}")
        return result.stdout

    def history(self, repo: RepoId, revision: str = "main") -> list[Commit]:
        path = self._path(repo, self._require(repo))
        out = _git(path, "log", "--format=%H%x00%P%x00%ct%x00%B%x1e", self.resolve(repo, revision))
        commits = []
        for record in out.split("\x1e"):
            if record.strip():
                sha, parents, stamp, message = record.strip("\n").split("\0", 3)
                commits.append(Commit(sha, message.strip(), int(stamp), tuple(parents.split())))
        return commits

    # -- internals ------------------------------------------------------------------------------------

    def _path(self, repo: RepoId, kind: RepoKind) -> Path:
        return self.root / "repos" / kind / repo.owner / f"{repo.name}.git"

    def _require(self, repo: RepoId) -> RepoKind:
        kind = self.kind_of(repo)
        if kind is None:
            known = [str(each) for each, _ in self.repos()]
            close = repo.close_matches(known)
            raise RepoNotFoundError(f"no repository {repo}" + (f"; did you mean {', '.join(close)}?" if close else ""))
        return kind

    @staticmethod
    def _ref(path: Path, ref: str) -> str | None:
        result = subprocess.run(["git", "rev-parse", "--verify", "--quiet", ref], cwd=path, capture_output=True, text=True)
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


def _check_path(name: str) -> None:
    parts = name.split("/")
    if not name or name.startswith("/") or any(part in ("", ".", "..", ".git") for part in parts) or "\\" in name:
        raise ValueError(f"file path {name!r} must be relative, without '..', '.git' or empty parts")


def _git(cwd: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})})
    if result.returncode != 0:
        raise VerihubError(f"git {args[0]} failed in {cwd.name}: {result.stderr.strip()[-300:]}")
    return result.stdout
