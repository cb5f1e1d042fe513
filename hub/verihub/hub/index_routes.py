"""The pip index (PEP 503 HTML and PEP 691 JSON) and the files it links to. Every route of
``project_router`` serves one distribution and sees it only through
:func:`~verihub.hub.deps.visible_project`, so a private repository's packages install only for its owners
(``pip install --index-url http://__token__:TOKEN@HOST/simple/ NAME``, or a netrc entry)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from verihub.hub.deps import Hub, Viewer, visible_project
from verihub.hub.index import JSON_CONTENT_TYPE, root_json, root_page
from verihub.ids import RepoId

__all__ = ["index_router", "project_router"]

index_router = APIRouter()
project_router = APIRouter(dependencies=[Depends(visible_project)])
VisibleProject = Annotated[RepoId, Depends(visible_project)]


@index_router.get("/simple/")
def simple_root(request: Request, who: Viewer, hub: Hub) -> Response:
    projects = hub.visibility.projects(who)
    if _wants_json(request):
        return JSONResponse(root_json(projects), media_type=JSON_CONTENT_TYPE)
    return HTMLResponse(root_page(projects))


@project_router.get("/simple/{project}/")
def simple_project(request: Request, project: str, _: VisibleProject, hub: Hub) -> Response:
    """The page written when the project was last published: one file read, whatever its number of versions."""
    if _wants_json(request):
        return Response(hub.files.page(project, "json"), media_type=JSON_CONTENT_TYPE)
    return Response(hub.files.page(project, "html"), media_type="text/html; charset=utf-8")


@project_router.get("/files/{project}/{filename}")
def download(project: str, filename: str, _: VisibleProject, hub: Hub) -> Response:
    return Response(hub.files.read(project, filename), media_type="application/octet-stream")


def _wants_json(request: Request) -> bool:
    return JSON_CONTENT_TYPE in request.headers.get("accept", "") or request.query_params.get("format") == "json"
