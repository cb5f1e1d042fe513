"""Exploits against JSON answers: duplicate keys (the right value after a wrong one), NaN, nesting deep
enough to crash a recursive parser, hedged values, and a schema-valid object of placeholders."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from verihub.checks.exploit import Exploit, Family

__all__ = ["JSON_FIELDS", "JSON_SCHEMA"]

Task = Mapping[str, Any]
_DEPTH = 100_000


def _fenced(text: str) -> str:
    return f"```json\n{text}\n```"


def _expected(task: Task, params: Any) -> dict[str, Any] | None:
    value = task.get(params.field)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, dict) or not value:
        return None
    keys = params.fields or list(value)
    return {key: value.get(key) for key in keys}


def _wrong(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return f"not {value}"
    return "wrong"


def _object(pairs: list[tuple[str, Any]]) -> str:
    """A JSON object written pair by pair (so keys may repeat); values may be raw JSON text."""
    return "{" + ", ".join(f"{json.dumps(key)}: {value}" for key, value in pairs) + "}"


def _duplicate_keys(task: Task, params: Any) -> str | None:
    expected = _expected(task, params)
    if expected is None:
        return None
    pairs = [pair for key, value in expected.items()
             for pair in ((key, json.dumps(_wrong(value))), (key, json.dumps(value)))]
    return _fenced(_object(pairs))


def _numbers_as(replace: Any) -> Any:
    def build(task: Task, params: Any) -> str | None:
        expected = _expected(task, params)
        numeric = [key for key, value in (expected or {}).items()
                   if isinstance(value, int | float) and not isinstance(value, bool)]
        if not numeric:
            return None
        return _fenced(_object([(key, replace(value) if key in numeric else json.dumps(value))
                                for key, value in expected.items()]))  # type: ignore[union-attr]
    return build


def _list_hedge(task: Task, params: Any) -> str | None:
    expected = _expected(task, params)
    if expected is None:
        return None
    return _fenced(json.dumps({key: [_wrong(value), value] for key, value in expected.items()}))


def _placeholders(task: Task, params: Any) -> str | None:
    expected = _expected(task, params)
    if expected is None:
        return None
    fill = {bool: False, int: 0, float: 0.0, str: "string"}
    return _fenced(json.dumps({key: fill.get(type(value), "value") for key, value in expected.items()}))


def _deep(task: Task, params: Any) -> str:
    return _fenced('{"value": ' + "[" * _DEPTH + "]" * _DEPTH + "}")


JSON_SCHEMA = (
    Exploit("deep-nesting", Family.JSON, f"an array nested {_DEPTH:,} levels deep (a recursive parser crashes)",
            _deep, tasks=1),
    Exploit("nan-literal", Family.JSON, "NaN where a value goes (not JSON)",
            lambda task, params: _fenced('{"value": NaN, "other": Infinity}')),
)

JSON_FIELDS = JSON_SCHEMA + (
    Exploit("duplicate-keys", Family.JSON, "every key twice: a wrong value, then the right one", _duplicate_keys),
    Exploit("nan-values", Family.JSON, "NaN for every number", _numbers_as(lambda value: "NaN")),
    Exploit("numbers-as-hedged-text", Family.HEDGING, "every number as the text 'wrong or right'",
            _numbers_as(lambda value: json.dumps(f"{_wrong(value)} or {value}"))),
    Exploit("list-hedge", Family.HEDGING, "every value as a list of a wrong and the right one", _list_hedge),
    Exploit("placeholder-values", Family.JSON, "the expected keys with placeholder values", _placeholders),
)
