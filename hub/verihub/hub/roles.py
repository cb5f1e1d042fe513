"""What a repository holds, read off its files, in one place.

Every repository of a hub is a dataset, as the Hugging Face Hub files RL environments; what it holds decides
which page shows it and which listings hold it:

- ``env``: an environment package (``environment.yaml`` at its root);
- ``verifier``: a verifier package (``pyproject.toml`` and a built wheel in ``dist/``, no environment.yaml);
- ``results``: eval results (``runs/<run>/metadata.json``, :mod:`verihub.hub.results`);
- ``dataset``: anything else (another framework's environment, plain data, a repository with no commit yet).

The role is a description, never a permission: visibility is :mod:`verihub.hub.policy`'s alone, and what a release
tag publishes to the pip index is decided by the tagged ``dist/`` itself (:mod:`verihub.hub.release`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from verihub.hub.results import run_of

__all__ = ["FRAMEWORKS", "PACKAGE_ROLES", "RL_ENVIRONMENT_TAG", "ROLE_TAGS", "VERIFIER_TAG", "Role", "role_of"]

Role = Literal["env", "verifier", "results", "dataset"]
PACKAGE_ROLES: tuple[Role, ...] = ("env", "verifier")  # what the pip index and `verihub install` serve
RL_ENVIRONMENT_TAG = "rl-environment"  # the Hub's tag for RL environment datasets (hub-docs, 2026-09)
FRAMEWORKS = ("verihub", "harbor", "verifiers", "openenv", "nemo-gym")  # tags naming a framework that loads one
LOADABLE = ("verihub", "harbor", "verifiers")  # the frameworks whose datasets hf://datasets/ ids load
VERIFIER_TAG = "verihub-verifier"  # a verifier package's: not an environment, so not rl-environment
# The tags a package's card carries (verihub.hub.derived), which a verihub server also lists for a package pushed
# before cards carried them, so tag filters find every package.
ROLE_TAGS: dict[Role, tuple[str, ...]] = {"env": (RL_ENVIRONMENT_TAG, "verihub"), "verifier": ("verihub", VERIFIER_TAG)}


def role_of(paths: Iterable[str]) -> Role:
    """The role of a commit holding ``paths``."""
    files = set(paths)
    if "environment.yaml" in files:
        return "env"
    if "pyproject.toml" in files and any(path.startswith("dist/") and path.endswith(".whl") for path in files):
        return "verifier"
    if any(run_of(path) for path in files):
        return "results"
    return "dataset"
