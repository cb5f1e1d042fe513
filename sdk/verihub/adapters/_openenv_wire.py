"""OpenEnv's wire protocol, client side: one WebSocket session (reset, step, state, close) and bounded HTTP
reads, with every failure of the remote translated into :class:`RemoteEnvError` with a reason.

The remote is untrusted: each reply is capped (``max_reply_bytes``), each request has a deadline, a frame
that is not the protocol's shape, an error frame, or a reward that is not a finite number in the
declared range raises; nothing the remote sends becomes a score without these checks.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import time
from collections.abc import Coroutine
from types import TracebackType
from typing import Any

from verihub._sync import LoopThread
from verihub.errors import ActionRefusedError, FrameError, MissingDependencyError, RemoteEnvError, describe_error
from verihub.serve.frames import MAX_FRAME, ErrorCode, read_reply, request_frame, ws_url

__all__ = ["MAX_REPLY_BYTES", "ActionRefusedError", "OwnLoop", "RemoteEnvError", "RemoteSession", "fetch"]

INSTALL_HINT = "pip install openenv"
MAX_REPLY_BYTES = MAX_FRAME  # a remote's reply, by default (its spec may allow more)


@functools.cache
def _websockets() -> Any:
    try:
        from websockets.asyncio.client import connect
    except ImportError as error:
        raise MissingDependencyError(
            f"openenv: environments need the websockets package ({error}): {INSTALL_HINT}"
        ) from error

    class connect_here(connect):  # noqa: N801 - used as websockets' connect
        """websockets' connect, but a redirected handshake is refused: the rewards come from the server the
        user named (HTTP requests follow no redirects either)."""

        def process_redirect(self, exc: Any) -> Exception | str:  # websockets' InvalidStatus/redirect error
            return (
                RemoteEnvError(
                    f"the handshake was redirected (HTTP {exc.response.status_code}); verihub "
                    "follows no redirects: name the server itself"
                )
                if _redirect(exc)
                else exc
            )

    return connect_here


def _redirect(exc: Exception) -> bool:
    response = getattr(exc, "response", None)
    return response is not None and 300 <= getattr(response, "status_code", 0) < 400


Result = tuple[dict[str, Any], float | None, bool]


class RemoteSession:
    """One episode on the remote (one WebSocket connection): ``reset``, ``step``, ``state``, ``close``.

    Every failure raises :class:`RemoteEnvError` with a reason; rewards are checked and rescaled."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 30.0,
        max_reply_bytes: int = MAX_REPLY_BYTES,
        reward_range: tuple[float, float] = (0.0, 1.0),
    ) -> None:
        self.url, self.timeout_s, self.max_reply_bytes = url, timeout_s, max_reply_bytes
        self.reward_range = reward_range
        self._ws: Any = None

    async def __aenter__(self) -> RemoteSession:
        if self._ws is None:
            await self.connect()
        return self

    async def connect(self) -> None:
        connect = _websockets()
        try:
            self._ws = await connect(
                ws_url(self.url), open_timeout=self.timeout_s, max_size=self.max_reply_bytes, close_timeout=1
            )
        except (OSError, TimeoutError) as error:
            raise RemoteEnvError(f"cannot reach the OpenEnv server at {self.url}: {describe_error(error)}") from error
        except Exception as error:  # noqa: BLE001 - handshake refusals (InvalidStatus, InvalidURI, ...)
            raise RemoteEnvError(
                f"the OpenEnv server at {self.url} refused the connection: {describe_error(error)}"
            ) from error

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                await asyncio.wait_for(ws.send(request_frame("close")), 1)
            except Exception:  # noqa: BLE001, S110 - closing a dead connection is done already
                pass
            try:
                await asyncio.wait_for(ws.close(), 2)
            except Exception:  # noqa: BLE001, S110 - closing a connection that is dead already
                pass

    async def reset(self, **options: Any) -> Result:
        return self._result(await self._request("reset", options), "reset")

    async def step(self, action: dict[str, Any]) -> Result:
        return self._result(await self._request("step", action), "step")

    async def state(self) -> dict[str, Any]:
        return await self._request("state", None)

    async def _request(self, kind: str, data: dict[str, Any] | None) -> dict[str, Any]:
        if self._ws is None:
            raise RemoteEnvError(f"the session with {self.url} is closed")
        try:
            try:
                await asyncio.wait_for(self._ws.send(request_frame(kind, data)), self.timeout_s)
            except TimeoutError:
                raise
            except Exception:  # noqa: BLE001, S110 - closed by the far end: a refusal (capacity) may be queued
                pass
            raw = await asyncio.wait_for(self._ws.recv(), self.timeout_s)
        except TimeoutError as error:
            await self.close()  # a late reply must not answer the next request
            raise RemoteEnvError(f"{self.url} sent no reply to {kind} within {self.timeout_s:g}s") from error
        except Exception as error:  # noqa: BLE001 - ConnectionClosed (server died, reply over max_size), OSError
            await self.close()
            raise RemoteEnvError(
                f"the connection to {self.url} broke during {kind}: {describe_error(error)}"
            ) from error
        try:
            return read_reply(raw, kind)
        except FrameError as error:
            refused = error.sent and kind == "step" and error.code == ErrorCode.VALIDATION_ERROR  # the answer's fault
            code = error.code if error.sent else None
            raise (ActionRefusedError if refused else RemoteEnvError)(
                f"{self.url} answered {kind} with {error}", code
            ) from None

    def _result(self, data: dict[str, Any], kind: str) -> Result:
        observation, reward, done = data.get("observation"), data.get("reward"), data.get("done", False)
        if not isinstance(observation, dict) or not isinstance(done, bool):
            raise RemoteEnvError(f"{self.url} answered {kind} with no observation object or a non-boolean done")
        return observation, None if reward is None else self._reward(reward, kind), done

    def _reward(self, reward: Any, kind: str) -> float:
        low, high = self.reward_range
        try:  # bool, int or float only; an integer too large for a float overflows
            value = float(reward) if isinstance(reward, bool | int | float) else math.nan
        except OverflowError:
            value = math.nan
        if not math.isfinite(value) or not low <= value <= high:
            raise RemoteEnvError(
                f"{self.url} answered {kind} with reward {str(reward)[:40]}, not a finite number in [{low:g}, {high:g}]"
            )
        return (value - low) / (high - low)


class OwnLoop:
    """Sync methods over async ones whose connection belongs to one event loop: the object's own loop, on a
    daemon thread started at the first sync call (use one style, sync or async, per object; see
    :mod:`verihub._sync`)."""

    _loop_thread: LoopThread | None = None

    @property
    def _loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop_thread.loop if self._loop_thread is not None else None

    def _sync(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        if self._loop_thread is None:
            self._loop_thread = LoopThread("verihub-openenv-session")
        return self._loop_thread.run(coroutine)

    def _stop_loop(self) -> None:
        if self._loop_thread is not None:
            self._loop_thread.stop()
            self._loop_thread = None


def fetch(url: str, path: str, timeout_s: float, limit: int, body: dict[str, Any] | None = None) -> Any:
    """GET (or POST ``body`` to) ``url + path`` as JSON, at most ``limit`` bytes; None where the server does
    not offer it (404, 405, 501)."""
    import httpx

    try:
        with httpx.stream("GET" if body is None else "POST", url + path, json=body, timeout=timeout_s) as response:
            if response.status_code in (404, 405, 501):
                return None
            if response.status_code != 200:
                raise RemoteEnvError(f"{url}{path} answered HTTP {response.status_code}")
            data, deadline = bytearray(), time.monotonic() + timeout_s  # httpx's timeout is per read: drips pass it
            for chunk in response.iter_bytes():
                data += chunk
                if len(data) > limit:
                    raise RemoteEnvError(f"{url}{path} sent more than {limit} bytes")
                if time.monotonic() > deadline:
                    raise RemoteEnvError(f"{url}{path} did not finish its reply within {timeout_s:g}s")
    except httpx.HTTPError as error:
        raise RemoteEnvError(f"cannot reach the OpenEnv server at {url}: {describe_error(error)}") from error
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as error:
        raise RemoteEnvError(f"{url}{path} answered with malformed JSON") from error
