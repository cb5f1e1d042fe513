"""A real OpenAI-compatible HTTP server on loopback whose "model" is a Python function.

For tests and benchmarks that need a model that behaves in a known way: the HTTP client, the rollout
loop, the parsers and the verifier stay real; only the model is scripted.

    def answer(request):                      # the request's JSON body
        return [{"content": "\\\\boxed{4}"}] * request.get("n", 1)
    with ScriptedChatServer(answer, latency_s=0.05) as server:
        backend = load_backend(f"openai:scripted@{server.url}")
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from verihub.errors import describe_error

__all__ = ["ScriptedChatServer"]

Choice = dict[str, Any]  # {"content": str} and/or {"tool_calls": [{"name": ..., "arguments": {...}}]}


class ScriptedChatServer:
    """``POST /v1/chat/completions`` answered by ``respond(request) -> choices``; ``latency_s`` per
    request; the first ``fail_first`` requests get HTTP 503 (to exercise retries). A request with
    ``"stream": true`` gets the same completion as server-sent events (OpenAI's chunk format, one
    chunk per choice, then ``data: [DONE]``), as clients that stream expect. A ``respond`` that
    returns bytes has them sent as the body as they are (a broken endpoint)."""

    def __init__(
        self, respond: Callable[[dict[str, Any]], list[Choice] | bytes], *, latency_s: float = 0.0, fail_first: int = 0
    ) -> None:
        self.respond, self.latency_s, self.fail_first = respond, latency_s, fail_first
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                with server._lock:
                    server.requests.append(body)
                    failing = len(server.requests) <= server.fail_first
                time.sleep(server.latency_s)
                if failing:
                    return self._send(503, {"error": {"message": "scripted outage"}})
                try:
                    choices = server.respond(body)
                except Exception as error:  # noqa: BLE001 - a broken script answers 500, like a crashed server
                    return self._send(500, {"error": {"message": describe_error(error)}})
                if isinstance(choices, bytes):
                    return self._send(200, choices)
                completion = _completion(body, choices)
                if body.get("stream"):
                    return self._send(200, _events(completion, body), "text/event-stream")
                return self._send(200, completion)

            def _send(
                self, status: int, payload: dict[str, Any] | bytes, content_type: str = "application/json"
            ) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> ScriptedChatServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # read by listen() at construction: many clients connect at once


def _completion(request: dict[str, Any], choices: list[Choice]) -> dict[str, Any]:
    out = []
    for index, choice in enumerate(choices):
        message: dict[str, Any] = {"role": "assistant", "content": choice.get("content")}
        if choice.get("tool_calls"):
            message["tool_calls"] = [
                {
                    "id": f"call_{index}_{number}",
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": json.dumps(call["arguments"])
                        if not isinstance(call["arguments"], str)
                        else call["arguments"],
                    },
                }
                for number, call in enumerate(choice["tool_calls"])
            ]
        out.append(
            {"index": index, "message": message, "finish_reason": "tool_calls" if choice.get("tool_calls") else "stop"}
        )
    prompt_chars = sum(len(str(m.get("content") or "")) for m in request.get("messages", []))
    completion_chars = sum(len(str(c.get("content") or "")) for c in choices)
    usage = {"prompt_tokens": prompt_chars // 4, "completion_tokens": completion_chars // 4}
    return {
        "id": "scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "scripted"),
        "choices": out,
        "usage": {**usage, "total_tokens": sum(usage.values())},
    }


def _events(completion: dict[str, Any], request: dict[str, Any]) -> bytes:
    """``completion`` as the server-sent events of a streamed response: a chunk per choice carrying the
    whole message as its delta, the usage chunk when ``stream_options.include_usage`` asks, ``[DONE]``."""
    head = {
        "id": completion["id"],
        "object": "chat.completion.chunk",
        "created": completion["created"],
        "model": completion["model"],
    }
    chunks = [
        {
            **head,
            "choices": [
                {"index": choice["index"], "delta": _delta(choice["message"]), "finish_reason": choice["finish_reason"]}
            ],
        }
        for choice in completion["choices"]
    ]
    if (request.get("stream_options") or {}).get("include_usage"):
        chunks.append({**head, "choices": [], "usage": completion["usage"]})
    return b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks) + b"data: [DONE]\n\n"


def _delta(message: dict[str, Any]) -> dict[str, Any]:
    calls = message.get("tool_calls")
    return (
        {**message, "tool_calls": [{**call, "index": index} for index, call in enumerate(calls)]} if calls else message
    )
