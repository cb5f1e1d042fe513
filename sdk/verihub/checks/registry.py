"""Finding a check by name: built in, published by an installed package, or imported by path."""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from verihub.checks.base import Check, Mode, as_check
from verihub.errors import CheckNotFoundError, describe_error

__all__ = ["BUILTIN_CHECKS", "ENTRY_POINT_GROUP", "available_check_names", "resolve_check"]

ENTRY_POINT_GROUP = "verihub.checks"
"""Entry-point group where packages publish checks: ``name = "package.module:function"``."""


# Every built-in check: name -> (module in verihub.checks, function, params model, mode, the exploits known
# against it as "module:attribute" in verihub.checks.attacks; `verihub validate` runs them). A check's
# modules are imported when it is first looked up, so loading an environment pays only for the checks it uses.
_BUILTINS: dict[str, tuple[str, str, str, Mode, str | None]] = {
    "exact": ("text", "exact", "ExactParams", "inline", "answers:EXACT"),
    "numeric": ("numeric", "numeric", "NumericParams", "inline", "answers:NUMERIC"),
    "math": ("symbolic", "math_equivalent", "MathParams", "process", "answers:MATH"),
    "regex": ("text", "regex", "RegexParams", "inline", None),
    "multiple_choice": ("text", "multiple_choice", "MultipleChoiceParams", "inline", "answers:MULTIPLE_CHOICE"),
    "json_schema": ("structured", "json_schema", "JsonSchemaParams", "inline", "structured:JSON_SCHEMA"),
    "json_fields": ("structured", "json_fields", "JsonFieldsParams", "inline", "structured:JSON_FIELDS"),
    "xml_tags": ("format", "xml_tags", "XmlTagsParams", "inline", "formats:XML_TAGS"),
    "boxed": ("format", "boxed", "NoParams", "inline", "formats:BOXED"),
    "think": ("format", "think", "ThinkParams", "inline", "formats:THINK"),
    "code_block": ("format", "code_block", "CodeBlockParams", "inline", "formats:CODE_BLOCK"),
    "length": ("format", "length", "LengthParams", "inline", None),
    "contains": ("text", "contains", "ContainsParams", "inline", None),
    "forbidden": ("text", "forbidden", "PatternsParams", "inline", "formats:FORBIDDEN"),
    "python_tests": ("code", "python_tests", "PythonTestsParams", "thread", "code:PYTHON_TESTS"),
}
# Cheap first steps the engine runs on the grading thread before sending a check to a worker (Check.prescreen).
_PRESCREENS: dict[str, str] = {"math": "math_prescreen"}


def _builtin(name: str) -> Check:
    module_name, function, params, mode, exploits = _BUILTINS[name]
    module = importlib.import_module(f"verihub.checks.{module_name}")
    fn = getattr(module, function)
    known: tuple[Any, ...] = ()
    if exploits is not None:
        attacks, _, attribute = exploits.partition(":")
        known = getattr(importlib.import_module(f"verihub.checks.attacks.{attacks}"), attribute)
    summary = (inspect.getdoc(fn) or "").split("\n\n")[0].replace("\n", " ")
    prescreen = getattr(module, _PRESCREENS[name]) if name in _PRESCREENS else None
    return Check(
        name=name,
        fn=fn,
        params=getattr(module, params),
        mode=mode,
        description=summary,
        exploits=known,
        prescreen=prescreen,
    )


class _BuiltinChecks(Mapping[str, Check]):
    """The built-in checks by name, each built on first lookup and the same object ever after."""

    def __init__(self) -> None:
        self._built: dict[str, Check] = {}

    def __getitem__(self, name: str) -> Check:
        found = self._built.get(name)
        if found is None:
            found = self._built.setdefault(name, _builtin(name))  # setdefault: one object even if two threads race
        return found

    def __contains__(self, name: object) -> bool:
        return name in _BUILTINS

    def __iter__(self) -> Iterator[str]:
        return iter(_BUILTINS)

    def __len__(self) -> int:
        return len(_BUILTINS)


BUILTIN_CHECKS: Mapping[str, Check] = _BuiltinChecks()


def _published() -> dict[str, Any]:
    from importlib.metadata import entry_points  # reads every installed distribution's metadata: only on use

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available_check_names() -> list[str]:
    """Built-in names, then names published by installed packages."""
    return [*BUILTIN_CHECKS, *sorted(set(_published()) - set(BUILTIN_CHECKS))]


def resolve_check(name: str) -> Check:
    """The check called ``name``; raises :class:`CheckNotFoundError` listing what exists."""
    if name in BUILTIN_CHECKS:
        return BUILTIN_CHECKS[name]
    published = _published()
    if name in published:
        return _load(name, lambda: published[name].load(), f"published check {name!r}")
    if ":" in name:
        module_name, _, attribute = name.partition(":")

        def load() -> Any:
            return getattr(importlib.import_module(module_name), attribute)

        return _load(name, load, f"check {name!r}")
    names = available_check_names()
    close = difflib.get_close_matches(name, names, n=3)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    raise CheckNotFoundError(
        name, f"unknown check {name!r}.{hint} Available: {', '.join(names)}; or use 'module:function'."
    )


def _load(name: str, load: Callable[[], Any], what: str) -> Check:
    try:
        obj = load()
    except Exception as error:  # noqa: BLE001 - a broken module of the author's is reported, not raised
        raise CheckNotFoundError(name, f"cannot import {what}: {describe_error(error)}") from error
    try:
        return as_check(obj, name=name.rpartition(":")[2])
    except TypeError as error:
        raise CheckNotFoundError(name, f"{what}: {error}") from error
