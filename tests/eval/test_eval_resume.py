"""`verihub eval --resume`: it extends only the same run, survives a torn last line, and refuses the rest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import datasets
import pytest

import verihub
from conftest import REPO, hedging_model
from verihub.errors import EvalResultsError
from verihub.eval.evaluate import evaluate
from verihub.testing import ScriptedChatServer

VERIHUB = str(Path(sys.executable).with_name("verihub"))


def first_run(env_dir: Path, out: Path) -> None:
    """The run to resume: 8 tasks x 2 of the flaky environment (3 rollouts fault), as the CLI would run it."""
    with ScriptedChatServer(hedging_model) as server:
        evaluate(verihub.load_env(env_dir), f"openai:m@{server.url}", n=8, k=2, out=out)


def resume(env_dir: Path, out: Path, *options: str, model: str = "m") -> tuple[subprocess.CompletedProcess[str], int]:
    """``verihub eval ENV --resume`` with the first run's settings plus ``options``; also the samples asked for."""
    with ScriptedChatServer(hedging_model) as server:
        result = subprocess.run(
            [
                VERIHUB,
                "eval",
                str(env_dir),
                "--model",
                f"openai:{model}@{server.url}",
                "-n",
                "8",
                "-k",
                "2",
                *options,
                "--out",
                str(out),
                "--resume",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "COLUMNS": "200"},
        )
    return result, sum(request["n"] for request in server.requests)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


@pytest.mark.parametrize("where", ["beside", "inside"])
def test_resume_of_the_same_run_reruns_only_the_faulted_rollouts(where: str, flaky_env: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" if where == "beside" else flaky_env / "runs" / "eval"  # results are not env content
    first_run(flaky_env, out)
    result, asked = resume(flaky_env, out)
    assert result.returncode == 0, result.stderr
    assert asked == 3  # t1's two and t2's hedged one; the 13 graded rollouts are kept
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["complete"] is True and metadata["metrics"]["rollouts"] == 16


# case -> (how the resumed run differs: CLI options and edits of the environment, the field the error names)
Edit = Callable[[Path], None]
MISMATCHES: dict[str, tuple[list[str], Edit | None, str]] = {
    "model": ([], None, "model: earlier 'm', now 'other'"),
    "temperature": (["--temperature", "0.5"], None, "sampling.temperature: earlier 1.0, now 0.5"),
    "max_tokens": (["--max-tokens", "99"], None, "sampling.max_tokens: earlier 1024, now 99"),
    "seed": (["--seed", "7"], None, "sampling.seed: earlier None, now 7"),
    "k": (["-k", "3"], None, "k: earlier 2, now 3"),
    "n": (["-n", "5"], None, "tasks: earlier 8, now 5"),
    "judge model": (["--judge-model", "openai:judge@http://127.0.0.1:9/v1"], None, "judge_model: earlier None"),
    "top_p": (
        [],
        lambda env: edit(env / "environment.yaml", "gold:", "eval: {top_p: 0.5}\ngold:"),
        "sampling.top_p: earlier 1.0, now 0.5",
    ),
    "environment id": (
        [],
        lambda env: edit(env / "environment.yaml", "id: flaky", "id: flaky-two"),
        "environment: earlier 'flaky', now 'flaky-two'",
    ),
    "environment version": (
        [],
        lambda env: edit(env / "environment.yaml", "version: 0.1.0", "version: 0.1.1"),
        "environment_version: earlier '0.1.0', now '0.1.1'",
    ),
    # same id and version, different content: a verifier or a dataset changed without a version bump
    "verifier": (
        [],
        lambda env: edit(env / "flaky_eval_check.py", '== "all"', '== "every"'),
        "environment content: file flaky_eval_check.py changed; layer correct changed",
    ),
    "dataset": (
        [],
        lambda env: edit(env / "data" / "tasks.jsonl", '"answer": "16"', '"answer": "61"'),
        "environment content: file data/tasks.jsonl changed; tasks changed",
    ),
}


@pytest.mark.parametrize("case", list(MISMATCHES))
def test_resume_refuses_results_of_a_different_run(case: str, flaky_env: Path, tmp_path: Path) -> None:
    options, change, message = MISMATCHES[case]
    out = tmp_path / "out"
    first_run(flaky_env, out)
    before = {name: (out / name).read_bytes() for name in ("rollouts.jsonl", "metadata.json", "results.parquet")}
    if change is not None:
        change(flaky_env)
    result, asked = resume(flaky_env, out, *options, model="other" if case == "model" else "m")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "cannot resume" in result.stderr and message in result.stderr, result.stderr
    assert asked == 0 and {name: (out / name).read_bytes() for name in before} == before  # nothing touched


@pytest.mark.parametrize("cut", ["torn", "newline"])
def test_resume_drops_a_torn_last_line_and_appends_cleanly(cut: str, flaky_env: Path, tmp_path: Path) -> None:
    first_run(flaky_env, tmp_path)
    log = tmp_path / "rollouts.jsonl"
    data = log.read_bytes()
    last = data[data.rfind(b"\n", 0, -1) + 1 :]
    log.write_bytes(data[: -len(last) // 2] if cut == "torn" else data[:-1])  # killed mid-record, or before its newline
    kept = [json.loads(line) for line in log.read_bytes().split(b"\n")[:15]]
    kept += [json.loads(last)] if cut == "newline" else []
    result, asked = resume(flaky_env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert ("dropped its torn last line (line 16" in result.stderr) is (cut == "torn"), result.stderr
    assert asked == 16 - sum(row["status"] in ("ok", "wrong") for row in kept)
    rows = [json.loads(line) for line in log.read_text().splitlines()]  # every line whole: nothing glued on
    assert len(rows) == len(kept) + asked
    table = datasets.load_dataset("parquet", data_files=str(tmp_path / "results.parquet"), split="train")
    assert len(table) == 16 and len({(row["task_id"], row["sample"]) for row in table}) == 16
    assert json.loads((tmp_path / "metadata.json").read_text())["notes"] == (
        [] if cut == "newline" else [next(line for line in result.stderr.splitlines() if "torn" in line)]
    )


def _tear_line_3(out: Path) -> None:
    lines = (out / "rollouts.jsonl").read_text().splitlines(keepends=True)
    lines[2] = lines[2][:40] + "\n"
    (out / "rollouts.jsonl").write_text("".join(lines))


def _foreign_line(out: Path) -> None:
    row = json.loads((out / "rollouts.jsonl").read_text().splitlines()[0])
    with (out / "rollouts.jsonl").open("a") as handle:
        handle.write(json.dumps({**row, "task_id": "not-a-task"}) + "\n")


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "a torn line in the middle": (_tear_line_3, "rollouts.jsonl:3: not JSON"),
    "a line of another run": (_foreign_line, "rollouts.jsonl:17: task 'not-a-task' sample"),
    "rollouts but no metadata": (
        lambda out: (out / "metadata.json").unlink(),
        "has rollouts.jsonl but no metadata.json",
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_resume_refuses_a_damaged_directory_naming_where(damage: str, flaky_env: Path, tmp_path: Path) -> None:
    spoil, message = DAMAGE[damage]
    first_run(flaky_env, tmp_path)
    spoil(tmp_path)
    log = (tmp_path / "rollouts.jsonl").read_bytes()
    result, asked = resume(flaky_env, tmp_path)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert asked == 0 and (tmp_path / "rollouts.jsonl").read_bytes() == log


def test_two_evals_never_write_one_directory(tmp_path: Path) -> None:
    env = verihub.load_env("envs/arithmetic")

    def answer(request: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"content": "\\boxed{0}"}] * request["n"]

    with ScriptedChatServer(answer, latency_s=1.5) as server:
        url = f"openai:m@{server.url}"
        first = threading.Thread(target=evaluate, args=(env, url), kwargs={"n": 1, "k": 1, "out": tmp_path})
        first.start()
        deadline = time.time() + 30
        while not server.requests and time.time() < deadline:
            time.sleep(0.02)
        for resuming in (False, True):  # starting over would wipe the running one's files
            with pytest.raises(EvalResultsError, match="another verihub eval is writing to"):
                evaluate(env, url, n=1, k=1, out=tmp_path, resume=resuming)
        first.join()
    metadata = json.loads((tmp_path / "metadata.json").read_text())
    assert metadata["complete"] is True and metadata["metrics"]["rollouts"] == 1
