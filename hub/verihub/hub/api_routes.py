"""The Hugging Face Hub API subset that the unmodified ``huggingface_hub`` client uses (dataset repositories,
regular uploads, no LFS/Xet). Every route of ``repo_router`` serves one repository and sees it only through
:func:`~verihub.hub.deps.visible_repo`; the router is mounted at ``/api/datasets`` (every repository:
environments, verifier packages, eval results, other datasets) and, for one release, at ``/api/models``, where
environments and verifier packages were before they were datasets (it never shows eval results). The account
routes find repositories through the same rule."""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
from typing import Annotated, Any, Literal
from urllib.parse import parse_qs, unquote

import yaml
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from verihub.hub.accounts import Identity
from verihub.hub.deps import (
    MAX_COMMIT_BYTES,
    MAX_JSON_BYTES,
    Hub,
    User,
    Viewer,
    VisibleRepo,
    WritableRepo,
    base_url,
    check_writer,
    error_response,
    identity,
    json_body,
    raw_body,
    raw_segments,
    user,
    visible_repo,
    writable_repo,
)
from verihub.hub.errors import EntryNotFoundError, ErrorCode, ForbiddenError, InvalidRequestError, RevisionNotFoundError
from verihub.hub.policy import RepoType
from verihub.hub.roles import PACKAGE_ROLES, role_of
from verihub.hub.state import HubState
from verihub.hub.storage import FileEntry
from verihub.ids import RepoId
from verihub.serve.body import describe

__all__ = ["REPO_MOUNTS", "account_router", "repo_info", "repo_router"]

account_router = APIRouter()
repo_router = APIRouter(prefix="/{owner}/{name}", dependencies=[Depends(visible_repo)])  # at REPO_MOUNTS
REPO_MOUNTS = ("/api/datasets", "/api/models")
_TYPES: dict[str | None, RepoType] = {None: "model", "model": "model", "dataset": "dataset"}


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class CreateRepo(_Body):
    name: str
    organization: str | None = None
    private: bool | None = None
    visibility: Literal["public", "private"] | None = None
    type: str | None = None


class DeleteRepo(_Body):
    name: str
    organization: str | None = None
    type: str | None = None


class YamlToCheck(_Body):
    content: str = ""


class NewTag(_Body):
    tag: str = Field(min_length=1, max_length=200)


class NewBranch(_Body):
    startingPoint: str | None = None  # noqa: N815 - the client's field name


class FileToUpload(_Body):
    path: str


class Preupload(_Body):
    files: list[FileToUpload] = Field(default_factory=list, max_length=100_000)


# -- account and repositories ------------------------------------------------------------------------


@account_router.get("/api/whoami-v2")
def whoami(who: User) -> dict[str, Any]:
    return {
        "type": "user",
        "name": who.user,
        "orgs": [{"name": org, "type": "org"} for org in who.orgs],
        "auth": {"accessToken": {"displayName": "token", "role": who.role}},
    }


@account_router.post("/api/repos/create")
def create_repo(
    request: Request, who: User, body: Annotated[CreateRepo, Depends(json_body(CreateRepo, user))], hub: Hub
) -> Response:
    owner = body.organization or who.user
    try:
        repo = RepoId(owner, body.name)
    except ValueError as error:
        raise InvalidRequestError(str(error)) from None
    if not who.can_write(repo.owner):
        raise ForbiddenError(f"{who.user} cannot create repositories under {repo.owner}")
    _repo_type_of(body.type)  # a model (what an older verihub asks for) is made a dataset, as every repository is
    url = f"{base_url(request)}/datasets/{repo}"
    private = body.visibility == "private" or bool(body.private)
    # the listing row is written under the repository's lock, so a concurrent delete cannot orphan it
    if not hub.storage.create_repo(
        repo,
        private=private,
        exist_ok=True,  # the client's exist_ok reads the 409
        then=lambda: hub.accounts.add_repo(repo, "dataset", private),
    ):
        return error_response(409, ErrorCode.REPO_EXISTS, "You already created this dataset repo", extra={"url": url})
    return JSONResponse({"url": url, "name": str(repo)})


@account_router.delete("/api/repos/delete")
def delete_repo(
    who: User, body: Annotated[DeleteRepo, Depends(json_body(DeleteRepo, user))], hub: Hub
) -> dict[str, str]:
    _repo_type_of(body.type)
    repo = hub.visibility.repo(who, body.organization or who.user, body.name)
    check_writer(who, repo)

    def forget() -> None:  # derived rows first: a crash in between leaves a repository the start lists again
        hub.accounts.remove_repo(repo)
        hub.leaderboard.forget(repo)

    hub.storage.delete_repo(repo, first=forget)
    return {}


def _repo_type_of(repo_type: str | None) -> RepoType:
    if repo_type not in _TYPES:
        raise InvalidRequestError(
            f"repository type {str(repo_type)[:40]!r}: this hub keeps datasets (environments, verifier packages, "
            "eval results)"
        )
    return _TYPES[repo_type]


@account_router.post("/api/validate-yaml")
def validate_yaml(body: Annotated[YamlToCheck, Depends(json_body(YamlToCheck, identity))]) -> Response:
    errors = []
    if body.content.startswith("---"):
        try:
            yaml.safe_load(body.content.split("---", 2)[1])
        except (yaml.YAMLError, RecursionError) as error:  # RecursionError: nested past what the parser follows
            errors.append({"message": f"invalid YAML front-matter: {error}"})
    return JSONResponse({"errors": errors, "warnings": []}, status_code=400 if errors else 200)


@account_router.get("/api/models")
def list_models(
    who: Viewer,
    hub: Hub,
    search: str = "",
    author: str | None = None,
    sort: str | None = None,
    limit: Annotated[int | None, Query(ge=1, le=100_000)] = None,
    filter: Annotated[list[str], Query()] = [],  # noqa: B006 - FastAPI makes a fresh default per request
) -> list[dict[str, Any]]:
    return _listing(who, hub, PACKAGE_ROLES, search, author, sort, limit, filter)  # as before they were datasets


@account_router.get("/api/datasets")
def list_datasets(
    who: Viewer,
    hub: Hub,
    search: str = "",
    author: str | None = None,
    sort: str | None = None,
    limit: Annotated[int | None, Query(ge=1, le=100_000)] = None,
    filter: Annotated[list[str], Query()] = [],  # noqa: B006 - FastAPI makes a fresh default per request
) -> list[dict[str, Any]]:
    return _listing(who, hub, (), search, author, sort, limit, filter)


def _listing(
    who: Identity | None,
    hub: HubState,
    kinds: tuple[str, ...],
    search: str,
    author: str | None,
    sort: str | None,
    limit: int | None,
    filter: list[str],
) -> list[dict[str, Any]]:  # noqa: A002 - the hub API's query parameter is named filter
    wanted_tags = set(filter)
    found = hub.accounts.search(
        text=search,
        author=author,
        namespaces=hub.visibility.namespaces(who),
        kinds=kinds,
        sort=sort,
        limit=None if wanted_tags else limit,
    )
    items = [
        {
            "id": str(meta.repo),
            "author": meta.repo.owner,
            "private": meta.private,
            "tags": list(meta.tags),
            "downloads": meta.downloads,
            "likes": 0,
            "lastModified": _date(meta.modified or meta.created),
            "createdAt": _date(meta.created),
            "kind": meta.kind,
            "summary": meta.summary,
        }
        for meta in hub.visibility.listing(who, found)
        if wanted_tags <= set(meta.tags)
    ]
    return items[:limit] if limit else items


# -- one repository ------------------------------------------------------------------------------------


@repo_router.get("")
def model_info(repo: VisibleRepo, hub: Hub) -> dict[str, Any]:
    return repo_info(hub, repo, "main")


@repo_router.get("/revision/{revision:path}")
def model_info_at(revision: str, repo: VisibleRepo, hub: Hub) -> dict[str, Any]:
    hub.storage.resolve(repo, revision)
    return repo_info(hub, repo, revision)


@repo_router.get("/tree/{rest:path}")
def tree(request: Request, repo: VisibleRepo, hub: Hub, recursive: bool = False) -> list[dict[str, Any]]:
    segments = raw_segments(request)[5:]  # api, models, owner, name, tree
    revision = unquote(segments[0]) if segments else "main"
    prefix = "/".join(unquote(s) for s in segments[1:]).strip("/")
    sha = hub.storage.resolve(repo, revision)
    entries = _tree(hub.storage.files(repo, sha), sha, prefix, recursive)
    if prefix and not entries:
        raise EntryNotFoundError(f"{prefix} does not exist at {revision}")
    return entries


@repo_router.post("/paths-info/{revision:path}")
def paths_info(
    revision: str, repo: VisibleRepo, hub: Hub, raw: Annotated[bytes, Depends(raw_body(MAX_JSON_BYTES, visible_repo))]
) -> list[dict[str, Any]]:
    sha = hub.storage.resolve(repo, revision)
    try:
        wanted = parse_qs(raw.decode(), errors="strict").get("paths", [])
    except (UnicodeDecodeError, ValueError):
        raise InvalidRequestError("paths-info takes a form body: paths=PATH&paths=PATH") from None
    files = {entry.path: entry for entry in hub.storage.files(repo, sha)}
    # Every folder once, so a request costs one lookup a path (scanning the files per path made 100,000
    # paths against 20,000 files take minutes, asked anonymously).
    folders = {name.rsplit("/", depth)[0] for name in files for depth in range(1, name.count("/") + 1)}
    found = []
    for path in wanted:
        path = path.strip("/")
        if path in files:
            found.append(_file_entry(files[path]))
        elif path in folders:
            found.append({"type": "directory", "path": path, "oid": _folder_oid(path, sha)})
    return found


@repo_router.get("/refs")
def refs(repo: VisibleRepo, hub: Hub) -> dict[str, Any]:
    found = hub.storage.refs(repo)
    return {
        "branches": [
            {"name": n, "ref": f"refs/heads/{n}", "targetCommit": s} for n, s in sorted(found["branches"].items())
        ],
        "tags": [{"name": n, "ref": f"refs/tags/{n}", "targetCommit": s} for n, s in sorted(found["tags"].items())],
        "converts": [],
        "pullRequests": [],
    }


@repo_router.get("/commits/{revision:path}")
def commits(revision: str, repo: VisibleRepo, hub: Hub) -> list[dict[str, Any]]:
    return [
        {
            "id": c.sha,
            "title": c.message.splitlines()[0] if c.message else "",
            "message": c.message,
            "date": _date(c.timestamp),
            "authors": [{"user": repo.owner}],
        }
        for c in hub.storage.history(repo, revision)
    ]


@repo_router.post("/tag/{revision:path}")
def create_tag(
    revision: str, repo: WritableRepo, body: Annotated[NewTag, Depends(json_body(NewTag, writable_repo))], hub: Hub
) -> dict[str, Any]:
    hub.releases.tag(
        repo, body.tag, revision
    )  # a release tag publishes its dist/ files (again, if a crash cut it short)
    return {}


@repo_router.post("/branch/{branch:path}")
def create_branch(
    branch: str, repo: WritableRepo, body: Annotated[NewBranch, Depends(json_body(NewBranch, writable_repo))], hub: Hub
) -> dict[str, Any]:
    hub.storage.create_branch(repo, branch, body.startingPoint or "main")
    return {}


@repo_router.post("/preupload/{revision:path}")
def preupload(
    revision: str,
    repo: WritableRepo,
    body: Annotated[Preupload, Depends(json_body(Preupload, writable_repo))],
    hub: Hub,
) -> dict[str, Any]:
    known = {}
    if revision in hub.storage.refs(repo)["branches"]:
        known = {entry.path: entry.blob for entry in hub.storage.files(repo, revision)}
    return {
        "files": [
            {"path": f.path, "uploadMode": "regular", "shouldIgnore": False, "oid": known.get(f.path)}
            for f in body.files
        ]
    }


@repo_router.post("/commit/{revision:path}")
def commit(
    request: Request,
    revision: str,
    repo: WritableRepo,
    raw: Annotated[bytes, Depends(raw_body(MAX_COMMIT_BYTES, writable_repo))],
    hub: Hub,
) -> dict[str, Any]:
    branches = hub.storage.refs(repo)["branches"]
    if branches and revision not in branches:
        try:
            hub.storage.resolve(repo, revision)
        except RevisionNotFoundError:
            raise RevisionNotFoundError(f"commits go to a branch; {revision!r} is not one") from None
        raise InvalidRequestError(f"commits go to a branch; {revision!r} is a tag or a commit")
    existing = {entry.path for entry in hub.storage.files(repo, revision)} if branches else set()
    summary, added, deleted, parent = _parse_commit(raw, existing)
    sha = hub.storage.commit(repo, added, summary or "update", branch=revision, delete=tuple(deleted), parent=parent)
    if revision == "main":
        hub.refresh_listing(repo)  # derived from main: the listing, and a results repository's leaderboard rows
    return {"commitOid": sha, "commitUrl": f"{base_url(request)}/{repo}/commit/{sha}", "success": True}


# -- the NDJSON commit body ----------------------------------------------------------------------------


class _Header(_Body):
    summary: str = ""
    description: str = ""
    parentCommit: str | None = Field(default=None, pattern="^[0-9a-f]{40}$")  # noqa: N815 - the client's name


class _File(_Body):
    path: str
    content: str
    encoding: Literal["base64", "utf-8"] = "base64"


class _Path(_Body):
    path: str


class _HeaderLine(_Body):
    key: Literal["header"]
    value: _Header


class _FileLine(_Body):
    key: Literal["file"]
    value: _File


class _DeletedFileLine(_Body):
    key: Literal["deletedFile"]
    value: _Path


class _DeletedFolderLine(_Body):
    key: Literal["deletedFolder"]
    value: _Path


_LINE = TypeAdapter(
    Annotated[_HeaderLine | _FileLine | _DeletedFileLine | _DeletedFolderLine, Field(discriminator="key")]
)
_KEYS = ("header", "file", "deletedFile", "deletedFolder")


def _parse_commit(raw: bytes, existing: set[str]) -> tuple[str, dict[str, bytes], list[str], str | None]:
    """(summary, files added, paths deleted, the parent commit it expects) of an NDJSON commit body;
    InvalidRequestError naming the line."""
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise InvalidRequestError("the commit body must be UTF-8 NDJSON") from None
    summary, added, deleted, parent = "", {}, [], None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: nested past what the parser follows
            raise InvalidRequestError(f"commit line {number} is not JSON") from None
        key = item.get("key") if isinstance(item, dict) else None
        if key not in _KEYS:
            raise InvalidRequestError(
                f"commit line {number}: unsupported commit operation {str(key)[:40]!r} "
                "(no LFS here: upload files as regular)"
            )
        try:
            operation = _LINE.validate_python(item)
        except ValidationError as error:
            raise InvalidRequestError(f"commit line {number}: {describe(error)}") from None
        value = operation.value
        if isinstance(value, _Header):
            summary = value.summary + ("\n\n" + value.description if value.description else "")
            parent = value.parentCommit
        elif isinstance(value, _File):
            added[value.path] = _content(value, number)
        elif isinstance(operation, _DeletedFileLine):
            if value.path not in existing:
                raise EntryNotFoundError(f"A file with this name doesn't exist: {value.path[:200]}")
            deleted.append(value.path)
        else:
            folder = value.path.rstrip("/") + "/"
            deleted += [path for path in existing if path.startswith(folder)]
    return summary, added, deleted, parent


def _content(value: _File, number: int) -> bytes:
    if value.encoding == "utf-8":
        return value.content.encode()
    try:
        return base64.b64decode(value.content, validate=True)
    except ValueError:  # binascii.Error, and a content that is not ASCII
        raise InvalidRequestError(
            f"commit line {number}: the content of {value.path[:200]!r} is not valid base64"
        ) from None


# -- answers in the client's shapes --------------------------------------------------------------------


def _date(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _file_entry(entry: FileEntry) -> dict[str, Any]:
    return {"type": "file", "path": entry.path, "oid": entry.blob, "size": entry.size}


def _folder_oid(path: str, sha: str) -> str:
    return hashlib.sha1(f"{sha}:{path}".encode()).hexdigest()


def _tree(files: list[FileEntry], sha: str, prefix: str, recursive: bool) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    folders: set[str] = set()
    lead = f"{prefix}/" if prefix else ""
    for entry in files:
        if not entry.path.startswith(lead):
            continue
        rest = entry.path[len(lead) :]
        if recursive or "/" not in rest:
            entries.append(_file_entry(entry))
        else:
            folders.add(lead + rest.split("/")[0])
    entries += [{"type": "directory", "path": folder, "oid": _folder_oid(folder, sha)} for folder in sorted(folders)]
    return entries


def repo_info(hub: HubState, repo: RepoId, revision: str) -> dict[str, Any]:
    private = hub.storage.is_private(repo)
    try:
        sha = hub.storage.resolve(repo, revision)
    except RevisionNotFoundError:
        if revision != "main":
            raise
        meta = hub.accounts.repo(repo)  # a new repository: no commit yet
        return {
            "id": str(repo),
            "author": repo.owner,
            "sha": None,
            "private": private,
            "tags": [],
            "siblings": [],
            "downloads": 0,
            "likes": 0,
            "lastModified": _date(meta.created if meta else 0),
        }
    files = hub.storage.files(repo, sha)
    _, card = hub.card(repo, sha, {entry.path for entry in files})
    meta = hub.accounts.repo(repo)
    tags = (
        [str(tag) for tag in card.get("tags", []) if isinstance(tag, str)] if isinstance(card.get("tags"), list) else []
    )
    return {
        "id": str(repo),
        "author": repo.owner,
        "sha": sha,
        "private": private,
        "lastModified": _date(hub.storage.commit_time(repo, sha)),
        "tags": tags,
        "cardData": card,
        "siblings": [{"rfilename": e.path, "size": e.size} for e in files],
        "downloads": meta.downloads if meta else 0,
        "likes": 0,
        "kind": role_of(entry.path for entry in files),
    }
