"""``verihub serve`` as a real process on loopback, driven by OpenEnv's own unmodified client.

The client is ``openenv.GenericEnvClient`` (PyPI ``openenv``, Meta's OpenEnv); raw WebSocket frames and
HTTP bodies play the hostile user.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openenv import GenericEnvClient  # the reference client, in the dev extra: missing it fails, never skips
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

import verihub
from conftest import REPO, start_serve, stop_serve
from verihub.environment.session import grade_detail

VERIHUB = str(Path(sys.executable).with_name("verihub"))
BUNDLED = sorted(path.name for path in (REPO / "envs").iterdir() if (path / "environment.yaml").is_file())

BROKEN_SPEC = """\
id: broken-files
version: 0.1.0
domain: shell
description: A tool environment whose tasks' files are not JSON.
dataset: {source: data/tasks.jsonl, split: {train: 0.5, eval: 0.5}}
prompt: {user: "Do {id}."}
interaction: {kind: multi_turn, max_turns: 2, tools: [bash]}
verifier:
  - {name: format, layer: rule, use: boxed}
gold: {reference: '\\boxed{{1}}', negatives: ['none']}
"""

FRAGILE_SPEC = """\
id: fragile
version: 0.1.0
domain: math
description: A check that raises on one answer.
dataset: {source: data/tasks.jsonl, split: {train: 0.5, eval: 0.5}}
prompt: {user: "Say {answer}."}
verifier:
  - {name: says, layer: check, use: "fragile_check:says"}
gold: {reference: '{answer}', negatives: ['no']}
"""

FRAGILE_CHECK = """\
from verihub.checks.base import CheckResult

def says(completion, task):
    if completion == "boom":
        raise RuntimeError("the check broke")
    if completion.startswith("echo:"):  # a detail that is the model's own text, whatever it holds
        return CheckResult(0.0, completion.removeprefix("echo:"))
    return completion == task["answer"]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    broken = tmp_path_factory.mktemp("envs") / "broken-files"
    (broken / "data").mkdir(parents=True)
    (broken / "environment.yaml").write_text(BROKEN_SPEC)
    (broken / "data" / "tasks.jsonl").write_text(
        "".join(json.dumps({"id": f"b{i}", "files": "{oops"}) + "\n" for i in range(4))
    )
    fragile = broken.parent / "fragile"
    (fragile / "data").mkdir(parents=True)
    (fragile / "environment.yaml").write_text(FRAGILE_SPEC)
    (fragile / "fragile_check.py").write_text(FRAGILE_CHECK)
    (fragile / "data" / "tasks.jsonl").write_text(
        "".join(json.dumps({"id": f"f{i}", "answer": str(i)}) + "\n" for i in range(4))
    )
    process, url = start_serve(*(f"envs/{name}" for name in BUNDLED), str(broken), str(fragile), "--max-sessions", "3")
    yield url
    stop_serve(process)


TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def quick_server() -> Iterator[str]:
    """One session at most, closed after a second without a frame; a token wanted."""
    process, url = start_serve("envs/sums", "--max-sessions", "1", "--idle-timeout", "1", "--token", TOKEN)
    yield url
    stop_serve(process)


def eventually(check: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("the condition did not hold in time")
        time.sleep(0.05)


def active(url: str) -> int:
    return int(httpx.get(f"{url}/health").json()["active_sessions"])


def ws_url(url: str) -> str:
    return url.replace("http://", "ws://") + "/ws"


def first_task(env: verihub.Environment, split: str = "eval") -> dict[str, Any]:
    return env.dataset(split)[0]


# -- the unmodified OpenEnv client, end to end ---------------------------------------------------------


def test_openenv_client_plays_a_single_turn_environment(server: str) -> None:
    sums = verihub.load_env(REPO / "envs" / "sums")
    task = first_task(sums)
    with GenericEnvClient(base_url=server).sync() as client:
        result = client.reset(env="sums", task_id=task["id"], episode_id="mine")
        assert result.observation["messages"] == sums.render(task) and not result.done
        result = client.step({"content": sums.reference(task)})
        assert (result.reward, result.done, result.metadata["status"]) == (1.0, True, "ok")
        assert client.state()["episode_id"] == "mine"
        client.reset(env="sums", task_id=task["id"])  # a second episode on the same connection
        result = client.step({"content": sums.negatives(task)[0]})
        assert (result.reward, result.done, result.metadata["status"]) == (0.0, True, "wrong")
        with pytest.raises(RuntimeError, match="session is over"):
            client.step({"content": sums.reference(task)})


@pytest.mark.nsjail
def test_openenv_client_plays_a_tool_environment_in_the_sandbox(server: str, nsjail_path: str) -> None:
    shell = verihub.load_env(REPO / "envs" / "shell-task")
    task = next(row for row in shell.dataset("train") if row["category"] == "csv-json")
    with GenericEnvClient(base_url=server).sync() as client:
        result = client.reset(env="shell-task", task_id=task["id"], split="train")
        assert [tool["function"]["name"] for tool in result.observation["tools"]] == ["bash"]
        call = {
            "id": "1",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": "ls; id -u"})},
        }
        result = client.step({"content": "", "tool_calls": [call]})
        listing = result.observation["messages"][0]["content"].split()
        assert "users.csv" in listing and listing[-1] == "65534" and not result.done  # seeded; nobody, in the jail
        work = {"id": "2", "function": {"name": "bash", "arguments": {"command": task["solution"]}}}
        assert client.step({"content": "", "tool_calls": [work]}).reward is None
        result = client.step({"content": "done"})
        assert (result.reward, result.done, result.metadata["turns"]) == (1.0, True, 3)
    with GenericEnvClient(base_url=server).sync() as client:  # words alone: graded on the untouched files
        client.reset(env="shell-task", task_id=task["id"], split="train")
        assert client.step({"content": f"done, I ran {task['solution']}"}).reward == 0.0


def opening_turns(name: str, task: dict[str, Any]) -> list[dict[str, Any]]:
    """A tool call before the answer, for the environments that have tools."""
    if name == "shell-task":
        return [
            {
                "content": "",
                "tool_calls": [{"id": "1", "function": {"name": "bash", "arguments": {"command": task["solution"]}}}],
            }
        ]
    if name == "code-repair":
        return [
            {
                "content": "",
                "tool_calls": [{"id": "1", "function": {"name": "python", "arguments": {"code": "print(6 * 7)"}}}],
            }
        ]
    return []


@pytest.mark.nsjail
@pytest.mark.parametrize("name", BUNDLED)
def test_openenv_client_plays_every_bundled_environment(server: str, name: str, nsjail_path: str) -> None:
    env = verihub.load_env(REPO / "envs" / name)
    task = first_task(env)
    with GenericEnvClient(base_url=server).sync() as client:
        result = client.reset(env=name, task_id=task["id"], split="eval")
        assert result.observation["messages"] == env.render(task)
        for turn in opening_turns(name, task):
            result = client.step(turn)
            assert not result.done and "error" not in result.observation["messages"][0]["content"]
        final = "done" if name == "shell-task" else env.reference(task)
        result = client.step({"content": final})
    assert result.done
    if name == "report":  # a judge layer and no judge model here: a fault, never a zero
        assert result.reward is None and "no judge configured" in result.metadata["reason"]
    else:
        assert (result.reward, result.metadata["status"]) == (1.0, "ok"), result.metadata


def plain_reply(schema: dict[str, Any], reply: str) -> dict[str, Any]:
    """The model's plain reply as the action, as a client that knows only the schema sends it (verifiers'
    ``openenv`` taskset): the value of the schema's one required field, which must be text."""
    required = schema.get("required", [])
    assert len(required) == 1, f"a plain reply fits an action with exactly one required field, not {required}"
    assert schema["properties"][required[0]]["type"] == "string"
    return {required[0]: reply}


@pytest.mark.nsjail
@pytest.mark.parametrize("name", BUNDLED)
def test_a_client_that_sends_plain_replies_plays_every_bundled_environment(
    server: str, name: str, nsjail_path: str
) -> None:
    """The answer goes in the action's one required field; tool calls in the optional one, alone, as clients
    written against the earlier schema (nothing required) send them."""
    schema = httpx.get(f"{server}/schema").json()["action"]
    env = verihub.load_env(REPO / "envs" / name)
    task = first_task(env)
    with GenericEnvClient(base_url=server).sync() as client:
        client.reset(env=name, task_id=task["id"], split="eval")
        for turn in opening_turns(name, task):
            result = client.step({"tool_calls": turn["tool_calls"]})
            assert not result.done and "error" not in result.observation["messages"][0]["content"]
        result = client.step(plain_reply(schema, "done" if name == "shell-task" else env.reference(task)))
    assert result.done
    if name == "report":  # no judge model here: a fault, as above
        assert result.reward is None and "no judge configured" in result.metadata["reason"]
    else:
        assert (result.reward, result.metadata["status"]) == (1.0, "ok"), result.metadata
    if name == "sums":
        with GenericEnvClient(base_url=server).sync() as client:
            client.reset(env=name, task_id=task["id"], split="eval")
            assert client.step(plain_reply(schema, env.negatives(task)[0])).reward == 0.0


def test_verihubs_own_openenv_adapter_finds_the_text_field_unasked() -> None:
    """``load_env("openenv:URL")`` fills the action's one required field with the completion: against a
    verihub server that is ``content``, with no ``action_field`` to name."""
    process, url = start_serve("envs/sums")
    try:
        remote = verihub.load_env(f"openenv:{url}", size=5)
        assert (remote.remote.action_field, remote.remote.action_kind) == ("content", "text")
        task = remote.dataset("eval")[0]
        sums = verihub.load_env(REPO / "envs" / "sums")
        asked = sums.dataset("eval")[0]
        assert json.loads(task["prompt"])["task_id"] == asked["id"]
        assert remote.grade(task, sums.reference(asked)).reward == 1.0
        assert remote.grade(task, sums.negatives(asked)[0]).reward == 0.0
    finally:
        stop_serve(process)


def test_a_fault_is_reward_null_with_a_reason(server: str) -> None:
    with GenericEnvClient(base_url=server).sync() as client:
        result = client.reset(env="broken-files", index=0)
        assert result.done and result.reward is None
        assert result.metadata["status"] == "env_error" and "cannot seed the work dir" in result.metadata["reason"]


# -- sessions: capacity, disconnects, idle ------------------------------------------------------------


def test_sessions_past_the_limit_are_refused_and_slots_come_back(server: str) -> None:
    eventually(lambda: active(server) == 0)
    held = [GenericEnvClient(base_url=server).sync() for _ in range(3)]
    for client in held:
        client.reset(env="sums", index=0)
    assert active(server) == 3
    with GenericEnvClient(base_url=server).sync() as extra, pytest.raises(RuntimeError, match="CAPACITY_REACHED"):
        extra.reset(env="sums", index=0)
    held.pop().close()  # a clean close frees its slot
    eventually(lambda: active(server) == 2)
    with connect(ws_url(server)) as raw:  # one that vanishes mid-episode, without a close frame, frees it too
        raw.send(json.dumps({"type": "reset", "data": {"env": "shell-task", "index": 0}}))
        assert json.loads(raw.recv(timeout=30))["type"] == "observation"
        raw.send(
            json.dumps(
                {"type": "step", "data": {"tool_calls": [{"name": "bash", "arguments": {"command": "touch x"}}]}}
            )
        )
        assert json.loads(raw.recv(timeout=30))["data"]["done"] is False  # a work dir now lives on the server
        assert active(server) == 3
        raw.socket.shutdown(2)
        eventually(lambda: active(server) == 2)
    for client in held:
        client.close()
    eventually(lambda: active(server) == 0)


def test_idle_sessions_are_reaped(quick_server: str) -> None:
    client = GenericEnvClient(base_url=quick_server, headers=AUTH).sync()
    client.reset(index=0)
    assert active(quick_server) == 1
    eventually(lambda: active(quick_server) == 0, seconds=5)  # after a second without a frame
    with GenericEnvClient(base_url=quick_server, headers=AUTH).sync() as fresh:  # the one slot is free again
        assert fresh.reset(index=0).observation["messages"]
    client.close()


def test_a_token_is_wanted_before_anything_is_parsed(quick_server: str) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        with (
            pytest.raises(ConnectionError, match="HTTP 403"),
            GenericEnvClient(base_url=quick_server, headers=headers).sync() as client,
        ):
            client.reset(index=0)
        refused = httpx.post(f"{quick_server}/grade", content=b"{not even json", headers=headers)
        assert refused.status_code == 401 and refused.json()["error"] == "UNAUTHORIZED"
        assert httpx.get(f"{quick_server}/metadata", headers=headers).status_code == 401
    assert httpx.get(f"{quick_server}/health").status_code == 200  # probes need no token
    assert httpx.get(f"{quick_server}/metadata", headers=AUTH).json()["name"] == "sums"


def test_a_taken_port_is_a_clear_error(quick_server: str) -> None:
    port = quick_server.rsplit(":", 1)[1]
    result = subprocess.run(
        [VERIHUB, "serve", "envs/sums", "--port", port], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr


# -- hostile frames and bodies ------------------------------------------------------------------------


def test_malformed_frames_get_error_frames_and_the_session_goes_on(server: str) -> None:
    with connect(ws_url(server)) as ws:

        def answer(frame: str | bytes) -> dict[str, Any]:
            ws.send(frame)
            reply = json.loads(ws.recv(timeout=30))
            return reply["data"] if reply["type"] == "error" else {"ok": reply}

        assert answer("{not json")["code"] == "INVALID_JSON"
        assert answer("[" * 100_000 + "]" * 100_000)["code"] == "INVALID_JSON"  # nested past the recursion limit
        assert answer('{"type": "reset", "data": {"seed": ' + "9" * 5000 + "}}")["code"] == "INVALID_JSON"
        assert answer(b"\x00\x01binary")["code"] == "INVALID_JSON"
        assert answer(json.dumps({"type": "launch"}))["code"] == "UNKNOWN_TYPE"
        assert answer(json.dumps(["reset"]))["code"] == "UNKNOWN_TYPE"
        assert "reset frame first" in answer(json.dumps({"type": "step", "data": {"content": "x"}}))["message"]
        refused = answer(json.dumps({"type": "reset", "data": {"env": "sums", "index": 0, "cheat": True}}))
        assert refused["code"] == "VALIDATION_ERROR" and "cheat" in refused["message"]
        assert "no environment 'nope'" in answer(json.dumps({"type": "reset", "data": {"env": "nope"}}))["message"]
        assert (
            "past the end" in answer(json.dumps({"type": "reset", "data": {"env": "sums", "index": 10**9}}))["message"]
        )
        assert "ok" in answer(json.dumps({"type": "reset", "data": {"env": "sums", "index": 0}}))
        assert answer(json.dumps({"type": "step", "data": {"content": ["x"]}}))["code"] == "VALIDATION_ERROR"
        assert answer(json.dumps({"type": "step", "data": {"tool_calls": "rm -rf /"}}))["code"] == "VALIDATION_ERROR"
        graded = answer(json.dumps({"type": "step", "data": {"content": "\\boxed{1}"}}))["ok"]["data"]
        assert graded["done"] and graded["reward"] in (0.0, 1.0)  # the refused frames were no turns
        ws.send(json.dumps({"type": "step", "data": {"content": "x" * (2 << 20)}}))  # past the frame bound
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009  # message too big
    assert httpx.get(f"{server}/health").json()["status"] == "healthy"
    eventually(lambda: active(server) == 0)


def test_batch_grading_matches_in_process_grades(server: str) -> None:
    envs = {name: verihub.load_env(REPO / "envs" / name) for name in ("sums", "compare")}
    items, expected = [], []
    for name, env in envs.items():
        for task in list(env.dataset("eval"))[:4]:
            for completion in (env.reference(task), *env.negatives(task)[:1], "x" * 100_000):
                items.append({"env": name, "task_id": task["id"], "completion": completion})
                expected.append(grade_detail(env.grade(task, completion)))
    response = httpx.post(f"{server}/grade", json={"items": items}, timeout=120)
    assert response.status_code == 200
    grades = response.json()["grades"]
    strip = [
        {**g, "layers": [{k: v for k, v in layer.items() if k != "detail"} for layer in g["layers"]]}
        for g in (*grades, *expected)
    ]
    assert strip[: len(grades)] == strip[len(grades) :]
    assert {g["status"] for g in grades} == {"ok", "wrong"}


def test_tasks_are_found_by_id_in_the_split_asked_or_the_first_split_that_has_it() -> None:
    from types import SimpleNamespace

    from verihub.serve.state import Catalog, TaskNotFound

    splits = {
        "train": [{"id": "a", "from": "train"}, {"id": 7, "from": "train"}],
        "eval": [{"id": "a", "from": "eval"}, {"id": "b", "from": "eval"}],
    }
    env = SimpleNamespace(id="two", split_names=list(splits), tasks=lambda split: splits[split])
    catalog = Catalog([env])
    assert catalog.by_id(env, "a", None)["from"] == "train"  # an id in two splits: the first split's
    assert catalog.by_id(env, "a", "eval")["from"] == "eval"
    assert catalog.by_id(env, "b", None)["from"] == "eval" and catalog.by_id(env, "7", "train")["id"] == 7
    with pytest.raises(TaskNotFound, match="no task 'b' in split 'train'"):
        catalog.by_id(env, "b", "train")
    for asked in range(100):  # a caller naming splits that do not exist adds nothing to what is held
        with pytest.raises(TaskNotFound, match="no split"):
            catalog.by_id(env, "a", f"split-{asked}")
    assert len(catalog._rows) == 3  # train, eval, and every split's ids


def test_a_check_that_raises_costs_only_its_own_pair_its_reward(server: str) -> None:
    items = [{"env": "fragile", "task_id": "f1", "completion": text} for text in ("1", "boom", "2")]
    grades = httpx.post(f"{server}/grade", json={"items": items}).json()["grades"]
    # the check raises on this answer alone (the task's reference passes it): the answer's fault, wrong
    assert [(g["status"], g["reward"]) for g in grades] == [("ok", 1.0), ("wrong", 0.0), ("wrong", 0.0)]
    assert "the check broke" in grades[1]["reason"] and grades[1]["layers"][0]["status"] == "answer_fault"


def test_batch_grades_carry_any_detail_intact_as_strict_json(server: str) -> None:
    # The server writes grades' JSON itself and remembers short layers: every detail, however odd or
    # long, and however often repeated, must come back as it was, in JSON that a strict parser reads.
    details = [
        'quote " backslash \\ slash / newline \n tab \t',
        "\x00\x1f\x7f",
        "é ü 日本 😀",
        "\u2028\u2029",
        "</script>",
        "x" * 3000,
        "",
        "a",
        "b",
        '{"score": 1}',
        "NaN",
        "1e999",
    ]
    texts = [*details, *details[::-1], *details]
    items = [{"env": "fragile", "task_id": "f1", "completion": "echo:" + text} for text in texts]
    response = httpx.post(f"{server}/grade", json={"items": items}, timeout=60)
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"

    def strict(constant: str) -> None:
        raise AssertionError(f"not JSON: {constant}")

    grades = json.loads(response.content.decode("utf-8"), parse_constant=strict)["grades"]
    assert [grade["layers"][0]["detail"] for grade in grades] == texts
    assert {(grade["status"], grade["reward"], grade["reason"]) for grade in grades} == {("wrong", 0.0, "")}
    assert all(grade["layers"][0].keys() == {"name", "layer", "status", "score", "detail"} for grade in grades)


def test_batch_grading_refuses_bad_requests_with_a_code(server: str) -> None:
    sums = verihub.load_env(REPO / "envs" / "sums")
    task_id = first_task(sums)["id"]

    def post(body: Any, **options: Any) -> httpx.Response:
        return httpx.post(f"{server}/grade", json=body, timeout=60, **options)

    missing = post(
        {
            "items": [
                {"env": "sums", "task_id": task_id, "completion": "1"},
                {"env": "sums", "task_id": "no-such", "completion": "1"},
            ]
        }
    )
    assert missing.status_code == 404 and "items[1]" in missing.json()["message"]
    in_split = post({"items": [{"env": "sums", "task_id": task_id, "split": "eval", "completion": "1"}]})
    assert in_split.status_code == 200 and len(in_split.json()["grades"]) == 1
    other_split = post({"items": [{"env": "sums", "task_id": task_id, "split": "train", "completion": "1"}]})
    assert other_split.status_code == 404 and "in split 'train'" in other_split.json()["message"]
    no_split = post({"items": [{"env": "sums", "task_id": task_id, "split": "nope", "completion": "1"}]})
    assert no_split.status_code == 404 and "no split 'nope'" in no_split.json()["message"]
    assert post({"items": [{"task_id": task_id, "completion": "1"}]}).json()["error"] == "NOT_FOUND"  # which env?
    # a multi-turn environment's text is graded as env.grade grades it, with no rollout (here: nothing to run)
    tool = post({"items": [{"env": "shell-task", "task_id": "sh-001", "completion": "1"}]})
    assert tool.status_code == 200 and tool.json()["grades"][0]["reward"] == 0.0, tool.text
    many = post({"items": [{"env": "sums", "task_id": task_id, "completion": "1"}] * 1025})
    assert many.status_code == 422 and "items" in many.json()["message"]
    assert post({"items": [{"env": "sums", "task_id": task_id}]}).status_code == 422
    bad_json = httpx.post(f"{server}/grade", content=b"{items: [", headers={"content-type": "application/json"})
    assert bad_json.status_code == 422 and bad_json.json()["error"] == "VALIDATION_ERROR"
    for hostile in (b"[" * 100_000, b'{"items": [{"task_id": ' + b"9" * 5000 + b"}]}"):
        refused = httpx.post(f"{server}/grade", content=hostile, headers={"content-type": "application/json"})
        assert refused.status_code == 422 and refused.json()["error"] == "VALIDATION_ERROR"
    huge = httpx.post(f"{server}/grade", content=b"x" * (17 << 20), timeout=60)
    assert huge.status_code == 413 and huge.json()["error"] == "BODY_TOO_LARGE"


# -- what is served, and OpenEnv's stateless forms ----------------------------------------------------


def test_replies_on_a_kept_alive_connection_are_not_held_back(server: str) -> None:
    # Without TCP_NODELAY on the server's sockets, each reply after a connection's first waited for the
    # client's delayed ACK (40 ms): a grader pool's requests are all on kept-alive connections.
    host, port = server.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port))) as connection:
        seconds = []
        for _ in range(6):
            began = time.perf_counter()
            connection.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            reply = b""
            while not reply.endswith(b"}"):
                reply += connection.recv(65536)
            seconds.append(time.perf_counter() - began)
    assert reply.startswith(b"HTTP/1.1 200")
    assert min(seconds[1:]) < 0.03, seconds  # the stall is a floor of 40 ms, so the best of five tells


def test_health_metadata_schema_and_the_task_api(server: str) -> None:
    assert httpx.get(f"{server}/health").json()["status"] == "healthy"
    metadata = httpx.get(f"{server}/metadata").json()
    assert [env["name"] for env in metadata["environments"]] == [*BUNDLED, "broken-files", "fragile"]
    schema = httpx.get(f"{server}/schema").json()
    assert {"action", "observation", "state"} <= set(schema) and "tool_calls" in schema["action"]["properties"]
    assert httpx.get(f"{server}/list_environments").json() == [*BUNDLED, "broken-files", "fragile"]
    splits = httpx.get(f"{server}/shell-task/splits").json()
    assert [split["name"] for split in splits] == ["train", "eval"]
    shell = verihub.load_env(REPO / "envs" / "shell-task")
    listed = httpx.post(f"{server}/shell-task/tasks", json={"split": "eval"}).json()["tasks"]
    assert [task["id"] for task in listed] == list(shell.dataset("eval")["id"])
    secret = shell.dataset("eval")[0]["solution"]
    assert all(set(task) <= {"id", "index", "prompt", "difficulty"} for task in listed)  # no answers listed
    assert secret not in json.dumps(listed)
    count = httpx.post(f"{server}/shell-task/num_tasks", json={"split": "eval"}).json()["num_tasks"]
    assert count == len(listed)
    assert httpx.post(f"{server}/shell-task/task", json={"split": "eval", "index": 1}).json()["task"] == listed[1]
    ranged = httpx.post(f"{server}/shell-task/task_range", json={"split": "eval", "start": 1, "stop": 3}).json()
    assert ranged["tasks"] == listed[1:3]
    assert httpx.post(f"{server}/shell-task/task", json={"split": "eval", "index": 999}).status_code == 400
    assert httpx.post(f"{server}/shell-task/tasks", json={"split": "nope"}).status_code == 404
    assert httpx.get(f"{server}/nope/splits").status_code == 404


def test_stateless_reset_and_step(server: str) -> None:
    sums = verihub.load_env(REPO / "envs" / "sums")
    task = first_task(sums)
    reset = httpx.post(f"{server}/reset", json={"env": "sums", "task_id": task["id"]}).json()
    assert reset["observation"]["messages"] == sums.render(task) and reset["done"] is False
    step = httpx.post(
        f"{server}/step", json={"env": "sums", "task_id": task["id"], "action": {"content": sums.reference(task)}}
    ).json()
    assert (step["reward"], step["done"], step["metadata"]["status"]) == (1.0, True, "ok")
    # a client that parsed the model's reply as JSON sends it as the action or as a non-text content: its text
    extract = verihub.load_env(REPO / "envs" / "json-extract")
    record = first_task(extract)
    wrong = extract.grade(record, record["wrong"]).reward  # partial credit: the fields it has right
    assert wrong is not None and 0 <= wrong < 1
    for action, reward in (
        ({**json.loads(record["expected"]), "metadata": {}}, 1.0),
        (json.loads(record["wrong"]), wrong),
        ({"content": 1992}, 0.0),
    ):
        step = httpx.post(f"{server}/step", json={"env": "json-extract", "task_id": record["id"], "action": action})
        assert (step.status_code, step.json()["reward"]) == (200, reward), (action, step.text)
    tool = httpx.post(f"{server}/step", json={"env": "shell-task", "task_id": "sh-001", "action": {"content": "x"}})
    assert tool.status_code == 409
    assert httpx.post(f"{server}/reset", json={"seed": -1}).status_code == 422
