"""What counts as evidence of whose fault a fault is (verihub.grading.faults), through ``load_env(...).grade``,
``agrade`` and ``validate_env``: a declared canary, never a placeholder; another answer to the same task graded
right, also one still in flight when the fault is found, and never one graded wrong (a scorer slow on, or raising
on, right answers alone must not make a right answer wrong); a sandbox that cannot start from an answer's state
weighed like any other fault, while the infrastructure's own (the sandbox's, the grader's) stays exempt; a check
cut off at its limit done cleaning up before its layer is graded."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
from typing import Any

import pytest

import verihub
from conftest import VERIHUB, MakeEnv
from verihub.grading.faults import lacks_evidence
from verihub.validation.validate import validate_env

SPEC = """\
id: {name}
version: 0.1.0
domain: test
description: Sums scored by a check of the test's own.
dataset: {{source: data/tasks.jsonl, split: {{eval: 1.0}}}}
prompt: {{user: "What is {{question}}?"}}
verifier:
  - {{name: exact, layer: check, use: "{module}:{check}", timeout_s: {timeout}}}
gold: {{reference: "{reference}", reference_is: {kind}, min_pass_rate: 0}}
"""

CHECKS = '''\
import asyncio
import threading
import time

from verihub.errors import GraderInfraError, SandboxInfraError, SandboxStateError

GATE = threading.Event()  # set by the second grade of a RAISE answer (its retry)
RAISES = []


def strict(completion, task):
    """int() of the answer: raises on anything that is no integer (the task's prompt too)."""
    return int(completion.strip()) == int(task["answer"])


def raise_then_right(completion, task):
    """RAISE raises; a right answer waits, the first time, until RAISE is being retried."""
    if completion == "RAISE":
        RAISES.append(1)
        if len(RAISES) == 2:
            GATE.set()
        raise ValueError("cannot parse this answer")
    GATE.wait(10)
    return completion.strip() == task["answer"]


def jail_cannot_restore(completion, task):
    """The sandbox cannot start from the state this answer left (a state past its limits); the reference's restores."""
    if "BOMB" in completion:
        raise SandboxStateError("its files take 9 GiB once restored, more than disk_mb=256")
    return completion.strip().endswith(task["answer"])


def jail_killed(completion, task):
    """The infrastructure fails, but only while this answer is graded: its own fault, never the answer's."""
    if "BOMB" in completion:
        raise SandboxInfraError("python_tests: the sandbox failed: the jail was killed from outside")
    return completion.strip().endswith(task["answer"])


def grader_failed(completion, task):
    """The grader's own machinery fails while this answer is graded (a worker that did not start)."""
    if "BOMB" in completion:
        raise GraderInfraError("a check worker process did not start (exit code 1)")
    return completion.strip().endswith(task["answer"])


def slow_when_right(completion, task):
    """A scorer slow on right answers alone (past a 0.5 s limit), instant on any other."""
    if completion.strip() == task["answer"]:
        time.sleep(1.5)
    return completion.strip() == task["answer"]


EVENTS = []


async def cleans_up(completion, task):
    """The first call runs past its limit and, cancelled, takes a second to clean up; later calls answer."""
    EVENTS.append("call")
    if len(EVENTS) == 1:
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(1.0)
            EVENTS.append("cleaned")
    return completion.strip() == task["answer"]
'''

ROWS = [{"id": f"t{i}", "question": f"{i} + {i}", "answer": str(2 * i)} for i in range(1, 4)]
_NAMES = itertools.count()


def env_for(
    make_env: MakeEnv, check: str, kind: str = "gold", reference: str = "{{answer}}", timeout: float = 20
) -> verihub.Environment:
    name = f"evidence{next(_NAMES)}"
    module = f"{name}_checks"  # a module of its own: its GATE and counts are this test's
    spec = SPEC.format(name=name, module=module, check=check, kind=kind, reference=reference, timeout=timeout)
    return verihub.load_env(make_env(spec, rows=ROWS, files={f"{module}.py": CHECKS}, name=name))


def checks_of(env: verihub.Environment) -> Any:
    return sys.modules[f"{env.id}_checks"]


def test_a_declared_canary_is_evidence_a_placeholder_never_and_validate_counts_tasks_without_any(
    make_env: MakeEnv,
) -> None:
    canary = env_for(make_env, "strict", "canary", "0")  # wrong, but the check scores it: evidence
    grade = canary.grade(canary.tasks("eval")[0], "two")
    assert (grade.status, grade.reward) == ("wrong", 0.0) and "ValueError" in grade.answer_fault.detail
    assert validate_env(canary, attacks=False).tasks_without_evidence == 0

    placeholder = env_for(make_env, "strict", "placeholder", "What is {{question}}?")
    task = placeholder.tasks("eval")[0]
    grade = placeholder.grade(task, "two")  # on main: the prompt raised as the reference, "faults there too"
    assert (grade.status, grade.reward) == ("env_error", None) and lacks_evidence(grade.reason), grade.reason
    assert "faults there too" not in grade.reason  # the prompt is no reference to fault "too"
    assert validate_env(placeholder, attacks=False).tasks_without_evidence == 3  # its prompts raise: none has any
    shown = subprocess.run(
        [VERIHUB, "validate", placeholder.root, "--no-attacks"], capture_output=True, text=True, timeout=120
    )
    assert "3 tasks have no evidence for the fault rule" in " ".join(shown.stdout.split()), shown.stdout
    assert placeholder.grade(task, "2").status == "ok"  # an answer the check took: evidence for this task
    blamed = placeholder.grade(task, "two")
    assert (blamed.status, blamed.reward) == ("wrong", 0.0) and "another answer" not in blamed.reason
    assert validate_env(placeholder, attacks=False).tasks_without_evidence == 2


def test_a_right_answer_still_in_flight_is_evidence_for_the_hostile_one_beside_it(make_env: MakeEnv) -> None:
    """The hostile answer faults at once; the right one of its group is still being graded (it ends only once
    the hostile one is retried). The evidence is looked for once it has ended: the fault is the answer's."""
    env = env_for(make_env, "raise_then_right", "placeholder", "What is {{question}}?")
    task = env.tasks("eval")[0]

    async def group() -> list[Any]:
        return await asyncio.gather(env.agrade(task, "2"), env.agrade(task, "RAISE"))

    right, hostile = asyncio.run(group())
    assert (right.status, right.reward) == ("ok", 1.0)
    assert (hostile.status, hostile.reward) == ("wrong", 0.0) and hostile.answer_fault is not None, hostile


@pytest.mark.parametrize("path", ["grade", "agrade"])
def test_a_jail_that_cannot_start_from_an_answers_state_is_the_answers_the_infrastructures_own_fault_is_not(
    make_env: MakeEnv, path: str
) -> None:
    for check, expected in (
        ("jail_cannot_restore", ("wrong", 0.0)),
        ("jail_killed", ("env_error", None)),
        ("grader_failed", ("env_error", None)),
    ):
        env = env_for(make_env, check)
        task = env.tasks("eval")[0]
        answer = "BOMB, and the sum is 2"  # right, but its state cannot be restored (or the jail dies under it)
        grade = env.grade(task, answer) if path == "grade" else asyncio.run(env.agrade(task, answer))
        assert (grade.status, grade.reward) == expected, grade
        if check == "jail_cannot_restore":  # the reference's state restores: the answer's state is to blame
            assert grade.answer_fault is not None and "SandboxStateError" in grade.answer_fault.detail
        else:
            assert "the infrastructure reports the fault as its own" in grade.reason


def test_a_fast_wrong_answer_is_never_evidence_against_a_right_ones_time(make_env: MakeEnv) -> None:
    """A scorer slow on right answers alone: a wrong answer's clean, fast grade says nothing of a right one's time
    (a timeout takes a right answer as evidence), so the right answer's timeout stays the environment's."""
    env = env_for(make_env, "slow_when_right", "placeholder", "What is {{question}}?", timeout=0.5)
    task = env.tasks("eval")[0]
    wrong = env.grade(task, "3")  # graded without a fault, and wrong: the adversary's to choose
    assert (wrong.status, wrong.reward) == ("wrong", 0.0)
    right = env.grade(task, task["answer"])
    assert (right.status, right.reward) == ("timeout", None), right
    assert lacks_evidence(right.reason), right.reason
    assert env.verifier.has_evidence(task)  # for a raise, the wrong answer's clean grade is evidence


def test_a_wrong_answers_clean_grade_is_evidence_for_a_raise(make_env: MakeEnv) -> None:
    """No gold and no right answer seen: another answer graded wrong without a fault shows the scorer runs on the
    task, so an answer that makes it raise is the answer's (a game graded one move at a time has no right move)."""
    env = env_for(make_env, "strict", "placeholder", "What is {{question}}?")
    task = env.tasks("eval")[0]
    assert env.grade(task, "3").status == "wrong"  # wrong, and graded without a fault
    blamed = env.grade(task, "three")  # int() raises on it
    assert (blamed.status, blamed.reward) == ("wrong", 0.0) and "ValueError" in blamed.answer_fault.detail


@pytest.mark.parametrize("path", ["grade", "agrade"])
def test_a_check_cut_off_at_its_limit_has_cleaned_up_before_its_layer_is_graded(make_env: MakeEnv, path: str) -> None:
    """On the work this started from, the cancelled check was left running: its clean-up came after the retry had
    started (or never, on a loop closed under it)."""
    env = env_for(make_env, "cleans_up", timeout=0.3)
    task = env.tasks("eval")[0]
    grade = env.grade(task, "2") if path == "grade" else asyncio.run(env.agrade(task, "2"))
    assert (grade.status, grade.reward) == ("ok", 1.0), grade  # the retry, a call of its own, answered
    assert checks_of(env).EVENTS == ["call", "cleaned", "call"]
