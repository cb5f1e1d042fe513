"""OpenEnv's WebSocket frames, for both ends: ``verihub serve``'s ``WS /ws`` and the two clients (an OpenEnv
remote's :mod:`verihub.adapters._openenv_wire`, a grader pool's :mod:`verihub.serve._remote_session`).

The client sends ``{"type": "reset" | "step" | "state" | "close", "data": ...}``; the server answers
``{"type": "observation", "data": {observation, reward, done, metadata}}``, ``{"type": "state", "data": ...}``
or ``{"type": "error", "data": {message, code}}``. The codes are OpenEnv's, so its client raises them as they
are. Each end reads the other's frames through this module: one bound, one set of checks, and one exception,
:class:`~verihub.errors.FrameError`, whose ``code`` is the error code the frame earns (or the one an error
frame carried).
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

from verihub.errors import FrameError, describe_error

__all__ = [
    "MAX_FRAME",
    "TRANSPORT_MAX",
    "ErrorCode",
    "FrameError",
    "error_frame",
    "read_reply",
    "read_request",
    "reply_frame",
    "request_frame",
    "ws_url",
]

MAX_FRAME = 1 << 20  # characters in one frame: a turn's text and tool calls, never a dataset
# What the WebSocket layer lets through: a frame a little past MAX_FRAME still arrives, to be answered with an
# error frame that names the bound instead of a dropped connection.
TRANSPORT_MAX = MAX_FRAME + 1024
REQUESTS = ("reset", "step", "state", "close")
MESSAGE_CHARS = 2000  # of an error frame's message, sent
SHOWN_CHARS = 300  # of one received, in the client's error


class ErrorCode(StrEnum):  # OpenEnv's WSErrorCode values
    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    SESSION_ERROR = "SESSION_ERROR"


def ws_url(url: str) -> str:
    """The ``WS /ws`` address of the server at the HTTP(S) ``url``."""
    return "ws" + url.removeprefix("http") + "/ws"


# -- client side ---------------------------------------------------------------------------------------


def request_frame(kind: str, data: Any = None) -> str:
    return json.dumps({"type": kind} if data is None else {"type": kind, "data": data})


def read_reply(text: str | bytes, kind: str) -> dict[str, Any]:
    """The ``data`` of the server's answer to a ``kind`` frame (``state`` for state, ``observation`` for the
    others). :class:`FrameError` if it is not one (malformed, or of another type), or if it is an error frame
    (its ``code`` and message). Its size is bounded before: by the connection's ``max_size``."""
    try:
        frame = json.loads(text)
    except (ValueError, RecursionError) as error:  # also past int_max_str_digits, or nested too deep
        raise FrameError(f"malformed JSON: {describe_error(error, 200)}", ErrorCode.INVALID_JSON) from None
    if not isinstance(frame, dict) or not isinstance(frame.get("data"), dict):
        raise FrameError("a frame that is not {type, data: {...}}", ErrorCode.INVALID_JSON)
    data: dict[str, Any] = frame["data"]
    if frame.get("type") == "error":
        code = str(data.get("code", "UNKNOWN"))[:40]
        raise FrameError(f"error {code}: {str(data.get('message', ''))[:SHOWN_CHARS]}", code, sent=True)
    wanted = "state" if kind == "state" else "observation"
    if frame.get("type") != wanted:
        raise FrameError(f"a {str(frame.get('type'))[:40]!r} frame, not {wanted!r}", ErrorCode.UNKNOWN_TYPE)
    return data


# -- server side ---------------------------------------------------------------------------------------


def read_request(text: str | None) -> tuple[str, Any]:
    """A client frame's type and data. :class:`FrameError` (with the code to answer it with) for a binary
    frame, one past :data:`MAX_FRAME`, malformed JSON or an unknown type."""
    if text is None or len(text) > MAX_FRAME:
        raise FrameError(f"frames are JSON text of at most {MAX_FRAME} characters", ErrorCode.INVALID_JSON)
    try:
        frame = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise FrameError(f"invalid JSON: {describe_error(error, 200)}", ErrorCode.INVALID_JSON) from None
    kind = frame.get("type") if isinstance(frame, dict) else None
    if kind not in REQUESTS:
        raise FrameError(
            f"unknown frame type {str(kind)[:40]!r}: use reset, step, state or close", ErrorCode.UNKNOWN_TYPE
        )
    return kind, frame.get("data", {})


def reply_frame(kind: str, data: dict[str, Any]) -> str:
    """An ``observation`` or ``state`` frame."""
    return json.dumps({"type": kind, "data": data})


def error_frame(code: ErrorCode | str, message: str, **extra: Any) -> str:
    return json.dumps({"type": "error", "data": {"message": message[:MESSAGE_CHARS], "code": str(code), **extra}})
