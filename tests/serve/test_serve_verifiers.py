"""Prime Intellect's ``verifiers`` plays ``verihub serve``: its own, unmodified ``openenv`` taskset, run by its
``vf-eval`` against a real server on loopback.

verifiers 0.4 pins packages the main lock cannot share, so it lives in .venv-verifiers (``scripts/setup.sh
--verifiers`` syncs it from engines/verifiers/uv.lock; CI's test.sh does). Where that venv could not be built
the tests are skipped, saying why. The model is a ScriptedChatServer that answers one task right and another
wrong; verifiers' chat program reaches it through its own interception server, so the whole client path is
theirs. The taskset maps a plain reply to the action schema's one required field, and sends a reply that is a
JSON object as the action itself (how a tool call gets there).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

import verihub
from conftest import REPO, start_serve, stop_serve
from verihub.testing import ScriptedChatServer

VENV = REPO / ".venv-verifiers"
FAILED = REPO / ".venv-verifiers.failed"  # setup.sh's record of a build that failed
UV = REPO / ".tools" / "uv" / "bin"  # verifiers runs its chat program with the uv on PATH (else pip-installs one)
LIMIT_S = 240  # one vf-eval run: about 20 s here, most of it verifiers starting and preparing its chat program


@pytest.fixture(scope="module")
def vf_eval() -> str:
    if FAILED.is_file():
        pytest.skip(f"scripts/setup.sh --verifiers could not build .venv-verifiers: {FAILED.read_text()[-1500:]}")
    found = VENV / "bin" / "vf-eval"
    if not found.is_file():
        pytest.skip(f"no {found}: scripts/setup.sh --verifiers builds it (from PyPI, about 800 MB)")
    if not (UV / "uv").is_file():
        pytest.skip(f"no uv at {UV} for verifiers' chat program: scripts/setup.sh installs it")
    return str(found)


def task_of(request: dict[str, Any]) -> str:
    """The task a chat request is about: the taskset's first user turn is JSON holding the reset's observation."""
    for message in request["messages"]:
        if message["role"] == "user":
            return json.loads(message["content"])["observation"]["task_id"]
    raise AssertionError(f"no user turn in {request['messages']}")


def run_vf_eval(
    vf_eval: str, tmp_path: Path, served: list[str], replies: dict[str, list[str]], split: str
) -> dict[str, dict[str, Any]]:
    """``vf-eval`` of the ``openenv`` taskset with one reset per task of ``replies`` (task id -> the model's
    replies, turn by turn) against ``verihub serve served``; each task's episode from its traces.jsonl."""
    env_name = Path(served[0]).name

    def respond(request: dict[str, Any]) -> list[dict[str, Any]]:
        turn = sum(message["role"] == "assistant" for message in request["messages"])
        return [{"content": replies[task_of(request)][turn]}]

    process, url = start_serve(*served)
    try:
        with ScriptedChatServer(respond) as model:
            resets = ", ".join(f'{{env = "{env_name}", split = "{split}", task_id = "{task}"}}' for task in replies)
            config = tmp_path / "eval.toml"
            config.write_text(
                f'model = "scripted"\npush = false\noutput_dir = "{tmp_path / "out"}"\n'
                f'[client]\nbase_url = "{model.url}"\napi_key_var = "VERIHUB_TEST_KEY"\n'
                f'[env.taskset]\nid = "openenv"\nbase_url = "{url}"\nresets = [{resets}]\n'
                # the plain chat program, run as a local process: no sandbox service, no container
                '[env.player.harness]\nid = "null"\n[env.player.runtime]\ntype = "subprocess"\n'
            )
            home = tmp_path / "home"  # verifiers' caches and run dirs stay here, not in the user's home
            home.mkdir()
            uv_cache = (
                os.environ.get("UV_CACHE_DIR")
                or subprocess.run(
                    [str(UV / "uv"), "cache", "dir"], capture_output=True, text=True, check=True
                ).stdout.strip()
            )
            environ = {
                **os.environ,
                "HOME": str(home),
                "UV_CACHE_DIR": uv_cache,
                "UV_PYTHON_DOWNLOADS": "never",
                "PATH": f"{UV}{os.pathsep}{os.environ.get('PATH', '')}",
                "VERIHUB_TEST_KEY": "unused",
            }
            ran = subprocess.run(
                [vf_eval, "@", str(config), "--no-rich"],
                cwd=tmp_path,
                env=environ,
                capture_output=True,
                text=True,
                timeout=LIMIT_S,
            )
    finally:
        stop_serve(process)
    assert ran.returncode == 0, ran.stderr[-4000:]
    (traces,) = (tmp_path / "out").glob("*/traces.jsonl")
    episodes = [json.loads(line) for line in traces.read_text().splitlines()]
    found = {episode["task"]["data"]["reset"]["task_id"]: episode for episode in episodes}
    assert set(found) == set(replies), ran.stderr[-4000:]
    return found


def outcome(episode: dict[str, Any]) -> tuple[Any, ...]:
    """An episode's reward (the taskset's sum of the server's step rewards), whether it ran clean, its errors."""
    (trace,) = episode["traces"]  # the one seat, the player
    reward = trace["rewards"].get("openenv_reward", {}).get("score")
    errors = [error["message"] for error in episode["errors"] + trace["errors"]]
    return reward, episode["ok"] and trace["ok"], errors


def test_vf_eval_scores_a_right_and_a_wrong_answer_on_a_single_turn_environment(vf_eval: str, tmp_path: Path) -> None:
    sums = verihub.load_env(REPO / "envs" / "sums")
    right, wrong = sums.dataset("eval")[0], sums.dataset("eval")[1]
    traces = run_vf_eval(
        vf_eval,
        tmp_path,
        ["envs/sums"],
        {right["id"]: [sums.reference(right)], wrong["id"]: [sums.negatives(wrong)[0]]},
        "eval",
    )
    assert outcome(traces[right["id"]]) == (1.0, True, [])
    assert outcome(traces[wrong["id"]]) == (0.0, True, [])


@pytest.mark.nsjail
def test_vf_eval_plays_a_tool_environment_with_a_tool_call_then_a_plain_answer(
    vf_eval: str, tmp_path: Path, nsjail_path: str
) -> None:
    """The model's first reply is a JSON action holding only a tool call (the work, run in the jail); its
    second, plain text, ends the episode and the work dir is graded. Words alone, without the work: 0."""
    shell = verihub.load_env(REPO / "envs" / "shell-task")
    worked, idle = shell.dataset("eval")[0], shell.dataset("eval")[1]
    call = {"tool_calls": [{"id": "1", "function": {"name": "bash", "arguments": {"command": worked["solution"]}}}]}
    traces = run_vf_eval(
        vf_eval, tmp_path, ["envs/shell-task"], {worked["id"]: [json.dumps(call), "done"], idle["id"]: ["done"]}, "eval"
    )
    assert outcome(traces[worked["id"]]) == (1.0, True, [])
    assert outcome(traces[idle["id"]]) == (0.0, True, [])


def test_vf_eval_scores_replies_it_parses_as_json_by_their_text(vf_eval: str, tmp_path: Path) -> None:
    """The taskset sends a reply that is a JSON object (json-extract's answer, fenced or not) as the action
    itself, and a bare number as a non-text field; on main the object graded as an empty answer (0.0) and the
    number was refused (an error in the trace)."""
    extract = verihub.load_env(REPO / "envs" / "json-extract")
    right, partial, number = (extract.dataset("eval")[index] for index in range(3))
    traces = run_vf_eval(
        vf_eval,
        tmp_path,
        ["envs/json-extract"],
        {right["id"]: [extract.reference(right)], partial["id"]: [partial["wrong"]], number["id"]: ["1992"]},
        "eval",
    )
    assert outcome(traces[right["id"]]) == (1.0, True, [])
    assert outcome(traces[partial["id"]]) == (extract.grade(partial, partial["wrong"]).reward, True, [])
    assert outcome(traces[number["id"]]) == (0.0, True, [])
