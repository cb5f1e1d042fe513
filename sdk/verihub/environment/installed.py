"""Environments installed as Python packages, found through the ``verihub.environments`` entry points, and
loaders of environments from elsewhere, found through ``verihub.adapters``.

An environment package declares, in its pyproject.toml::

    [project.entry-points."verihub.environments"]
    arithmetic = "arithmetic_env"      # name = the package that holds environment.yaml

The hub client (verihub-hub) declares how to open a hub, ``verihub.hubs``: ``open_hub(location, token)``
(:func:`open_installed_hub`), which the CLI and hub ids with versions (:mod:`.hub_refs`) use.

A loader declares the scheme of the refs it loads (``openenv`` for ``openenv:URL``, ``hf`` for
``hf://datasets/...``): every ecosystem verihub adapts is one, its own included, so a third-party package adds
one the same way and :func:`~verihub.load_env` knows none by name::

    [project.entry-points."verihub.adapters"]
    hf = "verihub.hub.hf_datasets:load_hf_env"

A loader is called ``load(ref, *, on_missing_judge, judge=..., size=..., seed=..., difficulty=..., config=...,
**settings) -> Environment``, given only the keywords the caller gave (``judge`` made from ``judge_model``
where one was named), and says which it does not take with a TypeError.
"""

from __future__ import annotations

import importlib
import importlib.resources
import re
from collections.abc import Callable
from importlib.metadata import EntryPoint, PackageNotFoundError, distribution, entry_points
from pathlib import Path
from typing import Any

__all__ = [
    "ADAPTER_ENTRY_POINT_GROUP",
    "ENV_ENTRY_POINT_GROUP",
    "HUBS_ENTRY_POINT_GROUP",
    "adapter_for",
    "adapter_schemes",
    "ref_scheme",
    "hub_env_entry_point",
    "installed_env_dir",
    "installed_envs",
    "open_installed_hub",
]

ENV_ENTRY_POINT_GROUP = "verihub.environments"
ADAPTER_ENTRY_POINT_GROUP = "verihub.adapters"
HUBS_ENTRY_POINT_GROUP = "verihub.hubs"


def open_installed_hub(location: str | None, token: str | None, *, needed_for: str = "publishing") -> Any:
    """The hub at ``location`` (a server URL or a directory; None: the configured one), through the installed hub
    client; MissingDependencyError, saying what ``needed_for`` it, when there is none."""
    from verihub.errors import MissingDependencyError

    found = sorted(entry_points(group=HUBS_ENTRY_POINT_GROUP), key=lambda entry: entry.name)
    if not found:
        raise MissingDependencyError(
            f"{needed_for} needs verihub's hub client (the verihub-hub package): pip install verihub"
        )
    return found[0].load()(location, token)


_SCHEME = re.compile(r"([a-z][a-z0-9+.-]*):")  # lowercase: a drive letter (C:) is a path


def ref_scheme(ref: str) -> str | None:
    """The scheme a ref names (``openenv`` for ``openenv:URL``, ``hf`` for ``hf://...``), or None."""
    found = _SCHEME.match(ref)
    return found.group(1) if found else None


def adapter_for(ref: str) -> Callable[..., Any] | None:
    """The installed loader of ``ref``'s scheme, if one is registered."""
    scheme = ref_scheme(ref)
    if scheme is None:
        return None
    found = {entry.value: entry for entry in entry_points(group=ADAPTER_ENTRY_POINT_GROUP) if entry.name == scheme}
    if len(found) > 1:  # never one picked by install order: a package must not silently take another's scheme
        from verihub.errors import UsageError

        raise UsageError(f"two installed loaders register {scheme}: refs ({', '.join(sorted(found))}): uninstall one")
    return next(iter(found.values())).load() if found else None


def adapter_schemes() -> list[str]:
    """The schemes installed loaders register, sorted."""
    return sorted({entry.name for entry in entry_points(group=ADAPTER_ENTRY_POINT_GROUP)})


def installed_envs() -> dict[str, list[EntryPoint]]:
    """Installed environment name -> the entry points that provide it (more than one is ambiguous)."""
    found: dict[str, list[EntryPoint]] = {}
    for entry_point in entry_points(group=ENV_ENTRY_POINT_GROUP):
        found.setdefault(entry_point.name, []).append(entry_point)
    return found


def hub_env_entry_point(distribution_name: str) -> EntryPoint | None:
    """The environment entry point of an installed distribution (a hub package ``owner-name``)."""
    try:
        found = distribution(distribution_name).entry_points
    except PackageNotFoundError:
        return None
    matches = [ep for ep in found if ep.group == ENV_ENTRY_POINT_GROUP]
    return matches[0] if matches else None


def installed_env_dir(entry_point: EntryPoint) -> Path:
    """The directory of an installed environment's package (where its environment.yaml lies).

    Asked of the distribution first: importing the package could find another copy earlier on
    sys.path (loading an environment from its source directory puts that directory there).
    """
    package = entry_point.value.partition(":")[0]
    if entry_point.dist is not None:
        installed = Path(str(entry_point.dist.locate_file(package.replace(".", "/"))))
        if (installed / "environment.yaml").is_file():
            return installed
    return Path(str(importlib.resources.files(importlib.import_module(package))))  # e.g. an editable install
