"""TRL's vLLM client (module-level requests, no headers) sends the server's key through verihub's stand-in
for ``requests`` (verihub.trainers._vllm_keys): to that server only, and only while the trainer holds it.
Two real HTTP servers on loopback record the Authorization header each request brought."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from trl.experimental.async_grpo import vllm_client
from trl.experimental.async_grpo.vllm_client import VLLMClient

from verihub.trainers._vllm_keys import keyed


class Recorder(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.seen.append(self.headers.get("Authorization"))  # type: ignore[attr-defined]
        body = b'{"world_size": 1, "data": [{"max_model_len": 64}]}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def servers() -> Iterator[list[ThreadingHTTPServer]]:
    made = []
    for _ in range(2):
        server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
        server.seen = []  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        made.append(server)
    yield made
    for server in made:
        server.shutdown()
        server.server_close()


def url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_trls_client_sends_the_key_to_its_server_only_and_only_while_held(
    servers: list[ThreadingHTTPServer],
) -> None:
    ours, other = servers
    with keyed(url(ours) + "/", "k1"):
        client = VLLMClient(url(ours))
        assert client.get_world_size() == 1
        client.pause()
        client.resume()
        vllm_client.requests.get(url(other) + "/health")  # another server is sent no key
        assert vllm_client.requests.ConnectionError is requests.ConnectionError  # requests' own in all else
    client.get_world_size()  # after the trainer closed
    assert ours.seen == ["Bearer k1"] * 3 + [None]  # type: ignore[attr-defined]
    assert other.seen == [None]  # type: ignore[attr-defined]


def test_a_url_that_only_begins_like_the_servers_is_not_sent_the_key() -> None:
    from verihub.trainers._vllm_keys import _KeyedRequests

    stand_in = _KeyedRequests(requests)
    stand_in.keys["http://127.0.0.1:8000"] = "k"
    assert "headers" in stand_in._with_key("http://127.0.0.1:8000/pause", {})
    assert "headers" in stand_in._with_key("http://127.0.0.1:8000", {})
    for elsewhere in ("http://127.0.0.1:80001/pause", "http://127.0.0.1:8000.evil/x", "http://127.0.0.1:800/x"):
        assert "headers" not in stand_in._with_key(elsewhere, {})
