"""``verihub serve`` and the OpenEnv adapter against TRUST.md's adversaries: a policy whose actions arrive
through ``step``, a hostile network client, a hostile OpenEnv remote. Each test drives a real process over
loopback (a ``verihub serve`` subprocess, or an OpenEnv-speaking server the adapter connects to)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, WebSocket
from fastapi.responses import RedirectResponse, StreamingResponse
from openenv import GenericEnvClient
from test_serve import REPO, VERIHUB, active, eventually, ws_url
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

import verihub
from conftest import start_serve, stop_serve
from verihub.adapters.openenv import RemoteEnvError


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    process, url = start_serve("envs/sums", "envs/shell-task", "--max-sessions", "4")
    yield url
    stop_serve(process)


def frame(ws: Any, kind: str, data: Any = None) -> dict[str, Any]:
    ws.send(json.dumps({"type": kind, **({} if data is None else {"data": data})}))
    reply: dict[str, Any] = json.loads(ws.recv())
    return reply


# -- the policy: what its tool calls can do --------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    ['{"command": ' + "1" * 5000 + "}", "[" * 6_000 + "]" * 6_000],
    ids=["past-the-digit-limit", "nested-too-deep"],
)
def test_tool_arguments_no_parser_takes_go_back_to_the_model(server: str, arguments: str, nsjail_path: str) -> None:
    """Arguments json.loads refuses with ValueError or RecursionError are the model's mistake, told to it as
    the tool's output; never a server fault (EXECUTION_ERROR) that ends or poisons the episode."""
    with connect(ws_url(server), max_size=None) as ws:
        frame(ws, "reset", {"env": "shell-task", "index": 0})
        call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": arguments}}
        reply = frame(ws, "step", {"content": "", "tool_calls": [call]})
        assert reply["type"] == "observation", reply
        assert reply["data"]["done"] is False and reply["data"]["reward"] is None
        assert "must be a JSON object" in reply["data"]["observation"]["messages"][0]["content"]
        assert frame(ws, "state")["data"]["step_count"] == 1


def test_a_refused_action_costs_no_turn_and_leaves_no_trace(server: str, nsjail_path: str) -> None:
    """A step the server refuses (a tool call with no name) is not half-recorded: the turn count and the
    transcript the verifier grades are as before it."""
    with connect(ws_url(server), max_size=None) as ws:
        frame(ws, "reset", {"env": "shell-task", "index": 0})
        before = frame(ws, "state")["data"]
        for _ in range(3):
            refused = frame(ws, "step", {"content": "x", "tool_calls": [{"function": {"arguments": "{}"}}]})
            assert refused["type"] == "error" and refused["data"]["code"] == "VALIDATION_ERROR", refused
        after = frame(ws, "state")["data"]
        assert (after["step_count"], after["messages"]) == (before["step_count"], before["messages"])


@pytest.mark.parametrize(
    "arguments",
    ['{"code": ' + "1" * 5000 + "}", "[" * 6_000 + "]" * 6_000],
    ids=["past-the-digit-limit", "nested-too-deep"],
)
def test_tool_arguments_no_parser_takes_do_not_crash_the_eval_loop(
    tmp_path: Path, arguments: str, nsjail_path: str
) -> None:
    """The same arguments from a model behind an OpenAI endpoint, in verihub's own eval loop: the backend
    and the session both read them as the model's mistake; every rollout is graded, none crashes the run."""
    from verihub.eval.evaluate import evaluate
    from verihub.generation import Sampling
    from verihub.spec.scaffold import init_env
    from verihub.testing import ScriptedChatServer

    env = verihub.load_env(init_env("calc", "tool", tmp_path))

    def agent(request: dict[str, Any]) -> list[dict[str, Any]]:
        told = [m["content"] for m in request["messages"] if m["role"] == "tool"]
        if not told:
            return [{"content": "", "tool_calls": [{"name": "python", "arguments": arguments}]}]
        return [{"content": "<answer>no</answer>"}]

    with ScriptedChatServer(agent) as chat:
        report = evaluate(env, f"openai:agent@{chat.url}", n=2, k=1, split="train", sampling=Sampling(temperature=0))
    assert [rollout.status for rollout in report.rollouts] == ["wrong", "wrong"]
    for rollout in report.rollouts:
        told = next(m["content"] for m in rollout.messages if m["role"] == "tool")
        assert "must be a JSON object" in told and rollout.turns == 2


# -- a hostile OpenEnv remote answering the adapter ---------------------------------------------------------


def remote_app(*, drip_s: float = 0.0, redirect_ws_to: str | None = None, splits: int = 0) -> Any:
    """An OpenEnv-speaking remote: one text field, reward 1 for any answer. ``drip_s``: /metadata comes a
    byte at a time; ``redirect_ws_to``: the WebSocket handshake is redirected there; ``splits``: its task
    API lists that many splits of one task each."""
    app = FastAPI()
    if splits:
        app.get("/list_environments")(lambda: ["many"])
        app.get("/many/splits")(lambda: [{"name": f"s{i}", "type": "train"} for i in range(splits)])
        app.post("/many/num_tasks")(lambda: {"num_tasks": 1})
    app.get("/schema")(lambda: {"action": {"properties": {"message": {"type": "string"}}, "required": ["message"]}})

    @app.get("/metadata")
    async def metadata() -> Any:
        import asyncio

        async def dribble() -> Any:
            for byte in json.dumps({"name": "dripping", "padding": "x" * 200}).encode():
                await asyncio.sleep(drip_s)
                yield bytes([byte])

        return StreamingResponse(dribble(), media_type="application/json") if drip_s else {"name": "plain"}

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        if redirect_ws_to is not None:
            elsewhere = redirect_ws_to.replace("http", "ws", 1) + "/ws"
            await websocket.send_denial_response(RedirectResponse(elsewhere, status_code=307))
            return
        await websocket.accept()
        while True:
            message = json.loads(await websocket.receive_text())
            if message["type"] not in ("reset", "step"):
                return
            done = message["type"] == "step"
            await websocket.send_text(
                json.dumps(
                    {
                        "type": "observation",
                        "data": {
                            "observation": {"text": f"Say anything ({message.get('data', {}).get('seed')})"},
                            "reward": 1.0 if done else None,
                            "done": done,
                        },
                    }
                )
            )

    return app


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` on a free loopback port, in a thread of this process, until the block ends."""
    import socket
    import threading

    import uvicorn

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.02)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)


def test_a_remote_that_drips_its_reply_hits_the_deadline() -> None:
    """Each byte within the read timeout, the whole reply far past it: the deadline is the request's."""
    with serving(remote_app(drip_s=0.1)) as url:
        began = time.monotonic()
        with pytest.raises(RemoteEnvError, match="within 1s"):
            verihub.load_env(f"openenv:{url}", size=5, timeout_s=1)
        assert time.monotonic() - began < 5


def test_a_remote_cannot_redirect_its_sessions_to_another_host() -> None:
    """Rewards come from the server the user named: a redirected WebSocket handshake is refused, as an
    HTTP redirect is."""
    with serving(remote_app()) as elsewhere, serving(remote_app(redirect_ws_to=elsewhere)) as url:
        assert (
            verihub.load_env(f"openenv:{elsewhere}", size=5)
            .grade(  # the other host alone is a fine remote
                {"id": "x", "reset": json.dumps({"seed": 0}), "prompt": "Say anything (0)"}, "hi"
            )
            .reward
            == 1.0
        )
        with pytest.raises(RemoteEnvError, match="redirect"):
            verihub.load_env(f"openenv:{url}", size=5)


def test_a_remote_cannot_make_loading_unbounded_with_its_task_api() -> None:
    """Each split listed costs a request and its tasks a reset each: a remote listing thousands is refused
    at once, by name, not loaded for minutes."""
    with serving(remote_app(splits=5000)) as url:
        began = time.monotonic()
        with pytest.raises(RemoteEnvError, match="lists 5000 splits"):
            verihub.load_env(f"openenv:{url}", size=5)
        assert time.monotonic() - began < 5


# -- a hostile network client ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def strict_server() -> Iterator[str]:
    process, url = start_serve("envs/sums", "--idle-timeout", "1", "--token", "t0ken", "--max-sessions", "2")
    yield url
    stop_serve(process)


def closed_within(sock: socket.socket, seconds: float, drip: bytes = b"") -> bool:
    """Whether the server closes ``sock`` within ``seconds`` while it is sent ``drip`` a byte at a time."""
    deadline = time.monotonic() + seconds
    sock.settimeout(0.25)
    for byte in itertools.cycle(drip or b"\0"):
        if time.monotonic() > deadline:
            return False
        try:
            if drip:
                sock.send(bytes([byte]))
            if sock.recv(4096) == b"":
                return True
        except TimeoutError:
            continue
        except OSError:  # reset: closed
            return True
    return False


@pytest.mark.parametrize(
    "drip", [b"", b"GET /health HTTP/1.1\r\nX-Slow: " + b"a" * 1000], ids=["idle", "dripping-its-head"]
)
def test_connections_without_a_request_are_closed_before_the_token_is_checked(strict_server: str, drip: bytes) -> None:
    """Sockets that never finish a request's head cannot pile up: each is closed within the deadline, also
    after a first request on a kept-alive connection; a WebSocket session that talks stays open."""
    host, port = strict_server.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as fresh:
        assert closed_within(fresh, 6, drip)
    with socket.create_connection((host, int(port))) as kept:
        kept.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        kept.settimeout(5)
        assert kept.recv(4096).startswith(b"HTTP/1.1 200")
        assert closed_within(kept, 6, drip)
    with connect(ws_url(strict_server), additional_headers={"Authorization": "Bearer t0ken"}) as ws:
        for _ in range(8):  # 3 s: past the deadline, a reset every 0.4 s (under the 1 s idle limit)
            assert frame(ws, "reset", {"index": 0})["type"] == "observation"
            time.sleep(0.4)


# -- who may reach a server: grades state answers, and POST /grade is a reward oracle --------------------


@pytest.fixture(scope="module")
def open_server() -> Iterator[str]:
    """No token, on loopback: for local programs only. One session; short limits to trip."""
    process, url = start_serve(
        "envs/sums", "--max-sessions", "1", "--idle-timeout", "1", "--max-session-time", "3", "--body-timeout", "1"
    )
    yield url
    stop_serve(process)


GRADE = json.dumps({"items": [{"env": "sums", "task_id": "sums-17-12", "completion": "28"}]}).encode()


def raw_request(url: str, head: str, body: bytes = b"") -> bytes:
    """One request as an attacker's script sends it (any Host, any Origin): the whole reply."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"Connection: close\r\n\r\n" + body)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
        return reply


def started_on_all_interfaces(*arguments: str, **environment: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [VERIHUB, "serve", "envs/sums", "--host", "0.0.0.0", "--port", "0", *arguments],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **environment},
    )
    found = re.search(r"http://0\.0\.0\.0:(\d+)", process.stdout.readline() if process.stdout else "")
    if found is None:
        process.kill()
        raise AssertionError("verihub serve did not start")
    return process, f"http://127.0.0.1:{found.group(1)}"


def test_a_server_without_a_token_listens_on_loopback_only() -> None:
    """Beyond loopback a token is wanted (from the environment, so it is not in ``ps``), or the operator
    says --no-token: an authenticating proxy of theirs decides who reaches it, and web pages still cannot."""
    refused = subprocess.run(
        [VERIHUB, "serve", "envs/sums", "--host", "0.0.0.0", "--port", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    for named in ("needs a token", "VERIHUB_SERVE_TOKEN", "--token", "--no-token"):
        assert named in refused.stderr, refused.stderr
    process, url = started_on_all_interfaces(VERIHUB_SERVE_TOKEN="envt0ken")
    try:
        assert b"envt0ken" not in Path(f"/proc/{process.pid}/cmdline").read_bytes()
        assert httpx.post(f"{url}/grade", content=GRADE).status_code == 401
        authorised = httpx.post(f"{url}/grade", content=GRADE, headers={"Authorization": "Bearer envt0ken"})
        assert authorised.status_code == 200 and authorised.json()["grades"][0]["status"] == "wrong"
    finally:
        stop_serve(process)
    process, url = started_on_all_interfaces("--no-token")
    try:
        head = f"POST /grade HTTP/1.1\nHost: grader.internal\nContent-Length: {len(GRADE)}\n"
        assert raw_request(url, head, GRADE).startswith(b"HTTP/1.1 200")
        foreign = httpx.post(f"{url}/grade", content=GRADE, headers={"Origin": "http://attacker.example"})
        assert foreign.status_code == 403
    finally:
        stop_serve(process)


@pytest.mark.parametrize(
    "host", ["attacker.example", "attacker.example:8000", "localhost.attacker.example", "127.0.0.1.nip.io"]
)
def test_a_rebinding_host_gets_nothing_from_a_server_without_a_token(open_server: str, host: str) -> None:
    """DNS rebinding: a page on the attacker's name, resolved to 127.0.0.1, sends that name as Host. It
    gets neither grades (their detail states answers) nor a session, nor even the task listing."""
    for head in (
        f"POST /grade HTTP/1.1\nHost: {host}\nContent-Length: {len(GRADE)}\n",
        f"POST /sums/tasks HTTP/1.1\nHost: {host}\nContent-Length: 2\n",
        f"GET /metadata HTTP/1.1\nHost: {host}\n",
    ):
        reply = raw_request(open_server, head, GRADE if "grade" in head else b"{}")
        assert reply.startswith(b"HTTP/1.1 403") and b"FORBIDDEN_HOST" in reply, reply
        assert b"grades" not in reply and b"prompt" not in reply
    handshake = (
        f"GET /ws HTTP/1.1\nHost: {host}\nUpgrade: websocket\nConnection: Upgrade\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\nSec-WebSocket-Version: 13\n"
    )
    assert raw_request(open_server, handshake).startswith(b"HTTP/1.1 403")


@pytest.mark.parametrize(
    "origin", ["http://attacker.example", "null", "http://127.0.0.1:1", "chrome-extension://abcdef"]
)
def test_a_web_page_of_another_origin_cannot_drive_a_server_without_a_token(open_server: str, origin: str) -> None:
    """A page the user visits can open a WebSocket to loopback, or send a CORS-simple POST (text/plain,
    no preflight); the browser adds its Origin, and the server refuses both before doing any work."""
    with pytest.raises(InvalidStatus, match="403"):
        connect(ws_url(open_server), origin=origin).close()
    posted = httpx.post(f"{open_server}/grade", content=GRADE, headers={"Origin": origin, "Content-Type": "text/plain"})
    assert posted.status_code == 403 and posted.json()["error"] == "FORBIDDEN_ORIGIN"
    assert "grades" not in posted.text


def test_local_programs_still_reach_a_server_without_a_token(open_server: str) -> None:
    """What the browser guard lets through: no Origin (OpenEnv's client, httpx, the grader pool), the
    server's own origin, localhost and IP addresses as Host; /health for anyone (probes)."""
    port = open_server.rsplit(":", 1)[1]
    with GenericEnvClient(base_url=open_server.replace("127.0.0.1", "localhost")).sync() as client:
        assert client.reset(index=0).observation["messages"]
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "127.0.0.1"):
        reply = raw_request(open_server, f"POST /grade HTTP/1.1\nHost: {host}\nContent-Length: {len(GRADE)}\n", GRADE)
        assert reply.startswith(b"HTTP/1.1 200"), reply
    same = httpx.post(f"{open_server}/grade", content=GRADE, headers={"Origin": open_server})
    assert same.status_code == 200 and same.json()["grades"][0]["status"] in ("correct", "wrong")
    assert raw_request(open_server, "GET /health HTTP/1.1\nHost: attacker.example\n").startswith(b"HTTP/1.1 200")


# -- holding the server's resources without doing work ------------------------------------------------------


def test_a_body_dripped_a_byte_at_a_time_is_cut_at_one_deadline(open_server: str) -> None:
    """Each byte well within any per-read timeout, the body as a whole past --body-timeout: 408, closed."""
    host, port = open_server.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(f"POST /grade HTTP/1.1\r\nHost: {host}\r\nContent-Length: 100000\r\n\r\n".encode())
        began = time.monotonic()
        reply = b""
        sock.settimeout(0.1)
        while time.monotonic() - began < 6:
            try:
                sock.send(b" ")
                chunk = sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                break
            if not chunk:
                break
            reply += chunk
        assert time.monotonic() - began < 3, "the dripping body held its connection"
    assert reply.startswith(b"HTTP/1.1 408") and b"REQUEST_TIMEOUT" in reply, reply


def test_frames_that_do_no_work_do_not_hold_a_session_slot(open_server: str) -> None:
    """A state frame (or a malformed one) just under --idle-timeout is no work: the session is closed a
    second after its last reset or step, and the one slot is free for someone else."""
    with connect(ws_url(open_server)) as ws:
        frame(ws, "reset", {"index": 0})
        began, told = time.monotonic(), []
        with contextlib.suppress(ConnectionClosed):
            for trickle in itertools.cycle([json.dumps({"type": "state"}), "{not json"]):
                if time.monotonic() - began > 5:
                    break
                ws.send(trickle)
                with contextlib.suppress(TimeoutError):
                    while True:  # the replies, and the closing frame when it comes
                        told.append(json.loads(ws.recv(timeout=0.4))["data"].get("message", ""))
        assert any("no reset or step for 1s" in message for message in told), told
        assert time.monotonic() - began < 2.5
    eventually(lambda: active(open_server) == 0, seconds=3)


def test_a_busy_session_ends_at_its_lifetime(open_server: str) -> None:
    """Resets every 0.4 s keep a session from idling, not open forever: --max-session-time closes it."""
    with connect(ws_url(open_server)) as ws:
        began, reply = time.monotonic(), {}
        while time.monotonic() - began < 8:
            reply = frame(ws, "reset", {"index": 0})
            with contextlib.suppress(TimeoutError):  # a pause between episodes; the server may speak in it
                reply = json.loads(ws.recv(timeout=0.4))
            if reply["type"] != "observation":
                break
        assert reply["type"] == "error" and "longest a session may last, 3s" in reply["data"]["message"], reply
        assert 2.5 < time.monotonic() - began < 5
    eventually(lambda: active(open_server) == 0, seconds=3)
