"""OpenEnv's frames, one codec for both ends (verihub.serve.frames): what each end refuses, with which code, and
that no other module writes or reads frames by hand."""

from __future__ import annotations

import json
import re

import pytest

from conftest import REPO
from verihub.errors import FrameError
from verihub.serve.frames import (
    MAX_FRAME,
    ErrorCode,
    error_frame,
    read_reply,
    read_request,
    reply_frame,
    request_frame,
    ws_url,
)


def test_a_request_and_a_reply_go_through_both_ends() -> None:
    assert read_request(request_frame("step", {"content": "42"})) == ("step", {"content": "42"})
    assert read_request(request_frame("state")) == ("state", {})
    data = {"observation": {"messages": []}, "reward": 1.0, "done": True, "metadata": {}}
    assert read_reply(reply_frame("observation", data), "step") == data
    assert read_reply(reply_frame("state", {"step_count": 2}), "state") == {"step_count": 2}
    assert ws_url("http://127.0.0.1:8000") == "ws://127.0.0.1:8000/ws"
    assert ws_url("https://grader.example") == "wss://grader.example/ws"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (None, ErrorCode.INVALID_JSON),  # a binary frame
        (json.dumps({"type": "step", "data": {"content": "x" * MAX_FRAME}}), ErrorCode.INVALID_JSON),
        ("{not json", ErrorCode.INVALID_JSON),
        ("[" * 100_000 + "]" * 100_000, ErrorCode.INVALID_JSON),  # nesting past the parser's recursion
        ('{"type": "step", "data": ' + "1" * 5000 + "}", ErrorCode.INVALID_JSON),  # past int_max_str_digits
        ('["step"]', ErrorCode.UNKNOWN_TYPE),
        ('{"type": "delete_everything"}', ErrorCode.UNKNOWN_TYPE),
        ('{"data": {}}', ErrorCode.UNKNOWN_TYPE),
        ('{"type": ["step"]}', ErrorCode.UNKNOWN_TYPE),
    ],
)
def test_a_server_refuses_a_bad_request_with_the_code_to_answer(text: str | None, code: ErrorCode) -> None:
    with pytest.raises(FrameError) as refused:
        read_request(text)
    assert refused.value.code == code and not refused.value.sent
    answer = json.loads(error_frame(refused.value.code, str(refused.value)))
    assert answer["type"] == "error" and answer["data"]["code"] == code


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("{not json", "malformed JSON"),
        ("[" * 100_000 + "]" * 100_000, "malformed JSON"),
        ('{"type": "observation", "data": [1]}', "not {type, data"),
        ('{"type": "observation"}', "not {type, data"),
        ('"observation"', "not {type, data"),
        ('{"type": "state", "data": {}}', "'state' frame, not 'observation'"),
    ],
)
def test_a_client_refuses_a_reply_that_is_not_one(text: str, shown: str) -> None:
    with pytest.raises(FrameError, match=re.escape(shown)) as refused:
        read_reply(text, "step")
    assert not refused.value.sent


def test_an_error_frame_reaches_the_client_as_its_code_and_a_bounded_message() -> None:
    with pytest.raises(FrameError) as refused:
        read_reply(error_frame(ErrorCode.CAPACITY_REACHED, "full " * 2000, max_sessions=4), "reset")
    assert refused.value.sent and refused.value.code == ErrorCode.CAPACITY_REACHED
    assert str(refused.value).startswith("error CAPACITY_REACHED: full") and len(str(refused.value)) < 400
    with pytest.raises(FrameError) as odd:  # a hostile server's code is shown cut, never trusted as more
        read_reply(json.dumps({"type": "error", "data": {"code": "X" * 5000}}), "step")
    assert odd.value.code == "X" * 40


def test_no_other_module_writes_or_reads_frames_by_hand() -> None:
    """Frames are built and parsed in verihub.serve.frames only: a frame dict or a frame-type test elsewhere
    is a second copy of the protocol's rules."""
    frame_literal = re.compile(r"""["']type["']\s*:\s*["'](reset|step|state|close|error|observation)["']""")
    frame_test = re.compile(
        r"""(get\(["']type["']\)|\[["']type["']\])\s*(==|!=|in)\s*\(?["'](error|observation|state|reset|step)"""
    )
    copies = [
        f"{path.relative_to(REPO)}:{number}"
        for part in ("sdk", "hub", "trainers")
        for path in sorted((REPO / part).rglob("*.py"))
        if path.name != "frames.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if frame_literal.search(line) or frame_test.search(line)
    ]
    assert copies == [], "build and read frames with verihub.serve.frames:\n" + "\n".join(copies)
    assert frame_literal.search('json.dumps({"type": "error", "data": {}})')  # the patterns see a copy
    assert frame_test.search('if answer.get("type") == "observation":')
