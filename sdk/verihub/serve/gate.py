"""Who may use a ``verihub serve``, checked before the app sees a byte of a request: the token, or without
one the browser's routes closed; and how long a request's body may take to arrive.

Grades carry each layer's ``detail``, which can state the expected answer, and ``POST /grade`` is a reward
oracle: a server must be reachable only by callers who are authorised. With a token, that is whoever sends
it (a browser page cannot: it can neither set the header on a WebSocket nor send it cross-origin without
a preflight the server never grants). Without one, the server is for local programs only, and a web page
the user visits is not one: it can reach a loopback port through DNS rebinding (its own name, resolved to
127.0.0.1, sent as ``Host``) or directly (a WebSocket, or a CORS-simple POST, with its ``Origin``). So a
tokenless server answers only a ``Host`` that is an IP address, ``localhost`` or a name the operator gave,
and nothing whose ``Origin`` is another web origin. ``/health`` stays open to all: probes, and it tells
nothing but counts.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
from collections.abc import Collection
from typing import Any
from urllib.parse import urlsplit

from verihub.serve.http import Refused, problem

__all__ = ["BODY_S", "Gate"]

BODY_S = 60.0  # seconds a request's body has, in all, to arrive once its head is in (16 MiB at 280 kB/s)


class Gate:
    """ASGI middleware: refuses an unauthorised request or WebSocket handshake (401/403, before routing),
    and gives each request's body ``body_s`` seconds in all, then answers 408 and closes the connection.

    ``token``: wanted as ``Authorization: Bearer``. Without it, ``host_names`` are the names (besides IP
    addresses and ``localhost``) a request's ``Host`` may carry; None takes any (the operator's own proxy
    in front decides who reaches the server)."""

    def __init__(
        self, app: Any, *, token: str | None, host_names: Collection[str] | None = (), body_s: float = BODY_S
    ) -> None:
        self.app, self.body_s = app, body_s
        self.expected = f"Bearer {token}".encode() if token else None
        self.host_names = None if host_names is None else {"localhost", *(name.lower() for name in host_names)}
        self._hosts_seen: dict[str, bool] = {}  # a client sends one Host over and over: parse it once

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        if scope["path"] != "/health":
            refusal = self._refusal(dict(scope["headers"]))
            if refusal is not None:
                return await _refuse(kind, send, *refusal)
        if kind == "http":
            receive = _by_deadline(receive, asyncio.get_running_loop().time() + self.body_s, self.body_s)
        return await self.app(scope, receive, send)

    def _refusal(self, headers: dict[bytes, bytes]) -> tuple[int, str, str] | None:
        if self.expected is not None:  # constant time: the reply's timing tells nothing of the token
            if hmac.compare_digest(headers.get(b"authorization", b""), self.expected):
                return None
            return 401, "UNAUTHORIZED", "send Authorization: Bearer <token>"
        host = headers.get(b"host", b"").decode("latin-1").lower()
        if host and self.host_names is not None and not self._local(host):
            return (
                403,
                "FORBIDDEN_HOST",
                (
                    f"this server has no token and answers only its local names, not "
                    f"Host {host[:100]!r}: use its IP address, or serve with a token"
                ),
            )
        origin = headers.get(b"origin")
        if origin is not None and not _same_origin(origin.decode("latin-1").lower(), host):
            return (
                403,
                "FORBIDDEN_ORIGIN",
                (
                    f"this server has no token and refuses web pages of other origins "
                    f"({origin.decode('latin-1')[:100]!r}): serve with a token"
                ),
            )
        return None

    def _local(self, host: str) -> bool:
        local = self._hosts_seen.get(host)
        if local is None:
            local = _local_host(host, self.host_names or set())
            if len(self._hosts_seen) < 256:  # bounded: an attacker can send any number of Hosts
                self._hosts_seen[host] = local
        return local


def _local_host(host: str, names: set[str]) -> bool:
    """Whether a ``Host`` value (``name[:port]``, ``[v6]:port``) is an IP address or one of ``names``: a DNS
    rebinding page sends its own name, never an address."""
    name = host.rpartition("]")[0].lstrip("[") if host.startswith("[") else host.rpartition(":")[0] or host
    if name in names:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _same_origin(origin: str, host: str) -> bool:
    """Whether a browser's ``Origin`` is this server's own (``null``, a sandboxed or file page, is not)."""
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and bool(host) and parts.netloc == host


async def _refuse(kind: str, send: Any, status: int, code: str, message: str) -> None:
    if kind == "websocket":  # closing before accept: the handshake gets HTTP 403
        await send({"type": "websocket.close", "code": 1008, "reason": code})
        return
    body = json.dumps({"error": code, "message": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _by_deadline(receive: Any, deadline: float, seconds: float) -> Any:
    """``receive``, but the request's body must be in by ``deadline`` (one for the whole body, not per
    chunk: a body dripped a byte at a time would otherwise hold its connection for as long as it likes)."""
    done = False

    async def receive_by_deadline() -> dict[str, Any]:
        nonlocal done
        if done:  # the body is in: what follows (a disconnect) has no deadline
            return await receive()
        try:
            async with asyncio.timeout_at(deadline):
                message: dict[str, Any] = await receive()
        except TimeoutError:
            late = problem(408, "REQUEST_TIMEOUT", f"the request's body did not arrive within {seconds:g}s")
            late.headers["connection"] = "close"
            raise Refused(late) from None
        done = message["type"] != "http.request" or not message.get("more_body", False)
        return message

    return receive_by_deadline
