"""The web pages: a searchable list of repositories and one page per repository. ``repo_page_router`` also
serves a repository's files (``/datasets/{owner}/{name}/resolve/...``); all its routes see the repository only
through :func:`~verihub.hub.deps.visible_repo`. It is mounted twice: at ``/datasets``, where every repository's
page is, and, last, at the root (``/{owner}/{name}`` must not shadow the API), where environments and verifier
packages were before they were datasets: a page there redirects, and its ``resolve`` still serves files for one
release."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import unquote

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from packaging.version import Version

from verihub.hub.api_routes import repo_info
from verihub.hub.deps import Hub, Viewer, VisibleRepo, base_url, raw_segments, repo_type, visible_repo
from verihub.hub.env_view import environment_view
from verihub.hub.errors import EntryNotFoundError, RepoNotFoundError, RevisionNotFoundError
from verihub.hub.ids import release_version
from verihub.hub.leaderboard import LeaderboardRow
from verihub.hub.pages import CSP, DatasetPage, PackagePage, dataset_page, listing_page, package_page
from verihub.hub.results import CARD, MAX_METADATA_BYTES, linked_environment
from verihub.hub.roles import PACKAGE_ROLES, RL_ENVIRONMENT_TAG, Role, role_of
from verihub.hub.state import HubState
from verihub.ids import RepoId

__all__ = ["PAGE_MOUNTS", "listing_router", "repo_page_router"]

listing_router = APIRouter()
repo_page_router = APIRouter(prefix="/{owner}/{name}", dependencies=[Depends(visible_repo)])
PAGE_MOUNTS = ("/datasets", "")  # in this order: the root mount would take /datasets/OWNER/NAME for OWNER/NAME


def _html(text: str) -> HTMLResponse:
    return HTMLResponse(text, headers={"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff"})


LISTED: tuple[Role, ...] = ("env", "verifier", "dataset")  # the home page's; eval results are on their pages
MAX_LISTED = 200


@listing_router.get("/", response_class=HTMLResponse)
def home(
    who: Viewer,
    hub: Hub,
    q: str = "",
    other: Annotated[list[str], Query(max_length=200)] = [],  # noqa: B006 - FastAPI makes a fresh default per request
) -> HTMLResponse:
    """Repositories whose id or summary holds ``q`` and that carry every tag ``other`` names (as the Hub's
    ``/datasets?other=rl-environment``), most downloaded first."""
    wanted = set(other[:10])
    found = hub.accounts.search(
        text=q,
        namespaces=hub.visibility.namespaces(who),
        kinds=LISTED,
        sort="downloads" if not q else None,
        limit=None if wanted else MAX_LISTED,
    )
    rows = [
        {
            "id": str(m.repo),
            "kind": m.kind,
            "summary": m.summary,
            "downloads": m.downloads,
            "rl_environment": RL_ENVIRONMENT_TAG in m.tags,
        }
        for m in hub.visibility.listing(who, found)
        if wanted <= set(m.tags)
    ]
    return _html(listing_page(q, rows[:MAX_LISTED], sorted(wanted)))


@repo_page_router.get("", response_class=HTMLResponse)
def page(request: Request, repo: VisibleRepo, who: Viewer, hub: Hub) -> Response:
    if repo_type(request) == "model":  # where packages were before they were datasets
        return RedirectResponse(f"/datasets/{repo}", status_code=301)
    revision = _latest_release(hub, repo) or "main"
    try:
        role = role_of(entry.path for entry in hub.storage.files(repo, revision))
    except RevisionNotFoundError:
        role = "dataset"
    if role in PACKAGE_ROLES:
        return _html(_package(request, hub, repo, who))
    return _html(_dataset(request, hub, repo, role))


@repo_page_router.api_route("/resolve/{rest:path}", methods=["GET", "HEAD"])
def resolve(request: Request, repo: VisibleRepo, hub: Hub) -> Response:
    segments = raw_segments(request)[4 if repo_type(request) == "dataset" else 3 :]  # [datasets,] owner, name, resolve
    if len(segments) < 2:
        raise EntryNotFoundError("resolve needs a revision and a file")
    sha = hub.storage.resolve(repo, unquote(segments[0]))
    path = "/".join(unquote(s) for s in segments[1:])
    entry = next((e for e in hub.storage.files(repo, sha) if e.path == path), None)
    if entry is None:
        raise EntryNotFoundError(f"{path[:200]} does not exist at {sha[:12]}", commit=sha)
    headers = {
        "X-Repo-Commit": sha,
        "ETag": f'"{entry.blob}"',
        "Content-Length": str(entry.size),
        "Accept-Ranges": "none",
        "X-Content-Type-Options": "nosniff",
    }
    if request.method == "HEAD":
        return Response(status_code=200, headers=headers)
    hub.accounts.count_download(repo)
    return Response(hub.storage.read(repo, path, sha), headers=headers, media_type="application/octet-stream")


# -- what the pages show ---------------------------------------------------------------------------------


def _latest_release(hub: HubState, repo: RepoId) -> str | None:
    versions = [version for tag in hub.storage.refs(repo)["tags"] if (version := release_version(tag)) is not None]
    return f"v{max(versions, key=Version)}" if versions else None


def _package(request: Request, hub: HubState, repo: RepoId, who: Viewer) -> str:
    tags = hub.storage.tag_times(repo)
    versions = sorted(
        ((version, stamp) for tag, (_, stamp) in tags.items() if (version := release_version(tag)) is not None),
        key=lambda pair: Version(pair[0]),
    )
    revision = f"v{versions[-1][0]}" if versions else "main"
    info = repo_info(hub, repo, revision)
    files = [s["rfilename"] for s in info.get("siblings", [])]
    card = hub.storage.read(repo, "README.md", revision).decode("utf-8", "replace") if "README.md" in files else ""
    shipped = (
        hub.storage.read(repo, "eval/metadata.json", revision).decode("utf-8", "replace")
        if "eval/metadata.json" in files and _size(info, "eval/metadata.json") <= MAX_METADATA_BYTES
        else None
    )
    install = f"verihub install {repo}" + (f"@{versions[-1][0]}" if versions else "") + f" --hub {base_url(request)}"
    kind = str(info.get("kind", "dataset"))
    view = environment_view(hub.storage, repo, info["sha"]) if kind == "env" and info.get("sha") else None
    published = {version for version, _ in versions}
    rows = [
        row for row in hub.leaderboard.for_environment(repo) if row.version in published and _visible(hub, who, row)
    ]
    return package_page(
        PackagePage(
            str(repo),
            kind,
            hub.storage.is_private(repo),
            install,
            versions,
            files,
            card,
            view,
            rows,
            shipped,
            hub=base_url(request),
        )
    )


def _dataset(request: Request, hub: HubState, repo: RepoId, role: Role) -> str:
    info = repo_info(hub, repo, "main")
    files = [s["rfilename"] for s in info.get("siblings", [])]
    card = (
        hub.storage.read(repo, CARD, "main").decode("utf-8", "replace")
        if CARD in files and _size(info, CARD) <= MAX_METADATA_BYTES
        else ""
    )
    environment = linked_environment(card)
    runs, skipped = hub.leaderboard.for_dataset(repo)
    tags = [str(tag) for tag in info.get("tags", [])]
    return dataset_page(
        DatasetPage(
            str(repo),
            hub.storage.is_private(repo),
            str(environment) if environment else None,
            runs,
            skipped,
            files,
            card,
            results=role == "results",
            tags=tags,
            hub=base_url(request),
        )
    )


def _visible(hub: HubState, who: Viewer, row: LeaderboardRow) -> bool:
    """A leaderboard row shows only to those who may see the results repository it comes from."""
    try:
        hub.visibility.repo(who, row.dataset.owner, row.dataset.name)
    except RepoNotFoundError:
        return False
    return True


def _size(info: dict[str, object], path: str) -> int:
    siblings: Any = info.get("siblings") or []
    return next((int(s["size"]) for s in siblings if isinstance(s, dict) and s.get("rfilename") == path), 0)
