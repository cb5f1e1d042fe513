"""Pulling the answer out of a completion: think blocks, \\boxed{}, <answer> tags, answer lines, numbers, JSON.

Every scan here is linear in the completion (a policy can send a megabyte of unclosed ``\\boxed{`` or
``<answer>``), and a completion that gives several different final answers has none: the hedge
"\\boxed{6} \\boxed{12}" is refused, never read as its last (or first) answer. The answer found is folded
(:func:`verihub.checks._unicode.fold`): invisible marks dropped, full-width forms, other scripts' digits and
dashes read as ASCII, so every check reads what the answer says.
"""

from __future__ import annotations

import json
import math
import re
from collections import deque
from fractions import Fraction
from typing import Any, Literal, NamedTuple

from verihub.checks._unicode import fold

Extract = Literal["auto", "full", "boxed", "answer_tag", "last_line"]
Source = Literal["boxed", "answer_tag", "answer_line", "last_line", "full", "none"]

# "answer is X" / "Answer: X"; one character class between the verb and X keeps it linear on long runs of
# whitespace (two adjacent \s* backtrack quadratically).
_ANSWER_LINE = re.compile(r"(?:final answer|answer)\s*(?:is|:|=)[\s:]*(\S[^\n]*)", re.IGNORECASE)
_BOX_OPENER = re.compile(r"\\(?:boxed|fbox)\s*\{")
_LATEX_LINE_TOKEN = re.compile(r"\\begin\{[^{}]*\}|\\end\{[^{}]*\}|\\\\")
_FENCE_LANGUAGE = re.compile(r"[\w+-]*")
_MAX_NUMBERS = 32  # an answer holding more numbers than this is not one number
# Every character ``str.isspace`` (and ``\s``) knows: edges are cut with str.strip, linear where a regex like
# ``[\s.]+$`` retries from each character of a long run (quadratic).
WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_BRACE_CHUNK = 4096  # characters a box's closing brace is looked for in at a time


class Answer(NamedTuple):
    """The answer part of a completion: its text ("" when there is none), why there is none (several
    different final answers, nested or multi-line boxes, ...), and where it was found."""

    text: str
    problem: str = ""
    source: Source = "none"


def strip_think(text: str) -> str:
    """The completion without reasoning: closed <think> blocks removed; an unclosed one leaves nothing."""
    if "<think>" not in text:
        return text
    kept: list[str] = []
    position = 0
    while True:
        start = text.find("<think>", position)
        if start == -1:
            kept.append(text[position:])
            break
        kept.append(text[position:start])
        end = text.find("</think>", start + len("<think>"))
        if end == -1:  # unclosed: nothing after it is an answer
            break
        position = end + len("</think>")
    return "".join(kept)


def boxed_spans(text: str) -> tuple[list[tuple[int, int]], bool]:
    """Where the content of every closed top-level ``\\boxed{...}``/``\\fbox{...}`` lies (nested braces
    allowed), in order, and whether a box holds another box. Linear: each brace is looked at once, and
    spans are returned, not copies."""
    if "\\boxed" not in text and "\\fbox" not in text:
        return [], False
    spans: list[tuple[int, int]] = []
    nested = False
    position = 0
    while (opener := _BOX_OPENER.search(text, position)) is not None:
        end = _closing_brace(text, opener.end())
        if end is None:
            break  # it never closes, so every later brace is inside it
        nested = nested or _BOX_OPENER.search(text, opener.end(), end) is not None
        spans.append((opener.end(), end))
        position = end + 1
    return spans, nested


def _closing_brace(text: str, start: int) -> int | None:
    """The index of the brace closing the one opened just before ``start``, or None. By chunks: one with
    fewer closing braces than the depth cannot close the box, so it is only counted (in C); in the others,
    each closing brace costs one step."""
    depth, position, end = 1, start, len(text)
    while position < end:
        stop = min(position + _BRACE_CHUNK, end)
        closes = text.count("}", position, stop)
        if closes < depth:
            depth += text.count("{", position, stop) - closes
            position = stop
            continue
        *pieces, last = text[position:stop].split("}")
        for piece in pieces:
            depth += piece.count("{") - 1
            position += len(piece) + 1
            if depth == 0:
                return position - 1
        depth += last.count("{")
        position = stop
    return None


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (nested braces allowed), or None."""
    spans, _ = boxed_spans(text)
    return text[spans[-1][0] : spans[-1][1]] if spans else None


def tag_contents(text: str, tag: str) -> list[str]:
    """The contents of every ``<tag>...</tag>`` (each opening tag closed by the next closing one)."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    last_close = text.rfind(closing)
    found: list[str] = []
    position = 0
    while last_close != -1:
        start = text.find(opening, position)
        if start == -1 or start > last_close:
            break
        end = text.find(closing, start + len(opening))
        found.append(text[start + len(opening) : end])
        position = end + len(closing)
    return found


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced code block as (language, body): a line opening with three backticks (its first word is
    the language) up to the next three backticks."""
    blocks: list[tuple[str, str]] = []
    position = 0
    while True:
        start = text.find("```", position)
        if start == -1:
            break
        newline = text.find("\n", start + 3)
        if newline == -1:
            break
        end = text.find("```", newline + 1)
        if end == -1:
            break
        language = _FENCE_LANGUAGE.match(text, start + 3).group(0)  # type: ignore[union-attr]  # the pattern matches the empty string: never None
        blocks.append((language, text[newline + 1 : end]))
        position = end + 3
    return blocks


def bash_commands(completion: str) -> str:
    """The commands of every ```bash (or ```sh, ```shell) block of ``completion``, in order: what a plain
    text answer to a terminal-state task does to the work dir."""
    blocks = [body for language, body in fenced_blocks(completion) if language.lower() in ("bash", "sh", "shell")]
    return "\n".join(block.strip("\n") for block in blocks).strip()


def find_answer(completion: str, how: Extract = "auto") -> Answer:
    """The answer part of ``completion`` (reasoning in <think> tags is always dropped first).

    ``auto`` tries \\boxed{}, then <answer> tags, then "answer is / Answer:" lines, then the last line.
    Several *different* answers of the kind found (restating the same one is fine), a box inside a box,
    and a box holding several lines are refused: the answer is then "" and ``problem`` says why.
    """
    text = strip_think(completion)
    if how == "full":
        return Answer(fold(text).strip(), "", "full")
    if how in ("auto", "boxed"):
        spans, nested = boxed_spans(text)
        if nested:
            return Answer("", "a \\boxed{} inside another \\boxed{}", "boxed")
        if spans:
            answer = _the_one([text[start:end] for start, end in spans], "\\boxed{}", "boxed")
            if not answer.problem and _several_lines(answer.text):
                return Answer("", "several lines in one \\boxed{} answer", "boxed")
            return answer
        if how == "boxed":
            return Answer("", "no \\boxed{} answer")
    if how in ("auto", "answer_tag"):
        tags = tag_contents(text, "answer")
        if any("<answer>" in tag for tag in tags):
            return Answer("", "nested <answer> tags", "answer_tag")
        if tags:
            return _the_one(tags, "<answer>", "answer_tag")
        if how == "answer_tag":
            return Answer("", "no <answer></answer> tags")
    if how == "auto":
        lines = _ANSWER_LINE.findall(text)
        if lines:
            return _the_one(lines, "'answer is' line", "answer_line")
    for line in reversed(text.splitlines()):
        if line.strip():
            return Answer(fold(line).strip(), "", "last_line")
    return Answer("", "the answer is empty")


def extract_answer(completion: str, how: Extract = "auto") -> str:
    """The answer text of ``completion`` ("" when there is none; see :func:`find_answer`)."""
    return find_answer(completion, how).text


def _the_one(candidates: list[str], label: str, source: Source) -> Answer:
    """The single answer among ``candidates``, or the problem: several different ones. Empty candidates
    count only when all are empty (``\\boxed{}`` said while explaining the format is not an answer)."""
    if len(candidates) == 1:  # the usual case, on the grading hot path
        text = fold(candidates[0]).strip()
        return Answer(text, "" if text else f"the {label} answer is empty", source)
    given = [text for candidate in candidates if (text := fold(candidate).strip())]
    if not given:
        return Answer("", f"the {label} answer is empty", source)
    distinct = {" ".join(candidate.split()).strip(WHITESPACE + ".,;:!?").casefold() for candidate in given}
    if len(distinct) > 1:
        return Answer("", f"{len(distinct)} different {label} answers (a hedge counts as no answer)", source)
    return Answer(given[-1], "", source)


def _several_lines(content: str) -> bool:
    """A box holding line breaks (``\\\\`` outside \\begin..\\end environments, or several text lines)."""
    if "\\\\" not in content and "\n" not in content:
        return False
    depth = 0
    for token in _LATEX_LINE_TOKEN.finditer(content):
        if token.group().startswith("\\begin"):
            depth += 1
        elif token.group().startswith("\\end"):
            depth = max(0, depth - 1)
        elif depth == 0:
            return True
    return sum(1 for line in content.splitlines() if line.strip()) > 1


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
_OPERATORS = "^*/_×÷·+-−±∓√∛∜"  # a number next to one is an operand of an expression, not the answer
_SCRIPTS = re.compile("[\u00b2\u00b3\u00b9\u2070-\u209c]")  # super- and subscripts: 2³, x₂
_CURRENCY = "$€£¥\\ "  # between a sign and its number: "-$5"
_COMMAND = re.compile(r"\\([A-Za-z]+)\s*\Z")
_COMMAND_AFTER = re.compile(r"\\([A-Za-z]+)")
_PLAIN_COMMANDS = frozenset({"boxed", "fbox", "text", "textbf", "textrm", "mathrm", "mathbf"})
# Commands that may stand next to a plain number ("5\,\text{cm}", "\approx 3"); any other one makes the
# number part of an expression: "\sqrt 2", "\pm 2", "2\pi", "2 \cdot 2".
_BESIDE_A_NUMBER = _PLAIN_COMMANDS | {"mbox", "quad", "qquad", "approx", "left", "right", "displaystyle", "textit"}


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
    last = deque(_NUMBER.finditer(text), maxlen=1)  # the last number
    match = last[0] if last else None
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
    """Whether the number at text[start:end] is part of an expression: a power ("2^{10}", "9^9^9", "2³"),
    a sum, product or quotient ("2+2", "x - 1", "2*3", "x/2"), a signed term ("5 -3"), a subscript, the
    argument of a command (\\sqrt{2}, \\sqrt 2, \\pm 2, \\dfrac{1}{2}) or a factor of one (2\\pi);
    "\\boxed{42}", "\\text{42}" and "x = -5" are plain numbers; "-$5" is none (a sign the parser would drop)."""
    before = text[max(0, start - 32) : start].rstrip()
    if before.endswith("{"):
        before = before[:-1].rstrip()
        command = _COMMAND.search(before)
        if before.endswith("}") or (command is not None and command.group(1) not in _PLAIN_COMMANDS):
            return True
    if text[start] in "+-−":  # a signed number after a term is a term of a sum: "5 -3", "(1+2) -3"
        if before[-1:].isdigit() or before[-1:] in (")", "]", "}"):
            return True
    else:  # an operator before it, maybe a currency between them ("-$5": the parser would drop the sign)
        last = before.rstrip(_CURRENCY)[-1:]
        if last and last in _OPERATORS:
            return True
    command = _COMMAND.search(before)
    if command is not None and command.group(1) not in _BESIDE_A_NUMBER:
        return True
    after = text[end : end + 32].lstrip(" \t\n)")
    if after.startswith("}") and after[1:].lstrip().startswith("{"):
        return True  # the first argument of a two-argument command
    if not after:
        return False
    if after[0] in _OPERATORS or after[0] == "π" or _SCRIPTS.match(after):
        return True
    command = _COMMAND_AFTER.match(after)
    return command is not None and command.group(1) not in _BESIDE_A_NUMBER


def _match_value(match: re.Match[str]) -> Fraction | None:
    frac_num, frac_den, slash_num, slash_den, sign, run, exponent, _ = match.groups()
    if run is None:
        numerator = _integer(frac_num if frac_num is not None else slash_num)
        denominator = _integer(frac_den if frac_den is not None else slash_den)
        if numerator is None or not denominator:  # too many digits, or a zero denominator
            return None
        ratio = Fraction(numerator, denominator)
        return ratio if ratio == 0 or Fraction(1, _LIMIT) <= abs(ratio) < _LIMIT else None
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


def sole_number(text: str, *, percent_as_fraction: bool = False) -> tuple[Fraction | None, str]:
    """The one number ``text`` states, or (None, why): no number, several different ones (a hedge such
    as "6 or 12"; restating the same value is fine), or an expression ("2^{10}"). The same bounds as
    :func:`parse_number` hold for each number, and at most _MAX_NUMBERS are looked at."""
    text = fold(text)  # "－5" and "–5" are -5, never 5
    if len(text) > 4096 and _DIGIT.search(text) is None:  # a fast scan first: _NUMBER tries every position
        return None, "no number in the answer"
    values: list[Fraction] = []
    for count, match in enumerate(_NUMBER.finditer(text)):
        if count >= _MAX_NUMBERS:
            return None, f"more than {_MAX_NUMBERS} numbers in the answer"
        start, end = match.span()
        if (start or end < len(text)) and _is_operand(text, start, end):
            return None, "the answer is an expression, not a number"
        value = _match_value(match)
        if value is None:
            return None, "not a number within ±1e308 with at most 300 digits"
        if percent_as_fraction and match.group(8):
            value /= 100
        if value not in values:
            values.append(value)
    if not values:
        return None, "no number in the answer"
    if len(values) > 1:
        shown = ", ".join(f"{float(value):g}" for value in values[:3])
        return None, f"{len(values)} different numbers in the answer ({shown}): a hedge counts as no answer"
    return values[0], ""


def answer_number(
    completion: str, how: Extract = "auto", *, percent_as_fraction: bool = False
) -> tuple[Fraction | None, str]:
    """The one number the answer of ``completion`` states (see :func:`find_answer`), or (None, why)."""
    answer = find_answer(completion, how)
    if answer.problem:
        return None, answer.problem
    return sole_number(answer.text, percent_as_fraction=percent_as_fraction)


_MAX_JSON_DEPTH = 64
_JSON_START = re.compile(r"[{\[]")
_MAX_JSON_STARTS = 1000  # bare values tried: each failing try is cheap, a megabyte of braces is not


class _Refused(ValueError):
    """JSON that parses but is not one plain value: duplicate keys, NaN/Infinity, too deep."""


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        keys = [key for key, _ in pairs]
        duplicate = next(key for key in keys if keys.count(key) > 1)
        raise _Refused(f"duplicate key {duplicate!r} in a JSON object (which one counts is undefined)")
    return found


def _no_constant(name: str) -> Any:
    raise _Refused(f"{name} is not JSON")


def _float(literal: str) -> float:
    """A JSON number with a fraction or exponent, refused where the float is not the number written:
    ``1e400`` (infinity) and ``1e-400`` (zero: an equal-looking answer to 0)."""
    value = float(literal)
    if math.isinf(value) or (
        value == 0 and any(digit in "123456789" for digit in literal.partition("e")[0].partition("E")[0])
    ):
        raise _Refused(f"the number {literal[:40]} is outside a float's range")
    return value


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant, parse_float=_float)


def _strict(text: str, start: int = 0) -> tuple[Any, int]:
    """One JSON value at ``start`` (and where it ends); _Refused for what strict JSON does not allow."""
    try:
        value, end = _DECODER.raw_decode(text, start)
    except _Refused:
        raise
    except RecursionError:
        raise _Refused(f"JSON nested deeper than {_MAX_JSON_DEPTH} levels") from None
    except json.JSONDecodeError:
        raise
    except ValueError as error:  # e.g. an integer past Python's digit limit
        raise _Refused(f"not usable JSON: {error}") from None
    if text.count("[", start, end) + text.count("{", start, end) > _MAX_JSON_DEPTH:  # else it cannot be too deep
        _check_depth(value)
    return value, end


def _check_depth(value: Any) -> None:
    level = [value]
    for _ in range(_MAX_JSON_DEPTH + 1):
        level = [
            child
            for node in level
            if isinstance(node, dict | list)
            for child in (node.values() if isinstance(node, dict) else node)
        ]
        if not level:
            return
    raise _Refused(f"JSON nested deeper than {_MAX_JSON_DEPTH} levels")


def find_json(text: str) -> Any:
    """The JSON value in a completion: its ```json block (or plain ``` block), else the first parseable
    {...} or [...]. Strict: duplicate keys, NaN/Infinity and nesting past 64 levels are refused, and so
    are several different JSON values (a hedge).

    Raises ValueError saying why when there is no usable value.
    """
    text = strip_think(text)
    blocks = fenced_blocks(text)
    labelled = [_whole_block(body) for language, body in blocks if language.lower() == "json"]
    plain = [body for language, body in blocks if not language]
    if labelled:  # a plain block that holds JSON too is another answer: compared, so a hedge is refused
        return _one_value(labelled + [value for body in plain if (value := _maybe_json(body)) is not None])
    if plain:
        return _one_value([_whole_block(body) for body in plain])
    values: list[Any] = []
    position, starts = 0, 0
    while len(values) < 2:
        found = _JSON_START.search(text, position)
        if found is None or starts >= _MAX_JSON_STARTS:
            break
        start = found.start()
        starts += 1
        try:
            value, end = _strict(text, start)
        except json.JSONDecodeError:
            position = start + 1
            continue
        # A second value of the same kind that differs is a hedge; a "[1]" after an object is prose.
        if not values or (type(value) is type(values[0]) and value != values[0]):
            values.append(value)
        position = end
    if not values:
        raise ValueError("no JSON object or array found")
    return _one_value(values)


def _whole_block(body: str) -> Any:
    body = body.strip()
    if not body:
        raise ValueError("the ```json block is empty")
    value, end = _strict(body)
    if body[end:].strip():
        raise ValueError("text after the JSON value in its ```json block (one value per block)")
    return value


def _maybe_json(body: str) -> Any:
    """A plain block's JSON value, or None when it holds no JSON (prose, code); refused JSON still raises."""
    try:
        return _whole_block(body)
    except json.JSONDecodeError:
        return None
    except _Refused:
        raise
    except ValueError:  # empty, or text after the value
        return None


def _one_value(values: list[Any]) -> Any:
    first = values[0]
    if any(value != first for value in values[1:]):
        raise ValueError(f"{len(values)} different JSON values (a hedge counts as no answer)")
    return first
