"""What every route of the hub server depends on: who is asking, what they may see, and their request body.

- :func:`identity` reads the token from ``Authorization`` (``Bearer TOKEN``, as huggingface_hub sends it,
  or HTTP Basic with the token as password, as pip and uv send an index URL's ``__token__:TOKEN@``).
- :func:`visible_repo` and :func:`visible_project` apply the visibility rule of :mod:`verihub.hub.policy`;
  the routers that serve a repository or a distribution declare them for all their routes.
- Bodies are never parsed before the caller is authorized: :func:`json_body` and :func:`raw_body` depend on
  the route's authorization dependency, and read at most a fixed number of bytes.

Routes and the dependencies that touch git, files or SQLite are plain ``def`` functions (FastAPI runs them
in its thread pool), so they never block the event loop; only reading the body and pure checks run on it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from packaging.utils import canonicalize_name
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from verihub.hub.accounts import Identity
from verihub.hub.errors import (
    BodyTooLargeError,
    ErrorCode,
    ForbiddenError,
    HubError,
    InvalidRequestError,
    UnauthorizedError,
)
from verihub.hub.limits import MAX_COMMIT_BYTES, MAX_JSON_BYTES
from verihub.hub.policy import RepoType
from verihub.hub.state import HubState
from verihub.ids import RepoId
from verihub.serve import body
from verihub.serve.body import describe

__all__ = [
    "MAX_COMMIT_BYTES",
    "MAX_JSON_BYTES",
    "Hub",
    "User",
    "Viewer",
    "VisibleRepo",
    "WritableRepo",
    "base_url",
    "check_writer",
    "error_response",
    "identity",
    "install_error_handlers",
    "json_body",
    "raw_body",
    "raw_segments",
    "repo_type",
    "state",
    "user",
    "visible_project",
    "visible_repo",
    "writable_repo",
]


async def state(request: Request) -> HubState:  # async: no blocking, so no thread-pool hop
    return request.app.state.hub


def identity(request: Request, hub: HubState = Depends(state)) -> Identity | None:
    """The caller, or None when anonymous; a token that is malformed or unknown is a 401, never anonymous."""
    token = _token(request.headers.get("authorization"))
    if token is None:
        return None
    who = hub.accounts.identify(token)
    if who is None:
        raise UnauthorizedError("Invalid credentials in Authorization header")
    return who


async def user(who: Identity | None = Depends(identity)) -> Identity:
    if who is None:
        raise UnauthorizedError("a token is needed for this")
    return who


def visible_repo(
    request: Request, owner: str, name: str, who: Identity | None = Depends(identity), hub: HubState = Depends(state)
) -> RepoId:
    return hub.visibility.repo(who, owner, name, repo_type(request))


def repo_type(request: Request) -> RepoType:
    """The repository type a route serves, from where it is mounted: ``/api/datasets/...`` and
    ``/datasets/...`` serve datasets, every other repository route is a legacy model route (what environments
    and verifier packages were before they were datasets)."""
    path, root = request.scope["path"], request.scope.get("root_path", "")
    path = path[len(root) :] if root and path.startswith(root) else path  # the path the router matched
    return "dataset" if path.startswith(("/api/datasets/", "/datasets/")) else "model"


async def writable_repo(repo: RepoId = Depends(visible_repo), who: Identity | None = Depends(identity)) -> RepoId:
    check_writer(who, repo)
    return repo


Hub = Annotated[HubState, Depends(state)]
User = Annotated[Identity, Depends(user)]
Viewer = Annotated[Identity | None, Depends(identity)]
VisibleRepo = Annotated[RepoId, Depends(visible_repo)]
WritableRepo = Annotated[RepoId, Depends(writable_repo)]


def check_writer(who: Identity | None, repo: RepoId) -> None:
    if who is None:
        raise UnauthorizedError(f"a token is needed to write to {repo}")
    if not who.can_write(repo.owner):
        raise ForbiddenError(f"you cannot write to {repo}: a write token of {repo.owner} is needed")


def visible_project(
    request: Request, project: str, who: Identity | None = Depends(identity), hub: HubState = Depends(state)
) -> RepoId:
    normalized = canonicalize_name(project)
    if normalized != project and request.url.path.startswith("/simple/"):
        raise StarletteHTTPException(301, headers={"Location": f"/simple/{normalized}/"})
    return hub.visibility.project(who, project)


def json_body[M: BaseModel](model: type[M], after: Callable[..., Any]) -> Callable[..., Awaitable[M]]:
    """A dependency that parses the body as ``model``, after ``after`` (the route's authorization) passed.
    An empty body reads as ``{}``."""

    async def dependency(request: Request, _authorized: Any = Depends(after)) -> Any:
        raw = await read_body(request, MAX_JSON_BYTES)
        try:
            return model.model_validate_json(raw.strip() or b"{}")
        except ValidationError as error:
            raise InvalidRequestError(f"invalid request body: {describe(error)}") from None

    return dependency


def raw_body(limit: int, after: Callable[..., Any]) -> Callable[..., Awaitable[bytes]]:
    """A dependency that reads at most ``limit`` bytes of body, after ``after`` passed."""

    async def dependency(request: Request, _authorized: Any = Depends(after)) -> bytes:
        return await read_body(request, limit)

    return dependency


async def read_body(request: Request, limit: int) -> bytes:
    try:
        return await body.read_body(request, limit)
    except body.BodyTooLarge as error:
        raise BodyTooLargeError(str(error)) from None


def base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def raw_segments(request: Request) -> list[str]:
    """The request path's segments still %-encoded: revisions and file paths arrive with %2F in them, and
    uvicorn decodes the path."""
    raw = request.scope.get("raw_path") or request.url.path.encode()
    return [segment for segment in raw.decode("latin-1").split("?")[0].split("/") if segment]


def install_error_handlers(app: Any) -> None:
    """Every refusal as its status, ``X-Error-Code`` and ``{"error", "code"}``; nothing else is a 500."""

    @app.exception_handler(HubError)
    async def _hub_error(request: Request, error: HubError) -> Response:
        return error_response(error.status, error.code, str(error), commit=error.commit)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> Response:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()[:5])
        return error_response(400, ErrorCode.INVALID_REQUEST, f"invalid request: {problems}")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, error: StarletteHTTPException) -> Response:
        if 300 <= error.status_code < 400:
            return Response(status_code=error.status_code, headers=error.headers)
        code = {404: ErrorCode.NOT_FOUND, 405: ErrorCode.METHOD_NOT_ALLOWED}.get(
            error.status_code, ErrorCode.INVALID_REQUEST
        )
        return error_response(error.status_code, code, str(error.detail))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> Response:
        return error_response(500, ErrorCode.INTERNAL, "internal error")


def error_response(
    status: int, code: str, message: str, *, commit: str | None = None, extra: dict[str, Any] | None = None
) -> Response:
    # A header is one line of printable ASCII (a NUL in an echoed name made uvicorn drop the connection).
    header = "".join(char if " " <= char < "\x7f" else "?" for char in " ".join(message.split())[:200])
    headers = {"X-Error-Code": str(code), "X-Error-Message": header}
    if commit:
        headers["X-Repo-Commit"] = commit
    return JSONResponse({"error": message, "code": str(code), **(extra or {})}, status_code=status, headers=headers)


def _token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    if scheme.lower() == "basic":
        try:
            username, _, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise UnauthorizedError("malformed Basic credentials in Authorization header") from None
        if password or username:  # the token is the password (user __token__), or the user alone
            return password or username
    raise UnauthorizedError("Invalid credentials in Authorization header: use Bearer TOKEN or Basic auth")
