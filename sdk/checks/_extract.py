"""Pulling the answer out of a completion: think blocks, \\boxed{}, <answer> tags, answer lines, numbers."""

from __future__ import annotations

import json
import re
from fractions import Fraction
from typing import Any, Literal

Extract = Literal["auto", "full", "boxed", "answer_tag", "last_line"]

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_ANSWER_LINE = re.compile(r"(?:final answer|answer)\s*(?:is|:|=)\s*:?\s*(.+)", re.IGNORECASE)
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


def strip_think(text: str) -> str:
    """The completion without reasoning: closed <think> blocks removed; an unclosed one leaves nothing."""
    if "<think>" not in text:
        return text
    text = _THINK_BLOCK.sub("", text)
    opened = text.find("<think>")
    return text[:opened] if opened != -1 else text


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (nested braces allowed), or None."""
    matches = list(_BOXED.finditer(text))
    for match in reversed(matches):
        content = _balanced(text, match.end())
        if content is not None:
            return content
    return None


def _balanced(text: str, start: int) -> str | None:
    depth = 1
    for index in range(start, len(text)):
        char = text[index]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start:index]
    return None


def extract_answer(completion: str, how: Extract = "auto") -> str:
    """The answer part of ``completion`` (reasoning in <think> tags is always dropped first).

    ``auto`` tries \\boxed{}, then <answer> tags, then an "answer is / Answer:" line, then the last line.
    """
    text = strip_think(completion)
    if how == "full":
        return text.strip()
    if how in ("auto", "boxed"):
        boxed = last_boxed(text)
        if boxed is not None or how == "boxed":
            return (boxed or "").strip()
    if how in ("auto", "answer_tag"):
        tags = _ANSWER_TAG.findall(text)
        if tags or how == "answer_tag":
            return tags[-1].strip() if tags else ""
    if how == "auto":
        lines = _ANSWER_LINE.findall(text)
        if lines:
            return lines[-1].strip()
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()
    return ""


_NUMBER = re.compile(
    r"\\frac\{\s*([-+]?\d+)\s*\}\{\s*([-+]?\d+)\s*\}"  # \frac{a}{b}
    r"|([-+−]?\d+)\s*/\s*(\d+)(?![\d.,])"  # a/b
    r"|([-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+−]?\.\d+(?:[eE][-+]?\d+)?)"  # 1,234.5e3
    r"(\s*%)?"
)


def parse_number(text: Any, *, percent_as_fraction: bool = False) -> Fraction | float | None:
    """The last number in ``text`` (thousands separators, fractions, \\frac, units and currency signs
    around it are fine), as an exact Fraction where possible; None if there is none."""
    if isinstance(text, bool):
        return None
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        return text
    matches = list(_NUMBER.finditer(str(text)))
    if not matches:
        return None
    match = matches[-1]
    frac_num, frac_den, slash_num, slash_den, plain, percent = match.groups()
    numerator, denominator = (frac_num, frac_den) if frac_num is not None else (slash_num, slash_den)
    if numerator is not None:
        if int(denominator) == 0:
            return None
        value: Fraction | float = Fraction(int(numerator.replace("−", "-")), int(denominator))
    else:
        literal = plain.replace(",", "").replace("−", "-")
        try:
            value = Fraction(literal)
        except ValueError:
            value = float(literal)
    if percent and percent_as_fraction:
        value = value / 100
    return value


def find_json(text: str) -> Any:
    """The JSON value in a completion: a ```json block, else the first parseable {...} or [...].

    Raises ValueError when there is none.
    """
    text = strip_think(text)
    fenced = re.search(r"```(?:json)?\s*\n(.*?)```", text, re.DOTALL)
    if fenced:
        return json.loads(fenced.group(1))
    decoder = json.JSONDecoder()
    for index, char in enumerate(text):
        if char in "{[":
            try:
                value, _ = decoder.raw_decode(text, index)
                return value
            except json.JSONDecodeError:
                continue
    raise ValueError("no JSON object or array found")
