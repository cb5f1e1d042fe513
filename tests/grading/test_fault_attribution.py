"""Whose fault a fault is, by evidence (verihub.grading.faults), through ``load_env(...).grade``/``agrade``: a
fault only the answer causes is ``wrong`` at the floor and named; one the reference shares, or that a retry
clears, is not the answer's; a right answer is never made wrong."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

import verihub
from conftest import MakeEnv

SPEC = """\
id: blame
version: 0.1.0
domain: test
description: Sums graded by checks that fault in chosen ways.
dataset: {{source: data/tasks.jsonl, split: {{eval: 1.0}}}}
prompt: {{user: "What is {{question}}?"}}
verifier:
  - {{name: format, layer: rule, use: boxed, gate: true, weight: 0.2}}
  - {{name: correct, layer: check, use: "{module}:{check}", weight: 0.8, timeout_s: 1}}
{grading}gold:
  reference: '\\boxed{{{{{{answer}}}}}}'
"""

CHECKS = '''\
import time
from pathlib import Path

from verihub.checks.base import CheckResult, check

CALLS = Path(__file__).with_name("calls")


def _count():
    CALLS.write_text(str(int(CALLS.read_text() or 0) + 1) if CALLS.exists() else "1")


def chokes_on_long(completion, task):
    """Raises on an answer with more than 40 digits (an int-conversion limit of its own), as checks do."""
    _count()
    if sum(c.isdigit() for c in completion) > 40:
        raise ValueError("Exceeds the limit for integer string conversion")
    return completion.endswith("{" + task["answer"] + "}")


def broken_on_t2(completion, task):
    """Raises on every answer to t2, the reference's too: the environment's fault."""
    _count()
    if task["id"] == "t2":
        raise RuntimeError("the task's data is corrupt")
    return completion.endswith("{" + task["answer"] + "}")


def fails_once(completion, task):
    """Raises the first time it is ever called: a transient fault a retry clears."""
    first = not CALLS.exists()
    _count()
    if first:
        raise ConnectionError("worker lost")
    return completion.endswith("{" + task["answer"] + "}")


def outage_of_two_calls(completion, task):
    """Down for its first two calls (an answer and its retry), then up again."""
    down = not CALLS.exists() or int(CALLS.read_text()) < 2
    _count()
    if down:
        raise ConnectionError("the scoring service is down")
    return completion.endswith("{" + task["answer"] + "}")


def slow_machine(completion, task):
    """Everything is slow: the reference takes 0.6 s of the 1 s limit, this other answer 1.5 s."""
    _count()
    time.sleep(0.6 if completion.endswith("{" + task["answer"] + "}") else 1.5)
    return completion.endswith("{" + task["answer"] + "}")


def jail_down_for_long(completion, task):
    """The sandbox reports itself failed, but only while this long answer is graded (an outage that spared
    the reference)."""
    from verihub.errors import SandboxInfraError

    _count()
    if len(completion) > 40:
        raise SandboxInfraError("python_tests: the sandbox failed: the jail was killed from outside")
    return completion.endswith("{" + task["answer"] + "}")


def slow_on_repeats(completion, task):
    """Runs past the layer's 1 s limit on an answer that repeats itself (a backtracking pattern of its own)."""
    _count()
    if completion.count("9") > 20:
        time.sleep(3)
    return completion.endswith("{" + task["answer"] + "}")


@check("inline_chokes", mode="inline")
def inline_chokes(completion, task):
    """chokes_on_long, run on the grading thread."""
    _count()
    if sum(c.isdigit() for c in completion) > 40:
        raise ValueError("Exceeds the limit for integer string conversion")
    return completion.endswith("{" + task["answer"] + "}")


def down_when_flagged(completion, task):
    """chokes_on_long, until a file named ``down`` appears beside it: then an outage, every answer faulting."""
    _count()
    if CALLS.with_name("down").exists():
        raise ConnectionError("the scoring service is down")
    if sum(c.isdigit() for c in completion) > 40:
        raise ValueError("Exceeds the limit for integer string conversion")
    return completion.endswith("{" + task["answer"] + "}")


def says_malformed(completion, task):
    """Declares an answer with a NUL byte malformed without raising."""
    _count()
    if "\\x00" in completion:
        return CheckResult.malformed("a NUL byte in the answer")
    return completion.endswith("{" + task["answer"] + "}")
'''

ROWS = [{"id": f"t{i}", "question": f"{i} + {i}", "answer": str(2 * i)} for i in range(1, 4)]


def env_for(make_env: MakeEnv, check: str, grading: str = "", spec: str = SPEC) -> verihub.Environment:
    module = f"blame_checks_{next(_MODULES)}"  # a module of its own: its call counter sits beside it
    root = make_env(
        spec.format(check=check, grading=grading, module=module), rows=ROWS, files={f"{module}.py": CHECKS}, name=module
    )
    return verihub.load_env(root)


_MODULES = itertools.count()


def calls(env: verihub.Environment) -> int:
    path = Path(env.root) / "calls"
    return int(path.read_text()) if path.exists() else 0


def test_a_fault_only_this_answer_causes_is_wrong_at_the_floor_and_named(make_env: MakeEnv) -> None:
    env = env_for(make_env, "chokes_on_long")
    task = env.tasks("eval")[0]
    grade = env.grade(task, "\\boxed{" + "9" * 50 + "}")
    assert (grade.status, grade.reward) == ("wrong", 0.0)  # not the 0.2 its passed format layer would give
    fault = grade.answer_fault
    assert fault is not None and fault.name == "correct" and fault.status == "answer_fault"
    assert "ValueError: Exceeds the limit" in fault.detail and "answer fault" in grade.reason
    assert env.grade(task, "\\boxed{2}").status == "ok"  # right answers are untouched


def test_every_grading_path_decides_the_same_way(make_env: MakeEnv) -> None:
    """One inline layer (the precompiled path), inline layers only, and the general path."""
    single = SPEC.replace("  - {{name: format, layer: rule, use: boxed, gate: true, weight: 0.2}}\n", "")
    for spec, check in ((single, "inline_chokes"), (SPEC, "inline_chokes"), (single, "chokes_on_long")):
        env = env_for(make_env, check, spec=spec)
        task = env.tasks("eval")[0]
        grade = env.grade(task, "\\boxed{" + "9" * 50 + "}")
        assert (grade.status, grade.reward, grade.answer_fault.name) == ("wrong", 0.0, "correct"), (check, grade)
        assert env.grade(task, "\\boxed{2}").status == "ok"


def test_the_floor_is_the_environments(make_env: MakeEnv) -> None:
    env = env_for(make_env, "chokes_on_long", grading="grading: {floor: 0.1}\n")
    assert env.grade(env.tasks("eval")[0], "\\boxed{" + "9" * 50 + "}").reward == 0.1


def test_a_fault_the_reference_shares_stays_the_environments_and_a_right_answer_is_never_wrong(
    make_env: MakeEnv,
) -> None:
    env = env_for(make_env, "broken_on_t2")
    t2 = env.tasks("eval")[1]
    for answer, why in (
        ("So: \\boxed{4}", "reference faults there too"),
        ("\\boxed{5}", "reference faults there too"),
        ("\\boxed{4}", "the answer is the task's reference"),
    ):  # right and wrong alike
        grade = env.grade(t2, answer)
        assert (grade.status, grade.reward, grade.answer_fault) == ("env_error", None, None)
        assert why in grade.reason
    assert env.grade(env.tasks("eval")[0], "\\boxed{2}").status == "ok"


def test_a_fault_a_retry_clears_is_no_fault(make_env: MakeEnv) -> None:
    env = env_for(make_env, "fails_once")
    grade = env.grade(env.tasks("eval")[0], "\\boxed{2}")
    assert (grade.status, grade.reward) == ("ok", 1.0) and calls(env) == 2


def test_an_outage_that_ends_while_the_reference_is_graded_is_not_the_answers(make_env: MakeEnv) -> None:
    env = env_for(make_env, "outage_of_two_calls")
    grade = env.grade(env.tasks("eval")[0], "So: \\boxed{2}")  # a right answer, graded while the service was down
    assert (grade.status, grade.reward, grade.answer_fault) == ("ok", 1.0, None)
    assert calls(env) == 4  # the answer, its retry, the reference, and the answer after it


@pytest.mark.parametrize("path", ["grade", "agrade"])
def test_evidence_is_graded_after_the_fault_not_remembered_from_before_it(make_env: MakeEnv, path: str) -> None:
    """The reference graded well once; then the service goes down for good. A right answer graded during the
    outage is not made wrong by the reference's earlier grade (on main: wrong, from the cached evidence)."""
    env = env_for(make_env, "down_when_flagged")
    task = env.tasks("eval")[0]
    grade = env.grade(task, "\\boxed{" + "9" * 50 + "}")  # an answer fault: the reference ran, and was graded
    assert grade.answer_fault is not None
    (Path(env.root) / "down").write_text("")
    right = "So: \\boxed{2}"
    grade = env.grade(task, right) if path == "grade" else asyncio.run(env.agrade(task, right))
    assert (grade.status, grade.reward, grade.answer_fault) == ("env_error", None, None), grade
    assert "the task's reference faults there too" in grade.reason


def test_a_limit_the_reference_nearly_reaches_too_is_the_machines_not_the_answers(make_env: MakeEnv) -> None:
    env = env_for(make_env, "slow_machine")
    grade = env.grade(env.tasks("eval")[0], "\\boxed{3}")
    assert (grade.status, grade.reward, grade.answer_fault) == ("timeout", None, None)
    assert "the machine, not this answer, is slow" in grade.reason


def test_a_fault_the_sandbox_reports_as_its_own_is_never_the_answers(make_env: MakeEnv) -> None:
    env = env_for(make_env, "jail_down_for_long")
    grade = env.grade(env.tasks("eval")[0], "After a long and careful look at it: \\boxed{2}")  # right, and long
    assert (grade.status, grade.reward, grade.answer_fault) == ("env_error", None, None)
    assert "the infrastructure reports the fault as its own" in grade.reason


def test_a_check_run_past_its_limit_by_one_answer_is_that_answers_fault(make_env: MakeEnv) -> None:
    env = env_for(make_env, "slow_on_repeats")
    task = env.tasks("eval")[0]
    grade = asyncio.run(env.agrade(task, "\\boxed{" + "9" * 30 + "}"))  # the async path decides the same way
    assert (grade.status, grade.reward) == ("wrong", 0.0)
    assert grade.answer_fault is not None and grade.answer_fault.detail.startswith("timeout: ran past 1s")
    assert env.grade(task, "\\boxed{" + "9" * 30 + "}") == grade  # remembered: a repeat costs nothing


def test_a_check_can_say_an_answer_is_malformed_without_raising(make_env: MakeEnv) -> None:
    env = env_for(make_env, "says_malformed")
    grade = env.grade(env.tasks("eval")[0], "\\boxed{2}\x00")
    assert (grade.status, grade.reward) == ("wrong", 0.0) and calls(env) == 1  # no retry, no reference needed
    assert grade.answer_fault is not None and grade.answer_fault.detail == "a NUL byte in the answer"


@pytest.mark.parametrize("check", ["chokes_on_long", "says_malformed"])
def test_an_answer_past_the_size_limit_is_wrong_before_any_layer_runs(make_env: MakeEnv, check: str) -> None:
    env = env_for(make_env, check, grading="grading: {max_answer_chars: 1000}\n")
    task = env.tasks("eval")[0]
    assert env.grade(task, " " * 990 + "\\boxed{2}").status == "ok"  # 999 characters: graded
    grade = env.grade(task, " " * 992 + "\\boxed{2}")
    assert (grade.status, grade.reward) == ("wrong", 0.0) and calls(env) == 1  # the check never saw it
    assert "1,001 characters, past this environment's limit of 1,000" in grade.answer_fault.detail
    assert [layer.status for layer in grade.layers] == ["answer_fault", "skipped"]


def test_the_default_size_limit_comes_from_the_token_budget(make_env: MakeEnv) -> None:
    env = env_for(make_env, "chokes_on_long")
    assert env.spec.max_answer_chars == 16 * 1024 * 1  # eval.max_tokens 1024, one turn (at least 16384)
    assert env.grade(env.tasks("eval")[0], "x" * 20_000).answer_fault is not None


def test_eval_counts_answer_faults_in_its_rates_and_metadata(make_env: MakeEnv, tmp_path: Path) -> None:
    """A model whose odd samples make the check fault: those are wrong (in pass@1) and counted, not left out."""
    from verihub.eval.evaluate import evaluate
    from verihub.testing import ScriptedChatServer

    def long_on_odd_samples(request: dict[str, Any]) -> list[dict[str, Any]]:
        value = 2 * int(request["messages"][-1]["content"].split(" ")[2])
        return [
            {"content": "\\boxed{" + ("9" * 50 if index % 2 else str(value)) + "}"}
            for index in range(request.get("n", 1))
        ]

    env = env_for(make_env, "chokes_on_long")
    with ScriptedChatServer(long_on_odd_samples) as server:
        report = evaluate(env, f"openai:m@{server.url}", n=3, k=2, out=tmp_path / "out")
    metrics = report.metrics
    assert (metrics["rollouts_graded"], metrics["rollouts_faulted"], metrics["answer_faults"]) == (6, 0, 3)
    assert metrics["answer_faults_by_layer"] == {"correct": 3} and metrics["pass@1"] == 0.5
    saved = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert saved["metrics"]["answer_faults"] == 3
    rows = [json.loads(line) for line in (tmp_path / "out" / "rollouts.jsonl").read_text().splitlines()]
    assert sorted(row["answer_fault"] for row in rows) == ["", "", "", "correct", "correct", "correct"]
