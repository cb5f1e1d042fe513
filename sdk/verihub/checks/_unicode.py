"""One folding of answer text, used by every extractor: what an answer means, whatever characters spell it.

An answer is read as a reader would read it. Invisible marks (zero-width characters, bidi controls, BOMs,
variation selectors) are dropped; full-width forms, other spaces and other scripts' decimal digits
(Arabic-Indic, Devanagari, ...) become their ASCII selves; every dash that reads as a minus becomes "-", so a
sign is never silently lost. Nothing else is folded: unlike NFKC, superscripts, subscripts, circled digits and
vulgar fractions keep their meaning (``2³`` is not ``23``), and look-alike letters of other scripts stay what
they are (:data:`LOOKALIKE_CAPITALS` names the ones that pose as Latin capitals). :func:`compatibility_fold`
also reads compatibility forms as NFKC does, for checks that look for words however they are spelled.

Both run in time linear in the text, and are free on ASCII. Canonical ordering (part of NFC and NFKC) sorts
each run of combining marks, in time quadratic in the run's length in CPython: a few hundred kilobytes of
marks on one letter would take minutes. So a run is cut at 30 marks first, the bound Unicode's stream-safe
text format (UAX #15) sets: no text that reads as anything has more on one character.
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from collections.abc import Callable

__all__ = ["LOOKALIKE_CAPITALS", "compatibility_fold", "fold"]

_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2796\ufe58\ufe63\uff0d"  # hyphens, dashes, minus signs
_INVISIBLE_MARKS = {0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0}  # grapheme joiner, Hangul fillers (not Cf)
_MAX_MARKS = 30  # combining marks kept in a row (UAX #15's stream-safe bound)
# Where assigned code points that fold or combine are: planes 0-3, and plane 14's tags and variation
# selectors (planes 4-13 are unassigned, 15-16 private use).
_ASSIGNED = (range(0x80, 0x40000), range(0xE0000, 0xE1000))
_READ_CATEGORIES = {"Cf", "Zs", "Nd", "Mn", "Mc", "Me"}  # what fold drops or reads, and marks

LOOKALIKE_CAPITALS = frozenset("АВСЕНІЈКМОРЅТХУԚԜΑΒΕΖΗΙΚΜΝΟΡΤΥΧ")
"""Cyrillic and Greek letters drawn like Latin capitals (A B C E H I J K M O P S T X Y ...)."""


def _folded(code: int) -> str | None:
    """What ``fold`` makes of one code point (None: dropped)."""
    char = chr(code)
    if (
        unicodedata.category(char) == "Cf"
        or code in _INVISIBLE_MARKS
        or 0xFE00 <= code <= 0xFE0F
        or 0xE0100 <= code <= 0xE01EF
    ):
        return None  # format controls, variation selectors: no meaning of their own
    if char in _DASHES:
        return "-"
    if 0xFF01 <= code <= 0xFF5E:
        return chr(code - 0xFEE0)  # full-width ASCII
    if unicodedata.category(char) == "Zs":
        return " "
    if (digit := unicodedata.decimal(char, None)) is not None:
        return str(digit)  # decimal digits only: superscripts and circled digits are no digits
    return char


_MAX_EXPANSION = 6  # characters NFKC may make of one; past it (only ﷺ, ﷻ: Arabic phrases) it stays itself


def _compatibility_folded(code: int) -> str | None:
    folded = _folded(code)
    if folded is None:
        return None
    compatible = unicodedata.normalize("NFKC", folded)
    return compatible if len(compatible) <= _MAX_EXPANSION else folded


class _Table(dict[int, "str | None"]):
    """``str.translate``'s table for a per-character mapping, filled per code point on first sight."""

    def __init__(self, mapping: Callable[[int], str | None]) -> None:
        super().__init__()
        self.mapping = mapping

    def __missing__(self, code: int) -> str | None:
        self[code] = value = self.mapping(code)
        return value


def _in_a_run(mapping: Callable[[int], str | None]) -> Callable[[int], str]:
    """ "\x01" for a character whose image under ``mapping`` continues a run of combining marks (a mark, or
    nothing: a dropped character joins the marks around it), else "\x00"."""

    def marker(code: int) -> str:
        image = mapping(code)
        return "\x01" if not image or unicodedata.combining(image[0]) else "\x00"

    return marker


_folding_run, _compatibility_run = _in_a_run(_folded), _in_a_run(_compatibility_folded)
_FOLDING, _COMPATIBILITY = _Table(_folded), _Table(_compatibility_folded)
_FOLDING_RUNS, _COMPATIBILITY_RUNS = _Table(_folding_run), _Table(_compatibility_run)
# The last texts folded: every layer of a grade reads the same answer (and folds it again when it reads a
# number from it), so each fold after the first is a lookup. A str caches its hash.
_RECENT: dict[str, str] = {}
_RECENT_LOCK = threading.Lock()
_RECENT_SIZE = 16
_LONG_RUN = re.compile(f"\x01{{{_MAX_MARKS + 1},}}")


@functools.cache
def _touched() -> tuple[frozenset[str], frozenset[str], frozenset[str], frozenset[str]]:
    """For this Python's Unicode: the characters fold changes or that may join a run of marks, those
    compatibility_fold does, and the run joiners of each. Found once, on the first text that is not ASCII
    (about 0.1 s): only characters of the categories fold reads, marks, and those with a decomposition can
    be any of them."""
    folds, compatible, joins, compatible_joins = set(), set(), set(), set()
    explicit = {*_INVISIBLE_MARKS, *map(ord, _DASHES), *range(0xFE00, 0xFE10), *range(0xFF01, 0xFF5F)}
    for span in _ASSIGNED:
        for code in span:
            char = chr(code)
            if not (
                unicodedata.category(char) in _READ_CATEGORIES or unicodedata.decomposition(char) or code in explicit
            ):
                continue
            if _folding_run(code) == "\x01":
                joins.add(char)
            if _compatibility_run(code) == "\x01":
                compatible_joins.add(char)
            if _folded(code) != char:
                folds.add(char)
            elif _compatibility_folded(code) != char:
                compatible.add(char)
    return (
        frozenset(folds | joins),
        frozenset(folds | compatible | compatible_joins),
        frozenset(joins),
        frozenset(compatible_joins),
    )


def fold(text: str) -> str:
    """``text`` as it reads: see the module's description. Idempotent."""
    if text.isascii():
        return text
    with _RECENT_LOCK:
        known = _RECENT.get(text)
    if known is not None:
        return known
    folded = text
    touched, _, joins, _ = _touched()
    if not touched.isdisjoint(text):  # a set scan first: most text has nothing to fold
        folded = _capped(text, joins, _FOLDING_RUNS).translate(_FOLDING)
    folded = unicodedata.normalize("NFC", folded)
    with _RECENT_LOCK:
        _RECENT[text] = _RECENT[folded] = folded  # idempotent: folding the result again is free too
        while len(_RECENT) > _RECENT_SIZE:
            del _RECENT[next(iter(_RECENT))]
    return folded


def forget_recent() -> None:
    """Empty the memo of recent folds (for measuring what a first fold costs)."""
    with _RECENT_LOCK:
        _RECENT.clear()


def compatibility_fold(text: str) -> str:
    """``fold``, then compatibility forms as NFKC reads them (ｆｕｌｌ-width, ﬁ ligatures, ㎏, ①): for
    finding words however they are written."""
    if text.isascii():
        return text
    _, touched, _, joins = _touched()
    if not touched.isdisjoint(text):
        text = _capped(text, joins, _COMPATIBILITY_RUNS).translate(_COMPATIBILITY)
    return unicodedata.normalize("NFC", text)  # NFC of each character's NFKC is the text's NFKC


def _capped(text: str, joins: frozenset[str], runs: _Table) -> str:
    """``text`` with each run of characters that make combining marks cut at _MAX_MARKS."""
    if joins.isdisjoint(text):
        return text
    spans = [match.span() for match in _LONG_RUN.finditer(text.translate(runs))]
    if not spans:
        return text
    kept, last = [], 0
    for start, end in spans:
        kept.append(text[last : start + _MAX_MARKS])
        last = end
    kept.append(text[last:])
    return "".join(kept)
