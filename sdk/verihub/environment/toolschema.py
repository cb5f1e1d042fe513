"""Tools as typed Python functions: the OpenAI tool JSON schema from a signature and docstring."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any, get_type_hints

from pydantic import create_model

__all__ = ["function_schema"]


def function_schema(function: Callable[..., Any], name: str | None = None) -> dict[str, Any]:
    """``{"type": "function", "function": {name, description, parameters}}`` for ``function``.

    >>> def add(a: int, b: int = 0) -> int:
    ...     '''Add two numbers.
    ...
    ...     Args:
    ...         a: The first.
    ...         b: The second.
    ...     '''
    >>> schema = function_schema(add)["function"]
    >>> schema["description"], schema["parameters"]["required"], schema["parameters"]["properties"]["a"]
    ('Add two numbers.', ['a'], {'description': 'The first.', 'type': 'integer'})
    """
    doc = inspect.getdoc(function) or ""
    summary = doc.split("\n\n")[0].replace("\n", " ").strip()
    described = _argument_docs(doc)
    hints = get_type_hints(function)
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(function).parameters.values():
        if parameter.name == "self" or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        annotation = hints.get(parameter.name, str)
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (annotation, _field(default, described.get(parameter.name)))
    model = create_model(f"{function.__name__}_arguments", **fields)
    parameters = model.model_json_schema()
    parameters.pop("title", None)
    for prop in parameters.get("properties", {}).values():
        prop.pop("title", None)
    parameters.setdefault("required", [])
    return {
        "type": "function",
        "function": {"name": name or function.__name__, "description": summary, "parameters": parameters},
    }


def _field(default: Any, description: str | None) -> Any:
    from pydantic import Field

    return Field(default, description=description) if description else Field(default)


def _argument_docs(doc: str) -> dict[str, str]:
    """Google-style ``Args:`` entries: name -> description."""
    match = re.search(r"^Args:\s*\n((?:[ \t]+.*\n?)+)", doc, re.MULTILINE)
    if not match:
        return {}
    found: dict[str, str] = {}
    current = None
    for line in match.group(1).splitlines():
        entry = re.match(r"\s+(\w+)(?:\s*\([^)]*\))?:\s*(.*)", line)
        if entry and (current is None or len(line) - len(line.lstrip()) <= 8):
            current = entry.group(1)
            found[current] = entry.group(2).strip()
        elif current and line.strip():
            found[current] += " " + line.strip()
    return found
