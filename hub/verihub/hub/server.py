"""The hub server: the subset of the Hugging Face Hub HTTP API that the unmodified ``huggingface_hub``
client uses, the pip simple index and its files, and web pages.

    verihub hub serve --port 8080 --data ./hubdata
    HF_ENDPOINT=http://127.0.0.1:8080 python -c 'import huggingface_hub; ...'
    pip install --index-url http://127.0.0.1:8080/simple/ alice-arithmetic

The routes live in three modules (:mod:`~verihub.hub.api_routes`, :mod:`~verihub.hub.index_routes`,
:mod:`~verihub.hub.page_routes`) over shared dependencies (:mod:`~verihub.hub.deps`: identity, the
visibility rule, bounded bodies read after authorization). Errors carry ``X-Error-Code``
(:mod:`~verihub.hub.errors`), the Hugging Face codes among them, so clients raise their own exception types.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI

from verihub.hub.api_routes import REPO_MOUNTS, account_router, repo_router
from verihub.hub.deps import install_error_handlers
from verihub.hub.index_routes import index_router, project_router
from verihub.hub.page_routes import PAGE_MOUNTS, listing_router, repo_page_router
from verihub.hub.state import HubState

__all__ = ["MOUNTS", "ROUTERS", "create_app"]

# (router, prefix), in this order: /{owner}/{name} (the package page) must not shadow the API or /datasets/...
MOUNTS: tuple[tuple[APIRouter, str], ...] = (
    (account_router, ""),
    *((repo_router, prefix) for prefix in REPO_MOUNTS),
    (index_router, ""),
    (project_router, ""),
    (listing_router, ""),
    *((repo_page_router, prefix) for prefix in PAGE_MOUNTS),
)
ROUTERS = tuple({id(router): router for router, _ in MOUNTS}.values())


INDEX_ROUTERS = (index_router, project_router)  # what --no-pip-index leaves out


def create_app(data: str | Path, *, pip_index: bool = True) -> FastAPI:
    """The app over the hub directory ``data``; first completes whatever a crash left half done. Without
    ``pip_index`` it serves no ``/simple/`` index nor its files, as huggingface.co does not: what verihub needs
    then goes through the Hub API alone."""
    hub = HubState.open(data)
    hub.start()
    app = FastAPI(title="verihub hub", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.hub = hub
    install_error_handlers(app)
    for router, prefix in MOUNTS:
        if pip_index or router not in INDEX_ROUTERS:
            app.include_router(router, prefix=prefix)
    return app
