"""JSON answers: validity against a JSON schema, and field-by-field equality with the expected record."""

from __future__ import annotations

import json
from collections.abc import Mapping
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationInfo, model_validator

from verihub.checks._extract import find_json, sole_number
from verihub.checks.base import CheckParams, CheckResult
from verihub.errors import DataError


class JsonSchemaParams(CheckParams):
    json_schema: dict[str, Any] | None = Field(None, alias="schema", description="The JSON schema, inline.")
    schema_file: str | None = Field(None, description="Or a JSON schema file, relative to the environment.")

    @model_validator(mode="after")
    def _one_schema(self, info: ValidationInfo) -> JsonSchemaParams:
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        if (self.json_schema is None) == (self.schema_file is None):
            raise ValueError("give exactly one of 'schema' and 'schema_file'")
        if self.schema_file is not None:
            root = (info.context or {}).get("root") or Path.cwd()
            path = Path(root) / self.schema_file
            if not path.is_file():
                raise ValueError(f"schema_file {self.schema_file!r} not found (looked in {root})")
            object.__setattr__(self, "json_schema", json.loads(path.read_text()))
        try:
            Draft202012Validator.check_schema(self.json_schema)
        except SchemaError as error:
            raise ValueError(f"not a valid JSON schema: {error.message}") from None
        return self

    @cached_property
    def validator(self) -> Any:
        from jsonschema import Draft202012Validator

        return Draft202012Validator(self.json_schema)


def json_schema(completion: str, task: Mapping[str, Any], params: JsonSchemaParams) -> CheckResult:
    """The completion holds JSON (a ```json block or a bare object) that satisfies a JSON schema."""
    try:
        value = find_json(completion)
    except ValueError as error:
        return CheckResult(0.0, str(error))
    errors = sorted(params.validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        where = "/".join(map(str, errors[0].absolute_path)) or "(root)"
        return CheckResult(0.0, f"{where}: {errors[0].message}"[:200])
    return CheckResult(1.0)


class JsonFieldsParams(CheckParams):
    field: str = Field("expected", description="Column with the expected object (a dict or a JSON string).")
    fields: list[str] | None = Field(None, description="Keys to compare (default: every expected key).")
    partial: bool = Field(True, description="Score the share of matching keys; otherwise all or nothing.")
    normalize_strings: bool = Field(True, description="Compare strings ignoring case and outer spaces.")

    def columns(self) -> set[str]:
        return {self.field}


def json_fields(completion: str, task: Mapping[str, Any], params: JsonFieldsParams) -> CheckResult:
    """The JSON in the completion has the expected values, key by key (numbers compared as numbers)."""
    expected = task[params.field]
    if isinstance(expected, str):
        expected = json.loads(expected)
    if not isinstance(expected, dict):
        raise DataError(f"column {params.field!r} must hold an object, got {type(expected).__name__}")
    try:
        got = find_json(completion)
    except ValueError as error:
        return CheckResult(0.0, str(error))
    if not isinstance(got, dict):
        return CheckResult(0.0, "the JSON is not an object")
    keys = params.fields or list(expected)
    wrong = [key for key in keys if not _same(got.get(key), expected.get(key), params.normalize_strings)]
    score = 1 - len(wrong) / len(keys) if keys else 1.0
    if not params.partial and wrong:
        score = 0.0
    return CheckResult(score, f"wrong or missing: {', '.join(wrong)}" if wrong else "")


def _same(got: Any, expected: Any, normalize_strings: bool) -> bool:
    if isinstance(expected, int | float) and not isinstance(expected, bool):
        # A number written as text must state one number: "29 or 30" is a hedge, not 30.
        number = sole_number(got)[0] if isinstance(got, str) else got
        if number is None or isinstance(number, bool) or not isinstance(number, int | float | Fraction):
            return False
        try:
            return float(number) == float(expected)
        except (TypeError, ValueError, OverflowError):  # a 400-digit integer is a wrong value, not a fault
            return False
    if isinstance(expected, str) and isinstance(got, str) and normalize_strings:
        return " ".join(got.split()).casefold() == " ".join(expected.split()).casefold()
    return got == expected
