"""What an environment's page shows of one release: its verifier's layers and a preview of a few tasks with
their prompts rendered, read from the release's files at a bounded cost.

A published package is hostile input here: the spec is read only up to a size, parsed with ``safe_load``,
and only plain values are taken from it (a YAML alias bomb under a field is "not a plain value", never
expanded); tasks come from the first bytes of a local data file only (a generator would be code, a Hugging
Face id a download); prompts are filled by substituting plain ``{column}`` fields as text, never with
``str.format`` (whose format specs can ask for a gigabyte of padding or reach into attributes), and a task's
own chat messages (``prompt.messages``) are shown as they are, never filled. The page escapes everything this
returns. A commit never changes, so a view is cached by commit.
"""

from __future__ import annotations

import csv
import io
import json
import string
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import yaml

from verihub.hub.storage import HubStorage
from verihub.ids import RepoId

__all__ = ["EnvView", "Layer", "TaskPreview", "environment_view", "fill"]

SPEC_FILE = "environment.yaml"
MAX_SPEC_BYTES = 256 << 10
MAX_DATA_BYTES = 64 << 10
MAX_LAYERS, MAX_TASKS, MAX_TEXT = 50, 3, 2000
MAX_MESSAGES = 6  # of a task's own chat messages: its first and its last five (the one the model answers)
_DEFAULT_WEIGHT = {"rule": 0.0, "check": 1.0, "judge": 1.0}  # the spec's defaults (verihub.spec.models.LayerSpec)


@dataclass(frozen=True)
class Layer:
    name: str
    kind: str  # rule, check or judge
    checks: str  # the check it runs (`use`), or a judge's rubric file
    gate: bool
    weight: str


@dataclass(frozen=True)
class TaskPreview:
    task_id: str
    messages: tuple[tuple[str, str], ...]  # (role, text)


@dataclass(frozen=True)
class EnvView:
    description: str = ""
    layers: tuple[Layer, ...] = ()
    tasks: tuple[TaskPreview, ...] = ()
    source: str = ""  # where the tasks come from
    notes: tuple[str, ...] = field(default_factory=tuple)  # what could not be shown, and why


def environment_view(storage: HubStorage, repo: RepoId, sha: str) -> EnvView:
    """The view of ``repo`` at commit ``sha`` (cached: a commit never changes)."""
    return _view(storage, repo, sha)


@lru_cache(maxsize=256)
def _view(storage: HubStorage, repo: RepoId, sha: str) -> EnvView:
    files = {entry.path: entry for entry in storage.files(repo, sha)}
    entry = files.get(SPEC_FILE)
    if entry is None:
        return EnvView(notes=("no environment.yaml in this release",))
    if entry.size > MAX_SPEC_BYTES:
        return EnvView(notes=(f"environment.yaml is over {MAX_SPEC_BYTES >> 10} KiB: not shown",))
    try:
        spec = yaml.safe_load(storage.read(repo, SPEC_FILE, sha))
    except (yaml.YAMLError, RecursionError, UnicodeDecodeError, ValueError):
        return EnvView(notes=("environment.yaml does not parse",))
    if not isinstance(spec, dict):
        return EnvView(notes=("environment.yaml is not a mapping",))
    if "dataset" not in spec and isinstance(spec.get("source"), str):  # another ecosystem's, wrapped
        wrapped = _plain(spec["source"])
        return EnvView(
            _plain(spec.get("description")),
            source=f"wraps {wrapped}",
            notes=(f"tasks and grading come from {wrapped} when the package is installed",),
        )
    layers = _layers(spec.get("verifier"))
    source, rows, notes = _rows(storage, repo, sha, files, spec.get("dataset"))
    prompt: dict[str, Any] = spec["prompt"] if isinstance(spec.get("prompt"), dict) else {}
    tasks = tuple(_preview(prompt, row, index) for index, row in enumerate(rows))
    return EnvView(_plain(spec.get("description")), layers, tasks, source, notes)


def _layers(section: Any) -> tuple[Layer, ...]:
    if not isinstance(section, list):
        return ()
    layers = []
    for item in section[:MAX_LAYERS]:
        if not isinstance(item, dict):
            continue
        kind = _plain(item.get("layer"))
        weight = item.get("weight")
        if weight is None:
            weight = _DEFAULT_WEIGHT.get(kind, "")
        checks = item.get("rubric") if kind == "judge" else item.get("use")
        layers.append(Layer(_plain(item.get("name")), kind, _plain(checks), item.get("gate") is True, _plain(weight)))
    return tuple(layers)


def _rows(
    storage: HubStorage, repo: RepoId, sha: str, files: dict[str, Any], section: Any
) -> tuple[str, list[dict[str, Any]], tuple[str, ...]]:
    source = _plain(section.get("source")) if isinstance(section, dict) else ""
    path = source.removeprefix("./")
    if path not in files:
        return source, [], (f"tasks come from {source or 'nowhere'}: no preview",) if source else ()
    head = storage.read_prefix(repo, path, sha, MAX_DATA_BYTES)
    complete = files[path].size <= MAX_DATA_BYTES
    text = head.decode("utf-8", "replace")
    if not complete:  # only whole lines of what was read
        text = text[: text.rfind("\n") + 1]
    rows: list[Any] = []
    try:
        if path.endswith(".jsonl"):
            for line in text.splitlines():
                if line.strip():
                    rows.append(json.loads(line))
                if len(rows) >= MAX_TASKS:
                    break
        elif path.endswith(".csv"):
            rows = [dict(row) for _, row in zip(range(MAX_TASKS), csv.DictReader(io.StringIO(text)), strict=False)]
        elif path.endswith(".json") and complete:
            loaded = json.loads(text)
            rows = loaded[:MAX_TASKS] if isinstance(loaded, list) else []
        else:
            return source, [], (f"no preview of {path}",)
    except (ValueError, RecursionError, csv.Error):
        return source, [], (f"{path} does not parse",)
    return source, [row for row in rows if isinstance(row, dict)], ()


def _preview(prompt: dict[str, Any], row: dict[str, Any], index: int) -> TaskPreview:
    column = prompt.get("messages")
    own = _own_messages(row.get(column)) if isinstance(column, str) else None
    messages = []
    system = prompt.get("system")
    if isinstance(system, str) and not (own and own[0][0] == "system"):  # the task's own system message wins
        messages.append(("system", fill(system, row)))
    if own is not None:
        messages += own
    elif isinstance(prompt.get("user"), str):
        messages.append(("user", fill(prompt["user"], row)))
    return TaskPreview(_plain(row.get("id", index)), tuple(messages))


def _own_messages(value: Any) -> list[tuple[str, str]]:
    """A task's own chat messages (a list of {role, content}, or JSON text of one) as (role, text): at most
    MAX_MESSAGES, the first and the last ones, of MAX_TEXT characters each. Never filled, never refused
    (loading the environment refuses malformed ones)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)  # no longer than the row, which came from MAX_DATA_BYTES of the file
        except (ValueError, RecursionError):
            return [("messages", "(not chat messages)")]
    if not isinstance(value, list) or not value:
        return [("messages", "(not chat messages)")]
    if len(value) > MAX_MESSAGES:
        hidden = ("…", f"{len(value) - MAX_MESSAGES} more messages")
        return [_message(value[0]), hidden, *map(_message, value[1 - MAX_MESSAGES :])]
    return [_message(message) for message in value]


def _message(message: Any) -> tuple[str, str]:
    if not isinstance(message, dict):
        return "?", _plain(message)
    content = message.get("content")
    return _plain(message.get("role"))[:20], content[:MAX_TEXT] if isinstance(content, str) else _plain(content)


def fill(template: str, row: dict[str, Any]) -> str:
    """``template`` with each plain ``{column}`` replaced by the task's value as text; anything else (format
    specs, attribute or index access, unknown columns) is left as written. At most MAX_TEXT characters."""
    try:
        parts = list(string.Formatter().parse(template[: MAX_TEXT * 4]))
    except ValueError:  # unbalanced braces: the template as written
        return template[:MAX_TEXT]
    out: list[str] = []
    for literal, name, spec, conversion in parts:
        out.append(literal)
        if name is None:
            continue
        if name in row and not spec and conversion is None:
            value = row[name]
            out.append(value if isinstance(value, str) else json.dumps(value, default=str)[:MAX_TEXT])
        else:
            out.append("{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}")
        if sum(len(part) for part in out) > MAX_TEXT:
            break
    return "".join(out)[:MAX_TEXT]


def _plain(value: Any) -> str:
    """A scalar as text; anything else (lists, mappings, an alias bomb) as a note, never expanded."""
    if value is None:
        return ""
    if isinstance(value, str | int | float | bool):
        return str(value)[:MAX_TEXT]
    return "(not a plain value)"
