"""What an environment's grades depend on, as digests: an eval's results record them, so a changed
verifier or dataset under the same version is told apart from the environment that graded them."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from verihub.checks.registry import resolve_check
from verihub.environment.core import Environment
from verihub.errors import VerihubError

__all__ = ["content_changes", "content_manifest", "environment_digest", "manifest_digest"]

# Caches, build outputs and virtual environments are not part of what grades; hidden entries neither.
_SKIP_DIRS = frozenset({"__pycache__", "build", "dist", "venv", "node_modules"})
_SKIP_SUFFIXES = (".pyc", ".pyo")
_CHUNK = 1 << 20


def content_manifest(
    env: Environment, tasks: Iterable[Mapping[str, Any]], *, skip: Callable[[Path], bool] = lambda _: False
) -> dict[str, str]:
    """sha256 of each part a grade depends on: the parsed spec, the tasks, each layer's check code (the
    module defining it) or rubric, and every file in the environment's directory except hidden ones,
    caches, build outputs and the files and directories ``skip`` names (an eval's results)."""
    manifest = {
        "spec": _sha(json.dumps(env.spec.model_dump(mode="json"), sort_keys=True).encode()),
        "tasks": _sha(json.dumps([dict(task) for task in tasks], sort_keys=True, default=str).encode()),
    }
    for layer in env.spec.verifier:
        manifest[f"layer {layer.name}"] = _layer_digest(layer, env.root)
    if env.root.is_dir():
        root = env.root.resolve()
        for path in _files(root, skip):
            manifest[f"file {path.relative_to(root).as_posix()}"] = _file_sha(path)
    return manifest


def environment_digest(env: Environment) -> str:
    """One digest of everything an environment grades with, every split's tasks included: ``verihub
    serve`` shows it in ``/metadata`` so a client sends work only to servers grading the very same
    content. Computed once per environment (eval result directories inside it are left out)."""
    digest = _DIGESTS.get(env)
    if digest is None:
        tasks = [task for split in env.split_names for task in env.dataset(split)]
        digest = _DIGESTS[env] = manifest_digest(content_manifest(env, tasks, skip=_holds_results))
    return digest


def _holds_results(path: Path) -> bool:
    directory = path if path.is_dir() else path.parent
    return (directory / "rollouts.jsonl").is_file()  # an eval's output (verihub.eval._outdir), not content


_DIGESTS: weakref.WeakKeyDictionary[Environment, str] = weakref.WeakKeyDictionary()


def manifest_digest(manifest: Mapping[str, str]) -> str:
    """One digest for a whole manifest."""
    return _sha(json.dumps(dict(manifest), sort_keys=True).encode())


def content_changes(earlier: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """What differs between two manifests, in words: ``"file data/tasks.jsonl changed"``."""
    changes = [f"{name} changed" for name in sorted(earlier.keys() & now.keys()) if earlier[name] != now[name]]
    changes += [f"{name} removed" for name in sorted(earlier.keys() - now.keys())]
    changes += [f"{name} added" for name in sorted(now.keys() - earlier.keys())]
    return changes


def _layer_digest(layer: Any, root: Path) -> str:
    if layer.rubric is not None:
        path = root / str(layer.rubric)
        return _file_sha(path) if path.is_file() else "missing"
    try:
        function = inspect.unwrap(resolve_check(str(layer.use)).fn)
    except VerihubError:
        return "unresolved"
    defined_by = function if inspect.isroutine(function) or inspect.isclass(function) else type(function)
    try:
        source = inspect.getsourcefile(defined_by)
    except TypeError:  # built into the interpreter
        source = None
    return _file_sha(Path(source)) if source and Path(source).is_file() else "no source file"


def _files(root: Path, skip: Callable[[Path], bool]) -> Iterator[Path]:
    for directory, subdirs, names in os.walk(root):
        here = Path(directory)
        subdirs[:] = sorted(
            name
            for name in subdirs
            if not name.startswith(".")
            and name not in _SKIP_DIRS
            and not name.endswith(".egg-info")
            and not skip(here / name)
        )
        for name in sorted(names):
            path = here / name
            if not name.startswith(".") and not name.endswith(_SKIP_SUFFIXES) and path.is_file() and not skip(path):
                yield path


def _file_sha(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
