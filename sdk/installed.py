"""Environments installed as Python packages, found through the ``verihub.environments`` entry points.

An environment package declares, in its pyproject.toml::

    [project.entry-points."verihub.environments"]
    arithmetic = "arithmetic_env"      # name = the package that holds environment.yaml
"""

from __future__ import annotations

import importlib
import importlib.resources
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

__all__ = ["ENV_ENTRY_POINT_GROUP", "installed_env_dir", "installed_envs"]

ENV_ENTRY_POINT_GROUP = "verihub.environments"


def installed_envs() -> dict[str, EntryPoint]:
    """Installed environment name -> its entry point."""
    return {ep.name: ep for ep in entry_points(group=ENV_ENTRY_POINT_GROUP)}


def installed_env_dir(entry_point: EntryPoint) -> Path:
    """The directory of an installed environment's package (where its environment.yaml lies)."""
    package = entry_point.value.partition(":")[0]
    return Path(str(importlib.resources.files(importlib.import_module(package))))
