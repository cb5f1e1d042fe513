"""Versions of packages: release tags and version requirements, parsed in one place: ``owner/name[@spec]``
(the ``owner/name`` part is :mod:`verihub.ids`).

A release tag is ``v`` + a PEP 440 version in normalized form (``v1.2.0``, ``v2.0.0rc1``).

Specs: an exact version (``1.2.0``), a caret range (``^1.2`` = ``>=1.2,<2``; ``^0.3`` = ``>=0.3,<0.4``),
``~=1.2`` and any other PEP 440 specifier set, or ``latest`` (the newest release; pre-releases only
when nothing else exists).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from verihub import _lazy, ids
from verihub.errors import UsageError
from verihub.hub.errors import VersionNotFoundError

__all__ = [
    "Requirement",
    "VersionNotFoundError",
    "VersionSpec",
    "is_release_like",
    "release_version",
    "release_versions",
]


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
            raise UsageError(f"version spec {raw!r}: use 1.2.0, ^1.2, ~=1.2, a PEP 440 range or latest") from None

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

    repo: ids.RepoId
    spec: VersionSpec

    @classmethod
    def parse(cls, text: str) -> Requirement:
        repo, _, spec = text.partition("@")
        return cls(ids.RepoId.parse(repo), VersionSpec.parse(spec or None))

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


# verihub 0.1 had the package ids here
__getattr__ = _lazy.moved_names(globals(), "verihub.ids", names=("RESERVED_OWNERS", "RepoId", "canonical_name"))
