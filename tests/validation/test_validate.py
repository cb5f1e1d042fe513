"""`verihub validate`'s own checks beyond gold answers and exploits."""

from __future__ import annotations

import verihub
from conftest import TASKS, MakeEnv
from verihub.validation.validate import validate_env


def test_a_held_out_task_that_repeats_a_training_prompt_fails_validation(make_env: MakeEnv) -> None:
    # Every question twice under two ids (once with other spacing and case): a seeded split puts some
    # pairs across train and eval, and those eval rates would measure memory.
    rows = [
        *TASKS,
        *({**row, "id": row["id"] + "-again", "question": row["question"].replace(" ", "  ").upper()} for row in TASKS),
    ]
    env = verihub.load_env(make_env(rows=rows))
    report = validate_env(env, attacks=False)
    train_ids = set(env.dataset("train")["id"])
    crossing = {
        row["id"]
        for row in env.dataset("eval")
        if (row["id"].removesuffix("-again") in train_ids or row["id"] + "-again" in train_ids)
    }
    assert crossing and report.held_out_repeats == len(crossing) and not report.ok
    assert any(
        "poses the same prompt as train task" in failure and "dataset.group_by" in failure
        for failure in report.failures
    )


def test_an_environment_without_repeats_passes(make_env: MakeEnv) -> None:
    report = validate_env(verihub.load_env(make_env()), attacks=False)
    assert report.held_out_repeats == 0 and report.ok, report.failures
