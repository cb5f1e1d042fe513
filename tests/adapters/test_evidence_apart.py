"""Evidence of whose fault a fault is, gathered apart from the answer (verihub.grading.faults, ._apart): a GRPO
group of hostile and right answers graded together, as the trainer does (``agrade`` of each row at once), and
repeated, on the in-process games (textarena, skyrl-gym: a move whose own regex holds the GIL for seconds, a
move its parser raises on) and through each bridge (a verifiers scorer that spins on a crafted reply and raises
on every non-integer, the task's prompt too; a GEM environment that does the same). Every right answer is
graded ok, every hostile one wrong at the floor with the fault named, none a fault: no hostile neighbour
stalls another answer or its evidence, and no prompt stands in for a gold answer. Also: a worker the grader cannot
have is the grader's fault, never the answer's; a skyrl-gym worker gets its row, never the dataset; an evidence
bridge that loads other tasks than the taskset's first load is refused."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hostile_games import GAME, SKYRL_ENV, STALL

import verihub
from conftest import use_own_environment
from verihub.errors import GraderInfraError
from verihub.grading import _pools
from verihub.grading.faults import lacks_evidence
from verihub.grading.grade import Grade

TASKSETS = Path(__file__).parent / "vf_tasksets"


def group_grades(env: verihub.Environment, tasks: list[Any], group: list[str]) -> list[list[Grade]]:
    """Each task's group graded at once, every row of every task concurrently (as the trainer's reward does)."""

    async def batch() -> list[Grade]:
        return await asyncio.gather(*(env.agrade(task, answer) for task in tasks for answer in group))

    grades = asyncio.run(batch())
    return [grades[index : index + len(group)] for index in range(0, len(grades), len(group))]


def assert_group(grades: list[Grade], group: list[str], right: set[str]) -> None:
    for answer, grade in zip(group, grades, strict=True):
        if answer in right:
            assert (grade.status, grade.reward) == ("ok", 1.0), (answer[:20], grade)
        else:
            assert (grade.status, grade.reward) == ("wrong", 0.0), (answer[:20], grade)
            assert grade.answer_fault is not None and "answer fault" in grade.reason, grade


@pytest.fixture(scope="module")
def skyrl_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "rows.jsonl"
    rows = [{"prompt": f"Game {i}: answer with the move [ok].", "reward_spec": {}} for i in range(6)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize("kind", ["textarena", "skyrl-gym"])
def test_a_group_of_hostile_and_right_moves_on_an_in_process_game(kind: str, skyrl_data: Path) -> None:
    """On main, the crafted move held the grading process's GIL for seconds: every other move of the batch
    waited behind it (one move at a time in the process), right ones ran past their time, and the evidence
    (the task's prompt played as a move) waited too."""
    if kind == "textarena":
        env = verihub.load_env(f"textarena:{GAME}", size=5, max_turns=1, timeout_s=2)
    else:
        env = verihub.load_env(f"skyrl-gym:{SKYRL_ENV}", data=str(skyrl_data), size=5, timeout_s=2)
    assert env.spec.gold.reference_is == "placeholder"  # a game has no gold move: the prompt is never evidence
    group = ["[ok]", STALL, "[ok] ", "RAISE: a move the game's parser refuses"]
    for _ in range(2):  # repeated: right answers come from the cache, hostile ones are graded anew
        for grades in group_grades(env, list(env.tasks("train")[:2]), group):
            assert_group(grades, group, {"[ok]", "[ok] "})


def test_a_group_of_hostile_and_right_replies_through_the_verifiers_bridge(monkeypatch: pytest.MonkeyPatch) -> None:
    """On main, the scorer raised on the task's prompt (the declared reference), so a reply it raised on was
    "the reference faults there too": env_error, and one that stalled the taskset's only bridge made the
    evidence of its neighbours wait behind it. (One task: each stall costs a bridge and its restart.)"""
    use_own_environment("verifiers", "VERIHUB_VERIFIERS_PYTHON", monkeypatch)
    env = verihub.load_env(f"verifiers:vf_strict?paths=[{TASKSETS}]", size=5, timeout_s=2)
    tasks = list(env.tasks("train")[:1])
    for _ in range(2):  # repeated: right answers come from the cache, hostile ones are graded anew
        groups = [[answer(task), "SPIN", answer(task) + " ", "I do not know"] for task in tasks]
        for group, grades in zip(groups, group_grades_each(env, tasks, groups), strict=True):
            assert_group(grades, group, {group[0], group[2]})


def group_grades_each(env: verihub.Environment, tasks: list[Any], groups: list[list[str]]) -> list[list[Grade]]:
    """Task i's group ``groups[i]``, every row of every task graded concurrently."""

    async def batch() -> list[Grade]:
        return await asyncio.gather(
            *(env.agrade(task, a) for task, group in zip(tasks, groups, strict=True) for a in group)
        )

    grades = iter(asyncio.run(batch()))
    return [[next(grades) for _ in group] for group in groups]


def answer(task: dict[str, Any]) -> str:
    words = task["prompt"].rstrip("?").split()
    return str(int(words[2]) + int(words[4]))


GEM_HOSTILE = '''\
"""Registers a GEM environment of one action that parses it with (a+)+$ (seconds on a crafted action, the
GIL held) and raises on an action that starts with RAISE; [ok] pays 1."""
import re

try:
    import gem
    from gem.core import Env
except ImportError:  # an interpreter without GEM (this file is on its path only through the test's wrapper)
    gem = None

if gem is not None:

    class HostileParse(Env):
        def reset(self, seed=None):
            return f"Game {seed}: answer with the move [ok].", {}

        def step(self, action):
            if action.startswith("RAISE"):
                raise ValueError("cannot parse this action")
            re.match(r"(a+)+$", action)
            return "The game is over.", 1.0 if action.strip() == "[ok]" else 0.0, True, False, {}

    gem.register("hostile:Parse-v0", entry_point=HostileParse)
'''


def test_a_group_of_hostile_and_right_actions_through_the_gem_bridge(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """On main, the crafted action stalled the one GEM bridge, under its lock, for every other action of the
    batch and for the evidence (the task's prompt as an action)."""
    venv = use_own_environment("gem", "VERIHUB_GEM_PYTHON", monkeypatch)
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(GEM_HOSTILE)
    python = tmp_path / "python"  # GEM's interpreter, with the hostile environment registered at its start
    python.write_text(f'#!/bin/sh\nPYTHONPATH={tmp_path / "site"} exec {venv / "bin" / "python"} "$@"\n')
    python.chmod(0o755)
    env = verihub.load_env("gem:hostile:Parse-v0", size=5, max_turns=1, timeout_s=2, python=str(python))
    assert env.spec.gold.reference_is == "placeholder"
    group = ["[ok]", STALL, "[ok] ", "RAISE: an action GEM's parser refuses"]
    for _ in range(2):
        for grades in group_grades(env, list(env.tasks("train")[:2]), group):
            assert_group(grades, group, {"[ok]", "[ok] "})
    assert os.environ.get("PYTHONPATH", "") != str(tmp_path / "site")  # the hostile module stayed in GEM's process


def test_with_no_gold_a_reply_is_blamed_on_another_replys_evidence_and_without_any_the_grade_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    use_own_environment("verifiers", "VERIHUB_VERIFIERS_PYTHON", monkeypatch)
    env = verihub.load_env(f"verifiers:vf_strict?paths=[{TASKSETS}]", size=5)
    first, second = env.tasks("train")[:2]
    alone = env.grade(first, "I do not know")  # nothing vouches for the scorer on this task yet
    assert (alone.status, alone.reward) == ("env_error", None) and lacks_evidence(alone.reason), alone.reason
    assert "prompt" not in alone.reason and not env.verifier.has_evidence(first)
    assert env.grade(first, answer(first)).status == "ok"  # a reply the scorer took: evidence for this task
    assert env.verifier.has_evidence(first) and not env.verifier.has_evidence(second)
    blamed = env.grade(first, "I do not know")
    assert (blamed.status, blamed.reward) == ("wrong", 0.0) and "ValueError" in blamed.answer_fault.detail
    assert env.grade(second, "I do not know").status == "env_error"  # evidence is per task


def test_a_worker_the_grader_cannot_have_is_its_own_fault_never_the_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every lease of the answer's grades fails (a worker that does not start), the evidence's does not: on the work
    this started from, that fault was weighed, and the evidence, played cleanly, blamed it on the answer."""
    env = verihub.load_env(f"textarena:{GAME}", size=5, max_turns=1, timeout_s=2)
    task = env.tasks("train")[0]
    assert env.grade(task, "[ok]").status == "ok"  # evidence for this task
    real, leases = _pools.lease, []

    def lease(wait_s: float = _pools.START_S) -> _pools.LeasedWorker:
        leases.append(wait_s)
        if len(leases) != 3:  # the answer's grade and its retry fail; the third, the evidence's, does not
            raise GraderInfraError("a check worker process did not start (exit code 1)")
        return real(wait_s)

    monkeypatch.setattr(_pools, "lease", lease)
    grade = env.grade(task, "[ok] ")
    assert (grade.status, grade.reward) == ("env_error", None), grade
    assert "the infrastructure reports the fault as its own" in grade.reason, grade.reason
    assert len(leases) == 3  # the evidence did play (the third lease): the fault's type, not the evidence, decided


def test_a_skyrl_gym_worker_gets_its_row_never_the_dataset(
    skyrl_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the work this started from, every fresh worker read the whole dataset (for parquet, importing datasets)
    within the reset's time limit. Here the file is gone once loaded, and every worker is fresh."""
    data = tmp_path / "rows.jsonl"
    data.write_text(skyrl_data.read_text())
    env = verihub.load_env(f"skyrl-gym:{SKYRL_ENV}", data=str(data), size=5, timeout_s=2)
    task = env.tasks("train")[0]
    data.unlink()
    fresh: _pools.Pool[Any] = _pools.Pool(_pools._start_worker, live_max=2, idle_max=2, what="test workers")
    monkeypatch.setattr(_pools, "_WORKERS", fresh)
    try:
        grade = env.grade(task, "[ok]")
    finally:
        fresh.close()
    assert (grade.status, grade.reward) == ("ok", 1.0), grade


def test_an_evidence_bridge_whose_taskset_loads_other_tasks_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """vf_shifting rotates its tasks at every load, and its scorer fails once. On the work this started from, the
    right reply's retry was scored by an evidence bridge that had loaded the tasks rotated: another task's answer,
    0, and the right reply was graded wrong."""
    use_own_environment("verifiers", "VERIHUB_VERIFIERS_PYTHON", monkeypatch)
    monkeypatch.setenv("VF_SHIFTING_DIR", str(tmp_path))  # the bridges' environment: their load counter
    env = verihub.load_env(f"verifiers:vf_shifting?paths=[{TASKSETS}]", size=5, timeout_s=10)
    task = env.tasks("train")[0]
    grade = env.grade(task, f"{answer(task)}!")  # right; its first score fails, the retry runs apart
    assert grade.status != "wrong" and grade.reward is None, grade
    assert "loaded other tasks" in grade.reason, grade.reason
