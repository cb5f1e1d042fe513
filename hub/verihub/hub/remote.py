"""A hub server over HTTP, through the huggingface_hub client: verihub's own server or huggingface.co.

Every repository is a dataset (``repo_type="dataset"``), as the Hub files RL environments. Pushing builds
locally (the pipeline both hubs share), uploads the source, ``dist/`` and what is derived from them as one commit
and tags ``v{version}``; verihub's server then also puts the tagged wheel and sdist in its pip index. Installing
reads the wheel at the release tag through the same API (:mod:`verihub.hub.install`), so it needs no index.
Every failure of the client is translated here, from the server's error code, into :mod:`verihub.hub.errors`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urljoin

from huggingface_hub.hf_api import RepoFile

from verihub.hub.errors import (
    CommitConflictError,
    EntryNotFoundError,
    HubError,
    PrivacyMismatchError,
    RepoExistsError,
    error_from_response,
)
from verihub.hub.ids import VersionSpec
from verihub.hub.index import JSON_CONTENT_TYPE
from verihub.hub.pipeline import COMMIT_ATTEMPTS, Hub
from verihub.hub.roles import PACKAGE_ROLES, RL_ENVIRONMENT_TAG, VERIFIER_TAG, Role, role_of
from verihub.ids import RepoId, dist_name

__all__ = ["RemoteHub"]

T = TypeVar("T")


class RemoteHub(Hub):
    def __init__(self, url: str, token: str | None = None) -> None:
        from huggingface_hub import HfApi

        self.url = self.location = url.rstrip("/")
        self.token = token
        self.api = HfApi(endpoint=self.url, token=token or False)
        self._refs_read: tuple[RepoId, Any] | None = None

    @property
    def index_url(self) -> str:
        return f"{self.url}/simple/"

    def info(self, repo: RepoId) -> dict[str, Any]:
        versions = self.versions(repo)
        latest = VersionSpec.parse("latest").best(versions) if versions else None
        revision = f"v{latest}" if latest else None
        card = self._read_file(repo, "README.md", revision).decode("utf-8", "replace") if revision else ""
        siblings = self._call(self.api.dataset_info, str(repo), revision=revision).siblings or []
        return {
            "repo": str(repo),
            "kind": role_of(sibling.rfilename for sibling in siblings),
            "versions": versions,
            "latest": latest,
            "card": card,
            "distribution": dist_name(repo),
            "install": f"verihub install {repo}@{latest} --hub {self.url}",
        }

    def search(self, query: str = "", kind: Role | None = None) -> list[dict[str, Any]]:
        """Published packages (datasets tagged ``verihub`` that are environments or verifier packages)."""
        found = []
        for dataset in self._call(lambda: list(self.api.list_datasets(search=query or None, filter=["verihub"]))):
            role = _listed_role(dataset)
            if role in PACKAGE_ROLES and (kind is None or role == kind):
                found.append({"repo": dataset.id, "kind": role, "latest": None, "summary": ""})
        return found

    # -- the backend's primitives ----------------------------------------------------------------------

    def _datasets_tagged(self, tags: list[str], query: str) -> list[tuple[str, list[str], str]]:
        listed = self._call(lambda: list(self.api.list_datasets(search=query or None, filter=tags)))
        return [
            (dataset.id, list(dataset.tags or []), str(getattr(dataset, "summary", "") or "")) for dataset in listed
        ]

    def _default_owner(self) -> str:
        return str(self._call(self.api.whoami)["name"])

    def _ensure_repo(self, repo: RepoId, *, private: bool, package: bool) -> None:
        try:  # not the client's exist_ok: it turns a refused write into a lookup that fails on a custom endpoint
            self._call(self.api.create_repo, str(repo), private=private, repo_type=DATASET)
            return
        except RepoExistsError:
            pass
        if private and not self._is_private(repo):
            raise PrivacyMismatchError(f"{repo} exists and is public; --private cannot hide what is published")

    def _tag_target(self, repo: RepoId, tag: str) -> str | None:
        refs = self._call(self.api.list_repo_refs, str(repo), repo_type=DATASET)
        self._refs_read = (repo, refs)  # the next upload's first attempt starts from this branch head
        return {ref.name: ref.target_commit for ref in refs.tags}.get(tag)

    def _tree(self, repo: RepoId, commit: str) -> dict[str, tuple[str, int]]:
        tree = self._call(
            lambda: list(self.api.list_repo_tree(str(repo), revision=commit, recursive=True, repo_type=DATASET))
        )
        return {entry.path: (entry.blob_id, int(entry.size)) for entry in tree if isinstance(entry, RepoFile)}

    def _resolve(self, repo: RepoId, revision: str) -> str:
        return str(self._call(self.api.dataset_info, str(repo), revision=revision).sha)

    def _download(self, repo: RepoId, commit: str, paths: list[str], target: Path) -> None:
        import glob

        from huggingface_hub import snapshot_download

        self._call(  # into a local directory: real files, never links into a cache
            snapshot_download,
            str(repo),
            repo_type=DATASET,
            revision=commit,
            allow_patterns=[glob.escape(path) for path in paths],  # each a name, never a pattern
            local_dir=str(target),
            endpoint=self.url,
            token=self.token or False,
        )

    def _upload(self, repo: RepoId, files: dict[str, bytes], message: str) -> str:
        """One commit on top of the head it read (``parent_commit``), so a concurrent commit makes it retry
        rather than delete from a stale listing."""
        from huggingface_hub import CommitOperationAdd, CommitOperationDelete

        error: HubError | None = None
        read, self._refs_read = self._refs_read, None
        for _ in range(COMMIT_ATTEMPTS):
            # The refs the push just read, if any: a head that moved since makes the commit conflict and the
            # next attempt read them again.
            refs = (
                read[1]
                if read is not None and read[0] == repo
                else self._call(self.api.list_repo_refs, str(repo), repo_type=DATASET)
            )
            read = None
            head = {ref.name: ref.target_commit for ref in refs.branches}.get("main")
            current = set(self._contents(repo, head)) if head else set()
            operations: list[Any] = [CommitOperationDelete(path) for path in sorted(current - set(files))]
            operations += [CommitOperationAdd(path_in_repo=name, path_or_fileobj=data) for name, data in files.items()]
            try:
                return str(
                    self._call(
                        self.api.create_commit,
                        str(repo),
                        operations,
                        commit_message=message,
                        parent_commit=head,
                        repo_type=DATASET,
                    ).oid
                )
            except (CommitConflictError, EntryNotFoundError) as conflict:  # another push committed meanwhile
                error = conflict
        assert error is not None
        raise error

    def _tag(self, repo: RepoId, tag: str, commit: str) -> None:
        self._call(self.api.create_tag, str(repo), tag=tag, revision=commit, repo_type=DATASET)

    def _tags(self, repo: RepoId) -> list[str]:
        return [ref.name for ref in self._call(self.api.list_repo_refs, str(repo), repo_type=DATASET).tags]

    def _legacy_sha256(self, repo: RepoId, version: str, filename: str, commit: str) -> str | None:
        """The file's LFS sha256 (as huggingface.co records a large file), else the entry of verihub's index."""
        import httpx

        infos = self._call(self.api.get_paths_info, str(repo), [f"dist/{filename}"], revision=commit, repo_type=DATASET)
        lfs = getattr(infos[0], "lfs", None) if infos else None
        if lfs is not None:
            return str(lfs.sha256)
        project = dist_name(repo)
        headers = {"Accept": JSON_CONTENT_TYPE, **({"Authorization": f"Bearer {self.token}"} if self.token else {})}
        page = httpx.get(urljoin(f"{self.url}/simple/", f"{project}/"), headers=headers, timeout=60)
        if page.status_code != 200:
            return None
        return next(
            (entry["hashes"]["sha256"] for entry in page.json().get("files", []) if entry.get("filename") == filename),
            None,
        )

    def _identity(self) -> tuple[str, tuple[str, ...]]:
        me = self._call(self.api.whoami)
        namespaces = (me["name"], *(org["name"] for org in me.get("orgs", [])))
        role = ((me.get("auth") or {}).get("accessToken") or {}).get("role", "write")
        return str(me["name"]), tuple(namespaces) if role == "write" else ()

    def _is_private(self, repo: RepoId) -> bool:
        return bool(self._call(self.api.repo_info, str(repo), repo_type=DATASET).private)

    def _files_at_main(self, repo: RepoId) -> tuple[str | None, dict[str, str]]:
        refs = self._call(self.api.list_repo_refs, str(repo), repo_type=DATASET)
        head = next((ref.target_commit for ref in refs.branches if ref.name == "main"), None)
        if head is None:
            return None, {}
        tree = self._call(
            lambda: list(self.api.list_repo_tree(str(repo), revision=head, recursive=True, repo_type=DATASET))
        )
        return head, {entry.path: entry.blob_id for entry in tree if hasattr(entry, "blob_id")}

    def _read_file(self, repo: RepoId, path: str, revision: str) -> bytes:
        import tempfile

        from huggingface_hub import hf_hub_download

        with tempfile.TemporaryDirectory(prefix="verihub-read-") as scratch:
            local = self._call(
                hf_hub_download,
                str(repo),
                path,
                repo_type=DATASET,
                revision=revision,
                endpoint=self.url,
                token=self.token or False,
                cache_dir=scratch,
            )
            return Path(local).read_bytes()

    def _commit_files(self, repo: RepoId, files: dict[str, bytes], message: str, *, parent: str | None) -> str:
        from huggingface_hub import CommitOperationAdd

        operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=data) for name, data in files.items()]
        return str(
            self._call(
                self.api.create_commit,
                str(repo),
                operations,
                commit_message=message,
                repo_type=DATASET,
                parent_commit=parent,
            ).oid
        )

    # -- translation at the seam -----------------------------------------------------------------------

    def _call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        with _translated():
            return function(*args, **kwargs)


DATASET = "dataset"  # every repository's type


def _listed_role(dataset: Any) -> Role:
    """A listed dataset's role: what verihub's server says (``kind``), else what its card's tags say."""
    kind = getattr(dataset, "kind", None)
    if kind in ("env", "verifier", "results", "dataset"):
        return kind
    tags = set(getattr(dataset, "tags", None) or [])
    if RL_ENVIRONMENT_TAG in tags and "verihub" in tags:
        return "env"
    if VERIFIER_TAG in tags:
        return "verifier"
    return "results" if "eval-results" in tags else "dataset"


@contextmanager
def _translated() -> Iterator[None]:
    """huggingface_hub's HTTP errors as verihub's, from the server's error code."""
    from huggingface_hub.errors import HfHubHTTPError

    try:
        yield
    except HfHubHTTPError as error:
        if error.response is None:
            raise
        raise error_from_response(error.response) from None
