"""Repository ids, release tags and version requirements, parsed in one place: ``owner/name[@spec]``.

Names are case-insensitive: every owner, user, organization and repository name has one stored spelling,
lowercase (``Alice/Quiz`` is ``alice/quiz``), the same rule pip applies to distribution names. Every name
enters through :func:`canonical_name`, so namespaces compare exactly everywhere else.

A release tag is ``v`` + a PEP 440 version in normalized form (``v1.2.0``, ``v2.0.0rc1``).

Specs: an exact version (``1.2.0``), a caret range (``^1.2`` = ``>=1.2,<2``; ``^0.3`` = ``>=0.3,<0.4``),
``~=1.2`` and any other PEP 440 specifier set, or ``latest`` (the newest release; pre-releases only
when nothing else exists).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from verihub.hub.errors import VersionNotFoundError

__all__ = ["RESERVED_OWNERS", "RepoId", "Requirement", "VersionNotFoundError", "VersionSpec", "canonical_name", "is_release_like",
           "release_version", "release_versions"]

_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9._-]{0,94}[a-z0-9])?$")
# Owners the server's routes spell out (/datasets/OWNER/NAME next to /OWNER/NAME): no namespace may take them.
RESERVED_OWNERS = frozenset({"api", "datasets", "files", "models", "simple", "spaces"})


def canonical_name(value: str, part: str = "name", within: str | None = None) -> str:
    """``value`` as the hub stores it (lowercase); ValueError naming the rule it breaks."""
    lowered = value.strip().lower() if value.isascii() else ""
    if not _NAME.match(lowered) or ".." in lowered or "--" in lowered:
        where = f" in {within!r}" if within is not None else ""
        raise ValueError(f"repository {part} {value!r}{where}: use letters, digits, '-', '_' and '.', start and end "
                         "with a letter or digit, no '--' or '..', at most 96 characters")
    if part == "owner" and lowered in RESERVED_OWNERS:
        raise ValueError(f"repository owner {value!r}: {', '.join(sorted(RESERVED_OWNERS))} are reserved (server routes)")
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
            raise ValueError(f"repository id {text!r} must look like owner/name")
        return cls(owner, name)

    def __str__(self) -> str:
        return f"{self.owner}/{self.name}"

    def close_matches(self, known: Iterable[str]) -> list[str]:
        return difflib.get_close_matches(str(self), list(known), n=3, cutoff=0.6)


@dataclass(frozen=True)
class VersionSpec:
    text: str
    specifier: SpecifierSet | None  # None: latest

    @classmethod
    def parse(cls, text: str | None) -> VersionSpec:
        raw = (text or "latest").strip()
        if raw == "latest":
            return cls(raw, None)
        try:
            if raw.startswith("^"):
                return cls(raw, _caret(raw[1:]))
            if raw[0].isdigit():
                return cls(raw, SpecifierSet(f"=={Version(raw)}"))
            return cls(raw, SpecifierSet(raw))
        except (InvalidVersion, InvalidSpecifier):
            raise ValueError(f"version spec {raw!r}: use 1.2.0, ^1.2, ~=1.2, a PEP 440 range or latest") from None

    def best(self, versions: Iterable[str]) -> str:
        """The newest of ``versions`` that satisfies this spec; VersionNotFoundError listing them otherwise."""
        parsed = sorted((Version(v), v) for v in versions)  # every caller passes release_versions()
        if self.specifier is None:
            releases = [pair for pair in parsed if not pair[0].is_prerelease]
            candidates = releases or parsed
        else:
            candidates = [pair for pair in parsed if self.specifier.contains(pair[0], prereleases=True)]
            finals = [pair for pair in candidates if not pair[0].is_prerelease]
            candidates = finals or candidates
        if not candidates:
            shown = ", ".join(v for _, v in parsed) or "none"
            raise VersionNotFoundError(f"no version matches {self.text!r}; published: {shown}")
        return candidates[-1][1]

    def __str__(self) -> str:
        return self.text


def _caret(base: str) -> SpecifierSet:
    version = Version(base)
    parts = list(version.release) + [0, 0]
    major, minor, patch = parts[:3]
    if major:
        upper = f"{major + 1}"
    elif minor or len(version.release) < 3:
        upper = f"0.{minor + 1}"
    else:
        upper = f"0.0.{patch + 1}"
    return SpecifierSet(f">={version},<{upper}")


@dataclass(frozen=True)
class Requirement:
    """``owner/name[@spec]``."""

    repo: RepoId
    spec: VersionSpec

    @classmethod
    def parse(cls, text: str) -> Requirement:
        repo, _, spec = text.partition("@")
        return cls(RepoId.parse(repo), VersionSpec.parse(spec or None))

    def __str__(self) -> str:
        return f"{self.repo}@{self.spec}"


def is_release_like(name: str) -> bool:
    """Whether a ref name reads as a version tag (``v`` + any PEP 440 version): such names belong to releases."""
    if not name.startswith("v"):
        return False
    try:
        Version(name[1:])
    except InvalidVersion:
        return False
    return True


def release_version(tag: str) -> str | None:
    """The version a release tag names (``v1.2.0`` -> ``1.2.0``); None for any other tag."""
    if not is_release_like(tag):
        return None
    version = tag[1:]
    return version if str(Version(version)) == version else None


def release_versions(tags: Iterable[str]) -> list[str]:
    """The versions of the release tags among ``tags``, oldest first: the one ordering of versions."""
    found = [version for version in map(release_version, tags) if version is not None]
    return sorted(found, key=Version)
