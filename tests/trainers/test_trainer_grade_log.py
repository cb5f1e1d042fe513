"""A training run's grade log (output_dir/grades.jsonl): every completion its reward functions graded, with its task,
bounded in size; `verihub regrade` reads it back and shows how much reward a hole paid during training."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from regrade_envs import EXPLOIT, TASKS, hole_env

import verihub
from conftest import MakeEnv, one_step_trainer
from verihub.eval.gradelog import GRADE_LOG, GradeLog
from verihub.eval.regrade import regrade
from verihub.trainers.mixture import resolve_envs
from verihub.trainers.rewards import EnvReward, GradeLedger


def score(reward: EnvReward, rows: list[tuple[str, dict[str, Any], str]], environments: Any = None) -> list[Any]:
    """What TRL's call of one reward function gives, for rows of (environment, task, answer)."""
    return asyncio.run(
        reward(
            prompts=[[]] * len(rows),
            completions=[[{"role": "assistant", "content": text}] for _, _, text in rows],
            environment=[env for env, _, _ in rows],
            task=[json.dumps(task) for _, task, _ in rows],
            difficulty=["all"] * len(rows),
            environments=environments,
        )
    )


def test_a_training_runs_grades_are_logged_and_regraded(tmp_path: Path, make_env: MakeEnv) -> None:
    """During training the hole paid the exploit on every task; regrading the run's log under the fixed version
    shows each of those completions flip ok → wrong with the reward it was paid. A completion graded on a rollout's
    final state is counted as one the log cannot grade again, and other environments' records are left alone."""
    v1 = hole_env(tmp_path / "v1", "1.0.0", fixed=False)
    v2 = hole_env(tmp_path / "v2", "2.0.0", fixed=True)
    hole, tiny = resolve_envs([v1, make_env()])
    log = GradeLog(tmp_path / "run")
    rewards = [EnvReward(item, GradeLedger(), log=log) for item in (hole, tiny)]
    rows = [("hole", task, f"\\boxed{{{task['answer']}}}") for task in TASKS[:4]]
    rows += [("hole", task, EXPLOIT) for task in TASKS[:4]]
    rows += [("tiny", {"id": "t1", "question": "1 + 1", "answer": "2", "wrong": "3"}, "\\boxed{2}")]
    assert [score(reward, rows) for reward in rewards][0] == [1.0] * 8 + [None]  # the exploit is paid
    session = hole.env.session(TASKS[0])  # a rollout graded on its session's final state
    session.reset()
    assert score(rewards[0], [("hole", TASKS[0], EXPLOIT)], [SimpleNamespace(session=session, fault=None)]) == [1.0]

    lines = (tmp_path / "run" / GRADE_LOG).read_text().splitlines()
    assert len(lines) == 10 and json.loads(lines[4])["completion"] == [{"role": "assistant", "content": EXPLOIT}]
    first = json.loads(lines[0])
    assert (first["env_id"], first["env_version"], first["task_id"], first["status"]) == ("hole", "1.0.0", "t1", "ok")

    report = regrade(tmp_path / "run", verihub.load_env(v2)).summary()
    assert report["kind"] == "training" and report["graded_by_before"]["version"] == "1.0.0"
    assert report["flips"]["ok → wrong"] == {"rollouts": 4, "reward_before": 4.0, "reward_after": 0.0}
    assert report["flips"]["unchanged"]["rollouts"] == 4 and report["reward_withdrawn"] == 4.0
    assert report["not_regraded_by_reason"] == {"final state not logged": 1}
    assert report["other_environments"] == {"tiny": 1}
    assert sorted(report["tasks"]) == ["t1", "t2", "t3", "t4"]


def test_the_grade_log_is_bounded_and_says_where_it_stopped(tmp_path: Path) -> None:
    v1 = hole_env(tmp_path / "v1", "1.0.0", fixed=False)
    hole = resolve_envs([v1])[0]
    log = GradeLog(tmp_path / "run", max_bytes=2000)
    reward = EnvReward(hole, GradeLedger(), log=log)
    score(reward, [("hole", task, EXPLOIT) for task in TASKS] * 4)  # 32 records would take ~17 kB
    data = (tmp_path / "run" / GRADE_LOG).read_bytes()
    assert len(data) < 2200 and 0 < log.records < 32
    assert json.loads(data.splitlines()[-1]) == {"log_full": True, "records": log.records, "max_bytes": 2000}
    report = regrade(tmp_path / "run", verihub.load_env(v1)).summary()
    assert report["rollouts"] == log.records and report["flips"]["unchanged"]["rollouts"] == log.records
    assert any(f"stopped after {log.records} records" in note for note in report["notes"])


def test_a_resumed_run_appends_to_its_grade_log_past_a_torn_line(tmp_path: Path) -> None:
    """Resuming a run (a new trainer on the same output_dir) keeps what it logged before; a line the killed run
    tore is cut off, so it never sits between whole lines."""
    v1 = hole_env(tmp_path / "v1", "1.0.0", fixed=False)
    hole = resolve_envs([v1])[0]
    score(EnvReward(hole, GradeLedger(), log=GradeLog(tmp_path / "run")), [("hole", TASKS[0], EXPLOIT)])
    path = tmp_path / "run" / GRADE_LOG
    path.write_bytes(path.read_bytes() + b'{"environment": "hole", "ta')  # killed mid-line
    score(EnvReward(hole, GradeLedger(), log=GradeLog(tmp_path / "run")), [("hole", TASKS[1], EXPLOIT)])
    report = regrade(tmp_path / "run", verihub.load_env(v1)).summary()
    assert report["rollouts"] == 2 and report["flips"]["unchanged"]["rollouts"] == 2


def test_a_grpo_step_logs_what_it_graded_for_regrade(tiny_model: Path, tmp_path: Path) -> None:
    """Through TRL: a GRPO step's graded completions land in output_dir/grades.jsonl, which regrade reads."""
    versions = []
    for name, fixed in (("v1", False), ("v2", True)):
        root = hole_env(tmp_path / name, f"{1 + fixed}.0.0", fixed=fixed)
        spec = root / "environment.yaml"
        spec.write_text(spec.read_text().replace("split: {eval: 1.0}", "split: {train: 1.0}"))
        versions.append(root)
    one_step_trainer(tiny_model, [str(versions[0])], tmp_path / "run").train()
    records = [json.loads(line) for line in (tmp_path / "run" / GRADE_LOG).read_text().splitlines()]
    assert len(records) >= 4 and {record["env_version"] for record in records} == {"1.0.0"}
    assert all(record["task_id"] in {task["id"] for task in TASKS} for record in records)
    report = regrade(tmp_path / "run", verihub.load_env(versions[1])).summary()
    assert report["rollouts"] == len(records) and report["regraded"] + report["not_regraded"] == len(records)
    assert report["graded_by_before"]["version"] == "1.0.0" and report["graded_by_after"]["version"] == "2.0.0"
