"""Loading an environment's tasks: files, Hugging Face datasets, seeded generators.

Generators and flat JSON Lines files are read as plain rows (:mod:`verihub.environment._tasktable`), without
importing `datasets`; every other source, and any rows Arrow would change, go through `datasets`.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verihub.environment._tasktable import TaskTable, plain_rows, read_jsonl
from verihub.spec.models import DATA_FILE_FORMATS, DatasetSpec, SourceKind

if TYPE_CHECKING:
    from datasets import Dataset

type Split = TaskTable | Dataset
"""One split's tasks: plain rows where the source allows, else a `datasets.Dataset`."""

__all__ = ["EmptySplitError", "Split", "SplitError", "as_dataset", "load_splits", "task_id"]

ID_COLUMN = "id"
_DATASETS_LOCK = threading.Lock()


def task_id(task: Mapping[str, Any]) -> str:
    """A task's stable id: its ``id`` column, or a hash of its content when it has none."""
    value = task.get(ID_COLUMN)
    if value is not None:
        return str(value)
    canonical = json.dumps(dict(task), sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha1(canonical.encode()).hexdigest()[:16]


def load_splits(spec: DatasetSpec, root: Path) -> dict[str, Split]:
    """Every split named in the spec, each with an ``id`` column.

    Fractional splits are carved from one seeded shuffle of the whole source, so they never overlap
    and do not change between runs (the same rows and order whether read as plain rows or by `datasets`).
    """
    generated = _generate(spec) if spec.kind is SourceKind.GENERATOR else None
    rows = _plain(spec, root, generated)
    if rows is not None:
        return _carve(_with_ids(TaskTable(rows)), spec)
    import datasets

    # One load through `datasets` at a time in a process: concurrent loads (validated pushes in threads) broke in
    # its progress bars (tqdm's thread_map deletes a lock another bar is using), and the switch below is global.
    with _DATASETS_LOCK:
        quiet = datasets.are_progress_bars_disabled()
        datasets.disable_progress_bars()  # loading a spec's data is not worth a progress bar
        try:
            return _load(spec, root, datasets, generated)
        finally:
            if not quiet:
                datasets.enable_progress_bars()


def as_dataset(split: Split) -> Dataset:
    """A split as a `datasets.Dataset` (built from its plain rows on first use)."""
    return split.dataset() if isinstance(split, TaskTable) else split


def _plain(spec: DatasetSpec, root: Path, generated: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    if generated is not None:
        return plain_rows(generated)
    if spec.kind is SourceKind.FILE and spec.source.endswith(".jsonl"):
        return read_jsonl(root / spec.source)
    return None


def _load(spec: DatasetSpec, root: Path, datasets: Any, generated: list[dict[str, Any]] | None) -> dict[str, Dataset]:
    if spec.kind is SourceKind.HUB:
        loaded = datasets.load_dataset(spec.source, name=spec.config)
        names = {name: value for name, value in spec.split.items() if isinstance(value, str)}
        if names:
            return {name: _with_ids(loaded[source]) for name, source in names.items()}
        whole = loaded["train"]
    elif spec.kind is SourceKind.FILE:
        path = root / spec.source
        builder = DATA_FILE_FORMATS[path.suffix]
        whole = datasets.load_dataset(builder, data_files=str(path), split="train")
    else:
        whole = datasets.Dataset.from_list(generated)
    return _carve(_with_ids(whole), spec)


def _generate(spec: DatasetSpec) -> list[dict[str, Any]]:
    module_name, _, attribute = spec.source.partition(":")
    make = getattr(importlib.import_module(module_name), attribute)
    rows = list(make(n=spec.size, seed=spec.seed, **spec.args))
    if not rows or not all(isinstance(row, Mapping) for row in rows):
        raise ValueError(f"generator {spec.source!r} must yield mappings (one per task); got {rows[:1]!r}")
    return [dict(row) for row in rows]


def _with_ids(dataset: Any) -> Any:  # a Dataset or a TaskTable (the same calls)
    if ID_COLUMN in dataset.column_names:
        return dataset
    return dataset.add_column(ID_COLUMN, [task_id(row) for row in dataset])


def _carve(whole: Any, spec: DatasetSpec) -> dict[str, Any]:
    shuffled = whole.shuffle(seed=spec.seed) if len(spec.split) > 1 else whole
    groups = iter(_groups(shuffled, spec.group_by))
    splits: dict[str, Any] = {}
    total = len(whole)
    taken = 0
    for name, fraction in spec.split.items():
        # Whole groups, in shuffled order, until the split holds its share of the tasks.
        target = min(taken + round(total * float(fraction)), total)
        rows: list[int] = []
        while taken < target and (group := next(groups, None)) is not None:
            rows += group
            taken += len(group)
        if not rows:
            raise EmptySplitError(
                name,
                f"split {name!r} gets no tasks ({fraction} of {total} rounds to none "
                f"after the splits before it); add tasks or raise its fraction",
            )
        splits[name] = shuffled.select(rows)
    return splits


def _groups(shuffled: Any, column: str | None) -> list[list[int]]:
    """Row indices grouped by ``column`` (each row alone without one), groups in order of first row."""
    if column is None:
        return [[index] for index in range(len(shuffled))]
    if column not in shuffled.column_names:
        raise SplitError(
            ("dataset", "group_by"),
            f"group_by column {column!r} is not a dataset column (columns: {', '.join(sorted(shuffled.column_names))})",
        )
    groups: dict[str, list[int]] = {}
    for index, value in enumerate(shuffled[column]):
        groups.setdefault(json.dumps(value, sort_keys=True, default=str), []).append(index)
    return list(groups.values())


class SplitError(ValueError):
    """Splitting the tasks failed; ``loc`` is the spec field to blame."""

    def __init__(self, loc: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc


class EmptySplitError(SplitError):
    """A fractional split that comes out empty; ``split`` names it."""

    def __init__(self, split: str, message: str) -> None:
        super().__init__(("dataset", "split", split), message)
        self.split = split
