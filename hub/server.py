"""The hub server: the subset of the Hugging Face Hub HTTP API that the unmodified ``huggingface_hub``
client uses (model repositories, regular uploads, no LFS/Xet), plus the pip simple index.

    verihub hub serve --port 8080 --data ./hubdata
    HF_ENDPOINT=http://127.0.0.1:8080 python -c 'import huggingface_hub; ...'
    pip install --index-url http://127.0.0.1:8080/simple/ alice-arithmetic

Errors carry ``X-Error-Code`` (RepoNotFound, RevisionNotFound, EntryNotFound) so the client raises its own
exception types. Revisions and tree paths arrive %2F-encoded, and uvicorn decodes the path, so the
routes that need them read the raw path.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

import yaml
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from verihub.errors import VerihubError
from verihub.hub.accounts import Accounts, Identity
from verihub.hub.ids import RepoId
from verihub.hub.index import JSON_CONTENT_TYPE, project_json, project_page, root_json, root_page
from verihub.hub.local import CorruptFileError, LocalHub
from verihub.hub.pages import listing_page, package_page
from verihub.hub.storage import RevisionNotFoundError, TagExistsError

__all__ = ["create_app"]

MAX_COMMIT_BYTES = 512 << 20


class HubHTTPError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None, commit: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.commit = status, code, commit


def create_app(data: str | Path) -> FastAPI:
    hub = LocalHub(data)
    accounts = Accounts(Path(data) / "hub.db")
    app = FastAPI(title="verihub hub", docs_url=None, redoc_url=None)
    for repo, kind in hub.storage.repos():  # repositories pushed straight into the directory
        if accounts.repo(repo) is None:
            accounts.add_repo(repo, kind, private=False)
            _refresh_listing(hub, accounts, repo)

    @app.exception_handler(HubHTTPError)
    async def _error(request: Request, error: HubHTTPError) -> Response:
        headers = {"X-Error-Message": str(error)[:200]}
        if error.code:
            headers["X-Error-Code"] = error.code
        if error.commit:
            headers["X-Repo-Commit"] = error.commit
        return JSONResponse({"error": str(error)}, status_code=error.status, headers=headers)

    def identity(request: Request) -> Identity | None:
        header = request.headers.get("authorization", "")
        return accounts.identify(header[7:].strip() if header.lower().startswith("bearer ") else None)

    def visible(request: Request, owner: str, name: str) -> RepoId:
        """The repository, if it exists and the caller may see it (private ones only to their owner)."""
        try:
            repo = RepoId.parse(f"{owner}/{name}")
        except ValueError as error:
            raise HubHTTPError(404, str(error), "RepoNotFound") from None
        meta = accounts.repo(repo)
        kind = hub.storage.kind_of(repo)
        if kind is None or (meta is not None and meta.private and not _owns(identity(request), repo)):
            raise HubHTTPError(404, f"Repository {repo} not found", "RepoNotFound")
        return repo

    def writable(request: Request, owner: str, name: str) -> RepoId:
        repo = visible(request, owner, name)
        who = identity(request)
        if who is None or not who.can_write(repo.owner):
            raise HubHTTPError(403, f"you cannot write to {repo}: a write token of {repo.owner} is needed")
        return repo

    def sha_of(repo: RepoId, revision: str) -> str:
        try:
            return hub.storage.resolve(repo, revision)
        except RevisionNotFoundError:
            raise HubHTTPError(404, f"Invalid rev id: {revision}", "RevisionNotFound") from None

    def base(request: Request) -> str:
        return str(request.base_url).rstrip("/")

    # -- account and repositories ------------------------------------------------------------------

    @app.get("/api/whoami-v2")
    async def whoami(request: Request) -> dict[str, Any]:
        who = identity(request)
        if who is None:
            raise HubHTTPError(401, "Invalid credentials in Authorization header")
        return {"type": "user", "name": who.user, "orgs": [{"name": org, "type": "org"} for org in who.orgs],
                "auth": {"accessToken": {"displayName": "token", "role": who.role}}}

    @app.post("/api/repos/create")
    async def create_repo(request: Request) -> Response:
        body = await request.json()
        who = identity(request)
        if who is None:
            raise HubHTTPError(401, "a token is needed to create a repository")
        owner = body.get("organization") or who.user
        if not who.can_write(owner):
            raise HubHTTPError(403, f"{who.user} cannot create repositories under {owner}")
        try:
            repo = RepoId.parse(f"{owner}/{body.get('name', '')}")
        except ValueError as error:
            raise HubHTTPError(400, str(error)) from None
        url = f"{base(request)}/{repo}"
        if hub.storage.kind_of(repo) is not None:
            return JSONResponse({"error": "You already created this model repo", "url": url}, status_code=409)
        kind = "verifier" if body.get("type") == "verifier" else "env"
        hub.storage.create_repo(repo, kind)
        accounts.add_repo(repo, kind, body.get("visibility") == "private" or bool(body.get("private")))
        return JSONResponse({"url": url, "name": str(repo)})

    @app.delete("/api/repos/delete")
    async def delete_repo(request: Request) -> dict[str, str]:
        body = await request.json()
        who = identity(request)
        owner = body.get("organization") or (who.user if who else "")
        repo = writable(request, owner, body.get("name", ""))
        hub.storage.delete_repo(repo)
        accounts.remove_repo(repo)
        return {}

    @app.post("/api/validate-yaml")
    async def validate_yaml(request: Request) -> Response:
        content = (await request.json()).get("content", "")
        errors = []
        if content.startswith("---"):
            try:
                yaml.safe_load(content.split("---", 2)[1])
            except yaml.YAMLError as error:
                errors.append({"message": f"invalid YAML front-matter: {error}"})
        return JSONResponse({"errors": errors, "warnings": []}, status_code=400 if errors else 200)

    @app.get("/api/models")
    async def list_models(request: Request) -> list[dict[str, Any]]:
        query = request.query_params
        who = identity(request)
        wanted_tags = set(query.getlist("filter"))
        limit = int(query["limit"]) if query.get("limit") and not wanted_tags else None
        found = accounts.search(text=query.get("search") or "", author=query.get("author"),
                                viewer=who, sort=query.get("sort"), limit=limit)
        items = [{"id": str(meta.repo), "author": meta.repo.owner, "private": meta.private, "tags": list(meta.tags),
                  "downloads": meta.downloads, "likes": 0, "lastModified": _date(meta.modified or meta.created),
                  "createdAt": _date(meta.created), "kind": meta.kind, "summary": meta.summary}
                 for meta in found if wanted_tags <= set(meta.tags)]
        return items[: int(query["limit"])] if query.get("limit") else items

    @app.get("/api/models/{owner}/{name}")
    async def model_info(request: Request, owner: str, name: str) -> dict[str, Any]:
        return await model_info_at(request, owner, name, "main")

    @app.get("/api/models/{owner}/{name}/revision/{revision:path}")
    async def model_info_at(request: Request, owner: str, name: str, revision: str) -> dict[str, Any]:
        repo = visible(request, owner, name)
        sha_of(repo, revision)
        info = _info(hub, accounts, repo, revision, base(request))
        if info is None:
            raise HubHTTPError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return info

    @app.get("/api/models/{owner}/{name}/tree/{rest:path}")
    async def tree(request: Request, owner: str, name: str, rest: str) -> list[dict[str, Any]]:
        repo = visible(request, owner, name)
        segments = _raw_segments(request)[5:]  # api, models, owner, name, tree
        revision = unquote(segments[0]) if segments else "main"
        prefix = "/".join(unquote(s) for s in segments[1:]).strip("/")
        sha = sha_of(repo, revision)
        recursive = request.query_params.get("recursive", "false").lower() == "true"
        entries = _tree(hub, repo, sha, prefix, recursive)
        if prefix and not entries:
            raise HubHTTPError(404, f"{prefix} does not exist at {revision}", "EntryNotFound")
        return entries

    @app.post("/api/models/{owner}/{name}/paths-info/{revision:path}")
    async def paths_info(request: Request, owner: str, name: str, revision: str) -> list[dict[str, Any]]:
        repo = visible(request, owner, name)
        sha = sha_of(repo, revision)
        wanted = parse_qs((await request.body()).decode()).get("paths", [])
        files = {entry.path: entry for entry in hub.storage.files(repo, sha)}
        found = []
        for path in wanted:
            path = path.strip("/")
            if path in files:
                found.append(_file_entry(files[path]))
            elif any(other.startswith(path + "/") for other in files):
                found.append({"type": "directory", "path": path, "oid": _folder_oid(path, sha)})
        return found

    @app.get("/api/models/{owner}/{name}/refs")
    async def refs(request: Request, owner: str, name: str) -> dict[str, Any]:
        repo = visible(request, owner, name)
        refs = hub.storage.refs(repo)
        return {
            "branches": [{"name": n, "ref": f"refs/heads/{n}", "targetCommit": s} for n, s in sorted(refs["branches"].items())],
            "tags": [{"name": n, "ref": f"refs/tags/{n}", "targetCommit": s} for n, s in sorted(refs["tags"].items())],
            "converts": [], "pullRequests": [],
        }

    @app.get("/api/models/{owner}/{name}/commits/{revision:path}")
    async def commits(request: Request, owner: str, name: str, revision: str) -> list[dict[str, Any]]:
        repo = visible(request, owner, name)
        sha_of(repo, revision)
        return [{"id": c.sha, "title": c.message.splitlines()[0] if c.message else "", "message": c.message,
                 "date": _date(c.timestamp), "authors": [{"user": repo.owner}]} for c in hub.storage.history(repo, revision)]

    @app.post("/api/models/{owner}/{name}/tag/{revision:path}")
    async def create_tag(request: Request, owner: str, name: str, revision: str) -> Response:
        repo = writable(request, owner, name)
        tag = (await request.json()).get("tag", "")
        sha = sha_of(repo, revision)
        dists = {e.path[5:]: hub.storage.read(repo, e.path, sha) for e in hub.storage.files(repo, sha)
                 if e.path.startswith("dist/") and e.path.endswith((".whl", ".tar.gz")) and e.path.count("/") == 1}
        version = tag.startswith("v") and bool(dists)  # a version: its built files join the pip index
        if version:
            try:
                hub.check_dists(repo, dists)
            except VerihubError as error:
                raise HubHTTPError(400, str(error)) from None
        try:
            created = hub.storage.tag(repo, tag, sha)
        except TagExistsError as error:
            raise HubHTTPError(409, str(error)) from None
        if created and version:
            hub.publish(repo, dists)
        return JSONResponse({})

    @app.post("/api/models/{owner}/{name}/branch/{branch:path}")
    async def create_branch(request: Request, owner: str, name: str, branch: str) -> Response:
        repo = writable(request, owner, name)
        body = await request.json() if await request.body() else {}
        if branch in hub.storage.refs(repo)["branches"]:
            raise HubHTTPError(409, f"branch {branch} already exists")
        hub.storage.create_branch(repo, branch, sha_of(repo, body.get("startingPoint") or "main"))
        return JSONResponse({})

    @app.post("/api/models/{owner}/{name}/preupload/{revision:path}")
    async def preupload(request: Request, owner: str, name: str, revision: str) -> dict[str, Any]:
        repo = writable(request, owner, name)
        known = {}
        if revision in hub.storage.refs(repo)["branches"]:
            known = {entry.path: entry.blob for entry in hub.storage.files(repo, revision)}
        files = (await request.json()).get("files", [])
        return {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False,
                           "oid": known.get(f["path"])} for f in files]}

    @app.post("/api/models/{owner}/{name}/commit/{revision:path}")
    async def commit(request: Request, owner: str, name: str, revision: str) -> dict[str, Any]:
        repo = writable(request, owner, name)
        body = await request.body()
        if len(body) > MAX_COMMIT_BYTES:
            raise HubHTTPError(413, f"a commit may carry at most {MAX_COMMIT_BYTES >> 20} MiB")
        branches = hub.storage.refs(repo)["branches"]
        if branches and revision not in branches:
            raise HubHTTPError(400 if _is_tag_or_sha(hub, repo, revision) else 404,
                               f"commits go to a branch; {revision!r} is not one", None if _is_tag_or_sha(hub, repo, revision) else "RevisionNotFound")
        existing = {entry.path for entry in hub.storage.files(repo, revision)} if branches else set()
        summary, added, deleted = "", {}, []
        for line in body.decode().splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            key, value = item.get("key"), item.get("value", {})
            if key == "header":
                summary = value.get("summary", "") + ("\n\n" + value["description"] if value.get("description") else "")
            elif key == "file":
                added[value["path"]] = base64.b64decode(value["content"]) if value.get("encoding") == "base64" else value["content"].encode()
            elif key == "deletedFile":
                if value["path"] not in existing:
                    raise HubHTTPError(404, f"A file with this name doesn't exist: {value['path']}", "EntryNotFound")
                deleted.append(value["path"])
            elif key == "deletedFolder":
                folder = value["path"].rstrip("/") + "/"
                deleted += [path for path in existing if path.startswith(folder)]
            else:
                raise HubHTTPError(400, f"unsupported commit operation {key!r} (no LFS here: upload files as regular)")
        try:
            sha = hub.storage.commit(repo, added, summary or "update", branch=revision, delete=tuple(deleted))
        except ValueError as error:
            raise HubHTTPError(400, str(error)) from None
        if revision == "main":
            _refresh_listing(hub, accounts, repo)
        return {"commitOid": sha, "commitUrl": f"{base(request)}/{repo}/commit/{sha}", "success": True}

    @app.api_route("/{owner}/{name}/resolve/{rest:path}", methods=["GET", "HEAD"])
    async def resolve(request: Request, owner: str, name: str, rest: str) -> Response:
        repo = visible(request, owner, name)
        segments = _raw_segments(request)[3:]  # owner, name, resolve
        if len(segments) < 2:
            raise HubHTTPError(404, "resolve needs a revision and a file", "EntryNotFound")
        sha = sha_of(repo, unquote(segments[0]))
        path = "/".join(unquote(s) for s in segments[1:])
        entry = next((e for e in hub.storage.files(repo, sha) if e.path == path), None)
        if entry is None:
            raise HubHTTPError(404, f"{path} does not exist at {sha[:12]}", "EntryNotFound", commit=sha)
        headers = {"X-Repo-Commit": sha, "ETag": f'"{entry.blob}"', "Content-Length": str(entry.size),
                   "Accept-Ranges": "none"}
        if request.method == "HEAD":
            return Response(status_code=200, headers=headers)
        accounts.count_download(repo)
        return Response(hub.storage.read(repo, path, sha), headers=headers, media_type="application/octet-stream")

    # -- the pip index ---------------------------------------------------------------------------------

    @app.get("/simple/")
    async def simple_root(request: Request) -> Response:
        projects = [path.name for path in (hub.root / "simple").iterdir() if path.is_dir()]
        if _wants_json(request):
            return JSONResponse(root_json(projects), media_type=JSON_CONTENT_TYPE)
        return HTMLResponse(root_page(projects))

    @app.get("/simple/{project}/")
    async def simple_project(request: Request, project: str) -> Response:
        from packaging.utils import canonicalize_name

        normalized = canonicalize_name(project)
        if normalized != project:
            return Response(status_code=301, headers={"Location": f"/simple/{normalized}/"})
        entries = hub.index_entries(normalized, url_prefix=f"{base(request)}/files")
        if not entries:
            raise HubHTTPError(404, f"no project {project}")
        if _wants_json(request):
            versions = sorted({_version_of(entry.filename) for entry in entries})
            return JSONResponse(project_json(normalized, entries, versions), media_type=JSON_CONTENT_TYPE)
        return HTMLResponse(project_page(normalized, entries))

    @app.get("/files/{project}/{filename}")
    async def download(project: str, filename: str) -> Response:
        try:
            data = hub.verified_file(project, filename)
        except FileNotFoundError as error:
            raise HubHTTPError(404, str(error)) from None
        except CorruptFileError as error:
            raise HubHTTPError(500, str(error)) from None
        return Response(data, media_type="application/octet-stream")

    # -- web pages (registered last: /{owner}/{name} must not shadow the API) ----------------------------

    @app.get("/", response_class=HTMLResponse)
    async def home(request: Request, q: str = "") -> HTMLResponse:
        who = identity(request)
        found = accounts.search(text=q, viewer=who, sort="downloads" if not q else None, limit=200)
        rows = [{"id": str(m.repo), "kind": m.kind, "summary": m.summary, "downloads": m.downloads} for m in found]
        return HTMLResponse(listing_page(q, rows))

    @app.get("/{owner}/{name}", response_class=HTMLResponse)
    async def package(request: Request, owner: str, name: str) -> HTMLResponse:
        repo = visible(request, owner, name)
        versions = sorted((t[1:] for t in hub.storage.refs(repo)["tags"] if t.startswith("v")), key=_version_key)
        revision = f"v{versions[-1]}" if versions else "main"
        info = _info(hub, accounts, repo, revision, base(request)) or {"id": str(repo), "siblings": []}
        files = [s["rfilename"] for s in info.get("siblings", [])]
        card = hub.storage.read(repo, "README.md", revision).decode("utf-8", "replace") if "README.md" in files else ""
        evaluation = hub.storage.read(repo, "eval/metadata.json", revision).decode() if "eval/metadata.json" in files else None
        install = f"verihub install {repo}" + (f"@{versions[-1]}" if versions else "") + f" --hub {base(request)}"
        return HTMLResponse(package_page(info, versions, files, card, install, evaluation))

    @app.exception_handler(VerihubError)
    async def _verihub_error(request: Request, error: VerihubError) -> Response:
        return JSONResponse({"error": str(error)}, status_code=400, headers={"X-Error-Message": str(error)[:200]})

    return app


def _owns(who: Identity | None, repo: RepoId) -> bool:
    return who is not None and who.owns(repo.owner)


def _raw_segments(request: Request) -> list[str]:
    raw = request.scope.get("raw_path") or request.url.path.encode()
    return [segment for segment in raw.decode("latin-1").split("/") if segment]


def _date(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _file_entry(entry: Any) -> dict[str, Any]:
    return {"type": "file", "path": entry.path, "oid": entry.blob, "size": entry.size}


def _folder_oid(path: str, sha: str) -> str:
    return hashlib.sha1(f"{sha}:{path}".encode()).hexdigest()


def _tree(hub: LocalHub, repo: RepoId, sha: str, prefix: str, recursive: bool) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    folders: set[str] = set()
    lead = f"{prefix}/" if prefix else ""
    for entry in hub.storage.files(repo, sha):
        if not entry.path.startswith(lead):
            continue
        rest = entry.path[len(lead):]
        if recursive or "/" not in rest:
            entries.append(_file_entry(entry))
        else:
            folders.add(lead + rest.split("/")[0])
    entries += [{"type": "directory", "path": folder, "oid": _folder_oid(folder, sha)} for folder in sorted(folders)]
    return entries


def _info(hub: LocalHub, accounts: Accounts, repo: RepoId, revision: str, base_url: str) -> dict[str, Any] | None:
    try:
        sha = hub.storage.resolve(repo, revision)
    except RevisionNotFoundError:
        if revision == "main":  # a new repository: no commit yet
            meta = accounts.repo(repo)
            return {"id": str(repo), "author": repo.owner, "sha": None, "private": bool(meta and meta.private),
                    "tags": [], "siblings": [], "downloads": 0, "likes": 0, "lastModified": _date(meta.created if meta else 0)}
        return None
    files = hub.storage.files(repo, sha)
    card: dict[str, Any] = {}
    if any(entry.path == "README.md" for entry in files):
        text = hub.storage.read(repo, "README.md", sha).decode("utf-8", "replace")
        if text.startswith("---"):
            try:
                card = yaml.safe_load(text.split("---", 2)[1]) or {}
            except yaml.YAMLError:
                card = {}
    meta = accounts.repo(repo)
    tags = [str(tag) for tag in card.get("tags", []) if isinstance(tag, str)] if isinstance(card, dict) else []
    return {
        "id": str(repo), "author": repo.owner, "sha": sha, "private": bool(meta and meta.private),
        "lastModified": _date(hub.storage.history(repo, sha)[0].timestamp), "tags": tags,
        "cardData": card if isinstance(card, dict) else {}, "siblings": [{"rfilename": e.path, "size": e.size} for e in files],
        "downloads": meta.downloads if meta else 0, "likes": 0, "kind": hub.storage.kind_of(repo),
    }


def _refresh_listing(hub: LocalHub, accounts: Accounts, repo: RepoId) -> None:
    from verihub.hub.local import _summary

    info = _info(hub, accounts, repo, "main", "")
    if info is None or info["sha"] is None:
        return
    card = hub.storage.read(repo, "README.md", info["sha"]).decode("utf-8", "replace") \
        if any(s["rfilename"] == "README.md" for s in info["siblings"]) else ""
    accounts.update_listing(repo, modified=hub.storage.history(repo, info["sha"])[0].timestamp, tags=info["tags"],
                            summary=_summary(card))


def _is_tag_or_sha(hub: LocalHub, repo: RepoId, revision: str) -> bool:
    try:
        hub.storage.resolve(repo, revision)
        return True
    except RevisionNotFoundError:
        return False


def _wants_json(request: Request) -> bool:
    return JSON_CONTENT_TYPE in request.headers.get("accept", "") or request.query_params.get("format") == "json"


def _version_key(version: str) -> Any:
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(version))
    except InvalidVersion:
        return (-1, version)


def _version_of(filename: str) -> str:
    stem = filename.removesuffix(".tar.gz").removesuffix(".zip")
    return stem.split("-")[1] if filename.endswith(".whl") else stem.rsplit("-", 1)[-1]
