"""The web pages: a searchable list of packages and one page per package. ``repo_page_router`` also
serves a repository's files (``/{owner}/{name}/resolve/...``); all its routes see the repository only
through :func:`~verihub.hub.deps.visible_repo`. Registered last: ``/{owner}/{name}`` must not shadow the API."""

from __future__ import annotations

from urllib.parse import unquote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from verihub.hub.api_routes import repo_info
from verihub.hub.deps import Hub, Viewer, VisibleRepo, base_url, raw_segments, visible_repo
from verihub.hub.errors import EntryNotFoundError
from verihub.hub.ids import release_versions
from verihub.hub.pages import listing_page, package_page

__all__ = ["listing_router", "repo_page_router"]

listing_router = APIRouter()
repo_page_router = APIRouter(prefix="/{owner}/{name}", dependencies=[Depends(visible_repo)])


@listing_router.get("/", response_class=HTMLResponse)
def home(who: Viewer, hub: Hub, q: str = "") -> HTMLResponse:
    found = hub.accounts.search(text=q, namespaces=hub.visibility.namespaces(who), sort="downloads" if not q else None,
                                limit=200)
    rows = [{"id": str(m.repo), "kind": m.kind, "summary": m.summary, "downloads": m.downloads}
            for m in hub.visibility.listing(who, found)]
    return HTMLResponse(listing_page(q, rows))


@repo_page_router.get("", response_class=HTMLResponse)
def package(request: Request, repo: VisibleRepo, hub: Hub) -> HTMLResponse:
    versions = release_versions(hub.storage.refs(repo)["tags"])
    revision = f"v{versions[-1]}" if versions else "main"
    info = repo_info(hub, repo, revision)
    files = [s["rfilename"] for s in info.get("siblings", [])]
    card = hub.storage.read(repo, "README.md", revision).decode("utf-8", "replace") if "README.md" in files else ""
    evaluation = hub.storage.read(repo, "eval/metadata.json", revision).decode("utf-8", "replace") \
        if "eval/metadata.json" in files else None
    install = f"verihub install {repo}" + (f"@{versions[-1]}" if versions else "") + f" --hub {base_url(request)}"
    return HTMLResponse(package_page(info, versions, files, card, install, evaluation))


@repo_page_router.api_route("/resolve/{rest:path}", methods=["GET", "HEAD"])
def resolve(request: Request, repo: VisibleRepo, hub: Hub) -> Response:
    segments = raw_segments(request)[3:]  # owner, name, resolve
    if len(segments) < 2:
        raise EntryNotFoundError("resolve needs a revision and a file")
    sha = hub.storage.resolve(repo, unquote(segments[0]))
    path = "/".join(unquote(s) for s in segments[1:])
    entry = next((e for e in hub.storage.files(repo, sha) if e.path == path), None)
    if entry is None:
        raise EntryNotFoundError(f"{path[:200]} does not exist at {sha[:12]}", commit=sha)
    headers = {"X-Repo-Commit": sha, "ETag": f'"{entry.blob}"', "Content-Length": str(entry.size), "Accept-Ranges": "none"}
    if request.method == "HEAD":
        return Response(status_code=200, headers=headers)
    hub.accounts.count_download(repo)
    return Response(hub.storage.read(repo, path, sha), headers=headers, media_type="application/octet-stream")
