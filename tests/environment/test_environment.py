"""Environments: loading by path and by installed name, splits, rendering, grading."""

from __future__ import annotations

from pathlib import Path

import pytest

import verihub
from conftest import BASE_SPEC, REPO, MakeEnv
from verihub import EnvNotFoundError, GradeStatus, SpecError


def test_load_by_path_renders_and_grades(make_env: MakeEnv) -> None:
    env = verihub.load_env(make_env())
    assert (env.id, env.version, env.domain) == ("tiny", "0.1.0", "math")
    task = env.dataset("eval")[0]
    assert env.render(task) == [
        {"role": "system", "content": "Answer in \\boxed{}."},
        {"role": "user", "content": f"What is {task['question']}?"},
    ]
    assert env.grade(task, env.reference(task)).status is GradeStatus.OK
    assert env.grade(task, env.negatives(task)[0]).status is GradeStatus.WRONG


def test_grade_accepts_chat_messages(make_env: MakeEnv) -> None:
    env = verihub.load_env(make_env())
    task = env.dataset("train")[0]
    messages = [*env.render(task), {"role": "assistant", "content": env.reference(task)}]
    assert env.grade(task, messages).passed
    with pytest.raises(ValueError, match="no assistant message"):
        env.grade(task, env.render(task))


async def test_agrade(make_env: MakeEnv) -> None:
    env = verihub.load_env(make_env())
    task = env.dataset("train")[0]
    assert (await env.agrade(task, env.reference(task))).passed


def test_fractional_splits_are_disjoint_complete_and_deterministic(make_env: MakeEnv) -> None:
    root = make_env()
    first, second = verihub.load_env(root), verihub.load_env(root)
    train, evaluation = list(first.dataset("train")["id"]), list(first.dataset("eval")["id"])
    assert not set(train) & set(evaluation) and len(train) + len(evaluation) == 8
    assert train == list(second.dataset("train")["id"])
    with pytest.raises(KeyError, match="splits: train, eval"):
        first.dataset("test")


def test_a_split_that_comes_out_empty_is_a_spec_error_naming_it(make_env: MakeEnv) -> None:
    root = make_env(BASE_SPEC.replace("{train: 0.5, eval: 0.5}", "{train: 0.95, eval: 0.05}"))
    with pytest.raises(SpecError, match=r"dataset\.split\.eval.*split 'eval' gets no tasks \(0\.05 of 8"):
        verihub.load_env(root)


def test_group_by_keeps_equivalent_tasks_in_one_split(make_env: MakeEnv) -> None:
    rows = [
        {
            "id": f"t{a}-{b}",
            "question": f"{a} + {b}",
            "answer": str(a + b),
            "wrong": "0",
            "pair": f"{min(a, b)}+{max(a, b)}",
        }
        for a in range(6)
        for b in range(6)
    ]
    grouped = BASE_SPEC.replace("{train: 0.5, eval: 0.5}", "{train: 0.75, eval: 0.25}\n  group_by: pair")
    env = verihub.load_env(make_env(grouped, rows=rows))
    pairs = {split: set(env.dataset(split)["pair"]) for split in ("train", "eval")}
    assert not pairs["train"] & pairs["eval"]
    assert len(env.dataset("train")) + len(env.dataset("eval")) == 36 and 7 <= len(env.dataset("eval")) <= 10
    # Without group_by the same seed splits twins apart: the option is what keeps them together.
    plain = verihub.load_env(make_env(grouped.replace("\n  group_by: pair", ""), rows=rows, name="plain"))
    assert set(plain.dataset("train")["pair"]) & set(plain.dataset("eval")["pair"])


def test_group_by_names_a_missing_column(make_env: MakeEnv) -> None:
    root = make_env(BASE_SPEC.replace("{train: 0.5, eval: 0.5}", "{train: 0.5, eval: 0.5}\n  group_by: pairs"))
    with pytest.raises(
        SpecError, match=r"environment.yaml:\d+: dataset\.group_by: group_by column 'pairs' is not a dataset column"
    ):
        verihub.load_env(root)


def test_rows_without_ids_get_stable_content_ids(make_env: MakeEnv) -> None:
    rows = [{"question": "1 + 1", "answer": "2", "wrong": "3"}, {"question": "2 + 2", "answer": "4", "wrong": "5"}]
    envs = [verihub.load_env(make_env(rows=rows, name=f"e{i}")) for i in range(2)]
    ids = [sorted([*env.dataset("train")["id"], *env.dataset("eval")["id"]]) for env in envs]
    assert ids[0] == ids[1] and len(set(ids[0])) == 2


def test_generator_source_is_seeded(make_env: MakeEnv) -> None:
    spec = (REPO / "envs/arithmetic/environment.yaml").read_text()
    root = make_env(spec.replace("size: 600", "size: 30"))
    a = list(verihub.load_env(root).dataset("train")["question"])
    b = list(verihub.load_env(root).dataset("train")["question"])
    assert a == b and len(a) == 24
    other_seed = verihub.load_env(
        make_env(spec.replace("size: 600", "size: 30").replace("seed: 7", "seed: 8"), name="b")
    )
    assert list(other_seed.dataset("train")["question"]) != a


def test_arithmetic_difficulty_levels() -> None:
    from arithmetic_env.gen import make

    rows = list(make(n=9, seed=1, levels=[1, 3]))
    assert {row["difficulty"] for row in rows} == {1, 3}
    with pytest.raises(ValueError, match="levels must be among"):
        list(make(n=1, seed=1, levels=[4]))


def test_installed_environment_loads_by_name() -> None:
    verihub.load_env(REPO / "envs/arithmetic")  # puts the source tree on sys.path: the name must still win
    env = verihub.load_env("arithmetic")
    assert env.root != REPO / "envs/arithmetic"  # the installed copy, not the source tree
    task = env.dataset("eval")[0]
    assert env.grade(task, env.reference(task)).passed


def test_unknown_name_suggests_close_installed_names() -> None:
    with pytest.raises(EnvNotFoundError, match="Did you mean 'arithmetic'") as caught:
        verihub.load_env("arithmetik")
    assert "math-word" in caught.value.available


def test_directory_without_spec_says_so(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no such file"):
        verihub.load_env(tmp_path)


def test_custom_check_by_import_path_from_the_env_module(make_env: MakeEnv) -> None:
    spec = """\
id: custom
version: 1.0.0
domain: demo
description: Uses a check from its own module.
dataset: {source: data/tasks.jsonl}
prompt: {user: "{question}"}
verifier:
  - {name: mine, layer: check, use: "custom_env_checks:always_half", args: {bonus: 0.25}}
gold: {reference: "{answer}"}
"""
    module = "def always_half(completion, task, bonus=0.0):\n    return 0.5 + bonus\n"
    env = verihub.load_env(make_env(spec, files={"custom_env_checks.py": module}))
    task = env.dataset("train")[0]
    assert env.grade(task, "x").reward == pytest.approx(0.75)
