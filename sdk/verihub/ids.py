"""Package ids: ``owner/name``, in the one spelling every part compares, and the distribution it installs as.

Names are case-insensitive: every owner, user, organization and repository name has one stored spelling,
lowercase (``Alice/Quiz`` is ``alice/quiz``), the same rule pip applies to distribution names. Every name
enters through :func:`canonical_name`, so namespaces compare exactly everywhere else. Versions and
requirements (``owner/name@^1.2``) are the hub's: :mod:`verihub.hub.ids`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.utils import canonicalize_name

from verihub.errors import UsageError

__all__ = ["RESERVED_OWNERS", "RepoId", "canonical_name", "dist_name"]

_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9._-]{0,94}[a-z0-9])?$")
# Owners the server's routes spell out (/datasets/OWNER/NAME next to /OWNER/NAME): no namespace may take them.
RESERVED_OWNERS = frozenset({"api", "datasets", "files", "models", "simple", "spaces"})


def canonical_name(value: str, part: str = "name", within: str | None = None) -> str:
    """``value`` as the hub stores it (lowercase); ValueError naming the rule it breaks."""
    lowered = value.strip().lower() if value.isascii() else ""
    if not _NAME.match(lowered) or ".." in lowered or "--" in lowered:
        where = f" in {within!r}" if within is not None else ""
        raise UsageError(
            f"repository {part} {value!r}{where}: use letters, digits, '-', '_' and '.', start and end "
            "with a letter or digit, no '--' or '..', at most 96 characters"
        )
    if part == "owner" and lowered in RESERVED_OWNERS:
        raise UsageError(
            f"repository owner {value!r}: {', '.join(sorted(RESERVED_OWNERS))} are reserved (server routes)"
        )
    return lowered


@dataclass(frozen=True, order=True)
class RepoId:
    """``owner/name`` in canonical (lowercase) spelling, however it was constructed."""

    owner: str
    name: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "owner", canonical_name(self.owner, "owner", f"{self.owner}/{self.name}"))
        object.__setattr__(self, "name", canonical_name(self.name, "name", f"{self.owner}/{self.name}"))

    @classmethod
    def parse(cls, text: str) -> RepoId:
        """``owner/name``; ValueError naming the rule that ``text`` breaks."""
        owner, slash, name = text.strip().partition("/")
        if not slash or "/" in name:
            raise UsageError(f"repository id {text!r} must look like owner/name")
        return cls(owner, name)

    def __str__(self) -> str:
        return f"{self.owner}/{self.name}"

    def close_matches(self, known: Iterable[str]) -> list[str]:
        return difflib.get_close_matches(str(self), list(known), n=3, cutoff=0.6)


def dist_name(repo: RepoId) -> str:
    """The distribution name a package ``owner/name`` publishes and installs under: ``owner-name``,
    normalized (PEP 503)."""
    return canonicalize_name(f"{repo.owner}-{repo.name}")
