"""The layered verifier engine: order, gates, weights, faults, timeouts, concurrency, cache, judge."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO
from verihub import CheckResult, GradeStatus, LayerStatus, check, load_env
from verihub.checks.base import Check, as_check
from verihub.checks.registry import BUILTIN_CHECKS
from verihub.grading import _pools
from verihub.grading.judge import JudgeVerdict
from verihub.grading.verifier import BoundLayer, Verifier
from verihub.spec.models import LayerSpec

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
    verifier = Verifier(
        [
            layer("correct", "check", "numeric", weight=2.0),
            layer("format", "rule", "boxed", gate=True),
            layer("short", "rule", "length", args={"max_chars": 100}, weight=0.5),
        ]
    )
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
    [
        ("crashes", "RuntimeError: database is down"),
        ("returns_garbage", "returned str"),
        ("out_of_range", "outside [0, 1]"),
    ],
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
    verifier = Verifier(
        [
            layer("format", "rule", "boxed", gate=True),
            layer("math", "check", "math", timeout_s=60),
            layer("half", "check", here("async_half"), weight=0.2),
        ]
    )
    assert as_check(async_half).mode == "async"
    tasks = [{"id": f"m{i}", "answer": f"\\frac{{{i}}}{{2}}"} for i in range(1, 7)]
    completions = [f"\\boxed{{{i / 2}}}" for i in range(1, 7)]
    grades = await verifier.agrade_many(tasks, completions)
    assert [g.status for g in grades] == [GradeStatus.WRONG] * 6  # half scores 0.5 < pass_score 1
    assert all(g.reward == pytest.approx(1.1) for g in grades)
    assert all(g.layer("math").status is LayerStatus.PASSED for g in grades)


class FakeJudge:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def judge(
        self, *, rubric: str, messages: list[dict[str, str]], completion: str, model: str | None
    ) -> JudgeVerdict:
        self.seen.append({"rubric": rubric, "messages": messages, "model": model})
        return JudgeVerdict(0.8 if "good" in completion else 0.1, "looked at it")


def judge_layer(tmp_path: Path) -> BoundLayer:
    (tmp_path / "rubric.md").write_text("Be good.")
    spec = LayerSpec.model_validate({"name": "style", "layer": "judge", "rubric": "rubric.md", "model": "m1"})
    return BoundLayer.from_spec(spec, tmp_path)


def test_judge_layer_uses_the_judge_and_missing_judge_is_a_fault(tmp_path: Path) -> None:
    judge = FakeJudge()
    render = lambda task: [{"role": "user", "content": task["answer"]}]  # noqa: E731 - a one-line stand-in
    verifier = Verifier(
        [layer("format", "rule", "length", args={"min_chars": 1}, gate=True), judge_layer(tmp_path)],
        judge=judge,
        render=render,
    )
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
        except BaseException as error:  # noqa: BLE001 - the thread's failure is kept for the assertion
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


# -- every limit holds in every mode; a check past its limit never holds a worker ----------------------

RELEASE = threading.Event()  # set at the end of the tests that hang checks, so their threads can leave


@pytest.fixture
def release_hung_checks() -> Any:
    yield
    RELEASE.set()


def hangs(completion: str, task: Mapping[str, Any]) -> bool:
    RELEASE.wait(120)
    return True


def quick(completion: str, task: Mapping[str, Any]) -> bool:
    return True


@check(mode="inline")
def slow_inline(completion: str, task: Mapping[str, Any]) -> bool:
    time.sleep(0.1)
    return True


@check(mode="process")
def spins(completion: str, task: Mapping[str, Any]) -> bool:
    while True:
        pass


@check(mode="process")
def quick_process(completion: str, task: Mapping[str, Any]) -> bool:
    return True


@check(mode="process")
def dies(completion: str, task: Mapping[str, Any]) -> bool:
    import os

    os._exit(3)


def decides_easy_ones(completion: str, task: Mapping[str, Any]) -> CheckResult | None:
    if completion == "raise":
        raise RuntimeError("the first step failed")
    return CheckResult(1.0, "decided on the grading thread") if completion == "easy" else None


# A process check whose worker dies: only what its first step leaves undecided ever reaches one.
PRESCREENED = Check(name="prescreened", fn=dies, mode="process", prescreen=decides_easy_ones)


async def test_a_checks_first_step_decides_on_the_grading_thread_and_leaves_the_rest_to_a_worker() -> None:
    alone = await Verifier([layer("first", "check", here("PRESCREENED"), timeout_s=20)]).agrade(TASK, "hard")
    assert alone.status is GradeStatus.ENV_ERROR and "worker process died" in alone.reason  # no evidence: kept
    verifier = Verifier([layer("first", "check", here("PRESCREENED"), timeout_s=20)])
    easy, hard, broken = await verifier.agrade_many([TASK] * 3, ["easy", "hard", "raise"])
    assert easy.passed and easy.layers[0].detail == "decided on the grading thread"
    # "easy" ran the layer without a fault on this task: evidence that the faults are these answers'
    assert hard.status is GradeStatus.WRONG and "worker process died" in hard.reason and hard.answer_fault
    assert broken.status is GradeStatus.WRONG and "the first step failed" in broken.reason and broken.answer_fault


def test_an_inline_check_past_its_limit_is_a_timeout_on_both_paths() -> None:
    fast_path = Verifier([layer("slow", "check", here("slow_inline"), timeout_s=0.05)])
    assert fast_path.all_inline
    grade = fast_path.grade(TASK, "x")
    assert grade.status is GradeStatus.TIMEOUT and grade.reward is None and "ran past 0.05s" in grade.reason
    general = Verifier(
        [layer("slow", "check", here("slow_inline"), timeout_s=0.05), layer("q", "check", here("quick"))]
    )
    assert not general.all_inline
    assert general.grade(TASK, "x").status is GradeStatus.TIMEOUT


async def test_hung_thread_checks_do_not_starve_their_neighbours(release_hung_checks: None) -> None:
    # Three times as many hung checks as the pool has threads, graded alongside fast ones: on main the
    # hung threads filled the pool and every later check timed out waiting for a thread.
    slow = Verifier([layer("hangs", "check", here("hangs"), timeout_s=0.2)])
    fast = Verifier([layer("quick", "check", here("quick"), timeout_s=1.0)])
    count = 3 * (_pools.cpu_count() + 4)
    start = time.perf_counter()
    slow_grades, fast_grades = await asyncio.gather(
        slow.agrade_many([{"id": f"s{i}"} for i in range(count)], ["x"] * count),
        fast.agrade_many([{"id": f"f{i}"} for i in range(count)], ["x"] * count),
    )
    assert {g.status for g in slow_grades} == {GradeStatus.TIMEOUT}
    assert {g.status for g in fast_grades} == {GradeStatus.OK}
    assert time.perf_counter() - start < 10
    fast.clear_cache()
    again = await fast.agrade_many([{"id": f"a{i}"} for i in range(count)], ["x"] * count)  # the pool is whole
    assert {g.status for g in again} == {GradeStatus.OK}


async def test_a_process_check_past_its_limit_is_killed_and_its_worker_replaced() -> None:
    spinning = Verifier([layer("spins", "check", here("spins"), timeout_s=0.5)])
    fast = Verifier([layer("quick", "check", here("quick_process"), timeout_s=20)])
    count = 2 * _pools.cpu_count()
    await fast.agrade({"id": "warm"}, "x")  # the workers are up
    slow_grades, fast_grades = await asyncio.gather(
        spinning.agrade_many([{"id": f"s{i}"} for i in range(count)], ["x"] * count),
        fast.agrade_many([{"id": f"f{i}"} for i in range(count)], ["x"] * count),
    )
    assert {g.status for g in slow_grades} == {GradeStatus.TIMEOUT}
    assert {g.status for g in fast_grades} == {GradeStatus.OK}
    start = time.perf_counter()
    fast.clear_cache()
    again = await fast.agrade_many([{"id": f"a{i}"} for i in range(count)], ["x"] * count)
    assert {g.status for g in again} == {GradeStatus.OK}
    assert time.perf_counter() - start < 15  # no worker is still spinning (on main they spun forever)


async def test_a_dead_worker_process_faults_only_its_own_grade() -> None:
    verifier = Verifier([layer("dies", "check", here("dies"))])
    grade = await verifier.agrade(TASK, "x")
    assert grade.status is GradeStatus.ENV_ERROR and "worker process died (exit code 3)" in grade.reason
    assert (await Verifier([layer("quick", "check", here("quick_process"))]).agrade(TASK, "x")).passed


@pytest.mark.parametrize("answer", ["10^{10^{10}}", "9^9^9^9", "(10^{8})!"])
def test_math_on_runaway_expressions_is_bounded_by_the_layers_limit(answer: str) -> None:
    verifier = Verifier([layer("math", "check", "math", timeout_s=1.5)])
    start = time.perf_counter()
    grade = verifier.grade({"id": "m", "answer": "7"}, f"\\boxed{{{answer}}}")
    assert grade.status in (GradeStatus.WRONG, GradeStatus.TIMEOUT)
    assert time.perf_counter() - start < 4  # main: math-verify's own 5 s limit, past the layer's
    assert verifier.grade({"id": "m", "answer": "7"}, "\\boxed{7}").passed  # the worker was replaced


# -- numeric abuse through a real environment ------------------------------------------------------


@pytest.mark.parametrize("env_dir", ["envs/sums", "envs/compare"])
@pytest.mark.parametrize(
    "answer",
    ["1e400", "-1e400", "1e20000000", "9" * 10_000, "inf", "nan", "1e-400", "1e" + "9" * 10_000, "1 " * 200_000],
)
def test_numeric_abuse_in_bundled_environments_is_wrong_and_cheap(env_dir: str, answer: str) -> None:
    env = load_env(REPO / env_dir)
    task = env.dataset("eval")[0]
    start = time.perf_counter()
    grade = env.grade(task, f"\\boxed{{{answer}}}")
    assert grade.status is GradeStatus.WRONG and grade.reward == 0
    assert time.perf_counter() - start < 0.5


# -- the cache keys on the task's content ---------------------------------------------------------


def test_the_cache_keys_on_task_content_not_on_the_id() -> None:
    env = load_env(REPO / "envs/sums")
    task = dict(env.dataset("eval")[0])
    completion = f"\\boxed{{{task['answer']}}}"
    assert env.grade(task, completion).passed
    changed = {**task, "answer": str(int(task["answer"]) + 1)}  # same id, another answer
    assert env.grade(changed, completion).status is GradeStatus.WRONG
    assert env.grade(task, completion).passed


CUSTOM_SPEC = """\
id: secrets
version: 0.1.0
domain: test
description: A custom check reading a column it does not declare.
dataset: {source: data/tasks.jsonl, split: {train: 0.5, eval: 0.5}}
prompt: {user: "{question}"}
verifier:
  - {name: secret, layer: check, use: "engine_cache_checks:matches_secret"}
gold: {reference: "{secret}"}
"""


def test_the_cache_keys_on_the_whole_task_for_custom_checks(make_env: Any) -> None:
    rows = [{"id": f"t{i}", "question": "q", "secret": f"s{i}"} for i in range(4)]
    checks = "def matches_secret(completion, task):\n    return completion == task['secret']\n"
    env = load_env(make_env(CUSTOM_SPEC, rows=rows, files={"engine_cache_checks.py": checks}))
    task = {"id": "t0", "question": "q", "secret": "s0"}
    assert env.grade(task, "s0").passed
    assert env.grade({**task, "secret": "other"}, "s0").status is GradeStatus.WRONG
    assert env.grade({**task, "secret": "other"}, "other").passed
    assert env.grade(task, "s0").passed


class RecordingTask(dict):
    """A task that notes every column a check reads ("*" when it walks them all)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)

    def __iter__(self) -> Any:
        self.read.add("*")
        return super().__iter__()

    def keys(self) -> Any:
        self.read.add("*")
        return super().keys()

    def items(self) -> Any:
        self.read.add("*")
        return super().items()

    def values(self) -> Any:
        self.read.add("*")
        return super().values()


BUILTIN_ARGS: dict[str, dict[str, Any]] = {
    "regex": {"pattern": r"\d+"},
    "json_schema": {"schema": {"type": "object"}},
    "xml_tags": {"tags": ["answer"]},
    "length": {"max_words": 50},
    "contains": {"patterns": ["a"]},
    "forbidden": {"patterns": ["b"]},
    "code_block": {"language": "python"},
}


@pytest.mark.parametrize("name", sorted(BUILTIN_CHECKS))
def test_built_in_checks_read_only_the_columns_they_declare(name: str) -> None:
    # The grade cache keys on the declared columns of built-in checks: a column read but not declared
    # would let two tasks that differ in it share a grade.
    check_ = BUILTIN_CHECKS[name]
    run, params = check_.bind(BUILTIN_ARGS.get(name, {}), Path.cwd())
    declared = params.columns() if params is not None else set()
    task = RecordingTask(id="t", answer="42", expected='{"a": 1}', tests="def test_x(:", question="q", files="{}")
    for completion in ("\\boxed{42}", '<answer>{"a": 1}</answer>', "```python\nx = 1\n```", "The answer is (B)."):
        try:
            run(completion, task)
        except Exception:  # noqa: BLE001 - reads before a failure count too
            pass
    assert task.read <= declared, f"{name} reads {sorted(task.read - declared)} without declaring them"
