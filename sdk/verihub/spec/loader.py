"""Reading ``environment.yaml``: every problem at once, each as ``file:line: field.path: message``."""

from __future__ import annotations

import difflib
import importlib
import string
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from verihub.checks.registry import resolve_check
from verihub.errors import CheckNotFoundError, SpecError, SpecProblem, UsageError, describe_error, relative_display
from verihub.spec.lines import LineMap, Loc, load_with_lines
from verihub.spec.models import DATA_FILE_FORMATS, EnvSpec, FieldError

__all__ = [
    "SPEC_FILE",
    "LoadedSpec",
    "add_import_root",
    "column_locations",
    "find_spec_file",
    "format_loc",
    "load_spec",
    "pydantic_problems",
    "template_fields",
    "template_locations",
]

SPEC_FILE = "environment.yaml"


@dataclass(frozen=True)
class LoadedSpec:
    """A valid spec and where it came from (for messages that point at lines)."""

    spec: EnvSpec
    file: Path
    lines: LineMap

    @property
    def root(self) -> Path:
        return self.file.parent

    def problem(self, loc: Loc, message: str) -> SpecProblem:
        return SpecProblem(relative_display(self.file), self.lines.line_of(loc), format_loc(loc), message)


def find_spec_file(path: str | Path) -> Path:
    path = Path(path)
    return path / SPEC_FILE if path.is_dir() else path


def load_spec(path: str | Path) -> LoadedSpec:
    """Load and validate a spec file (or a directory holding ``environment.yaml``).

    Raises :class:`SpecError` listing every problem: YAML syntax, schema, unknown keys (with a
    "did you mean"), unknown checks and their arguments, missing data and rubric files, templates.
    """
    file = find_spec_file(path)
    shown = relative_display(file)
    if not file.is_file():
        raise SpecError([SpecProblem(shown, None, "", f"no such file (expected {SPEC_FILE} in {file.parent})")])
    data = file.read_bytes()
    try:
        raw, lines = load_with_lines(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise SpecError(
            [SpecProblem(shown, line, "", f"not valid UTF-8 text (byte {data[error.start]:#04x})")]
        ) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
        at = mark.line + 1 if mark is not None else None
        raise SpecError([SpecProblem(shown, at, "", f"invalid YAML: {getattr(error, 'problem', error)}")]) from None
    if not isinstance(raw, dict):
        got = "an empty file" if raw is None else type(raw).__name__
        raise SpecError([SpecProblem(shown, 1, "", f"must be a mapping of keys to values, got {got}")])

    problems: list[SpecProblem] = []

    def report(loc: Loc, message: str) -> None:
        problems.append(SpecProblem(shown, lines.line_of(loc), format_loc(loc), message))

    spec: EnvSpec | None = None
    try:
        spec = EnvSpec.model_validate(raw)
    except ValidationError as error:
        for loc, message in pydantic_problems(error, raw, EnvSpec):
            report(loc, message)
    add_import_root(file.parent)
    _check_references(raw, file.parent, report)
    for loc, line, first in lines.duplicates:
        problems.append(
            SpecProblem(
                shown, line, format_loc(loc), f"duplicate key (first given on line {first}; YAML keeps the last)"
            )
        )
    if problems:
        raise SpecError(sorted(problems, key=lambda p: (p.line or 0, p.path)))
    assert spec is not None
    return LoadedSpec(spec, file, lines)


def add_import_root(root: Path) -> None:
    """Make an environment's own modules importable when it is loaded from a directory."""
    root = root.resolve()  # a relative entry would follow later changes of directory
    for candidate in (root / "src", root):
        if candidate.is_dir() and str(candidate) not in sys.path:
            sys.path.insert(0, str(candidate))


# -- checks that need more than the schema -------------------------------------------------------------


def _check_references(raw: dict[str, Any], root: Path, report: typing.Callable[[Loc, str], None]) -> None:
    """Files, imports, checks and templates; works on the raw data so it reports alongside schema errors."""
    dataset = raw.get("dataset")
    if isinstance(dataset, dict) and isinstance(dataset.get("source"), str):
        _check_source(dataset["source"], root, report)
    layers = raw.get("verifier")
    if isinstance(layers, list):
        seen: dict[str, int] = {}
        for index, layer in enumerate(layers):
            if not isinstance(layer, dict):
                continue
            name = layer.get("name")
            if isinstance(name, str):
                if name in seen:
                    report(
                        ("verifier", index, "name"), f"layer name {name!r} is already used by verifier[{seen[name]}]"
                    )
                seen.setdefault(name, index)
            if isinstance(layer.get("use"), str):
                _check_layer_use(layer, index, root, report)
            if isinstance(layer.get("rubric"), str) and not (root / layer["rubric"]).is_file():
                report(
                    ("verifier", index, "rubric"),
                    f"rubric file {layer['rubric']!r} not found in {relative_display(root)}",
                )
    calibration = raw.get("calibration")
    if isinstance(calibration, dict) and isinstance(calibration.get("file"), str):
        if not (root / calibration["file"]).is_file():
            report(
                ("calibration", "file"),
                f"calibration file {calibration['file']!r} not found in {relative_display(root)}",
            )
    for loc, template in _templates(raw):
        try:
            template_fields(template)
        except ValueError as error:
            report(loc, f"bad template: {error} (write {{{{ and }}}} for literal braces)")


def _check_source(source: str, root: Path, report: typing.Callable[[Loc, str], None]) -> None:
    loc: Loc = ("dataset", "source")
    path = root / source
    suffix = Path(source).suffix
    if suffix in DATA_FILE_FORMATS:
        if not path.is_file():
            report(loc, f"data file {source!r} not found in {relative_display(root)}")
    elif path.exists():
        known = ", ".join(DATA_FILE_FORMATS)
        report(loc, f"unsupported data file type {suffix or '(none)'!r} for {source!r}; use one of {known}")
    elif ":" in source:
        module_name, _, attribute = source.partition(":")
        try:
            module = importlib.import_module(module_name)
        except Exception as error:  # noqa: BLE001 - any failure of the author's module is reported here
            report(loc, f"cannot import generator module {module_name!r}: {describe_error(error)}")
            return
        if not callable(getattr(module, attribute, None)):
            report(loc, f"generator {source!r}: module {module_name!r} has no function {attribute!r}")


def _check_layer_use(layer: dict[str, Any], index: int, root: Path, report: typing.Callable[[Loc, str], None]) -> None:
    try:
        check = resolve_check(layer["use"])
    except CheckNotFoundError as error:
        report(("verifier", index, "use"), str(error))
        return
    args = layer.get("args", {})
    if not isinstance(args, dict):
        return  # the schema reports it
    try:
        check.bind(args, root)
    except ValidationError as error:
        for loc, message in pydantic_problems(error, args, check.params):
            report(("verifier", index, "args", *loc), message)
    except TypeError as error:
        report(("verifier", index, "args"), f"check {check.name!r}: {error}")
    except ValueError as error:
        report(("verifier", index, "args"), f"check {check.name!r}: {error}")


def _templates(raw: dict[str, Any]) -> list[tuple[Loc, str]]:
    found: list[tuple[Loc, str]] = []
    prompt = raw.get("prompt")
    if isinstance(prompt, dict):
        found += [(("prompt", key), prompt[key]) for key in ("system", "user") if isinstance(prompt.get(key), str)]
    gold = raw.get("gold")
    if isinstance(gold, dict):
        if isinstance(gold.get("reference"), str):
            found.append((("gold", "reference"), gold["reference"]))
        if isinstance(gold.get("negatives"), list):
            found += [(("gold", "negatives", i), t) for i, t in enumerate(gold["negatives"]) if isinstance(t, str)]
        for i, exploit in enumerate(gold.get("exploits") or []):
            if isinstance(exploit, dict):
                found += (
                    [(("gold", "exploits", i, "completion"), exploit["completion"])]
                    if isinstance(exploit.get("completion"), str)
                    else []
                )
                for path, text in (exploit.get("files") or {}).items():
                    found += [(("gold", "exploits", i, "files"), path), (("gold", "exploits", i, "files", path), text)]
    return found


def template_fields(template: str) -> set[str]:
    """Column names a ``{column}`` template reads (format specs included); raises ValueError for
    malformed braces and unknown conversions."""
    names = set()
    for _, field, format_spec, conversion in string.Formatter().parse(template):
        if field is None:
            continue
        if not field:
            raise UsageError("empty placeholder {}")
        if conversion not in (None, "r", "s", "a"):
            raise UsageError(f"unknown conversion '!{conversion}' in {{{field}}}")
        names.add(field.split(".")[0].split("[")[0])
        if format_spec:
            names |= template_fields(format_spec)
    return names


def template_locations(spec: EnvSpec) -> list[tuple[Loc, str]]:
    """Every ``{column}`` template of a spec (prompt and gold) with its location."""
    return _templates(spec.model_dump(mode="json", exclude_none=True))


def column_locations(spec: EnvSpec) -> list[tuple[Loc, str]]:
    """Every column a spec names outright, not in a template, with its location: ``prompt.messages`` (whose
    values are chat messages, data that is never filled as a template)."""
    return [(("prompt", "messages"), spec.prompt.messages)] if spec.prompt.messages is not None else []


# -- pydantic errors as short messages -----------------------------------------------------------------


def pydantic_problems(error: ValidationError, raw: Any, model: type[BaseModel] | None) -> list[tuple[Loc, str]]:
    """(location in the data, message) per problem; errors for one value from a union are merged."""
    merged: dict[Loc, list[str]] = {}
    for item in error.errors(include_url=False):
        cause = (item.get("ctx") or {}).get("error")
        at = cause.at if isinstance(cause, FieldError) else ()
        loc = _data_loc((*item["loc"], *at), raw, "missing" if at else item["type"])
        message = _message(item, loc, model)
        messages = merged.setdefault(loc, [])
        if message not in messages:
            messages.append(message)
    return [(loc, " or ".join(messages)) for loc, messages in merged.items()]


def _data_loc(loc: Loc, raw: Any, kind: str) -> Loc:
    """Drop the parts of pydantic's location that are not in the data (union member names)."""
    kept: list[str | int] = []
    current = raw
    for position, part in enumerate(loc):
        if isinstance(current, dict) and part in current:
            current = current[part]
            kept.append(str(part))  # a YAML key, even a numeric one, is shown as a key, not an index
        elif isinstance(current, list) and isinstance(part, int) and part < len(current):
            current = current[part]
            kept.append(part)
        elif position == len(loc) - 1 and kind in ("missing", "extra_forbidden"):
            kept.append(part)
    return tuple(kept)


def _message(item: Any, loc: Loc, model: type[BaseModel] | None) -> str:
    kind, ctx, value = item["type"], item.get("ctx") or {}, item.get("input")
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        allowed = _allowed_keys(model, loc[:-1])
        if not allowed:
            return f"unknown key {loc[-1]!r}: this takes no arguments"
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"unknown key {loc[-1]!r}{hint}; allowed: {', '.join(allowed)}"
    bounds = {
        "greater_than_equal": (">=", "ge"),
        "greater_than": (">", "gt"),
        "less_than_equal": ("<=", "le"),
        "less_than": ("<", "lt"),
    }
    if kind in bounds:
        symbol, key = bounds[kind]
        bound = ctx[key]
        bound = int(bound) if isinstance(bound, float) and bound.is_integer() else bound
        return f"must be {symbol} {bound} (got {value!r})"
    if kind in ("literal_error", "enum"):
        return f"must be one of {ctx.get('expected')} (got {value!r})"
    if kind == "too_short":
        return f"must have at least {ctx.get('min_length')} item(s)"
    if kind == "string_pattern_mismatch":
        return f"{value!r} does not match the pattern {ctx.get('pattern')}"
    message = str(item["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if message.startswith("Input should be"):
        message = "must be" + message.removeprefix("Input should be")
        if not isinstance(value, dict | list):
            message += f" (got {value!r})"
    return message


def _allowed_keys(model: type[BaseModel] | None, loc: Loc) -> list[str]:
    current: Any = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            if field is None:
                return []
            current = field.annotation
        else:
            args = typing.get_args(current)
            current = args[-1] if args else None
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [field.alias or name for name, field in current.model_fields.items()]
    return []


def _unwrap(annotation: Any) -> Any:
    """``X | None`` -> X; ``Annotated[X, ...]`` -> X."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(members) != 1:
                return annotation
            annotation = members[0]
        else:
            return annotation


def format_loc(loc: Loc) -> str:
    """('verifier', 1, 'weight') -> 'verifier[1].weight'."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text
