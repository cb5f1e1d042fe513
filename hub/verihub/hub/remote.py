"""A hub server over HTTP, through the huggingface_hub client (the same code talks to huggingface.co).

Pushing builds locally (the pipeline both hubs share), uploads the source plus ``dist/`` as one commit and
tags ``v{version}``; the server then puts the tagged wheel and sdist in its pip index. Installing is plain
pip against ``{url}/simple/``, with the token as the index URL's password when there is one (so private
packages install). Every failure of the client is translated here, from the server's error code, into
:mod:`verihub.hub.errors`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

from verihub.hub.errors import (
    CommitConflictError,
    CorruptFileError,
    EntryNotFoundError,
    HubError,
    PrivacyMismatchError,
    RepoExistsError,
    error_from_response,
)
from verihub.hub.ids import VersionSpec
from verihub.hub.index import JSON_CONTENT_TYPE
from verihub.hub.pipeline import COMMIT_ATTEMPTS, Hub
from verihub.hub.storage import RepoKind
from verihub.ids import RepoId, dist_name

__all__ = ["RemoteHub"]

T = TypeVar("T")


class RemoteHub(Hub):
    def __init__(self, url: str, token: str | None = None) -> None:
        from huggingface_hub import HfApi

        self.url = url.rstrip("/")
        self.token = token
        self.api = HfApi(endpoint=self.url, token=token or False)
        self._refs_read: tuple[RepoId, Any] | None = None

    @property
    def index_url(self) -> str:
        return f"{self.url}/simple/"

    def info(self, repo: RepoId) -> dict[str, Any]:
        versions = self.versions(repo)
        latest = VersionSpec.parse("latest").best(versions) if versions else None
        card = ""
        if latest:
            from huggingface_hub import hf_hub_download

            card = Path(
                self._call(
                    hf_hub_download,
                    str(repo),
                    "README.md",
                    revision=f"v{latest}",
                    endpoint=self.url,
                    token=self.token or False,
                )
            ).read_text()
        kind = getattr(self._call(self.api.model_info, str(repo)), "kind", "env")
        return {
            "repo": str(repo),
            "kind": kind,
            "versions": versions,
            "latest": latest,
            "card": card,
            "distribution": dist_name(repo),
            "install": f"verihub install {repo}@{latest} --hub {self.url}",
        }

    def search(self, query: str = "", kind: str | None = None) -> list[dict[str, Any]]:
        found = []
        for model in self._call(lambda: list(self.api.list_models(search=query or None))):
            model_kind = getattr(model, "kind", "env")
            if kind and model_kind != kind:
                continue
            found.append({"repo": model.id, "kind": model_kind, "latest": None, "summary": ""})
        return found

    # -- the backend's primitives ----------------------------------------------------------------------

    def _default_owner(self) -> str:
        return str(self._call(self.api.whoami)["name"])

    def _ensure_repo(self, repo: RepoId, kind: RepoKind, *, private: bool) -> None:
        try:  # not the client's exist_ok: it turns a refused write into a lookup that fails on a custom endpoint
            self._call(self.api.create_repo, str(repo), private=private, repo_type=_repo_type(kind))
            return
        except RepoExistsError:
            pass
        if private and not self._is_private(repo, kind):
            raise PrivacyMismatchError(f"{repo} exists and is public; --private cannot hide what is published")

    def _tag_target(self, repo: RepoId, tag: str) -> str | None:
        refs = self._call(self.api.list_repo_refs, str(repo))
        self._refs_read = (repo, refs)  # the next upload's first attempt starts from this branch head
        return {ref.name: ref.target_commit for ref in refs.tags}.get(tag)

    def _contents(self, repo: RepoId, commit: str) -> dict[str, str]:
        tree = self._call(lambda: list(self.api.list_repo_tree(str(repo), revision=commit, recursive=True)))
        return {entry.path: entry.blob_id for entry in tree if hasattr(entry, "blob_id")}

    def _upload(self, repo: RepoId, files: dict[str, bytes], message: str) -> str:
        """One commit on top of the head it read (``parent_commit``), so a concurrent commit makes it retry
        rather than delete from a stale listing."""
        from huggingface_hub import CommitOperationAdd, CommitOperationDelete

        error: HubError | None = None
        read, self._refs_read = self._refs_read, None
        for _ in range(COMMIT_ATTEMPTS):
            # The refs the push just read, if any: a head that moved since makes the commit conflict and the
            # next attempt read them again.
            refs = read[1] if read is not None and read[0] == repo else self._call(self.api.list_repo_refs, str(repo))
            read = None
            head = {ref.name: ref.target_commit for ref in refs.branches}.get("main")
            current = set(self._contents(repo, head)) if head else set()
            operations: list[Any] = [CommitOperationDelete(path) for path in sorted(current - set(files))]
            operations += [CommitOperationAdd(path_in_repo=name, path_or_fileobj=data) for name, data in files.items()]
            try:
                return str(
                    self._call(
                        self.api.create_commit, str(repo), operations, commit_message=message, parent_commit=head
                    ).oid
                )
            except (CommitConflictError, EntryNotFoundError) as conflict:  # another push committed meanwhile
                error = conflict
        assert error is not None
        raise error

    def _tag(self, repo: RepoId, tag: str, commit: str) -> None:
        self._call(self.api.create_tag, str(repo), tag=tag, revision=commit)

    def _tags(self, repo: RepoId) -> list[str]:
        return [ref.name for ref in self._call(self.api.list_repo_refs, str(repo)).tags]

    def _wheel(self, repo: RepoId, version: str) -> bytes | None:
        """The version's wheel from the server's index, checked against the index's sha256."""
        import httpx

        project = dist_name(repo)
        headers = {"Accept": JSON_CONTENT_TYPE, **({"Authorization": f"Bearer {self.token}"} if self.token else {})}
        page_url = f"{self.index_url}{project}/"
        page = httpx.get(page_url, headers=headers, timeout=60)
        if page.status_code != 200:
            return None
        prefix = f"{project.replace('-', '_')}-{version}-"
        for entry in page.json().get("files", []):
            if entry["filename"].startswith(prefix) and entry["filename"].endswith(".whl"):
                response = httpx.get(
                    urljoin(page_url, entry["url"]), headers=headers, timeout=300
                )  # links are relative
                if response.status_code != 200:
                    raise error_from_response(response)
                if hashlib.sha256(response.content).hexdigest() != entry["hashes"]["sha256"]:
                    raise CorruptFileError(f"{entry['filename']} does not match the sha256 the index gives")
                return response.content
        return None

    def _pip_index_url(self) -> str:
        if not self.token:
            return self.index_url
        parts = urlsplit(self.index_url)  # pip sends the password as HTTP Basic auth, and redacts it in its logs
        return urlunsplit(parts._replace(netloc=f"__token__:{quote(self.token, safe='')}@{parts.netloc}"))

    def _identity(self) -> tuple[str, tuple[str, ...]]:
        me = self._call(self.api.whoami)
        namespaces = (me["name"], *(org["name"] for org in me.get("orgs", [])))
        role = ((me.get("auth") or {}).get("accessToken") or {}).get("role", "write")
        return str(me["name"]), tuple(namespaces) if role == "write" else ()

    def _is_private(self, repo: RepoId, kind: RepoKind) -> bool:
        return bool(self._call(self.api.repo_info, str(repo), repo_type=_repo_type(kind)).private)

    def _files_at_main(self, repo: RepoId, kind: RepoKind) -> tuple[str | None, dict[str, str]]:
        refs = self._call(self.api.list_repo_refs, str(repo), repo_type=_repo_type(kind))
        head = next((ref.target_commit for ref in refs.branches if ref.name == "main"), None)
        if head is None:
            return None, {}
        tree = self._call(
            lambda: list(self.api.list_repo_tree(str(repo), revision=head, recursive=True, repo_type=_repo_type(kind)))
        )
        return head, {entry.path: entry.blob_id for entry in tree if hasattr(entry, "blob_id")}

    def _read_file(self, repo: RepoId, path: str, kind: RepoKind, revision: str) -> bytes:
        import tempfile

        from huggingface_hub import hf_hub_download

        with tempfile.TemporaryDirectory(prefix="verihub-read-") as scratch:
            local = self._call(
                hf_hub_download,
                str(repo),
                path,
                repo_type=_repo_type(kind),
                revision=revision,
                endpoint=self.url,
                token=self.token or False,
                cache_dir=scratch,
            )
            return Path(local).read_bytes()

    def _commit_files(
        self, repo: RepoId, kind: RepoKind, files: dict[str, bytes], message: str, *, parent: str | None
    ) -> str:
        from huggingface_hub import CommitOperationAdd

        operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=data) for name, data in files.items()]
        return str(
            self._call(
                self.api.create_commit,
                str(repo),
                operations,
                commit_message=message,
                repo_type=_repo_type(kind),
                parent_commit=parent,
            ).oid
        )

    # -- translation at the seam -----------------------------------------------------------------------

    def _call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        with _translated():
            return function(*args, **kwargs)


def _repo_type(kind: RepoKind) -> str | None:
    return "dataset" if kind == "dataset" else None  # environments and verifiers are models to the client


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
