"""`verihub regrade`: eval results made under a verifier with a hole, graded again under the fixed version, show the
exploited answers flipping ok → wrong and the reward they were paid; a regrade under the same version changes
nothing; what cannot be regraded is counted with its reason; the stored results are never changed, and a regrade's
own results say which verifier graded them (and are never resumed as an eval)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from regrade_envs import EXPLOIT, hole_env, scripted

import verihub
from conftest import REPO, TASKS, TOOL_SPEC, MakeEnv, results_table
from verihub.errors import CorruptResultsError, EvalResultsError
from verihub.eval.evaluate import evaluate
from verihub.eval.regrade import regrade
from verihub.eval.rollout import Rollout
from verihub.testing import ScriptedChatServer

VERIHUB = str(Path(sys.executable).with_name("verihub"))
FILES = ("metadata.json", "results.parquet", "rollouts.jsonl")


@pytest.fixture(scope="module")
def hole(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both versions of the hole environment, and an eval of 8 tasks x 3 made under 1.0.0 (the hole's)."""
    root = tmp_path_factory.mktemp("hole")
    found = {
        "v1": hole_env(root / "v1", "1.0.0", fixed=False),
        "v2": hole_env(root / "v2", "2.0.0", fixed=True),
        "results": root / "results",
    }
    with ScriptedChatServer(scripted) as server:
        evaluate(verihub.load_env(found["v1"]), f"openai:m@{server.url}", n=8, k=3, out=found["results"])
    return found


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [VERIHUB, "regrade", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )


def snapshot(directory: Path) -> dict[str, bytes]:
    return {name: (directory / name).read_bytes() for name in FILES}


def test_a_regrade_under_the_fixed_version_shows_what_the_hole_paid(hole: dict[str, Path], tmp_path: Path) -> None:
    """The "Done when" of the look back: under 1.0.0 the exploit was paid on every task; 2.0.0 takes it back."""
    stored = snapshot(hole["results"])
    metadata = json.loads((hole["results"] / "metadata.json").read_text())
    assert (
        metadata["graded_by"]["version"] == "1.0.0"
        and metadata["graded_by"]["digest"] == metadata["environment_digest"]
    )
    result = cli(str(hole["results"]), "--env", str(hole["v2"]), "--json", "--out", str(tmp_path / "regraded"))
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["graded_by_before"]["version"] == "1.0.0" and report["graded_by_after"]["version"] == "2.0.0"
    flips = report["flips"]
    assert flips["ok → wrong"] == {"rollouts": 7, "reward_before": 7.0, "reward_after": 0.0}  # the exploit, t1..t7
    assert flips["wrong → ok"] == {"rollouts": 7, "reward_before": 0.0, "reward_after": 7.0}  # the false negative
    assert flips["unchanged"]["rollouts"] == 7 and flips["reward changed"]["rollouts"] == 0
    assert report["reward_withdrawn"] == 7.0 and report["reward_added"] == 7.0
    assert report["regraded"] == 21 and report["not_regraded_by_reason"] == {"no answer": 3}  # t8 never answered
    assert report["tasks"]["t3"] == {"ok → wrong": 1, "wrong → ok": 1, "reward_before": 1.0, "reward_after": 1.0}
    exploited = [change for change in report["changes"] if change["flip"] == "ok → wrong"]
    assert {(change["task_id"], change["sample"]) for change in exploited} == {(f"t{i}", 1) for i in range(1, 8)}
    assert all(change["reward_before"] == 1.0 and change["reward_after"] == 0.0 for change in exploited)
    assert report["rates"]["before"]["pass@1"] == report["rates"]["after"]["pass@1"]  # 7 lost, 7 gained

    assert snapshot(hole["results"]) == stored  # the results read are never touched
    regraded = tmp_path / "regraded"
    written = json.loads((regraded / "metadata.json").read_text())
    assert written["complete"] is True and written["environment_version"] == "1.0.0"  # the answers' run
    assert (
        written["graded_by"]["version"] == "2.0.0" and written["graded_by"]["digest"] != metadata["environment_digest"]
    )
    assert written["regraded_from"]["graded_by"] == metadata["graded_by"]
    assert written["regrade"]["flips"]["ok → wrong"]["rollouts"] == 7
    assert written["metrics"]["rollouts_faulted"] == 3
    rows = results_table(regraded)
    assert len(rows) == 24 and set(rows.column_names) >= {"status_before", "reward_before"}
    by_key = {(row["task_id"], row["sample"]): row for row in rows}
    assert by_key[("t5", 1)]["completion"] == EXPLOIT
    assert (by_key[("t5", 1)]["status_before"], by_key[("t5", 1)]["status"]) == ("ok", "wrong")
    assert by_key[("t8", 0)]["status"] == "env_error" and by_key[("t8", 0)]["reason"].startswith(
        "not regraded: no answer"
    )
    for row in rows:
        Rollout.from_row(row)  # the eval's own record format

    table = cli(str(hole["results"]), "--env", str(hole["v2"]))
    assert table.returncode == 0, table.stderr[-3000:]
    assert "graded by hole@1.0.0, regraded by hole@2.0.0" in table.stdout
    row = next(line for line in table.stdout.splitlines() if "ok → wrong" in line)
    assert [cell.strip() for cell in row.split("│")[1:5]] == ["ok → wrong", "7", "7.000", "0.000"]
    assert "reward withdrawn (paid under hole@1.0.0, not under hole@2.0.0): 7.000" in table.stdout


def test_a_regrade_under_the_version_that_graded_changes_nothing(hole: dict[str, Path]) -> None:
    report = regrade(hole["results"], verihub.load_env(hole["v1"])).summary()
    assert report["graded_by_after"] == report["graded_by_before"]  # the same verifier, digest and all
    assert {flip: row["rollouts"] for flip, row in report["flips"].items() if row["rollouts"]} == {"unchanged": 21}
    assert report["changed"] == 0 and report["changes"] == [] and report["tasks"] == {}
    assert report["reward_before"] == report["reward_after"] == 14.0 and report["reward_withdrawn"] == 0.0
    assert report["rates"]["before"] == report["rates"]["after"]
    assert any("the same verifier graded these results" in note for note in report["notes"])


def test_a_regrades_results_are_never_resumed_as_an_eval(hole: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "regraded"
    regrade(hole["results"], verihub.load_env(hole["v2"]), out=out)
    before = snapshot(out)
    with ScriptedChatServer(scripted) as server:
        resumed = subprocess.run(
            [VERIHUB, "eval", str(hole["v1"]), "--model", f"openai:m@{server.url}", "-n", "8", "-k", "3"]
            + ["--out", str(out), "--resume"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert resumed.returncode == 2 and "graded by" in resumed.stderr, resumed.stderr
    assert snapshot(out) == before and not server.requests


@pytest.mark.parametrize("target", ["the results", "other results"])
def test_regrade_never_writes_over_results(target: str, hole: dict[str, Path], tmp_path: Path) -> None:
    out = hole["results"] if target == "the results" else tmp_path / "other"
    if target == "other results":
        shutil.copytree(hole["results"], out)
    before = snapshot(out)
    with pytest.raises(EvalResultsError, match="new directory|new --out"):
        regrade(hole["results"], verihub.load_env(hole["v2"]), out=out)
    assert snapshot(out) == before


def test_results_of_another_environment_are_refused(hole: dict[str, Path], make_env: MakeEnv) -> None:
    with pytest.raises(EvalResultsError, match="holds results of 'hole', not of 'tiny'"):
        regrade(hole["results"], verihub.load_env(make_env()))


def test_an_unfinished_run_is_regraded_from_its_log_and_a_damaged_log_is_refused(
    hole: dict[str, Path], tmp_path: Path
) -> None:
    """A run killed before it finished left its log and metadata (complete: false): the logged rollouts are
    regraded, a torn last line left out; a bad line anywhere else is corruption, named by its line."""
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    metadata = json.loads((hole["results"] / "metadata.json").read_text())
    (unfinished / "metadata.json").write_text(json.dumps({**metadata, "complete": False}))
    lines = (hole["results"] / "rollouts.jsonl").read_text().splitlines()
    exploit = next(number for number, line in enumerate(lines) if json.loads(line)["completion"] == EXPLOIT)
    kept = lines[: exploit + 1]
    (unfinished / "rollouts.jsonl").write_text("\n".join(kept) + "\n" + lines[exploit + 1][:40])
    report = regrade(unfinished, verihub.load_env(hole["v2"])).summary()
    assert report["rollouts"] == len(kept) and report["flips"]["ok → wrong"]["rollouts"] == 1
    assert any("did not finish" in note for note in report["notes"]) and any("torn" in note for note in report["notes"])

    (unfinished / "rollouts.jsonl").write_text("\n".join([kept[0], "{not json", *kept[1:]]) + "\n")
    with pytest.raises(CorruptResultsError, match=r"rollouts\.jsonl:2: not JSON"):
        regrade(unfinished, verihub.load_env(hole["v2"]))


def tool_model(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Computes with the python tool, then answers what it printed."""
    last = request["messages"][-1]
    if last["role"] == "tool":
        return [{"content": f"\\boxed{{{last['content'].strip()}}}"}]
    question = request["messages"][-1]["content"].split("What is ", 1)[1].rstrip("?")
    return [{"tool_calls": [{"name": "python", "arguments": {"code": f"print({question})"}}]}]


@pytest.mark.nsjail
def test_a_tool_rollout_is_replayed_in_the_jail_and_one_that_diverges_is_not_regraded(
    make_env: MakeEnv, tmp_path: Path, nsjail_path: str
) -> None:
    """A multi-turn rollout is graded on its final state: the replay runs its tool calls again in the new version's
    jail and grades what they leave. A stored conversation whose tools now answer otherwise (here: an output
    edited in the log) is not that rollout: it is counted, not regraded."""
    env_dir = make_env(TOOL_SPEC.replace("split: {train: 0.5, eval: 0.5}", "split: {eval: 1.0}"), rows=TASKS[:3])
    out = tmp_path / "results"
    with ScriptedChatServer(tool_model) as server:
        evaluate(verihub.load_env(env_dir), f"openai:m@{server.url}", n=3, k=1, out=out)
    assert set(results_table(out)["status"]) == {"ok"} and set(results_table(out)["turns"]) == {2}
    report = regrade(out, verihub.load_env(env_dir)).summary()
    assert report["regraded"] == 3 and report["flips"]["unchanged"]["rollouts"] == 3

    edited = tmp_path / "edited"
    edited.mkdir()
    metadata = json.loads((out / "metadata.json").read_text())
    (edited / "metadata.json").write_text(json.dumps({**metadata, "complete": False}))
    records = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    messages = json.loads(records[0]["messages"])
    tool = next(message for message in messages if message["role"] == "tool")
    tool["content"] = "40\n"
    records[0]["messages"] = json.dumps(messages)
    (edited / "rollouts.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    report = regrade(edited, verihub.load_env(env_dir)).summary()
    assert report["regraded"] == 2 and report["not_regraded_by_reason"] == {"replay diverged": 1}


def test_answers_to_tasks_the_new_version_dropped_or_changed_are_counted(hole: dict[str, Path], tmp_path: Path) -> None:
    v3 = hole_env(tmp_path / "v3", "3.0.0", fixed=True)
    tasks = [json.loads(line) for line in (v3 / "data" / "tasks.jsonl").read_text().splitlines()]
    tasks = [{**task, "question": "12 + 0"} if task["id"] == "t6" else task for task in tasks if task["id"] != "t7"]
    (v3 / "data" / "tasks.jsonl").write_text("".join(json.dumps(task) + "\n" for task in tasks))
    report = regrade(hole["results"], verihub.load_env(v3)).summary()
    assert report["not_regraded_by_reason"] == {"no answer": 3, "task not in hole@3.0.0": 3}
    assert report["tasks_changed"] == 3 and report["regraded"] == 18  # t6's answers: to "6 + 6", graded all the same
