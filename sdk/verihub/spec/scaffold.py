"""``verihub init``: copy a package template and fill in the environment's name."""

from __future__ import annotations

import importlib.resources
import re
import shutil
from pathlib import Path

from verihub.errors import TargetExistsError, TemplateNotFoundError, UsageError

__all__ = ["TEMPLATES", "init_env"]

TEMPLATES = ("single-turn", "tool", "judge")
_NAME = re.compile(r"^[a-z][a-z0-9-]*$")
# Tokens the template files carry in place of the names `init` fills in.
_ENV_NAME, _MODULE = "__ENV_NAME__", "__MODULE__"


def init_env(name: str, template: str = "single-turn", directory: Path | None = None) -> Path:
    """Create a new environment package ``name`` from ``template``; returns its directory."""
    if not _NAME.match(name):
        raise UsageError(f"environment name {name!r}: use lowercase letters, digits and '-', starting with a letter")
    if template not in TEMPLATES:
        raise TemplateNotFoundError(f"no template {template!r}; templates: {', '.join(TEMPLATES)}")
    target = (directory or Path.cwd()) / name
    if target.exists():
        raise TargetExistsError(f"{target} already exists; choose another name or remove it")
    module = name.replace("-", "_") + "_env"
    source = importlib.resources.files("verihub.templates") / template
    with importlib.resources.as_file(source) as source_dir:
        staging = target.with_name(f".{name}.partial")
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(source_dir, staging, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for path in sorted(staging.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            path.write_text(text.replace(_ENV_NAME, name).replace(_MODULE, module), encoding="utf-8")
        if _MODULE in path.name:
            path.rename(path.with_name(path.name.replace(_MODULE, module)))
    staging.rename(target)  # all or nothing: a failed copy never leaves a half-made package
    return target
