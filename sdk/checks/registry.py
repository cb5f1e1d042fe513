"""Finding a check by name: built in, published by an installed package, or imported by path."""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from verihub.checks import format as fmt
from verihub.checks import code, numeric, structured, symbolic, text
from verihub.checks.attacks import answers, formats
from verihub.checks.attacks import code as code_attacks
from verihub.checks.attacks import structured as json_attacks
from verihub.checks.base import Check, CheckParams, Mode, as_check
from verihub.checks.exploit import Exploit
from verihub.errors import CheckNotFoundError

__all__ = ["BUILTIN_CHECKS", "ENTRY_POINT_GROUP", "available_check_names", "resolve_check"]

ENTRY_POINT_GROUP = "verihub.checks"
"""Entry-point group where packages publish checks: ``name = "package.module:function"``."""


def _builtin(fn: Callable[..., Any], params: type[CheckParams], mode: Mode, name: str | None = None,
             exploits: tuple[Exploit, ...] = (), prescreen: Callable[..., Any] | None = None) -> Check:
    summary = (inspect.getdoc(fn) or "").split("\n\n")[0].replace("\n", " ")
    return Check(name=name or fn.__name__, fn=fn, params=params, mode=mode, description=summary, exploits=exploits,
                 prescreen=prescreen)


# Every built-in check with the exploits known against it (verihub.checks.attacks); `verihub validate` runs them.


BUILTIN_CHECKS: dict[str, Check] = {
    check.name: check
    for check in (
        _builtin(text.exact, text.ExactParams, "inline", exploits=answers.EXACT),
        _builtin(numeric.numeric, numeric.NumericParams, "inline", exploits=answers.NUMERIC),
        _builtin(symbolic.math_equivalent, symbolic.MathParams, "process", name="math", exploits=answers.MATH,
                 prescreen=symbolic.math_prescreen),
        _builtin(text.regex, text.RegexParams, "inline"),
        _builtin(text.multiple_choice, text.MultipleChoiceParams, "inline", exploits=answers.MULTIPLE_CHOICE),
        _builtin(structured.json_schema, structured.JsonSchemaParams, "inline", exploits=json_attacks.JSON_SCHEMA),
        _builtin(structured.json_fields, structured.JsonFieldsParams, "inline", exploits=json_attacks.JSON_FIELDS),
        _builtin(fmt.xml_tags, fmt.XmlTagsParams, "inline", exploits=formats.XML_TAGS),
        _builtin(fmt.boxed, fmt.NoParams, "inline", exploits=formats.BOXED),
        _builtin(fmt.think, fmt.ThinkParams, "inline", exploits=formats.THINK),
        _builtin(fmt.code_block, fmt.CodeBlockParams, "inline", exploits=formats.CODE_BLOCK),
        _builtin(fmt.length, fmt.LengthParams, "inline"),
        _builtin(text.contains, text.ContainsParams, "inline"),
        _builtin(text.forbidden, text.PatternsParams, "inline"),
        _builtin(code.python_tests, code.PythonTestsParams, "thread", exploits=code_attacks.PYTHON_TESTS),
    )
}


def _published() -> dict[str, Any]:
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
        raise CheckNotFoundError(name, f"cannot import {what}: {type(error).__name__}: {error}") from error
    try:
        return as_check(obj, name=name.rpartition(":")[2])
    except TypeError as error:
        raise CheckNotFoundError(name, f"{what}: {error}") from error
