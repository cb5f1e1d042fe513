"""The key every request to a vLLM server verihub starts must carry, on every route.

vLLM's own ``--api-key`` guards only its API routes (``/v1``, ``/v2``, ...), never the development ones a
trainer syncs weights through (``/pause``, ``/resume``, ``/server_info``, ``/collective_rpc``): anything that
reached the port could load an adapter or stop generation. This ASGI middleware (``--middleware
verihub_vllm_key.RequireKey``, imported by the server's own interpreter, so stdlib only) answers 401 to any
HTTP request and closes any websocket without ``Authorization: Bearer <key>``, the key read from
``VERIHUB_VLLM_KEY`` at start; a server started without it refuses to start.
"""

import hmac
import json
import os

VARIABLE = "VERIHUB_VLLM_KEY"


class RequireKey:
    def __init__(self, app):
        key = os.environ.get(VARIABLE, "")
        if not key:
            raise RuntimeError(f"{VARIABLE} is not set: this server would answer without a key")
        self.app = app
        self.expected = b"Bearer " + key.encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket") and not self.allowed(scope):
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            body = json.dumps({"error": "this server needs its key: Authorization: Bearer KEY"}).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 401, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)

    def allowed(self, scope):
        given = [value for name, value in scope.get("headers", ()) if name.lower() == b"authorization"]
        return len(given) == 1 and hmac.compare_digest(given[0], self.expected)
