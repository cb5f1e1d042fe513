"""Environment refs that name a hub package, ``owner/name[@spec]``: installed from the hub (when the version here
does not satisfy the spec), then loaded by name. Every other ref goes to :func:`~verihub.load_env` as it is.

The SDK reaches the hub through the installed hub client (the ``verihub.hubs`` entry point, verihub-hub's), so
that the trainers (``GRPOTrainer(envs={"alice/quiz@^1.0": 1})``) and ``verihub regrade --env alice/quiz@2.0.0``
read a ref by the same rule.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from verihub.environment.core import Environment, load_env
from verihub.environment.installed import open_installed_hub, ref_scheme
from verihub.errors import VerihubError
from verihub.ids import RepoId, dist_name

__all__ = ["load_env_ref", "names_hub_package"]

HF_DATASETS = "hf://"  # hf://datasets/ORG/NAME[@REV]: its loader reads the hub itself


def names_hub_package(ref: str | Path) -> bool:
    """Whether ``ref`` names a hub package (``owner/name`` or ``owner/name@spec``), not a directory, an installed
    name, an adapter's ref or an ``hf://`` dataset. Without ``@``, a path that exists (or whose folder does) is a
    directory: its own error then says precisely what is missing there."""
    text = str(ref)
    if ref_scheme(text) is not None or "/" not in text:
        return False
    path = Path(text)
    return "@" in text or not (path.exists() or path.parent.exists())


def load_env_ref(ref: str | Path, *, hub: str | None = None, token: str | None = None, **options: Any) -> Environment:
    """The environment ``ref`` names, with ``load_env``'s ``options``. A hub package is pip-installed into this
    interpreter from ``hub`` (a server URL or a directory; default: the configured one) first, unless the
    version installed satisfies its spec (the hub is not even opened when that is plain: no spec, ``latest``, or
    the very version installed); an ``hf://`` ref's loader reads ``hub`` with ``token``."""
    text = str(ref)
    if text.startswith(HF_DATASETS):
        return load_env(text, hub=hub, token=token, **options)
    if not names_hub_package(text):
        return load_env(text, **options)
    repo, installed = _installed(text) or open_installed_hub(
        hub, token, needed_for="an environment named owner/name@version"
    ).ensure_installed(text)
    env = load_env(str(repo), **options)
    if not _same_version(env.version, installed):  # a directory of that name here wins over the package
        raise VerihubError(
            f"{text}: {installed} is installed, but loading {repo} gave {env.id}@{env.version} from {env.root}; "
            "move that directory, or name the environment by its path"
        )
    return env


def _installed(text: str) -> tuple[RepoId, str] | None:
    """The package and its version when the one installed here is what ``text`` asks for on its face (any version
    for ``owner/name`` or ``@latest``, that very version for ``@1.2.0``); None: ask the hub, whose spec rules
    decide the rest (ranges, carets)."""
    name, _, spec = text.partition("@")
    repo = RepoId.parse(name)
    try:
        installed = version(dist_name(repo))
    except PackageNotFoundError:
        return None
    spec = spec.strip()
    if spec in ("", "latest") or (spec[:1].isdigit() and _same_version(spec, installed)):
        return repo, installed
    return None


def _same_version(one: str, other: str) -> bool:
    try:
        return Version(one) == Version(other)
    except InvalidVersion:
        return one == other
