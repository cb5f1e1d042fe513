"""``verihub serve``: environments as an OpenEnv-compatible HTTP/WebSocket service.

``WS /ws`` holds one :class:`~verihub.environment.session.Session` per connection (reset picks the task, step takes a
turn, state, close; :mod:`verihub.serve.ws`); ``POST /reset`` and ``POST /step`` are OpenEnv's
stateless forms (single-turn only); ``GET /health``, ``/metadata``, ``/schema`` and the task API
(``/list_environments``, ``/{env}/splits``, ``/{env}/tasks``, ...) describe what is served; ``POST /grade``
grades many task+completion pairs at once (:mod:`verihub.serve.http`).

Grades state answers (a layer's ``detail``), so only authorised callers reach a server: beyond loopback it
wants a token, and without one it refuses what a web page could send (:mod:`verihub.serve.gate`). Every
frame and body is bounded in size and in time, bad input gets an error frame or a 4xx with a code (never a
crash or a 500), sessions past ``max_sessions`` are refused with ``CAPACITY_REACHED``, an idle or too old
session is closed, and a session's work dir is dropped when its connection ends. A fault is ``reward: null`` with the
reason in
``metadata``; never 0. Task listings carry ids and rendered prompts, never the reference columns.
"""

from __future__ import annotations

import gc
import ipaddress
from collections.abc import Collection, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from verihub.environment.core import Environment
from verihub.errors import ExposedError, ListenError, UsageError
from verihub.serve.frames import TRANSPORT_MAX
from verihub.serve.gate import BODY_S, Gate
from verihub.serve.http import Refused, problem
from verihub.serve.http import router as http_router
from verihub.serve.listen import tcp_listener
from verihub.serve.shutdown import serve
from verihub.serve.state import Catalog, ServeState, TaskNotFound
from verihub.serve.ws import router as ws_router

__all__ = ["ExposedError", "ListenError", "TaskNotFound", "create_app", "run"]


def create_app(
    envs: Sequence[Environment],
    *,
    max_sessions: int = 64,
    idle_timeout_s: float = 300.0,
    max_session_s: float = 3600.0,
    body_s: float = BODY_S,
    token: str | None = None,
    host_names: Collection[str] | None = (),
) -> FastAPI:
    """The service for ``envs``; at most ``max_sessions`` WebSocket sessions, each closed after
    ``idle_timeout_s`` without a reset or step, or ``max_session_s`` after it opened; a request's body has
    ``body_s`` seconds in all to arrive. With ``token``, every route but ``/health`` wants
    ``Authorization: Bearer <token>``, checked before anything is parsed; without one, a ``Host`` that is an
    IP address, ``localhost`` or in ``host_names`` (None: any), and no foreign ``Origin``
    (:class:`verihub.serve.gate.Gate`)."""
    if max_sessions < 1:
        raise UsageError(f"max_sessions must be at least 1, got {max_sessions}")
    app = FastAPI(title="verihub serve", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.serve = ServeState(Catalog(envs), max_sessions, idle_timeout_s, max_session_s)
    app.include_router(http_router)
    app.include_router(ws_router)

    @app.exception_handler(Refused)
    async def refused(_request: Request, error: Refused) -> JSONResponse:
        return error.response

    @app.exception_handler(TaskNotFound)
    async def not_found(_request: Request, error: TaskNotFound) -> JSONResponse:
        return problem(404, "NOT_FOUND", str(error))

    app.add_middleware(Gate, token=token, host_names=host_names, body_s=body_s)
    return app


YOUNG_OBJECTS = 10_000
"""Allocations between the collector's young passes in a server (CPython's default: 700). A ``POST /grade``
of a few hundred items makes thousands of objects that live as long as the request: at 700 the collector
runs many times a request, moves them to the older generations, and so sets off full passes that walk the
grade cache. At 10,000 most die first (cheap grades through ``POST /grade`` ~5% faster); cyclic garbage
waits for at most that many allocations."""

HEAD_S = 10.0  # seconds a connection has to send a request's head, at most (a client sends it at once)


def _head_deadline(seconds: float) -> type:
    """uvicorn's HTTP protocol, but a connection that sends no complete request head within ``seconds`` of
    opening (or of its last response) is closed. uvicorn times out neither, and the token is checked only
    once a head is in: without this anyone could hold sockets open, idle or dripping a byte at a time,
    until the server runs out of file descriptors."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class HeadDeadline(AutoHTTPProtocol):  # type: ignore[misc, valid-type]  # uvicorn's protocol class, chosen at run time
        _timer: Any = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._timer is not None:
                self._timer.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self.loop.call_later(seconds, self._late)

        def _late(self) -> None:
            waiting = self.cycle is None or self.cycle.response_complete  # a request being answered is not late
            if waiting and self.transport.get_protocol() is self:  # an upgraded WebSocket has its own idle limit
                self.timeout_keep_alive_handler()

    return HeadDeadline


def run(
    envs: Sequence[Environment],
    *,
    host: str,
    port: int,
    max_sessions: int,
    idle_timeout_s: float,
    max_session_s: float = 3600.0,
    body_s: float = BODY_S,
    token: str | None = None,
    no_token: bool = False,
) -> None:
    """Serve until interrupted (SIGTERM or SIGINT: requests in flight get :data:`~verihub.serve.shutdown.GRACE_S`
    seconds); prints the address it listens on (``port`` 0 takes a free one). Raises
    :class:`ListenError` if it cannot listen there, :class:`ExposedError` if it would listen beyond
    loopback without a token and without ``no_token`` (an authenticating proxy of the operator's in front)."""
    import uvicorn

    if token is not None and not token.strip():
        raise ExposedError("the serve token is empty (--token / VERIHUB_SERVE_TOKEN): give one, or leave it unset")
    if token and no_token:
        raise ExposedError("--no-token with a token (--token / VERIHUB_SERVE_TOKEN): choose one")
    try:
        listener = tcp_listener(host, port)
    except OSError as error:
        raise ListenError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    loopback = ipaddress.ip_address(listener.getsockname()[0]).is_loopback
    if not loopback and not token and not no_token:
        listener.close()
        raise ExposedError(
            f"verihub serve on {host} needs a token: other machines can reach it, and its grades state answers. "
            "Set VERIHUB_SERVE_TOKEN (or --token TOKEN; clients send 'Authorization: Bearer TOKEN'), or pass "
            "--no-token if an authenticating proxy of your own is in front"
        )
    app = create_app(
        envs,
        max_sessions=max_sessions,
        idle_timeout_s=idle_timeout_s,
        max_session_s=max_session_s,
        body_s=body_s,
        token=token,
        host_names=[host] if loopback else None,
    )
    bound = listener.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    print(
        f"verihub serve: {', '.join(env.id for env in envs)} on http://{shown}:{bound} "
        f"(ws://{shown}:{bound}/ws, at most {max_sessions} sessions)",
        flush=True,
    )
    config = uvicorn.Config(
        app,
        http=_head_deadline(min(idle_timeout_s, HEAD_S)),
        ws="websockets-sansio",
        ws_max_size=TRANSPORT_MAX,
        log_level="warning",
    )
    # Start-up's objects (modules, the environments and their tasks) live as long as the server: frozen,
    # the collector's full passes, which a steady flow of grades sets off, skip them (a server grades
    # cheap checks ~10% faster). See YOUNG_OBJECTS for the young collections.
    gc.freeze()
    gc.set_threshold(YOUNG_OBJECTS, *gc.get_threshold()[1:])
    serve(config, sockets=[listener])  # stops within seconds of SIGTERM, whatever a grading thread is doing
