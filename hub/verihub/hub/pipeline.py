"""One publishing pipeline for both hubs, over a small backend seam.

:class:`Hub` validates, builds, publishes and installs a package the same way whether the hub is a
directory (:class:`~verihub.hub.local.LocalHub`) or a server speaking the Hugging Face Hub API
(:class:`~verihub.hub.remote.RemoteHub`: verihub's own, or huggingface.co). A backend supplies the primitives
below and translates its own failures into :mod:`verihub.hub.errors` at the seam, so ``push`` and ``install``
see one set of exceptions.

A package is published as a dataset repository, as the Hub files RL environments: its source, its ``dist/``
(wheel and sdist) and what :mod:`verihub.hub.derived` derives (the dataset card, the tasks as parquet, the
release record) in one commit, tagged ``v{version}``. A push that finds its version already tagged tags it again:
that is a no-op for a complete release and completes one that a crash left half published (see
:mod:`verihub.hub.release`). Installing needs no pip index: :mod:`verihub.hub.install`.
"""

from __future__ import annotations

import hashlib
import logging
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verihub.errors import VerihubError
from verihub.hub.build import Bump, Prepared, prepare
from verihub.hub.derived import CARD, RELEASE_RECORD, ReleaseRecord, dataset_card, task_tables
from verihub.hub.errors import HubError, RepoNotFoundError, TagExistsError, VersionExistsError
from verihub.hub.ids import Requirement, release_versions
from verihub.hub.install import (
    FetchedRelease,
    Pins,
    check_sha256,
    hub_dependency_candidates,
    pip_install_wheels,
    resolve_closure,
    wheel_requirements,
)
from verihub.hub.roles import FRAMEWORKS, LOADABLE, RL_ENVIRONMENT_TAG
from verihub.ids import RepoId, dist_name

if TYPE_CHECKING:
    from verihub.hub.results_push import ResultsPushed

__all__ = ["Hub", "Published", "PushResult", "blob_id"]

logger = logging.getLogger("verihub.hub")
COMMIT_ATTEMPTS = 5  # commits tried while concurrent pushes move the branch


@dataclass(frozen=True)
class PushResult:
    repo: RepoId
    version: str
    commit: str
    created: bool  # False: identical content was already published (a no-op)
    files: tuple[str, ...]


@dataclass(frozen=True)
class Published:
    """A release tag as a hub holds it: its commit and the git blob ids of the source it was pushed from."""

    commit: str
    source: dict[str, str]


class Hub(ABC):
    """A hub a command talks to: ``push``, ``versions``, ``resolve`` and ``install`` over the primitives."""

    location: str  # what names this hub in the install pins: a URL, or a directory

    # -- the pipeline ---------------------------------------------------------------------------------

    def push(
        self,
        path: str | Path,
        *,
        owner: str | None = None,
        bump: Bump | None = None,
        validate: bool = True,
        private: bool = False,
    ) -> PushResult:
        """Validate, build and publish the package at ``path`` as ``owner/<its name>``, tagged ``v{version}``.
        The same content again is a no-op; other content under a published version is refused."""
        prepared = prepare(path, owner or self._default_owner(), bump=bump, validate=validate)
        repo, version, tag = prepared.repo, prepared.version, f"v{prepared.version}"
        self._check_hub_dependencies(prepared)
        self._ensure_repo(repo, private=private, package=True)
        published = self._published(repo, tag)
        if published is None:
            built = prepared.source.build(repo)
            if prepared.env is not None:
                built.check_environment()
            dist = {f"dist/{name}": data for name, data in built.files.items()}
            uploads = {**prepared.files, **_derived(prepared, built.files), **dist}
            commit = self._commit_exactly(repo, uploads, f"{repo} {version}")
            try:
                self._tag(repo, tag, commit)
                return PushResult(repo, version, commit, True, tuple(built.files))
            except TagExistsError:  # a concurrent push of this version tagged first
                published = self._published(repo, tag)
                if published is None:
                    raise
        if published.source != {name: blob_id(content) for name, content in prepared.files.items()}:
            raise VersionExistsError(
                f"{repo} {version} is already published with different content; versions never "
                "change: bump it (verihub push --bump patch|minor|major)"
            )
        self._tag(repo, tag, published.commit)
        return PushResult(repo, version, published.commit, False, ())

    def _commit_exactly(self, repo: RepoId, files: dict[str, bytes], message: str) -> str:
        """A commit holding exactly ``files``, checked: a hub may answer an upload that changes nothing with
        its branch head, which a concurrent push may have moved to other content (never tag that)."""
        wanted = {name: blob_id(content) for name, content in files.items()}
        for _ in range(COMMIT_ATTEMPTS):
            commit = self._upload(repo, files, message)
            if self._contents(repo, commit) == wanted:
                return commit
        raise HubError(f"could not commit {repo}: concurrent pushes kept moving its main branch; try again")

    def _published(self, repo: RepoId, tag: str) -> Published | None:
        commit = self._tag_target(repo, tag)
        if commit is None:
            return None
        contents = self._contents(repo, commit)
        if RELEASE_RECORD in contents:
            return Published(commit, self._release_record(repo, commit).source)
        # a release from before the record: its source is what is outside dist/
        return Published(commit, {path: blob for path, blob in contents.items() if not path.startswith("dist/")})

    def _release_record(self, repo: RepoId, commit: str) -> ReleaseRecord:
        return ReleaseRecord.decode(self._read_file(repo, RELEASE_RECORD, commit), f"{repo}@{commit[:12]}")

    def _check_hub_dependencies(self, prepared: Prepared) -> None:
        """Every declared hub dependency is published here; an undeclared dependency this hub publishes is
        worth a warning (installs take it from pip's indexes, by name)."""
        declared = prepared.source.hub_dependencies
        for repo in declared:
            if not self._has_releases(repo):
                raise VerihubError(
                    f"{prepared.repo} declares the hub dependency {repo}, which has no release on this hub; "
                    "push it first"
                )
        for text in prepared.source.dependencies:
            _, candidates = hub_dependency_candidates(text)
            for repo in candidates:
                if repo not in declared and self._has_releases(repo):
                    logger.warning(
                        "%s depends on %r, which this hub publishes as %s; declare it in pyproject.toml's "
                        '[tool.verihub] hub-dependencies = ["%s"] so installs take it from the hub by id, '
                        "not from an index by name",
                        prepared.repo,
                        text,
                        repo,
                        repo,
                    )

    def _has_releases(self, repo: RepoId) -> bool:
        try:
            return bool(self.versions(repo))
        except RepoNotFoundError:
            return False

    def versions(self, repo: RepoId) -> list[str]:
        """The published versions of ``repo``, oldest first."""
        return release_versions(self._tags(repo))

    def resolve(self, requirement: Requirement) -> str:
        return requirement.spec.best(self.versions(requirement.repo))

    def install(
        self, requirement: str | Requirement, *, python: str = sys.executable, allow_moved_tag: bool = False
    ) -> tuple[RepoId, str]:
        """pip-install ``owner/name[@spec]`` and its hub dependencies from the wheels their release tags hold,
        checked against the sha256 recorded at release (see :mod:`verihub.hub.install`): no pip index needed."""
        wanted = Requirement.parse(requirement) if isinstance(requirement, str) else requirement
        releases = self.fetch(wanted)
        pins = Pins(self.location)
        pins.check(releases, allow_moved_tag=allow_moved_tag)
        pip_install_wheels(releases, python=python)
        pins.record(releases)
        return wanted.repo, releases[0].version

    def ensure_installed(self, requirement: str | Requirement) -> tuple[RepoId, str]:
        """:meth:`install` into this interpreter, unless the version installed here already satisfies the spec
        (then nothing is asked of the hub): the repository and the version now installed."""
        from importlib import invalidate_caches
        from importlib.metadata import PackageNotFoundError, version

        wanted = Requirement.parse(requirement) if isinstance(requirement, str) else requirement
        try:
            installed: str | None = version(dist_name(wanted.repo))
        except PackageNotFoundError:
            installed = None
        specifier = wanted.spec.specifier
        if installed is not None and (specifier is None or specifier.contains(installed, prereleases=True)):
            return wanted.repo, installed
        found = self.install(wanted)
        invalidate_caches()  # the new package must be importable from this process
        return found

    def fetch(self, requirement: Requirement) -> list[FetchedRelease]:
        """The releases ``requirement`` needs, checked: its own first, then its hub dependencies."""
        return resolve_closure(requirement.repo, requirement.spec.specifier, self.versions, self.fetch_release)

    def fetch_release(self, repo: RepoId, version: str) -> FetchedRelease:
        """The release ``v{version}`` of ``repo``: its wheel, read at the tag's commit and checked against the
        sha256 recorded at release, and its hub dependencies."""
        tag = f"v{version}"
        commit = self._tag_target(repo, tag)
        if commit is None:
            raise HubError(f"{repo} has no release tag {tag}")
        contents = self._contents(repo, commit)
        recorded: str | None
        dependencies: dict[str, str] | None = None
        if RELEASE_RECORD in contents:
            record = self._release_record(repo, commit)
            wheel = record.wheel()
            if wheel is None:
                raise HubError(f"{repo} {version}: its release record lists no wheel")
            (name, recorded), dependencies = wheel, record.hub_dependencies
        else:  # a release from before the record
            prefix = f"dist/{dist_name(repo).replace('-', '_')}-{version}-"
            names = [path[5:] for path in contents if path.startswith(prefix) and path.endswith(".whl")]
            if not names:
                raise HubError(f"{repo} {version}: the release holds no wheel in dist/")
            name, recorded = names[0], self._legacy_sha256(repo, version, names[0], commit)
        data = self._read_file(repo, f"dist/{name}", commit)
        sha256 = check_sha256(f"{repo} {version}", name, data, recorded)
        if dependencies is None:
            dependencies = self._legacy_hub_dependencies(repo, data)
        return FetchedRelease(repo, version, commit, name, data, sha256, dependencies)

    def _legacy_hub_dependencies(self, repo: RepoId, wheel: bytes) -> dict[str, str]:
        """A release from before the record names no hub dependency by id: its dependencies this hub publishes are
        taken from it (as the hub's index served them first, then)."""
        found: dict[str, str] = {}
        for text in wheel_requirements(wheel):
            specifier, candidates = hub_dependency_candidates(text)
            held = [candidate for candidate in candidates if candidate != repo and self._has_releases(candidate)]
            if held:
                found[str(held[0])] = specifier
        return found

    def rl_environments(self, framework: str | None = None, query: str = "") -> list[dict[str, Any]]:
        """The hub's RL environment datasets (tagged ``rl-environment``, and ``framework`` if given) whose id or
        summary holds ``query``: ``repo``, ``frameworks`` (its framework tags), ``loads`` (whether
        ``load_env("hf://datasets/REPO")`` can load it) and ``summary``."""
        wanted = [RL_ENVIRONMENT_TAG, *([framework] if framework else [])]
        found = []
        for repo, tags, summary in self._datasets_tagged(wanted, query):
            frameworks = [tag for tag in tags if tag in FRAMEWORKS]
            found.append(
                {
                    "repo": repo,
                    "frameworks": frameworks,
                    "loads": any(tag in LOADABLE for tag in frameworks),
                    "summary": summary,
                }
            )
        return found

    def push_results(self, out: str | Path, environment: RepoId | None = None) -> ResultsPushed:
        """Push the eval results in ``out`` (what ``verihub eval --out`` wrote) to a results dataset linked to
        ``environment`` (default: the pusher's environment of that id; see :mod:`verihub.hub.results_push`)."""
        from verihub.hub.results_push import push_results

        return push_results(self, Path(out), environment)

    # -- the backend's primitives ----------------------------------------------------------------------

    @abstractmethod
    def _default_owner(self) -> str: ...

    @abstractmethod
    def _ensure_repo(self, repo: RepoId, *, private: bool, package: bool) -> None:
        """Create the dataset repository ``repo`` if needed; PrivacyMismatchError if ``private`` is asked of a
        public one. ``package``: it will publish a distribution (``owner-name``), whose name must be free."""

    @abstractmethod
    def _tag_target(self, repo: RepoId, tag: str) -> str | None:
        """The commit ``tag`` points at (None: no such tag)."""

    def _contents(self, repo: RepoId, commit: str) -> dict[str, str]:
        """Every file of ``commit``: path -> git blob id."""
        return {path: blob for path, (blob, _) in self._tree(repo, commit).items()}

    @abstractmethod
    def _tree(self, repo: RepoId, commit: str) -> dict[str, tuple[str, int]]:
        """Every file of ``commit``: path -> (git blob id, size in bytes)."""

    @abstractmethod
    def _resolve(self, repo: RepoId, revision: str) -> str:
        """The commit id ``revision`` (a tag, a branch or a commit id) names now; RevisionNotFoundError if none."""

    @abstractmethod
    def _download(self, repo: RepoId, commit: str, paths: list[str], target: Path) -> None:
        """Write the files ``paths`` of ``commit`` under ``target`` as regular files (never links)."""

    @abstractmethod
    def _upload(self, repo: RepoId, files: dict[str, bytes], message: str) -> str:
        """Commit exactly ``files`` to the main branch; the resulting commit's id."""

    @abstractmethod
    def _tag(self, repo: RepoId, tag: str, commit: str) -> None:
        """Tag ``commit`` (publishing a release tag's files); TagExistsError if the tag is elsewhere."""

    @abstractmethod
    def _tags(self, repo: RepoId) -> list[str]: ...

    @abstractmethod
    def _legacy_sha256(self, repo: RepoId, version: str, filename: str, commit: str) -> str | None:
        """The sha256 this hub recorded for ``dist/filename`` of a release from before release records (its LFS
        metadata, or its index entry); None if it recorded none."""

    @abstractmethod
    def _datasets_tagged(self, tags: list[str], query: str) -> list[tuple[str, list[str], str]]:
        """(id, tags, summary) of every dataset the caller can see that carries all ``tags`` and whose id or summary
        holds ``query``."""

    # results datasets (verihub eval --push)

    @abstractmethod
    def _identity(self) -> tuple[str, tuple[str, ...]]:
        """Who pushes: their user name and the namespaces they may write to."""

    @abstractmethod
    def _is_private(self, repo: RepoId) -> bool:
        """Whether ``repo`` is private; RepoNotFoundError if there is none that the caller can see."""

    @abstractmethod
    def _files_at_main(self, repo: RepoId) -> tuple[str | None, dict[str, str]]:
        """The main branch's commit (None before the first) and its files: path -> git blob id."""

    @abstractmethod
    def _read_file(self, repo: RepoId, path: str, revision: str) -> bytes: ...

    @abstractmethod
    def _commit_files(self, repo: RepoId, files: dict[str, bytes], message: str, *, parent: str | None) -> str:
        """Add ``files`` to main in one commit on top of ``parent``; CommitConflictError if main moved."""


def _derived(prepared: Prepared, dist: dict[str, bytes]) -> dict[str, bytes]:
    """What a push adds to the source (:mod:`verihub.hub.derived`); a source file at one of its paths is refused."""
    source, env = prepared.source, prepared.env
    tables, counts = task_tables(env) if env is not None else ({}, {})
    spec = env.spec if env is not None else None
    project = source.pyproject.get("project") or {}
    license_ = project.get("license")
    card = dataset_card(
        prepared.files.get(CARD),
        repo=prepared.repo,
        pretty_name=spec.id if spec is not None else str(project.get("name", prepared.repo.name)),
        description=spec.description if spec is not None else str(project.get("description", "")),
        license=(spec.license if spec is not None else None) or (license_ if isinstance(license_, str) else None),
        tags=list(spec.tags) if spec is not None else [],
        environment=env is not None,
        splits=counts,
    )
    record = ReleaseRecord(
        source={name: blob_id(content) for name, content in prepared.files.items()},
        dist={name: hashlib.sha256(data).hexdigest() for name, data in dist.items()},
        hub_dependencies={str(repo): spec_text for repo, spec_text in source.hub_dependencies.items()},
    )
    derived = {**tables, RELEASE_RECORD: record.encode()}
    taken = sorted(set(derived) & set(prepared.files))
    if taken:
        raise VerihubError(
            f"{source.root}: {', '.join(taken)} would be overwritten by what a push derives (the tasks as parquet, "
            "the release record); rename it"
        )
    return {**derived, CARD: card}


def blob_id(content: bytes) -> str:
    """The git blob id of ``content``: how both hubs tell whether a published file changed."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()
