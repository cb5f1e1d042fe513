"""A hub server over HTTP, through the huggingface_hub client (the same code talks to huggingface.co).

Pushing builds locally (as the embedded hub does), uploads the source plus ``dist/`` as one commit and
tags ``v{version}``; the server then puts the tagged wheel and sdist in its pip index. Installing is
plain pip against ``{url}/simple/``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from verihub.errors import VerihubError
from verihub.hub.build import Bump, dist_name, prepare
from verihub.hub.ids import RepoId, Requirement, VersionSpec
from verihub.hub.index import JSON_CONTENT_TYPE
from verihub.hub.install import pip_install
from verihub.hub.local import PushResult, VersionExistsError, blob_id

__all__ = ["RemoteHub"]


class RemoteHub:
    def __init__(self, url: str, token: str | None = None) -> None:
        from huggingface_hub import HfApi

        self.url = url.rstrip("/")
        self.api = HfApi(endpoint=self.url, token=token)

    @property
    def index_url(self) -> str:
        return f"{self.url}/simple/"

    def push(self, path: str | Path, *, owner: str | None = None, bump: Bump | None = None,
             validate: bool = True) -> PushResult:
        from huggingface_hub import CommitOperationAdd, CommitOperationDelete

        prepared = prepare(path, owner or self.api.whoami()["name"], bump=bump, validate=validate)
        source, repo, version, files = prepared.source, prepared.repo, prepared.version, prepared.files
        self.api.create_repo(str(repo), exist_ok=True)
        refs = self.api.list_repo_refs(str(repo))
        tags = {tag.name: tag.target_commit for tag in refs.tags}
        tag = f"v{version}"
        if tag in tags:
            published = {entry.path: entry.blob_id for entry in self.api.list_repo_tree(str(repo), revision=tags[tag],
                         recursive=True) if hasattr(entry, "blob_id") and not entry.path.startswith("dist/")}
            if published == {name: blob_id(content) for name, content in files.items()}:
                return PushResult(repo, version, tags[tag], False, ())
            raise VersionExistsError(f"{repo} {version} is already published with different content; versions never "
                                     "change: bump it (verihub push --bump patch|minor|major)")
        built = source.build(repo)
        if source.kind == "env":
            built.check_environment()
        current = set(self.api.list_repo_files(str(repo))) if refs.branches else set()
        uploads = {**files, **{f"dist/{name}": data for name, data in built.files.items()}}
        operations: list[Any] = [CommitOperationDelete(path) for path in sorted(current - set(uploads))]
        operations += [CommitOperationAdd(path_in_repo=name, path_or_fileobj=data) for name, data in uploads.items()]
        commit = self.api.create_commit(str(repo), operations, commit_message=f"{repo} {version}")
        self.api.create_tag(str(repo), tag=tag, revision=commit.oid)
        return PushResult(repo, version, commit.oid, True, tuple(built.files))

    def versions(self, repo: RepoId) -> list[str]:
        from packaging.version import Version

        tags = [tag.name[1:] for tag in self.api.list_repo_refs(str(repo)).tags if tag.name.startswith("v")]
        return sorted(tags, key=Version)

    def info(self, repo: RepoId) -> dict[str, Any]:
        versions = self.versions(repo)
        latest = VersionSpec.parse("latest").best(versions) if versions else None
        card = ""
        if latest:
            from huggingface_hub import hf_hub_download

            card = Path(hf_hub_download(str(repo), "README.md", revision=f"v{latest}", endpoint=self.url,
                                        token=self.api.token)).read_text()
        kind = getattr(self.api.model_info(str(repo)), "kind", "env")
        return {"repo": str(repo), "kind": kind, "versions": versions, "latest": latest, "card": card,
                "distribution": dist_name(repo), "install": f"verihub install {repo}@{latest} --hub {self.url}"}

    def search(self, query: str = "", kind: str | None = None) -> list[dict[str, Any]]:
        found = []
        for model in self.api.list_models(search=query or None):
            model_kind = getattr(model, "kind", "env")
            if kind and model_kind != kind:
                continue
            found.append({"repo": model.id, "kind": model_kind, "latest": None, "summary": ""})
        return found

    def install(self, requirement: str | Requirement, *, python: str = sys.executable) -> tuple[RepoId, str]:
        wanted = Requirement.parse(requirement) if isinstance(requirement, str) else requirement
        version = wanted.spec.best(self.versions(wanted.repo))
        pip_install(self.index_url, wanted.repo, version, python=python, wheel=self._wheel(wanted.repo, version))
        return wanted.repo, version

    def _wheel(self, repo: RepoId, version: str) -> bytes | None:
        """The version's wheel from the server's index, checked against the index's sha256."""
        import hashlib

        import httpx

        project = dist_name(repo)
        page = httpx.get(f"{self.index_url}{project}/", headers={"Accept": JSON_CONTENT_TYPE}, timeout=60)
        if page.status_code != 200:
            return None
        prefix = f"{project.replace('-', '_')}-{version}-"
        for entry in page.json().get("files", []):
            if entry["filename"].startswith(prefix) and entry["filename"].endswith(".whl"):
                data = httpx.get(entry["url"], timeout=300).content
                if hashlib.sha256(data).hexdigest() != entry["hashes"]["sha256"]:
                    raise VerihubError(f"{entry['filename']} does not match the sha256 the index gives")
                return data
        return None


