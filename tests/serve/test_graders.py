"""Grading on many machines: ``verihub eval --grader`` and the trainer's ``graders=`` against real
``verihub serve`` processes on loopback, some of them killed on the way."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
import pytest
from test_eval import arithmetic_model
from test_serve import TOKEN

import verihub
from conftest import REPO, TASKS, TOOL_SPEC, free_port, start_serve, stop_serve
from verihub.eval.evaluate import evaluate
from verihub.generation import Sampling
from verihub.serve.graders import GraderError, GraderPool
from verihub.testing import ScriptedChatServer

VERIHUB = str(Path(sys.executable).with_name("verihub"))


def grades(rollouts: list[Any]) -> list[tuple[Any, ...]]:
    """What a grade is, per rollout: everything but timings."""
    return [
        (r.task_id, r.sample, r.status, r.reward, r.reason, r.layers, r.layers_passed, r.turns, r.completion)
        for r in rollouts
    ]


@pytest.fixture
def two_graders() -> Iterator[list[tuple[subprocess.Popen[str], str]]]:
    servers = [start_serve("envs/arithmetic", "envs/shell-task") for _ in range(2)]
    yield servers
    for process, _ in servers:
        stop_serve(process)


def test_eval_with_two_graders_gives_the_in_process_grades(two_graders: list[Any], tmp_path: Path) -> None:
    (_, first), (_, second) = two_graders
    with ScriptedChatServer(arithmetic_model) as model:
        common = ["eval", "envs/arithmetic", "--model", f"openai:scripted@{model.url}", "-n", "12", "-k", "2"]
        here = subprocess.run(
            [VERIHUB, *common, "--out", str(tmp_path / "here")], cwd=REPO, capture_output=True, text=True, timeout=300
        )
        there = subprocess.run(
            [VERIHUB, *common, "--out", str(tmp_path / "there"), "--grader", first, "--grader", second],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert here.returncode == 0, here.stderr
    assert there.returncode == 0, there.stderr
    columns = ["task_id", "sample", "status", "reward", "reason", "layers", "layers_passed", "completion"]
    tables = [
        datasets.load_dataset("parquet", data_files=str(tmp_path / run / "results.parquet"), split="train")
        .select_columns(columns)
        .to_list()
        for run in ("here", "there")
    ]
    assert tables[0] == tables[1] and len(tables[0]) == 24
    assert {row["status"] for row in tables[1]} == {"ok", "wrong"}


def test_load_is_spread_over_the_servers(two_graders: list[Any]) -> None:
    env = verihub.load_env(REPO / "envs" / "arithmetic")
    tasks = list(env.dataset("eval"))[:40]
    pairs = [(task, f"\\boxed{{{task['answer']}}}") for task in tasks for _ in range(8)]  # 320: 5 batches
    with GraderPool([url for _, url in two_graders]) as pool:
        grader = pool.grader(env)
        remote = asyncio.run(grader.agrade_many([task for task, _ in pairs], [text for _, text in pairs]))
        assert all(server.done >= 1 for server in pool.servers)
    assert [(grade.status, grade.reward) for grade in remote] == [("ok", 1.0)] * len(pairs)


def test_a_server_killed_mid_run_costs_no_grade(two_graders: list[Any]) -> None:
    env = verihub.load_env(REPO / "envs" / "arithmetic")
    finished: list[Any] = []
    killed: list[subprocess.Popen[str]] = []

    def kill_one_that_has_graded(rollout: Any) -> None:
        finished.append(rollout)
        if not killed and len(finished) >= 8:  # mid-run: 40 of 48 rollouts still to come
            busiest = max(range(len(two_graders)), key=lambda index: pool.servers[index].done)
            assert pool.servers[busiest].done >= 1  # every finished rollout was graded by some server
            killed.append(two_graders[busiest][0])
            killed[0].kill()

    with ScriptedChatServer(arithmetic_model, latency_s=0.05) as model:
        here = evaluate(env, f"openai:scripted@{model.url}", n=24, k=2, concurrency=4)
        with GraderPool([url for _, url in two_graders], timeout_s=20) as pool:
            there = evaluate(
                env,
                f"openai:scripted@{model.url}",
                n=24,
                k=2,
                concurrency=4,
                graders=pool,
                on_rollout=kill_one_that_has_graded,
            )
    assert len(killed) == 1 and killed[0].wait(timeout=10) is not None and len(finished) == 48
    assert grades(there.rollouts) == grades(here.rollouts)
    assert there.metrics["rollouts_faulted"] == 0


def test_a_server_that_stops_answering_is_timed_out_and_its_work_done_elsewhere(two_graders: list[Any]) -> None:
    (frozen, first), (_, second) = two_graders
    env = verihub.load_env(REPO / "envs" / "arithmetic")
    tasks = list(env.dataset("eval"))[:8]
    os.kill(frozen.pid, signal.SIGSTOP)  # it still accepts connections (the kernel does), but answers nothing
    try:
        with GraderPool([first, second], timeout_s=2) as pool:
            graded = [pool.grader(env).grade(task, f"\\boxed{{{task['answer']}}}") for task in tasks]
            assert pool.servers[0].done == 0 and pool.servers[1].done == len(tasks)
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    assert {(grade.status, grade.reward) for grade in graded} == {("ok", 1.0)}


def test_every_server_dead_is_env_error_for_each_and_the_run_completes(tmp_path: Path) -> None:
    process, gone = start_serve("envs/arithmetic")
    stop_serve(process)
    with ScriptedChatServer(arithmetic_model) as model:
        report = evaluate(
            verihub.load_env(REPO / "envs" / "arithmetic"),
            f"openai:scripted@{model.url}",
            n=5,
            k=2,
            graders=[gone, f"http://127.0.0.1:{free_port()}"],
            out=tmp_path,
        )
    assert len(report.rollouts) == 10 and {r.status for r in report.rollouts} == {"env_error"}
    assert all(
        r.reward is None and "no grader could grade it" in r.reason and gone in r.reason for r in report.rollouts
    )
    assert report.metrics["env_errors_by_reason"] == {"no grader could grade it": 10}
    assert (
        report.metrics["rollouts_faulted"] == 10 and report.metrics["pass@1_graded"] != report.metrics["pass@1_graded"]
    )
    assert json.loads((tmp_path / "metadata.json").read_text())["complete"] is True


def test_a_server_with_other_content_is_never_used(make_env: Any) -> None:
    """A stale grader (same id and version, other answers in its tasks) would grade against them: it is
    refused, and the work goes to the server that holds this very content."""
    here = make_env()
    stale = make_env(rows=[{**row, "answer": row["wrong"]} for row in TASKS], name="stale")
    servers = [start_serve(str(stale)), start_serve(str(here))]
    try:
        env = verihub.load_env(here)
        task = env.dataset("eval")[0]
        right = f"\\boxed{{{task['answer']}}}"
        with GraderPool([servers[0][1]]) as pool:
            alone = pool.grader(env).grade(task, right)
        assert alone.status == "env_error" and alone.reward is None and "other content" in alone.reason
        with GraderPool([url for _, url in servers]) as pool:
            graded = [pool.grader(env).grade(task, right) for _ in range(4)]
            assert pool.servers[0].done == 0 and pool.servers[1].done == 4
        assert {(grade.status, grade.reward) for grade in graded} == {("ok", 1.0)}
    finally:
        for process, _ in servers:
            stop_serve(process)


def test_a_request_the_server_rejects_is_a_fault_and_the_server_stays_in_use(two_graders: list[Any]) -> None:
    env = verihub.load_env(REPO / "envs" / "arithmetic")
    task = env.dataset("eval")[0]
    with GraderPool([two_graders[0][1]]) as pool:
        unknown = pool.grader(env).grade({**task, "id": "not-a-task"}, "\\boxed{1}")
        known = pool.grader(env).grade(task, f"\\boxed{{{task['answer']}}}")
    assert unknown.status == "env_error" and unknown.reward is None
    assert "refused the request: HTTP 404" in unknown.reason and "not-a-task" in unknown.reason
    assert (known.status, known.reward) == ("ok", 1.0)


def test_a_server_started_with_a_token_wants_it() -> None:
    process, url = start_serve("envs/sums", "--token", TOKEN)
    try:
        env = verihub.load_env(REPO / "envs" / "sums")
        task = env.dataset("eval")[0]
        with GraderPool([url]) as pool:
            refused = pool.grader(env).grade(task, env.reference(task))
        assert refused.reward is None and "--grader-token" in refused.reason
        with GraderPool([url], token=TOKEN) as pool:
            remote = pool.grader(env).grade(task, env.reference(task))
            assert TOKEN not in repr(pool)
        local = env.grade(task, env.reference(task))
        assert (
            (remote.status, remote.reward, remote.reason)
            == (local.status, local.reward, local.reason)
            == ("ok", 1.0, "")
        )
        assert [layer._replace(time_s=0.0) for layer in local.layers] == list(remote.layers)
    finally:
        stop_serve(process)


def test_bad_grader_urls_are_refused_by_name() -> None:
    with pytest.raises(GraderError, match="use http://HOST:PORT"):
        GraderPool(["grader-a:8000"])
    result = subprocess.run(
        [VERIHUB, "eval", "envs/sums", "--model", "openai:m@http://127.0.0.1:9/v1", "--grader", "ftp://x"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "--grader" in result.stderr


# -- tool sessions -----------------------------------------------------------------------------------------


def shell_agent(env: verihub.Environment, on_turn: Any = None) -> Any:
    """Runs the task's solution with bash, then lists the files, then says it is done."""
    solutions = {env.render(task)[-1]["content"]: task["solution"] for task in env.dataset("eval")}

    def agent(request: dict[str, Any]) -> list[dict[str, Any]]:
        messages = request["messages"]
        done = sum(message["role"] == "tool" for message in messages)
        if on_turn is not None:
            on_turn(done)
        prompt = next(message["content"] for message in messages if message["role"] == "user")
        command = [solutions[prompt], "ls -la"][done] if done < 2 else None
        if command is None:
            return [{"content": "done"}]
        return [{"content": "", "tool_calls": [{"name": "bash", "arguments": {"command": command}}]}]

    return agent


@pytest.mark.nsjail
def test_tool_sessions_on_graders_match_in_process_even_when_their_server_dies(nsjail_path: str) -> None:
    env = verihub.load_env(REPO / "envs" / "shell-task")
    sampling = Sampling(temperature=0, max_tokens=64)
    with ScriptedChatServer(shell_agent(env)) as model:
        here = evaluate(env, f"openai:agent@{model.url}", n=3, k=1, sampling=sampling)
    assert {r.status for r in here.rollouts} == {"ok"} and {r.turns for r in here.rollouts} == {3}

    servers = [start_serve("envs/shell-task"), start_serve("envs/shell-task")]
    victim = servers[0][0]
    pool = GraderPool([url for _, url in servers], timeout_s=30)
    held: list[int] = []

    def kill_after_the_first_tool_call(tools_run: int) -> None:  # the sessions held on it must move
        if tools_run == 1 and not held:
            held.append(pool.servers[0].busy)
            victim.kill()

    try:
        with ScriptedChatServer(shell_agent(env, kill_after_the_first_tool_call)) as model, pool:
            there = evaluate(env, f"openai:agent@{model.url}", n=3, k=1, sampling=sampling, graders=pool)
    finally:
        for process, _ in servers:
            stop_serve(process)
    assert held and held[0] >= 1 and victim.poll() is not None  # a session was on the server that died
    assert grades(there.rollouts) == grades(here.rollouts)
    tool_outputs = [m["content"] for r in there.rollouts for m in r.messages if m["role"] == "tool"]
    assert tool_outputs and not any("error" in output.lower() for output in tool_outputs)


@pytest.mark.nsjail
def test_a_full_server_is_a_fault_with_its_reason_and_a_finished_session_frees_its_slot(nsjail_path: str) -> None:
    process, url = start_serve("envs/shell-task", "--max-sessions", "1")
    env = verihub.load_env(REPO / "envs" / "shell-task")
    first, second = list(env.dataset("eval"))[:2]
    call = {
        "content": "",
        "tool_calls": [{"id": "1", "function": {"name": "bash", "arguments": {"command": first["solution"]}}}],
    }
    try:
        with GraderPool([url], attempts=2) as pool:
            grader = pool.grader(env, "eval")
            holder = grader.session(first)
            holder.reset()
            assert holder.step(call).done is False  # it holds the server's one session
            refused = grader.session(second)
            refused.reset()
            result = refused.step(call)
            assert result.done and result.reward is None and refused.grade is None
            assert "full" in (refused.fault or "") and "CAPACITY_REACHED" not in str(result.observation)
            assert holder.step({"content": "done"}).reward == 1.0  # graded there; the slot is free again
            later = grader.session(first)
            later.reset()
            assert later.step(call).done is False
            later.close()
    finally:
        stop_serve(process)


# -- the trainer -------------------------------------------------------------------------------------------


def test_trainer_rewards_through_a_grader_pool(two_graders: list[Any]) -> None:
    from verihub.trainers.mixture import resolve_envs
    from verihub.trainers.rewards import EnvReward, GradeLedger

    item = resolve_envs([str(REPO / "envs" / "arithmetic")])[0]
    tasks = list(item.env.dataset("train"))[:6]
    rows = [json.dumps(task) for task in tasks for _ in range(2)]
    texts = [f"\\boxed{{{task['answer']}}}" if sample == 0 else "\\boxed{-1}" for task in tasks for sample in range(2)]
    completions = [[{"role": "assistant", "content": text}] for text in texts]

    def score(grader: Any) -> tuple[list[float | None], list[Any]]:
        ledger = GradeLedger()
        rewards = asyncio.run(
            EnvReward(item, ledger, grader)(
                prompts=[[]] * len(rows),
                completions=completions,
                environment=["arithmetic"] * len(rows),
                task=rows,
                difficulty=["all"] * len(rows),
            )
        )
        return rewards, [(o.status, o.rules_passed, o.checks_passed) for o in ledger.take(len(rows))]

    with GraderPool([url for _, url in two_graders]) as pool:
        assert score(pool.grader(item.env, "train")) == score(None)
        assert score(None)[0] == [1.0, 0.0] * 6
    with GraderPool([f"http://127.0.0.1:{free_port()}"], attempts=2) as dead:
        rewards, outcomes = score(dead.grader(item.env, "train"))
    assert rewards == [None] * len(rows) and {status for status, *_ in outcomes} == {"env_error"}


@pytest.mark.nsjail
def test_a_training_step_with_graders_runs_tools_and_rewards_on_them(
    tiny_model: Path, tmp_path: Path, make_env: Any, nsjail_path: str
) -> None:
    from verihub.trainers import GRPOTrainer
    from verihub.trainers.rewards import EnvReward, GradeLedger

    tool_env = make_env(TOOL_SPEC, name="calc")
    process, url = start_serve(str(tool_env), "envs/arithmetic")
    try:
        trainer = GRPOTrainer(
            str(tiny_model),
            {str(tool_env): 1, "envs/arithmetic": 1},
            lora=True,
            max_steps=1,
            num_generations=4,
            per_device_train_batch_size=8,
            max_completion_length=12,
            output_dir=tmp_path / "run",
            graders=[url],
            display="quiet",
        )
        trainer.train()
        record = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
        assert record["step"] == 1 and record["verihub/arithmetic/fault_rate"] == 0.0
        assert trainer.graders is not None and trainer.graders.servers[0].done > 0

        # a tool call runs in the server's jail; the final answer is graded there, on that session
        instance = type(trainer.trl._environment_pool["calc-tool"][0])()
        row = trainer.mix[0].env.dataset("train")[0]
        instance.reset(task=json.dumps(row))
        assert instance.python("import os; print(6 * 7, os.getuid())").split() == ["42", "65534"]
        reward = EnvReward(trainer.mix[0], GradeLedger(), trainer._grader(trainer.mix[0]))
        answer = [{"role": "assistant", "content": f"\\boxed{{{row['answer']}}}"}]
        scores = asyncio.run(
            reward(
                prompts=[[]],
                completions=[answer],
                environment=["calc-tool"],
                task=[json.dumps(row)],
                difficulty=["all"],
                environments=[instance],
            )
        )
        assert scores == [1.0] and instance.session.done
        trainer.graders.close()
    finally:
        stop_serve(process)


def test_verihub_train_grader_sends_the_rewards_there(tiny_model: Path, tmp_path: Path) -> None:
    """With its only grader gone, every reward of the step is a fault (None), never 0: the rewards
    were asked of the grader, not computed here."""
    process, gone = start_serve("envs/arithmetic")
    stop_serve(process)
    out = tmp_path / "run"
    trained = subprocess.run(
        [
            VERIHUB,
            "train",
            "--model",
            str(tiny_model),
            "--env",
            "envs/arithmetic",
            "--max-steps",
            "1",
            "--output-dir",
            str(out),
            "--quiet",
            "--grader",
            gone,
            "--set",
            "num_generations=4",
            "--set",
            "per_device_train_batch_size=8",
            "--set",
            "max_completion_length=12",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "VERIHUB_GRADER_TOKEN": TOKEN},
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    record = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert record["verihub/arithmetic/fault_rate"] == 1.0
