"""Comparing two query results: as multisets of rows, or as sequences when the question asks for an order.

Numbers compare with a small tolerance (so ``3`` equals ``3.0`` and float sums may differ in the last bits);
text, NULL and blobs compare exactly. Column names are ignored; the number and order of columns count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["compare_results", "same_row", "same_value"]

Row = Sequence[Any]
_GREEDY_LIMIT = 400  # rows; above it only the sorted comparison runs


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def same_value(a: Any, b: Any, rel_tol: float = 1e-6, abs_tol: float = 1e-6) -> bool:
    if _is_number(a) and _is_number(b):
        return a == b or math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)
    return type(a) is type(b) and a == b


def same_row(a: Row, b: Row, rel_tol: float = 1e-6, abs_tol: float = 1e-6) -> bool:
    return len(a) == len(b) and all(same_value(x, y, rel_tol, abs_tol) for x, y in zip(a, b, strict=True))


def _key(row: Row) -> tuple[tuple[int, Any], ...]:
    def one(value: Any) -> tuple[int, Any]:
        if value is None:
            return (0, 0)
        if _is_number(value):
            return (1, float(value))
        if isinstance(value, str):
            return (2, value)
        return (3, repr(value))

    return tuple(one(value) for value in row)


def _show(row: Row) -> str:
    text = repr(list(row))
    return text if len(text) <= 160 else text[:157] + "..."


def _same_multiset(expected: list[Row], got: list[Row], rel_tol: float, abs_tol: float) -> tuple[bool, str]:
    want, have = sorted(expected, key=_key), sorted(got, key=_key)
    first_difference = next(
        (i for i, (a, b) in enumerate(zip(want, have, strict=True)) if not same_row(a, b, rel_tol, abs_tol)), None
    )
    if first_difference is None:
        return True, ""
    if len(want) <= _GREEDY_LIMIT:
        # Values within the tolerance can sort apart; match greedily before giving up.
        unmatched = list(want)
        for row in have:
            index = next(
                (i for i, candidate in enumerate(unmatched) if same_row(candidate, row, rel_tol, abs_tol)), None
            )
            if index is None:
                break
            unmatched.pop(index)
        else:
            return True, ""
    missing = [row for row in want if not any(same_row(row, other, rel_tol, abs_tol) for other in have)]
    extra = [row for row in have if not any(same_row(row, other, rel_tol, abs_tol) for other in want)]
    parts = []
    if missing:
        parts.append(f"{len(missing)} expected rows missing, e.g. {_show(missing[0])}")
    if extra:
        parts.append(f"{len(extra)} unexpected rows, e.g. {_show(extra[0])}")
    if not parts:
        parts.append("the same rows but with different multiplicities (duplicates)")
    return False, "; ".join(parts)


def compare_results(
    expected: list[Row],
    got: list[Row],
    *,
    ordered: bool,
    rel_tol: float = 1e-6,
    abs_tol: float = 1e-6,
    expected_columns: int | None = None,
    got_columns: int | None = None,
) -> tuple[bool, str]:
    """``(True, "")`` when ``got`` matches ``expected``, else ``(False, why)``."""
    width_expected = expected_columns if expected_columns is not None else (len(expected[0]) if expected else None)
    width_got = got_columns if got_columns is not None else (len(got[0]) if got else None)
    if width_expected is not None and width_got is not None and width_expected != width_got:
        return False, f"expected {width_expected} columns, got {width_got}"
    if len(expected) != len(got):
        return False, f"expected {len(expected)} rows, got {len(got)}"
    if not ordered:
        return _same_multiset(list(expected), list(got), rel_tol, abs_tol)
    for index, (want, have) in enumerate(zip(expected, got, strict=True)):
        if not same_row(want, have, rel_tol, abs_tol):
            same_rows, _ = _same_multiset(list(expected), list(got), rel_tol, abs_tol)
            if same_rows:
                return (
                    False,
                    f"the right rows in the wrong order (first at row {index + 1}: expected {_show(want)}, got "
                    f"{_show(have)})",
                )
            return False, f"row {index + 1} differs: expected {_show(want)}, got {_show(have)}"
    return True, ""
