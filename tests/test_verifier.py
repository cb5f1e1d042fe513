"""The layered verifier engine: order, gates, weights, faults, timeouts, concurrency, cache, judge."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from verihub import CheckResult, GradeStatus, LayerStatus, check
from verihub.checks.base import as_check
from verihub.judge import JudgeVerdict
from verihub.spec import LayerSpec
from verihub.verifier import BoundLayer, Verifier

CALLS: dict[str, int] = {}


def counted(completion: str, task: Mapping[str, Any]) -> float:
    CALLS["counted"] = CALLS.get("counted", 0) + 1
    return 1.0


def crashes(completion: str, task: Mapping[str, Any]) -> float:
    raise RuntimeError("database is down")


def returns_garbage(completion: str, task: Mapping[str, Any]) -> object:
    return "yes"


def out_of_range(completion: str, task: Mapping[str, Any]) -> float:
    return 1.5


def sleeps(completion: str, task: Mapping[str, Any], seconds: float = 0.3) -> bool:
    time.sleep(seconds)
    return True


@check(mode="async")
async def async_half(completion: str, task: Mapping[str, Any]) -> CheckResult:
    await asyncio.sleep(0.01)
    return CheckResult(0.5, "half")


def layer(name: str, kind: str, use: str, **fields: Any) -> BoundLayer:
    spec = LayerSpec.model_validate({"name": name, "layer": kind, "use": use, **fields})
    return BoundLayer.from_spec(spec, Path.cwd())


def here(name: str) -> str:
    return f"{__name__}:{name}"


TASK = {"id": "t1", "answer": "42"}


def test_layers_run_cheapest_first_and_rewards_are_weighted() -> None:
    verifier = Verifier([
        layer("correct", "check", "numeric", weight=2.0),
        layer("format", "rule", "boxed", gate=True),
        layer("short", "rule", "length", args={"max_chars": 100}, weight=0.5),
    ])
    assert [stage[0].spec.name for stage in verifier.stages] == ["format", "short", "correct"]
    grade = verifier.grade(TASK, "\\boxed{42}")
    assert grade.status is GradeStatus.OK and grade.reward == pytest.approx(2.5)
    assert [r.name for r in grade.layers] == ["format", "short", "correct"]
    wrong = verifier.grade(TASK, "\\boxed{41}")
    assert wrong.status is GradeStatus.WRONG and wrong.reward == pytest.approx(0.5)
    assert "expected 42" in wrong.layer("correct").detail


def test_failed_gate_skips_later_layers() -> None:
    verifier = Verifier([layer("format", "rule", "boxed", gate=True), layer("counted", "check", here("counted"))])
    CALLS.clear()
    grade = verifier.grade(TASK, "42, no box")
    assert grade.status is GradeStatus.WRONG and grade.reward == 0
    assert grade.layer("counted").status is LayerStatus.SKIPPED
    assert CALLS == {}


@pytest.mark.parametrize(
    ("check_name", "reason"),
    [("crashes", "RuntimeError: database is down"), ("returns_garbage", "returned str"), ("out_of_range", "outside [0, 1]")],
)
def test_a_faulty_check_is_env_error_with_reward_none(check_name: str, reason: str) -> None:
    verifier = Verifier([layer("format", "rule", "boxed"), layer("broken", "check", here(check_name))])
    grade = verifier.grade(TASK, "\\boxed{42}")
    assert grade.status is GradeStatus.ENV_ERROR
    assert grade.reward is None and grade.is_env_fault
    assert reason in grade.reason and "'broken'" in grade.reason
    assert grade.layer("broken").status is LayerStatus.ERROR


def test_an_inline_check_that_raises_is_env_error() -> None:
    # numeric raises when the environment's expected value is not a number: the data is at fault.
    verifier = Verifier([layer("correct", "check", "numeric")])
    grade = verifier.grade({"id": "x", "answer": "n/a"}, "\\boxed{1}")
    assert grade.status is GradeStatus.ENV_ERROR and grade.reward is None and "not a number" in grade.reason


def test_a_check_past_its_timeout_is_timeout_with_reward_none() -> None:
    verifier = Verifier([layer("slow", "check", here("sleeps"), timeout_s=0.05, args={"seconds": 0.5})])
    grade = verifier.grade(TASK, "x")
    assert grade.status is GradeStatus.TIMEOUT and grade.reward is None
    assert "ran past 0.05s" in grade.reason


def test_faults_are_not_cached_but_grades_are() -> None:
    verifier = Verifier([layer("counted", "check", here("counted"))])
    CALLS.clear()
    first = verifier.grade(TASK, "a")
    assert verifier.grade(TASK, "a") is first and CALLS["counted"] == 1
    verifier.grade({"id": "t2"}, "a")
    assert CALLS["counted"] == 2  # another task is another key
    broken = Verifier([layer("broken", "check", here("crashes"))])
    assert broken.grade(TASK, "a") is not broken.grade(TASK, "a")
    broken_inline = Verifier([layer("correct", "check", "numeric")])  # the inline fast path
    bad_task = {"id": "x", "answer": "n/a"}
    assert broken_inline.grade(bad_task, "1") is not broken_inline.grade(bad_task, "1")


async def test_slow_checks_run_concurrently_without_timing_out_their_neighbours() -> None:
    # Ten 0.3 s checks with a 1 s limit each: run one after another they would take 3 s, and the
    # later ones would time out if the limit counted time spent queueing.
    verifier = Verifier([layer("slow", "check", here("sleeps"), timeout_s=1.0)])
    start = time.perf_counter()
    grades = await verifier.agrade_many([{"id": str(i)} for i in range(10)], ["x"] * 10)
    elapsed = time.perf_counter() - start
    assert all(g.status is GradeStatus.OK for g in grades)
    assert elapsed < 2.0


async def test_a_slow_check_does_not_block_the_event_loop() -> None:
    verifier = Verifier([layer("slow", "check", here("sleeps"), args={"seconds": 0.3})])
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    running = asyncio.create_task(ticker())
    await verifier.agrade(TASK, "x")
    running.cancel()
    assert ticks >= 10


async def test_async_checks_and_math_in_the_process_pool() -> None:
    verifier = Verifier([
        layer("format", "rule", "boxed", gate=True),
        layer("math", "check", "math", timeout_s=60),
        layer("half", "check", here("async_half"), weight=0.2),
    ])
    assert as_check(async_half).mode == "async"
    tasks = [{"id": f"m{i}", "answer": f"\\frac{{{i}}}{{2}}"} for i in range(1, 7)]
    completions = [f"\\boxed{{{i / 2}}}" for i in range(1, 7)]
    grades = await verifier.agrade_many(tasks, completions)
    assert [g.status for g in grades] == [GradeStatus.WRONG] * 6  # half scores 0.5 < pass_score 1
    assert all(g.reward == pytest.approx(1.1) for g in grades)
    assert all(g.layer("math").status is LayerStatus.PASSED for g in grades)


def test_sync_grade_inside_a_running_loop_says_what_to_do() -> None:
    verifier = Verifier([layer("slow", "check", here("sleeps"), args={"seconds": 0})])

    async def inside() -> None:
        verifier.grade(TASK, "x")

    with pytest.raises(RuntimeError, match="await agrade"):
        asyncio.run(inside())


class FakeJudge:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def judge(self, *, rubric: str, messages: list[dict[str, str]], completion: str, model: str | None) -> JudgeVerdict:
        self.seen.append({"rubric": rubric, "messages": messages, "model": model})
        return JudgeVerdict(0.8 if "good" in completion else 0.1, "looked at it")


def judge_layer(tmp_path: Path) -> BoundLayer:
    (tmp_path / "rubric.md").write_text("Be good.")
    spec = LayerSpec.model_validate({"name": "style", "layer": "judge", "rubric": "rubric.md", "model": "m1"})
    return BoundLayer.from_spec(spec, tmp_path)


def test_judge_layer_uses_the_judge_and_missing_judge_is_a_fault(tmp_path: Path) -> None:
    judge = FakeJudge()
    render = lambda task: [{"role": "user", "content": task["answer"]}]  # noqa: E731
    verifier = Verifier([layer("format", "rule", "length", args={"min_chars": 1}, gate=True), judge_layer(tmp_path)],
                        judge=judge, render=render)
    grade = verifier.grade(TASK, "a good answer")
    assert grade.reward == pytest.approx(0.8) and grade.layer("style").detail == "looked at it"
    assert judge.seen == [{"rubric": "Be good.", "messages": [{"role": "user", "content": "42"}], "model": "m1"}]
    without = Verifier([judge_layer(tmp_path)])
    assert without.grade(TASK, "x").status is GradeStatus.ENV_ERROR
    skipping = Verifier([judge_layer(tmp_path)], on_missing_judge="skip")
    skipped = skipping.grade(TASK, "x")
    assert skipped.status is GradeStatus.OK and skipped.layer("style").status is LayerStatus.SKIPPED


def test_verifier_is_safe_across_threads() -> None:
    verifier = Verifier([layer("slow", "check", here("sleeps"), args={"seconds": 0.01})])
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            assert verifier.grade({"id": str(index)}, "x").passed
        except BaseException as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
