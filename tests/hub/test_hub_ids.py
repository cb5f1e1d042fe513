"""Repository ids and version specs."""

from __future__ import annotations

import pytest

from verihub.hub.ids import Requirement, VersionNotFoundError, VersionSpec
from verihub.ids import RepoId

VERSIONS = ["0.3.1", "0.4.0", "1.1.0", "1.2.0", "1.2.5", "1.9.0", "2.0.0", "2.1.0rc1"]


@pytest.mark.parametrize(
    ("spec", "chosen"),
    [
        ("latest", "2.0.0"),
        (None, "2.0.0"),
        ("1.2.0", "1.2.0"),
        ("^1.2", "1.9.0"),
        ("^0.3", "0.3.1"),
        ("~=1.2", "1.9.0"),
        ("~=1.2.0", "1.2.5"),
        (">=1.2,<1.3", "1.2.5"),
        ("==2.1.0rc1", "2.1.0rc1"),
        (">2.0", "2.1.0rc1"),
    ],
)
def test_best_version(spec: str | None, chosen: str) -> None:
    assert VersionSpec.parse(spec).best(VERSIONS) == chosen


def test_no_match_names_what_exists() -> None:
    with pytest.raises(VersionNotFoundError, match="no version matches '\\^3'; published: 0.3.1, 0.4.0"):
        VersionSpec.parse("^3").best(VERSIONS)
    with pytest.raises(VersionNotFoundError, match="published: none"):
        VersionSpec.parse("latest").best([])


@pytest.mark.parametrize("bad", ["one", "^x", "1.2.", "~=", "=>1"])
def test_bad_specs(bad: str) -> None:
    with pytest.raises(ValueError, match="version spec"):
        VersionSpec.parse(bad)


def test_requirements_and_ids() -> None:
    requirement = Requirement.parse("alice/code-repair@^1.2")
    assert requirement.repo == RepoId("alice", "code-repair") and str(requirement) == "alice/code-repair@^1.2"
    assert str(Requirement.parse("bob/sql").spec) == "latest"
    for bad in ("code-repair", "a/b/c", "alice/-x", "alice/x--y", "../etc/passwd", "alice/a..b", "al ice/x"):
        with pytest.raises(ValueError, match="repository"):
            RepoId.parse(bad)
    assert RepoId("alice", "code-repair").close_matches(["alice/code-repiar", "bob/sql"]) == ["alice/code-repiar"]
