"""Exploits against JSON answers: duplicate keys (the right value after a wrong one), NaN, nesting deep
enough to crash a recursive parser, integers past Python's digit limit, hedged values (a second object in a
plain block, lists of candidates), numbers that read as the right one to a careless parser (1e-400 for 0,
"–5" for 5, "5 + 5"), and a schema-valid object of placeholders. Where only some fields carry the attack,
the others are wrong, so that partial credit (``json_fields`` scores the share of right keys) comes from
the attack alone."""

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
    pairs = [
        pair for key, value in expected.items() for pair in ((key, json.dumps(_wrong(value))), (key, json.dumps(value)))
    ]
    return _fenced(_object(pairs))


def _numbers_as(replace: Any, applies: Any = lambda value: True) -> Any:
    """Every number (that ``applies``) written by ``replace`` as raw JSON; every other value wrong."""

    def build(task: Task, params: Any) -> str | None:
        expected = _expected(task, params)
        numeric = [
            key
            for key, value in (expected or {}).items()
            if isinstance(value, int | float) and not isinstance(value, bool) and applies(value)
        ]
        if not numeric or expected is None:
            return None
        return _fenced(
            _object(
                [
                    (key, replace(value) if key in numeric else json.dumps(_wrong(value)))
                    for key, value in expected.items()
                ]
            )
        )

    return build


def _then_plain_block(task: Task, params: Any) -> str | None:
    expected = _expected(task, params)
    if expected is None:
        return None
    wrong = {key: _wrong(value) for key, value in expected.items()}
    return f"{_fenced(json.dumps(expected))}\nOr perhaps:\n```\n{json.dumps(wrong)}\n```"


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
    placeholders = {key: fill.get(type(value), "value") for key, value in expected.items()}
    return _fenced(
        json.dumps(
            {key: _wrong(value) if placeholders[key] == value else placeholders[key] for key, value in expected.items()}
        )
    )


def _deep(task: Task, params: Any) -> str:
    return _fenced('{"value": ' + "[" * _DEPTH + "]" * _DEPTH + "}")


JSON_SCHEMA = (
    Exploit(
        "deep-nesting",
        Family.JSON,
        f"an array nested {_DEPTH:,} levels deep (a recursive parser crashes)",
        _deep,
        tasks=1,
    ),
    Exploit(
        "nan-literal",
        Family.JSON,
        "NaN where a value goes (not JSON)",
        lambda task, params: _fenced('{"value": NaN, "other": Infinity}'),
    ),
    Exploit(
        "huge-integer",
        Family.JSON,
        "a 5,000-digit integer (past Python's int conversion limit)",
        lambda task, params: _fenced('{"value": ' + "9" * 5000 + "}"),
        tasks=1,
    ),
)

JSON_FIELDS = JSON_SCHEMA + (
    Exploit("duplicate-keys", Family.JSON, "every key twice: a wrong value, then the right one", _duplicate_keys),
    Exploit("nan-values", Family.JSON, "NaN for every number", _numbers_as(lambda value: "NaN")),
    Exploit(
        "numbers-as-hedged-text",
        Family.HEDGING,
        "every number as the text 'wrong or right'",
        _numbers_as(lambda value: json.dumps(f"{_wrong(value)} or {value}")),
    ),
    Exploit("list-hedge", Family.HEDGING, "every value as a list of a wrong and the right one", _list_hedge),
    Exploit("placeholder-values", Family.JSON, "the expected keys with placeholder values", _placeholders),
    Exploit(
        "json-then-plain-block",
        Family.HEDGING,
        "the right object in a ```json block, a wrong one in a plain block after it",
        _then_plain_block,
    ),
    Exploit(
        "underflow-to-zero",
        Family.NUMERIC_ABUSE,
        "1e-400 for every number that is 0 (a float reads 0.0)",
        _numbers_as(lambda value: "1e-400", lambda value: value == 0),
    ),
    Exploit(
        "dash-minus-text",
        Family.NUMERIC_ABUSE,
        'minus every positive number, as text with an en dash ("–5")',
        _numbers_as(lambda value: json.dumps(f"\u2013{value}"), lambda value: value > 0),
    ),
    Exploit(
        "sum-as-text",
        Family.NUMERIC_ABUSE,
        'every non-zero number added to itself, as text ("5 + 5")',
        _numbers_as(lambda value: json.dumps(f"{value} + {value}"), lambda value: value != 0),
    ),
)
