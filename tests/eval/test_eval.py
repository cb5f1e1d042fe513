"""Rollouts and `verihub eval` against a real HTTP server on loopback whose model is scripted."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import datasets
import httpx2
import pytest

import verihub
from conftest import BASE_SPEC, REPO, free_port, hedging_model, wait_until_serving
from verihub.eval.evaluate import evaluate, pass_at_k
from verihub.generation import Sampling
from verihub.testing import ScriptedChatServer

VERIHUB = str(Path(sys.executable).with_name("verihub"))


def arithmetic_model(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Right on even samples, off by one on odd ones."""
    question = re.search(r"What is (.*)\?", request["messages"][-1]["content"])
    value = eval(question.group(1)) if question else 0  # noqa: S307 - our own generated expression
    return [{"content": f"Working... \\boxed{{{value + (index % 2)}}}"} for index in range(request.get("n", 1))]


def test_pass_at_k() -> None:
    assert pass_at_k(4, 0, 2) == 0.0 and pass_at_k(4, 4, 1) == 1.0
    assert pass_at_k(4, 1, 1) == 0.25 and pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert pass_at_k(2, 1, 5) == 1.0  # fewer samples than k: as many as there are


def test_the_scripted_endpoint_streams_to_clients_that_ask() -> None:
    request = {
        "model": "m",
        "messages": [{"role": "user", "content": "What is 2 + 3?"}],
        "n": 2,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with (
        ScriptedChatServer(arithmetic_model) as server,
        httpx2.stream("POST", f"{server.url}/chat/completions", json=request) as response,
    ):
        assert response.headers["content-type"] == "text/event-stream"
        events = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert {chunk["object"] for chunk in chunks} == {"chat.completion.chunk"}
    deltas = {choice["index"]: choice for chunk in chunks for choice in chunk["choices"]}
    assert {index: choice["delta"]["content"] for index, choice in deltas.items()} == {
        0: "Working... \\boxed{5}",
        1: "Working... \\boxed{6}",
    }
    assert {choice["finish_reason"] for choice in deltas.values()} == {"stop"}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0


def test_eval_cli_end_to_end(tmp_path: Path) -> None:
    with ScriptedChatServer(arithmetic_model) as server:
        result = subprocess.run(
            [
                VERIHUB,
                "eval",
                "envs/arithmetic",
                "--model",
                f"openai:scripted@{server.url}",
                "-n",
                "8",
                "-k",
                "2",
                "--seed",
                "3",
                "--out",
                str(tmp_path),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "COLUMNS": "200"},
        )
        assert result.returncode == 0, result.stderr
        assert len(server.requests) == 8  # the k samples of a task share one request
        assert {r["n"] for r in server.requests} == {2} and {r["seed"] for r in server.requests} == {3}
    assert "pass@2" in result.stdout and "1.000" in result.stdout
    table = datasets.load_dataset("parquet", data_files=str(tmp_path / "results.parquet"), split="train")
    assert len(table) == 16 and set(table["status"]) == {"ok", "wrong"}
    metadata = json.loads((tmp_path / "metadata.json").read_text())
    assert metadata["environment"] == "arithmetic" and metadata["environment_version"] == "1.0.0"
    assert metadata["sampling"]["seed"] == 3 and metadata["verihub_version"] == verihub.__version__
    assert metadata["metrics"]["pass@1"] == pytest.approx(0.5) and metadata["metrics"]["pass@2"] == 1.0


@pytest.mark.parametrize("env_name", ["math-word", "json-extract"])
def test_eval_on_the_other_bundled_environments(env_name: str) -> None:
    env = verihub.load_env(f"envs/{env_name}")
    references = {str(task["id"]): env.reference(task) for task in env.dataset("eval")}

    def gold(request: dict[str, Any]) -> list[dict[str, Any]]:
        prompt = request["messages"][-1]["content"]
        for task in env.dataset("eval"):
            if env.render(task)[-1]["content"] == prompt:
                return [{"content": references[str(task["id"])]}] * request["n"]
        return [{"content": "?"}] * request["n"]

    with ScriptedChatServer(gold) as server:
        report = evaluate(env, f"openai:gold@{server.url}", n=6, k=1)
    assert report.metrics["pass@1"] == 1.0 and report.metrics["env_error_rate"] == 0.0


def test_endpoint_errors_are_retried_then_env_error_never_wrong(tmp_path: Path) -> None:
    env = verihub.load_env("envs/arithmetic")
    with ScriptedChatServer(arithmetic_model, fail_first=3) as server:
        report = evaluate(env, f"openai:flaky@{server.url}", n=2, k=2)
    assert report.metrics["env_error_rate"] == 0.0  # three 503s, retried with backoff
    with ScriptedChatServer(arithmetic_model, fail_first=10_000) as down:
        failed = evaluate(env, f"openai:m@{down.url}", n=2, k=2, out=tmp_path)
    assert {r.status for r in failed.rollouts} == {"env_error"}
    assert all(r.reward is None and "generation failed" in r.reason for r in failed.rollouts)
    assert failed.metrics["env_errors_by_reason"] == {"generation failed": 4}
    with ScriptedChatServer(arithmetic_model) as back:  # --resume reruns the faulted rollouts
        resumed = evaluate(env, f"openai:m@{back.url}", n=2, k=2, out=tmp_path, resume=True)
    assert resumed.rerun == 4 and resumed.metrics["env_error_rate"] == 0.0


MALFORMED = {  # task -> what a broken endpoint answers its request with
    "t1": b"[1, 2]",
    "t2": b'{"choices": [{"message": "hi"}]}',
    "t3": b'{"choices": [{"message": {"content": 5}}]}',
    "t4": b'{"choices": []}',
}


def test_a_malformed_endpoint_answer_is_retried_then_env_error_never_a_crash(make_env: Any) -> None:
    env = verihub.load_env(make_env(BASE_SPEC.replace("{train: 0.5, eval: 0.5}", "{eval: 1.0}")))
    question_to_task = {env.render(task)[-1]["content"]: str(task["id"]) for task in env.dataset("eval")}

    def broken(request: dict[str, Any]) -> list[dict[str, Any]] | bytes:
        task = question_to_task[request["messages"][-1]["content"]]
        return MALFORMED.get(task) or hedging_model(request)

    with ScriptedChatServer(broken) as server:
        report = evaluate(env, f"openai:broken@{server.url}", n=8, k=1)
        asked = Counter(question_to_task[r["messages"][-1]["content"]] for r in server.requests)
    by_task = {r.task_id: r for r in report.rollouts}
    assert {task for task, r in by_task.items() if r.status == "env_error"} == set(MALFORMED)
    assert all("not a chat completion" in by_task[task].reason for task in MALFORMED)
    assert all(asked[task] == 5 for task in MALFORMED)  # retried like any endpoint fault
    assert {r.status for task, r in by_task.items() if task not in MALFORMED} == {"ok"}


def test_concurrency_is_the_number_of_requests_in_flight_even_past_256(make_env: Any) -> None:
    rows = [
        {"id": f"t{i}", "question": f"{i} + {i}", "answer": str(2 * i), "wrong": str(2 * i + 1)} for i in range(300)
    ]
    env = verihub.load_env(make_env(BASE_SPEC.replace("{train: 0.5, eval: 0.5}", "{eval: 1.0}"), rows=rows))
    answered: list[float] = []

    def slow(request: dict[str, Any]) -> list[dict[str, Any]]:
        answered.append(time.monotonic())  # after the server's latency: one wave if all 300 were in flight
        return hedging_model(request)

    with ScriptedChatServer(slow, latency_s=2.0) as server:
        report = evaluate(env, f"openai:wide@{server.url}", n=300, k=1, concurrency=300)
    assert report.metrics["env_error_rate"] == 0.0 and len(answered) == 300
    assert max(answered) - min(answered) < 1.5  # a pool of fewer connections answers in two waves, 2 s apart


def test_resume_after_a_killed_run(tmp_path: Path) -> None:
    with ScriptedChatServer(arithmetic_model, latency_s=0.25) as server:
        command = [
            VERIHUB,
            "eval",
            "envs/arithmetic",
            "--model",
            f"openai:slow@{server.url}",
            "-n",
            "24",
            "-k",
            "1",
            "--concurrency",
            "2",
            "--out",
            str(tmp_path),
        ]
        process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        log = tmp_path / "rollouts.jsonl"
        deadline = time.time() + 60
        while time.time() < deadline and (not log.exists() or len(log.read_text().splitlines()) < 4):
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait()
        done_before = len(
            {json.loads(line)["task_id"] for line in log.read_text().splitlines(keepends=True) if line.endswith("\n")}
        )  # a line the kill cut short is rerun
        assert 4 <= done_before < 24
        metadata = json.loads((tmp_path / "metadata.json").read_text())  # written when the run started
        assert metadata["complete"] is False and metadata["model"] == "slow" and "metrics" not in metadata
        first_requests = len(server.requests)
        resumed = subprocess.run([*command, "--resume"], cwd=REPO, capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stderr
        assert len(server.requests) - first_requests == 24 - done_before  # only what was missing
    table = datasets.load_dataset("parquet", data_files=str(tmp_path / "results.parquet"), split="train")
    assert sorted(table["task_id"]) == sorted(set(table["task_id"])) and len(table) == 24
    assert json.loads((tmp_path / "metadata.json").read_text())["complete"] is True


def test_verifier_faults_are_env_error(make_env: Any) -> None:
    from conftest import BASE_SPEC, TASKS

    rows = [dict(row) for row in TASKS]
    for row in rows:
        row["answer"] = "not a number"  # the environment's data is broken
    env = verihub.load_env(make_env(BASE_SPEC, rows=rows))

    def boxed(request: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"content": "\\boxed{4}"}] * request["n"]

    with ScriptedChatServer(boxed) as server:
        report = evaluate(env, f"openai:m@{server.url}", n=2, k=1, split="train")
    assert {r.status for r in report.rollouts} == {"env_error"}
    metrics = report.metrics  # nothing graded: no rate can be claimed, and every task is lost
    assert (
        metrics["pass@1"] == 0.0
        and metrics["mean_reward"] == 0.0
        and metrics["pass@1_graded"] != metrics["pass@1_graded"]
    )
    assert (metrics["rollouts_faulted"], metrics["tasks_lost"]) == (2, 2)


def test_a_fault_scores_as_a_failure_and_is_counted_next_to_every_rate(flaky_env: Path, make_env: Any) -> None:
    from conftest import FLAKY_CHECK, FLAKY_ROWS, FLAKY_SPEC, hedging_model

    with ScriptedChatServer(hedging_model) as server:
        report = evaluate(verihub.load_env(flaky_env), f"openai:m@{server.url}", n=8, k=2)
    metrics = report.metrics  # 16 asked: both of t1's and t2's hedged one faulted, the 13 graded are right
    assert (metrics["rollouts"], metrics["rollouts_graded"], metrics["rollouts_faulted"]) == (16, 13, 3)
    assert (metrics["tasks"], metrics["tasks_lost"], metrics["tasks_with_faults"]) == (8, 1, 2)
    assert metrics["pass@1"] == pytest.approx(6.5 / 8) and metrics["pass@2"] == pytest.approx(7 / 8)
    assert metrics["mean_reward"] == pytest.approx(13 / 16)
    assert metrics["layer_pass_rate"] == pytest.approx({"format": 13 / 16, "correct": 13 / 16})
    assert metrics["pass@1_graded"] == metrics["pass@2_graded"] == metrics["mean_reward_graded"] == 1.0
    assert metrics["env_errors_by_reason"] == {"layer 'correct'": 3}

    # The same model, wrong exactly where the check faulted, on a check that never does: the same headline.
    rows = [{**row, "broken": ""} for row in FLAKY_ROWS]
    honest = verihub.load_env(
        make_env(FLAKY_SPEC, rows=rows, files={"flaky_eval_check.py": FLAKY_CHECK}, name="honest")
    )

    def wrong_where_it_faulted(request: dict[str, Any]) -> list[dict[str, Any]]:
        choices = hedging_model(request)
        question = request["messages"][-1]["content"]
        faulted = range(2) if "1 + 1" in question else range(1, 2) if "2 + 2" in question else range(0)
        return [{"content": "\\boxed{-1}"} if index in faulted else choice for index, choice in enumerate(choices)]

    with ScriptedChatServer(wrong_where_it_faulted) as server:
        earned = evaluate(honest, f"openai:m@{server.url}", n=8, k=2).metrics
    assert earned["rollouts_faulted"] == 0
    for rate in ("pass@1", "pass@2", "mean_reward"):
        assert metrics[rate] == pytest.approx(earned[rate]), rate
    assert metrics["layer_pass_rate"]["correct"] == pytest.approx(earned["layer_pass_rate"]["correct"])


def test_samples_a_backend_never_returned_are_faults_not_a_smaller_k() -> None:
    from verihub.generation import Generation

    class OneSample:
        """A backend that answers every request with one sample, right, however many were asked for."""

        model = "one-sample"

        async def generate(
            self, messages: list[dict[str, Any]], sampling: Sampling, tools: Any = None
        ) -> list[Generation]:
            return [Generation(arithmetic_model({"messages": messages, "n": 1})[0]["content"])]

        async def aclose(self) -> None:
            pass

    report = evaluate(verihub.load_env("envs/arithmetic"), OneSample(), n=3, k=4)
    assert len(report.rollouts) == 12 and sum(r.status == "env_error" for r in report.rollouts) == 9
    assert all("returned 1 of the 4 samples" in r.reason for r in report.rollouts if r.status == "env_error")
    metrics = report.metrics
    assert metrics["pass@1"] == pytest.approx(0.25) and metrics["pass@1_graded"] == 1.0  # not pass@1 of 1 sample
    assert (metrics["rollouts_faulted"], metrics["tasks_with_faults"], metrics["tasks_lost"]) == (9, 3, 0)


def _table_rows(stdout: str) -> dict[str, list[str]]:
    """A rich table's body rows: first cell -> the others."""
    rows = {}
    for line in stdout.splitlines():
        if line.startswith("│"):
            cells = [cell.strip() for cell in line.strip("│").split("│")]
            rows[cells[0]] = cells[1:]
    return rows


def test_eval_tables_and_metadata_show_what_faults_took_out(flaky_env: Path, tmp_path: Path) -> None:
    from conftest import hedging_model

    wide = {**os.environ, "COLUMNS": "250"}
    model = ["--model"]
    with ScriptedChatServer(hedging_model) as server:
        model.append(f"openai:m@{server.url}")
        single = subprocess.run(
            [VERIHUB, "eval", str(flaky_env), *model, "-n", "8", "-k", "2", "--out", str(tmp_path / "one")],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
            env=wide,
        )
        several = subprocess.run(
            [VERIHUB, "eval", str(flaky_env), "envs/arithmetic", *model, "-n", "8", "-k", "2"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
            env=wide,
        )
    assert single.returncode == 0, single.stderr
    rows = _table_rows(single.stdout)
    lost = "3/16 rollouts, 1/8 tasks"  # faulted rollouts; tasks with no rollout graded
    assert rows["pass@1"] == ["0.812", "1.000", lost] and rows["pass@2"] == ["0.875", "1.000", lost]
    assert rows["mean reward"] == ["0.812", "1.000", lost]
    assert rows["layer correct pass rate"] == ["0.812", "1.000", lost]
    assert rows["faulted rollouts"][0] == "3" and rows["tasks with a fault"][0] == "2"
    metadata = json.loads((tmp_path / "one" / "metadata.json").read_text())
    assert metadata["complete"] is True and metadata["metrics"]["pass@1"] == 0.8125
    assert {
        key: metadata["metrics"][key] for key in ("rollouts", "rollouts_faulted", "tasks_lost", "pass@1_graded")
    } == {"rollouts": 16, "rollouts_faulted": 3, "tasks_lost": 1, "pass@1_graded": 1.0}

    assert several.returncode == 0, several.stderr
    by_env = _table_rows(several.stdout[several.stdout.index("every environment, by domain") :])
    assert (
        by_env["math"][:6] == ["flaky@0.1.0", "8 x 2", "0.812", "1.000", "0.812", "3/16"] and by_env["math"][6] == "1/8"
    )
    assert by_env["arithmetic"][4:] == ["1.000", "0/16", "0/8"]


@pytest.mark.nsjail
def test_multi_turn_tool_loop_runs_tools_in_the_sandbox(tmp_path: Path, nsjail_path: str) -> None:
    from verihub.spec.scaffold import init_env

    env = verihub.load_env(init_env("calc", "tool", tmp_path))

    answers = {task["question"]: task["answer"] for task in env.dataset("train")}

    def agent(request: dict[str, Any]) -> list[dict[str, Any]]:
        """Computes the answer with the python tool, then reports what the tool printed."""
        messages = request["messages"]
        assert [tool["function"]["name"] for tool in request["tools"]] == ["python"]
        tool_results = [m for m in messages if m["role"] == "tool"]
        if not tool_results:
            code = f"import os\nprint(int('{answers[messages[-1]['content']]}'), os.getuid())"
            return [{"content": "", "tool_calls": [{"name": "python", "arguments": {"code": code}}]}]
        return [{"content": f"<answer>{tool_results[-1]['content'].split()[0]}</answer>"}]

    with ScriptedChatServer(agent) as server:
        report = evaluate(env, f"openai:agent@{server.url}", n=6, k=1, split="train", sampling=Sampling(temperature=0))
    assert len(report.rollouts) == 6 and {r.status for r in report.rollouts} == {"ok"}
    for rollout in report.rollouts:  # the answer the model gave came back from the sandboxed tool
        assert rollout.turns == 2
        answer, uid = next(m["content"] for m in rollout.messages if m["role"] == "tool").split()
        assert f"<answer>{answer}</answer>" == rollout.completion
        assert uid == "65534"  # nobody: the tool ran in the jail, not on the host


@pytest.mark.slow
def test_eval_with_a_local_hf_model(tiny_model: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [
            VERIHUB,
            "eval",
            "envs/arithmetic",
            "--model",
            f"hf:{tiny_model}",
            "-n",
            "8",
            "-k",
            "2",
            "--max-tokens",
            "16",
            "--out",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    table = datasets.load_dataset("parquet", data_files=str(tmp_path / "results.parquet"), split="train")
    assert len(table) == 16 and set(table["status"]) <= {"ok", "wrong"}  # a random tiny model: wrong, not faults


@pytest.mark.slow
def test_one_eval_across_every_installed_environment_by_domain(tiny_model: Path, tmp_path: Path) -> None:
    from verihub.environment.installed import installed_envs

    result = subprocess.run(
        [
            VERIHUB,
            "eval",
            "all",
            "--model",
            f"hf:{tiny_model}",
            "-n",
            "2",
            "-k",
            "1",
            "--max-tokens",
            "8",
            "--out",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = result.stdout[result.stdout.index("every environment, by domain") :]
    names = sorted(installed_envs())
    assert {"code-repair", "sql", "shell-task", "report", "arithmetic"} <= set(names)
    for name in names:
        assert f" {name}@" in summary
        assert (tmp_path / name / "results.parquet").is_file()
    for domain in ("code", "sql", "shell", "writing", "arithmetic"):
        assert f"│ {domain} " in summary


@pytest.mark.slow
def test_eval_against_transformers_serve(tiny_model: Path, tmp_path: Path) -> None:
    """A real OpenAI-compatible server (`transformers serve`) serving the tiny model on loopback."""
    port = free_port()
    transformers_cli = str(Path(sys.executable).with_name("transformers"))
    server = subprocess.Popen(
        [transformers_cli, "serve", str(tiny_model), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_serving(f"http://127.0.0.1:{port}/health")
        env = verihub.load_env("envs/arithmetic")
        report = evaluate(
            env,
            f"openai:{tiny_model}@http://127.0.0.1:{port}/v1",
            n=3,
            k=2,
            sampling=Sampling(max_tokens=12),
            out=tmp_path,
        )
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert len(report.rollouts) == 6 and {r.status for r in report.rollouts} <= {"ok", "wrong"}
    assert report.metrics["completion_tokens"] > 0


def test_unknown_and_missing_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    from verihub.errors import MissingDependencyError
    from verihub.generation import load_backend

    with pytest.raises(ValueError, match="openai:MODEL@URL, hf:PATH_OR_ID or vllm:PATH_OR_ID"):
        load_backend("gpt-4")
    monkeypatch.delenv("VERIHUB_VLLM_PYTHON", raising=False)
    try:
        import vllm  # noqa: F401 - only whether vLLM imports here
    except ImportError:  # said before any run starts, with both ways to get vLLM
        with pytest.raises(MissingDependencyError, match='pip install "verihub\\[vllm\\]".*setup.sh --vllm'):
            load_backend("vllm:some/model")
    monkeypatch.setenv("VERIHUB_VLLM_PYTHON", "/no/such/python")
    with pytest.raises(MissingDependencyError, match="no such interpreter"):
        load_backend("vllm:some/model")


def test_greedy_samples_go_one_request_each_and_sampled_ones_together() -> None:
    """vLLM refuses n > 1 at temperature 0 (every greedy -k rollout was env_error against it)."""
    from verihub.generation import load_backend

    async def ask(url: str, temperature: float) -> int:
        backend = load_backend(f"openai:m@{url}")
        try:
            return len(
                await backend.generate(
                    [{"role": "user", "content": "What is 1 + 1?"}], Sampling(n=3, temperature=temperature)
                )
            )
        finally:
            await backend.aclose()

    with ScriptedChatServer(hedging_model) as server:
        assert asyncio.run(ask(server.url, 0.0)) == 3
        assert [request["n"] for request in server.requests] == [1, 1, 1]
        server.requests.clear()
        assert asyncio.run(ask(server.url, 0.7)) == 3
        assert [request["n"] for request in server.requests] == [3]
