"""``verihub serve`` and ``verihub hub serve`` stop within seconds of SIGTERM, whatever a request waits on
(issue 39, item 5): a grading thread spinning in Python, one holding the GIL in C code (a regex
backtracking), a client that never sends the body it announced. Real processes, real signals.

Before, uvicorn waited for every request in flight, without end: the server outlived SIGTERM as long as its
slowest request (forever, for these), so a deployment's stop turned into a kill and a test's into a leak.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from conftest import REPO, VERIHUB, free_port, wait_until_serving

STOPPED_WITHIN_S = 30  # generous: the servers stop in about 3 s (6 s for a thread that holds the GIL)

SPEC = """\
id: busy
version: 0.1.0
domain: test
description: A check that never returns on some answers.
dataset: {source: data/tasks.jsonl, split: {train: 0.5, eval: 0.5}}
prompt: {user: "Say {answer}."}
verifier:
  - {name: says, layer: check, use: "busy_check:says", timeout_s: 600}
gold: {reference: '{answer}', negatives: ['no']}
"""
CHECK = """\
import os, re
from pathlib import Path


def says(completion, task):
    if completion in ("spin", "regex"):
        Path(os.environ["BUSY_MARKER"]).write_text(completion)  # the grading thread is in: tell the test
    if completion == "spin":
        while True:
            pass
    if completion == "regex":
        re.match(r"(a+)+$", "a" * 64 + "b")  # catastrophic backtracking, all of it in C with the GIL held
    return completion == task["answer"]
"""


def busy_env(root: Path) -> Path:
    (root / "data").mkdir(parents=True)
    (root / "environment.yaml").write_text(SPEC)
    (root / "busy_check.py").write_text(CHECK)
    (root / "data" / "tasks.jsonl").write_text(
        "".join(json.dumps({"id": f"t{i}", "answer": str(i)}) + "\n" for i in range(4))
    )
    return root


def eventually(check: object, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]  # a callable
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.02)


def stopped(process: subprocess.Popen[str]) -> float:
    """SIGTERM ``process``; the seconds it took to end (the test fails if it does not within the bound)."""
    start = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOPPED_WITHIN_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(f"still serving {STOPPED_WITHIN_S}s after SIGTERM")
    return time.monotonic() - start


def refused(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize("answer", ["spin", "regex"])
def test_verihub_serve_stops_on_sigterm_while_a_grading_thread_is_busy(tmp_path: Path, answer: str) -> None:
    marker = tmp_path / "busy"
    process = subprocess.Popen(
        [VERIHUB, "serve", str(busy_env(tmp_path / "busy-env")), "--port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "BUSY_MARKER": str(marker)},
    )
    found = re.search(r"http://127\.0\.0\.1:(\d+)", process.stdout.readline() if process.stdout else "")
    assert found is not None, process.communicate(timeout=30)
    port = int(found.group(1))
    grade = json.dumps({"items": [{"env": "busy", "task_id": "t0", "completion": answer}]})

    def post() -> None:
        try:
            httpx.post(f"http://127.0.0.1:{port}/grade", content=grade, timeout=120)
        except httpx.HTTPError:
            pass  # the server stops under it

    threading.Thread(target=post, daemon=True).start()
    eventually(marker.exists)
    stopped(process)
    # by the signal, re-raised once the request was cancelled; by the watchdog's SIGKILL where a thread held the
    # GIL (Python's handler, and so uvicorn, never ran)
    assert process.returncode == (-signal.SIGTERM if answer == "spin" else -signal.SIGKILL)
    assert refused(port)


def test_verihub_hub_serve_stops_on_sigterm_while_a_client_holds_a_request(tmp_path: Path) -> None:
    """An authorised client announces a body and never sends it: the request waits in the route (it has
    asked for the body: uvicorn said ``100 Continue``) when SIGTERM comes."""
    from verihub.hub.accounts import Accounts
    from verihub.hub.local import LocalHub

    data = tmp_path / "hubdata"
    LocalHub(data)
    token = Accounts(data / "hub.db").create_token("alice")
    port = free_port()
    process = subprocess.Popen(
        [VERIHUB, "hub", "serve", "--port", str(port), "--data", str(data)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until_serving(f"http://127.0.0.1:{port}/api/datasets", timeout_s=60)
        with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
            client.sendall(
                b"POST /api/repos/create HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
                + token.encode()
                + b"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n"
            )
            assert client.recv(100).startswith(b"HTTP/1.1 100"), "the route did not ask for the body"
            client.sendall(b'{"name": ')  # and nothing more
            stopped(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert refused(port)
