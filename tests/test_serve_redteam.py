"""``verihub serve`` and the OpenEnv adapter against TRUST.md's adversaries: a policy whose actions arrive
through ``step``, a hostile network client, a hostile OpenEnv remote. Each test drives a real process over
loopback (a ``verihub serve`` subprocess, or an OpenEnv-speaking server the adapter connects to)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from test_serve import start, stop, ws_url
from websockets.sync.client import connect


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    process, url = start("envs/sums", "envs/shell-task", "--max-sessions", "4")
    yield url
    stop(process)


def frame(ws: Any, kind: str, data: Any = None) -> dict[str, Any]:
    ws.send(json.dumps({"type": kind, **({} if data is None else {"data": data})}))
    reply: dict[str, Any] = json.loads(ws.recv())
    return reply


# -- the policy: what its tool calls can do --------------------------------------------------------------


@pytest.mark.parametrize("arguments", ['{"command": ' + "1" * 5000 + "}", "[" * 100_000 + "]" * 100_000],
                         ids=["past-the-digit-limit", "nested-too-deep"])
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
