"""Reading a repository card (``README.md``): its YAML front-matter, its tags, its body and the line listings show.

A card is untrusted input: the front-matter is parsed with ``safe_load``, a malformed or nested-past-reason one
reads as empty, and only plain values are taken from it.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

__all__ = ["body", "front_matter", "split", "summary", "tags"]

_FRONT = re.compile(r"^---\n(.*?)\n---[ \t]*(?:\n|$)", re.DOTALL)


def split(card: str) -> tuple[dict[str, Any], str]:
    """(the front-matter, ``{}`` when there is none or it does not parse as a mapping; the body after it)."""
    match = _FRONT.match(card)
    if match is None:
        return {}, card
    try:
        data = yaml.safe_load(match.group(1))
    except (yaml.YAMLError, RecursionError):  # RecursionError: nested past what the parser follows
        data = None
    return (data if isinstance(data, dict) else {}), card[match.end() :]


def front_matter(card: str) -> dict[str, Any]:
    return split(card)[0]


def body(card: str) -> str:
    """A card without its front-matter."""
    return split(card)[1].strip()


def tags(card: str | dict[str, Any]) -> list[str]:
    """The card's ``tags`` (of its text, or of its parsed front-matter): plain values only, as text."""
    front = front_matter(card) if isinstance(card, str) else card
    found = front.get("tags")
    return [str(tag) for tag in found if isinstance(tag, str | int | float)] if isinstance(found, list) else []


def summary(card: str) -> str:
    """The first line of prose of a card: what listings show."""
    for line in body(card).splitlines():
        if line.strip() and not line.startswith("#"):
            return line.strip()[:160]
    return ""
