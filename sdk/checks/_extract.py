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


# Numbers. Cost is bounded by construction, whatever the text: only the end of a long text is scanned
# (the part that holds its last number), and a number is read only when it has at most _MAX_DIGITS
# significant digits and lies within a float's range, so "1e20000000", a 10,000-digit integer or a
# megabyte of digits costs microseconds and is simply not a number. Every accepted value converts
# to a finite float, and comparisons on it stay exact and cheap.
_MAX_DIGITS = 300
_MAX_EXP10 = 308  # accepted: 0, or 10**-308 <= |value| < 10**308
_LIMIT = 10**_MAX_EXP10
_WINDOW = 2048  # characters before a long text's last digit that are scanned for its last number
_NUMBER = re.compile(
    r"\\frac\{\s*([-+−]?\d+)\s*\}\{\s*([-+−]?\d+)\s*\}"  # \frac{a}{b}
    r"|([-+−]?\d+)\s*/\s*(\d+)(?![\d.,])"  # a/b
    r"|([-+−]?)(\d[\d,.]*|\.\d[\d,.]*)(?:[eE]([-+]?\d+))?(\s*%)?"  # 1,234.5e3, 50 %: a run checked below
)
_DECIMAL = re.compile(r"(\d{1,3}(?:,\d{3})+|\d*)(?:\.(\d*))?")  # what a run of digits, commas and points must be
_DIGIT = re.compile(r"\d")
_OPERATORS = "^*/_×÷·"  # a number next to one is an operand of an expression, not the answer
_COMMAND = re.compile(r"\\([A-Za-z]+)\s*\Z")
_PLAIN_COMMANDS = frozenset({"boxed", "fbox", "text", "textbf", "textrm", "mathrm", "mathbf"})


def parse_number(text: Any, *, percent_as_fraction: bool = False) -> Fraction | None:
    """The last number in ``text`` as an exact Fraction (thousands separators, fractions, \\frac,
    exponents, units and currency signs around it are fine), or None when there is none.

    Also None when the last number is malformed ("1,0000", "1.2.3"), is an exponent ("2^{10}",
    "9^9^9"), has more than 300 significant digits, or lies outside a float's range (``1e400``,
    ``1e-400``; ``inf`` and ``nan`` are not numbers either). The cost is bounded whatever the text.
    """
    if isinstance(text, bool):
        return None
    if isinstance(text, int):
        return Fraction(text) if -_LIMIT < text < _LIMIT else None
    if isinstance(text, float):
        in_range = text == 0 or 10.0**-_MAX_EXP10 <= abs(text) < 1e308  # False for inf and nan
        return Fraction(repr(text)) if in_range else None  # the decimal the float was written as
    text = str(text)
    if len(text) > _WINDOW:
        tail = _last_number_zone(text)
        if tail is None:
            return None
        text = tail
    match = None
    for match in _NUMBER.finditer(text):
        pass
    if match is None:
        return None
    start, end = match.span()
    if (start or end < len(text)) and _is_operand(text, start, end):
        return None
    value = _match_value(match)
    if value is not None and percent_as_fraction and match.group(8):
        value /= 100
    return value


def _last_number_zone(text: str) -> str | None:
    """The end of a long text that holds its last number: the _WINDOW characters before its last
    digit and a few after. None when there is no digit, or the cut falls inside a run of digits (a
    number that long is no number)."""
    if text.isascii():  # the common case, at memrchr speed
        end = max(map(text.rfind, "0123456789")) + 1
    else:
        found = _DIGIT.search(text[::-1])
        end = len(text) - found.start() if found is not None else 0
    if not end:
        return None
    start = max(0, end - _WINDOW)
    if start and text[start - 1].isdigit() and text[start].isdigit():
        return None
    return text[start : end + 16]


def _is_operand(text: str, start: int, end: int) -> bool:
    """Whether the number at text[start:end] is part of an expression: a power ("2^{10}", "9^9^9"),
    a product or quotient ("2*3", "x/2"), a subscript, the argument of a command (\\sqrt{2},
    \\dfrac{1}{2}); "\\boxed{42}" and "\\text{42}" are plain numbers."""
    before = text[max(0, start - 32) : start].rstrip()
    if before.endswith("{"):
        before = before[:-1].rstrip()
        command = _COMMAND.search(before)
        if before.endswith("}") or (command is not None and command.group(1) not in _PLAIN_COMMANDS):
            return True
    if before and before[-1] in _OPERATORS:
        return True
    after = text[end : end + 32].lstrip(" \t\n)")
    if after.startswith("}") and after[1:].lstrip().startswith("{"):
        return True  # the first argument of a two-argument command
    return bool(after) and after[0] in _OPERATORS


def _match_value(match: re.Match[str]) -> Fraction | None:
    frac_num, frac_den, slash_num, slash_den, sign, run, exponent, _ = match.groups()
    if run is None:
        numerator = _integer(frac_num if frac_num is not None else slash_num)
        denominator = _integer(frac_den if frac_den is not None else slash_den)
        if numerator is None or not denominator:  # too many digits, or a zero denominator
            return None
        value = Fraction(numerator, denominator)
        return value if value == 0 or Fraction(1, _LIMIT) <= abs(value) < _LIMIT else None
    value = _decimal(run.rstrip(".,"), exponent)  # a trailing point or comma ends the sentence
    return -value if value is not None and sign and sign != "+" else value


def _integer(digits: str) -> int | None:
    """``digits`` (a sign allowed) as an int, or None past _MAX_DIGITS significant digits."""
    negative = digits[0] in "-−"
    digits = digits.lstrip("+-−").lstrip("0")
    if len(digits) > _MAX_DIGITS:
        return None
    value = int(digits) if digits else 0
    return -value if negative else value


def _decimal(run: str, exponent: str | None) -> Fraction | None:
    """A run of digits, thousands separators and a decimal point, times 10**exponent."""
    if exponent is None and run.isdigit() and len(run) <= _MAX_DIGITS:
        return Fraction(int(run))  # the common case: a plain integer
    parts = _DECIMAL.fullmatch(run)
    if parts is None:
        return None  # malformed: "1,0000", "12,34", "1.2.3"
    whole, decimals = parts.group(1).replace(",", ""), parts.group(2) or ""
    digits = (whole + decimals).lstrip("0")
    if not digits:
        return Fraction(0)
    shift = -len(decimals)
    significant = digits.rstrip("0")
    shift += len(digits) - len(significant)
    if exponent is not None:
        if len(exponent.lstrip("+-").lstrip("0")) > 4:
            return None  # |exponent| >= 10**4: far out of range
        shift += int(exponent)
    top = len(significant) + shift  # 10**(top - 1) <= value < 10**top
    if len(significant) > _MAX_DIGITS or not -_MAX_EXP10 < top <= _MAX_EXP10:
        return None
    mantissa = int(significant)
    return Fraction(mantissa * 10**shift) if shift >= 0 else Fraction(mantissa, 10**-shift)


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
