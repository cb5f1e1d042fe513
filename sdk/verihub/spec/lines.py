"""YAML loading that remembers the line each value came from, so spec errors can point at it."""

from __future__ import annotations

from typing import Any

import yaml

Loc = tuple[str | int, ...]

__all__ = ["Loc", "LineMap", "load_with_lines"]


class LineMap:
    """Maps a location in the loaded data (keys and list indexes) to its 1-based source line."""

    def __init__(self) -> None:
        self._lines: dict[Loc, int] = {}
        self.duplicates: list[tuple[Loc, int, int]] = []  # (location, line, line of the first one)

    def record(self, loc: Loc, line: int) -> None:
        self._lines[loc] = line

    def line_of(self, loc: Loc) -> int | None:
        """The line of ``loc``, or of its closest ancestor that has one."""
        for end in range(len(loc), -1, -1):
            line = self._lines.get(tuple(loc[:end]))
            if line is not None:
                return line
        return None


def load_with_lines(text: str) -> tuple[Any, LineMap]:
    """Parse YAML ``text``; raises ``yaml.YAMLError`` (which carries a mark) on syntax errors."""
    lines = LineMap()
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    if node is None:
        return None, lines
    data = yaml.load(text, Loader=yaml.SafeLoader)
    _walk(node, (), lines)
    return data, lines


def _walk(node: yaml.Node, loc: Loc, lines: LineMap, line: int | None = None) -> None:
    # A value is located at its key's line: the better pointer for "unknown key" and block values.
    lines.record(loc, line or node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        first_lines: dict[str, int] = {}
        for key_node, value_node in node.value:
            key, key_line = key_node.value, key_node.start_mark.line + 1
            if key in first_lines:
                lines.duplicates.append(((*loc, key), key_line, first_lines[key]))
            first_lines.setdefault(key, key_line)
            _walk(value_node, (*loc, key), lines, key_line)  # a later duplicate wins, as in the data
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*loc, index), lines)
