"""Tasks read as plain rows (no `datasets` import): the same rows, order, splits and Dataset as `datasets`
gives, and any source whose rows Arrow would change is left to `datasets`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import verihub
from conftest import BASE_SPEC, REPO, MakeEnv

ROWS = [
    {
        "id": f"t{n}",
        "question": f"{n} + {n}",
        "answer": str(2 * n),
        "wrong": "0",
        "level": n % 3,
        "hard": n % 2 == 0,
        "note": None if n % 4 else "four",
    }
    for n in range(12)
]


def _rows_as_datasets_reads(path: Path) -> tuple[list[dict[str, Any]], Any]:
    import datasets

    whole = datasets.load_dataset("json", data_files=str(path), split="train")
    return list(whole), whole.features


def test_flat_jsonl_gives_the_rows_splits_and_features_datasets_gives(make_env: MakeEnv) -> None:
    import datasets

    root = make_env(rows=ROWS)
    env = verihub.load_env(root)
    expected, features = _rows_as_datasets_reads(root / "data" / "tasks.jsonl")
    order = datasets.Dataset.from_list(expected).shuffle(seed=0)  # the spec's seed: the carve's shuffle
    assert [task["id"] for task in env.tasks("train")] == order["id"][:6]
    assert [task["id"] for task in env.tasks("eval")] == order["id"][6:]
    for split in ("train", "eval"):
        assert list(env.tasks(split)) == list(env.dataset(split))
        assert env.dataset(split).features == features
    assert sorted([*env.tasks("train"), *env.tasks("eval")], key=lambda t: t["id"]) == sorted(
        expected, key=lambda t: t["id"]
    )


def test_generator_splits_are_datasets_shuffle_of_its_rows() -> None:
    import datasets
    from arithmetic_env.gen import make

    env = verihub.load_env(REPO / "envs" / "arithmetic")
    order = datasets.Dataset.from_list(list(make(n=600, seed=7, levels=[1, 2, 3]))).shuffle(seed=7)
    assert [task["id"] for task in env.tasks("train")] == order["id"][:480]
    assert list(env.tasks("eval")) == list(order.select(range(480, 600)))
    assert list(env.dataset("eval")) == list(order.select(range(480, 600)))


@pytest.mark.parametrize(
    "rows",
    [
        [
            {"id": "a", "question": "1", "answer": 1, "wrong": "0"},
            {"id": "b", "question": "2", "answer": 2.5, "wrong": "0"},
        ],
        [{"id": "a", "question": "1", "answer": "1", "wrong": "0", "when": "2024-05-01 12:00:01"}],
        [{"id": "a", "question": "1", "answer": "1", "wrong": "0", "facts": ["x", "y"]}],
        [
            {"id": "a", "question": "1", "answer": "1", "wrong": "0"},
            {"id": "b", "question": "2", "answer": "2", "wrong": "0", "extra": 1},
        ],
        [
            {"id": "a", "question": "1", "answer": 1.5, "wrong": "0"},
            {"id": "b", "question": "2", "answer": 0.1, "wrong": "0"},
        ],
        [{"id": "a", "question": "1", "answer": "1", "wrong": "0", "big": 1 << 64}],
        [
            {"id": "a", "question": "1", "answer": True, "wrong": "0"},
            {"id": "b", "question": "2", "answer": 1, "wrong": "0"},
        ],
    ],
    ids=["int-and-float", "timestamp", "nested", "ragged", "floats", "beyond-int64", "bool-and-int"],
)
def test_rows_arrow_would_change_are_read_by_datasets(rows: list[dict[str, Any]], make_env: MakeEnv) -> None:
    """What validation grades (tasks) is what a trainer gets (dataset), value for value, type for type."""
    spec = BASE_SPEC.replace("{train: 0.5, eval: 0.5}", "{train: 1.0}")
    env = verihub.load_env(make_env(spec, rows=rows * 2 if len(rows) > 1 else rows * 4))
    tasks, served = list(env.tasks("train")), list(env.dataset("train"))
    assert [{k: (type(v), v) for k, v in task.items()} for task in tasks] == [
        {k: (type(v), v) for k, v in task.items()} for task in served
    ]


def test_a_duplicate_key_or_a_bad_line_is_still_the_spec_error_datasets_gives(make_env: MakeEnv) -> None:
    root = make_env()
    (root / "data" / "tasks.jsonl").write_text(
        '{"id": "a", "question": "1", "answer": "1", "answer": "2", "wrong": "0"}\n'
    )
    with pytest.raises(verihub.SpecError, match="cannot load tasks from 'data/tasks.jsonl'"):
        verihub.load_env(root)


def test_a_task_edited_by_its_reader_stays_as_published(make_env: MakeEnv) -> None:
    env = verihub.load_env(make_env(rows=ROWS))
    first = env.tasks("train")[0]
    first["answer"] = "forged"
    next(iter(env.tasks("train")))["answer"] = "forged"
    assert env.tasks("train")[0]["answer"] != "forged" and env.dataset("train")[0]["answer"] != "forged"
    assert json.dumps(env.tasks("train")[0])  # a plain dict: serializable as it is


def test_a_big_source_is_left_to_datasets(make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past a size Python rows would cost more memory and time than Arrow's memory-mapped tables."""
    import verihub.environment._tasktable as tasktable

    monkeypatch.setattr(tasktable, "MAX_PLAIN_BYTES", 200)
    env = verihub.load_env(make_env(rows=ROWS))
    assert not isinstance(env.tasks("train"), tasktable.TaskTable)
    assert list(env.tasks("train")) == list(env.dataset("train"))
    monkeypatch.setattr(tasktable, "MAX_PLAIN_BYTES", 1 << 20)
    monkeypatch.setattr(tasktable, "MAX_PLAIN_ROWS", 5)
    assert not isinstance(verihub.load_env(make_env(rows=ROWS, name="rows")).tasks("train"), tasktable.TaskTable)
    monkeypatch.setattr(tasktable, "MAX_PLAIN_ROWS", 100)
    assert isinstance(verihub.load_env(make_env(rows=ROWS, name="small")).tasks("train"), tasktable.TaskTable)
