"""The key middleware the vLLM servers verihub starts run (verihub_vllm_key.RequireKey), on a FastAPI app
shaped like vLLM's: API and development routes alike answer 401 without the key, with a wrong one, or with
two; a websocket without it is closed; a server started without a key refuses to start. The real server's
routes are probed with the same requests in tests/trainers/test_async_grpo.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fastapi import FastAPI, WebSocket
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from verihub.generation import vllm_server

KEY = "a-key-of-this-test"
ROUTES = [("get", "/health"), ("get", "/v1/models"), ("post", "/pause"), ("post", "/v1/load_lora_adapter")]


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> FastAPI:
    monkeypatch.syspath_prepend(str(vllm_server.KEY_PATH))  # as the server's PYTHONPATH has it
    monkeypatch.setenv("VERIHUB_VLLM_KEY", KEY)
    from verihub_vllm_key import RequireKey

    app = FastAPI()
    for method, path in ROUTES:
        getattr(app, method)(path)(lambda: {"ok": True})

    @app.websocket("/v1/realtime")
    async def realtime(socket: WebSocket) -> None:
        await socket.accept()
        await socket.send_text("hello")
        await socket.close()

    app.add_middleware(RequireKey)  # as vLLM's --middleware adds a class
    return app


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_every_route_asks_the_key(app: FastAPI, method: str, path: str) -> None:
    client = TestClient(app)
    assert getattr(client, method)(path, headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
    for headers in (
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": KEY},  # the key without its scheme
        {"Authorization": f"Bearer {KEY}x"},
        {"Authorization": f"Bearer {KEY[:-1]}"},
        {"X-Api-Key": KEY},
    ):
        answer = getattr(client, method)(path, headers=headers)
        assert answer.status_code == 401, (headers, answer.text)
        assert answer.json() == {"error": "this server needs its key: Authorization: Bearer KEY"}
    twice = [("authorization", "Bearer wrong"), ("authorization", f"Bearer {KEY}")]
    assert client.request(method.upper(), path, headers=twice).status_code == 401  # httpx sends both


def test_a_websocket_without_the_key_is_closed(app: FastAPI) -> None:
    client = TestClient(app)
    with client.websocket_connect("/v1/realtime", headers={"Authorization": f"Bearer {KEY}"}) as socket:
        assert socket.receive_text() == "hello"
    with pytest.raises(WebSocketDisconnect), client.websocket_connect("/v1/realtime") as socket:
        socket.receive_text()


def test_a_server_without_a_key_refuses_to_start(app: FastAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VERIHUB_VLLM_KEY")
    with pytest.raises(RuntimeError, match="VERIHUB_VLLM_KEY is not set"), TestClient(app) as client:
        client.get("/health")


def test_the_server_command_runs_the_middleware_with_a_fresh_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIHUB_VLLM_PYTHON", sys.executable)  # the command is built, not run
    one, two = (vllm_server.VLLMServer(tmp_path) for _ in range(2))
    assert one.api_key != two.api_key and len(one.api_key) >= 40
    command = one.command()
    assert command[command.index("--middleware") + 1] == "verihub_vllm_key.RequireKey"
    assert one.api_key not in " ".join(command)  # argv is anyone's to read (ps): the key goes in the environment
