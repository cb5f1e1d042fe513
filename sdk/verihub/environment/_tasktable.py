"""Tasks as plain rows, read without importing `datasets` (about half a second) where that changes nothing.

A generator's rows and a JSON Lines file's rows are kept as Python dicts when Arrow would store them as
they are: every row has the same keys, and each column holds one scalar type (``str``, ``int`` within
int64, ``bool``; ``float`` from a generator) or None, and the source is of modest size. Any other shape
(nested values, mixed types, strings Arrow reads as timestamps, ...) returns None and the caller loads
through `datasets`, whose reading then decides. The `datasets.Dataset` form of a table is built from these very rows
when asked
for (:meth:`TaskTable.dataset`), so what validation grades and what a trainer gets cannot differ.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    from datasets import Dataset

__all__ = ["TaskTable", "plain_rows", "read_jsonl"]

_INT64 = range(-(1 << 63), 1 << 63)
# Past these the rows go to `datasets` anyway: its Arrow reader is faster on big files, and its tables are
# memory-mapped where Python dicts would be held in memory.
MAX_PLAIN_ROWS = 100_000
MAX_PLAIN_BYTES = 32 << 20
# pyarrow's JSON reader turns a string like "2020-01-01 10:00:00" into a timestamp; leave any string that
# starts like a date to it.
_DATE_LIKE = re.compile(r"\s*[+-]?\d{4,}-\d\d-\d\d")


class _Base:
    """The rows a table's views share, and their one `datasets.Dataset` (built on first use)."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self._dataset: Dataset | None = None

    def dataset(self) -> Dataset:
        if self._dataset is None:
            import datasets

            self._dataset = datasets.Dataset.from_list(self.rows)
        return self._dataset


class TaskTable(Sequence[dict[str, Any]]):
    """A split's tasks: a view (row indices) of shared plain rows. The part of `datasets.Dataset` that
    carving splits uses (``column_names``, ``select``, ``shuffle``, ``add_column``, a column by name);
    each row read is a fresh dict, so a caller that edits one changes no other reader's task."""

    def __init__(
        self, rows: list[dict[str, Any]], indices: Sequence[int] | None = None, *, _base: _Base | None = None
    ) -> None:
        self._base = _base or _Base(rows)
        self._indices = list(range(len(rows))) if indices is None else list(indices)
        self._dataset: Dataset | None = None

    @property
    def column_names(self) -> list[str]:
        return list(self._base.rows[0]) if self._base.rows else []

    def __len__(self) -> int:
        return len(self._indices)

    @overload
    def __getitem__(self, key: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, key: slice) -> list[dict[str, Any]]: ...
    @overload
    def __getitem__(self, key: str) -> list[Any]: ...

    def __getitem__(self, key: int | slice | str) -> Any:
        rows = self._base.rows
        if isinstance(key, str):  # a column, as `datasets` gives it
            if rows and key not in rows[0]:
                raise KeyError(key)
            return [rows[index][key] for index in self._indices]
        if isinstance(key, slice):
            return [dict(rows[index]) for index in self._indices[key]]
        return dict(rows[self._indices[key]])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        rows = self._base.rows
        return (dict(rows[index]) for index in self._indices)

    def select(self, indices: Sequence[int]) -> TaskTable:
        return TaskTable(self._base.rows, [self._indices[index] for index in indices], _base=self._base)

    def shuffle(self, seed: int) -> TaskTable:
        """The order `datasets.Dataset.shuffle(seed=...)` gives: NumPy's default generator's permutation."""
        if not self._indices:
            return self
        import numpy

        return self.select([int(index) for index in numpy.random.default_rng(seed).permutation(len(self))])

    def add_column(self, name: str, values: Sequence[Any]) -> TaskTable:
        """The rows with one more column (last), as a new table over all of them (tables carve after this)."""
        assert len(self._indices) == len(self._base.rows), "add columns before selecting rows"
        return TaskTable([{**row, name: value} for row, value in zip(self._base.rows, values, strict=True)])

    def dataset(self) -> Dataset:
        """These tasks as a `datasets.Dataset`: the shared rows' Dataset, these rows selected (once)."""
        if self._dataset is None:
            whole = self._base.dataset()
            self._dataset = whole if self._indices == list(range(len(self._base.rows))) else whole.select(self._indices)
        return self._dataset


def plain_rows(rows: Sequence[Mapping[str, Any]], *, parsed_json: bool = False) -> list[dict[str, Any]] | None:
    """``rows`` as dicts with their keys in the first row's order, if Arrow keeps every value as it is;
    else None. ``parsed_json`` for rows parsed from JSON text, which pyarrow's reader would read instead:
    it parses floats its own way and reads some strings as timestamps, so rows with either are left to it."""
    if not rows or len(rows) > MAX_PLAIN_ROWS:
        return None
    keys = list(rows[0])
    if not all(type(key) is str for key in keys):
        return None
    kinds: dict[str, type] = {}
    allowed = (str, int, bool) if parsed_json else (str, int, bool, float)
    out: list[dict[str, Any]] = []
    for row in rows:
        if type(row) is not dict or len(row) != len(keys):
            return None
        for key in keys:
            if key not in row:
                return None
            value = row[key]
            if value is None:
                continue
            kind = type(value)
            if kind not in allowed or kinds.setdefault(key, kind) is not kind:
                return None
            if kind is int and value not in _INT64:
                return None
            if kind is str and (
                (not value.isascii() and not _utf8(value)) or (parsed_json and _DATE_LIKE.match(value))
            ):
                return None
        out.append(row if list(row) == keys else {key: row[key] for key in keys})
    return out


def read_jsonl(path: Path) -> list[dict[str, Any]] | None:
    """A JSON Lines file's rows, or None where `datasets` (pyarrow's reader) might read it differently
    or refuse it (then it is the one to read it, and to name what is wrong)."""
    try:
        if path.stat().st_size > MAX_PLAIN_BYTES:
            return None
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    rows: list[dict[str, Any]] = []
    try:
        for line in text.split("\n"):
            if line.strip():
                rows.append(json.loads(line, object_pairs_hook=_unique_keys, parse_constant=_refuse))
    except ValueError:  # JSONDecodeError included
        return None
    return plain_rows(rows, parsed_json=True)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    row = dict(pairs)
    if len(row) != len(pairs):
        raise ValueError("a key given twice")  # pyarrow refuses the row
    return row


def _refuse(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")  # NaN, Infinity: pyarrow refuses them


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: Arrow cannot store it
        return False
    return True
