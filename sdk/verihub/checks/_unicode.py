"""One folding of answer text, used by every extractor: what an answer means, whatever characters spell it.

An answer is read as a reader would read it. Invisible marks (zero-width characters, bidi controls, BOMs,
variation selectors) are dropped; full-width forms, other spaces and other scripts' decimal digits
(Arabic-Indic, Devanagari, ...) become their ASCII selves; every dash that reads as a minus becomes "-", so a
sign is never silently lost. Nothing else is folded: unlike NFKC, superscripts, subscripts, circled digits and
vulgar fractions keep their meaning (``2³`` is not ``23``), and look-alike letters of other scripts stay what
they are (:data:`LOOKALIKE_CAPITALS` names the ones that pose as Latin capitals). Linear, and free on ASCII.
"""

from __future__ import annotations

import unicodedata

__all__ = ["LOOKALIKE_CAPITALS", "fold"]

_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2796\ufe58\ufe63\uff0d"  # hyphens, dashes, minus signs
_INVISIBLE_MARKS = {0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0}  # grapheme joiner, Hangul fillers (not Cf)

LOOKALIKE_CAPITALS = frozenset("АВСЕНІЈКМОРЅТХУԚԜΑΒΕΖΗΙΚΜΝΟΡΤΥΧ")
"""Cyrillic and Greek letters drawn like Latin capitals (A B C E H I J K M O P S T X Y ...)."""


class _Folding(dict[int, "str | None"]):
    """``str.translate``'s table, filled per code point on first sight."""

    def __missing__(self, code: int) -> str | None:
        char = chr(code)
        folded: str | None = char
        if unicodedata.category(char) == "Cf" or code in _INVISIBLE_MARKS or 0xFE00 <= code <= 0xFE0F \
                or 0xE0100 <= code <= 0xE01EF:
            folded = None  # format controls, variation selectors: no meaning of their own
        elif char in _DASHES:
            folded = "-"
        elif 0xFF01 <= code <= 0xFF5E:
            folded = chr(code - 0xFEE0)  # full-width ASCII
        elif unicodedata.category(char) == "Zs":
            folded = " "
        elif (digit := unicodedata.decimal(char, None)) is not None:
            folded = str(digit)  # decimal digits only: superscripts and circled digits are no digits
        self[code] = folded
        return folded


_FOLDING = _Folding()


def fold(text: str) -> str:
    """``text`` as it reads: see the module's description. Idempotent."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFC", text.translate(_FOLDING))
