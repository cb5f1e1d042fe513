"""A wrapped environment: an environment.yaml that names another ecosystem's environment instead of declaring
tasks and layers, so that one written for textarena, skyrl-gym, verifiers, OpenEnv or reasoning-gym, or a hub's
RL environment dataset (``hf://datasets/ORG/NAME@REV``: Harbor task folders, a verifiers row table with the layers
that grade it in ``options``), becomes a versioned hub package (``verihub push``) that installs with its package
and loads by name::

    id: guess-the-number
    version: 1.0.0
    description: textarena's GuessTheNumber, ten turns.
    source: textarena:GuessTheNumber-v0       # any load_env ref of an adapter
    options: {max_turns: 10, size: 200}       # its options; data and paths are relative to this file

The package's pyproject.toml pins what the source needs (``dependencies = ["textarena==0.7.4"]``), so
``pip install`` brings it. ``load_env`` loads the source with the options, then gives the environment this
file's identity (id, version, description, domain, tags, license).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from verihub.errors import SpecError, SpecProblem

__all__ = ["PATH_OPTIONS", "SCHEME", "WrappedSpec", "read_wrapped"]

PATH_OPTIONS = ("data", "paths")  # options that name files: relative to the environment's directory
SCHEME = re.compile(r"[a-z][a-z0-9+.-]*:")  # a load_env ref of another ecosystem: SCHEME:..., its adapter's


class WrappedSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", description="Name: lowercase letters, digits, '.', '_', '-'.")
    version: str = Field(pattern=r"^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$", description="MAJOR.MINOR.PATCH.")
    description: str = ""
    domain: str | None = Field(None, description="Default: the source's.")
    tags: list[str] = Field(default_factory=list)
    license: str | None = None
    source: str = Field(description="The environment wrapped: a load_env ref such as textarena:GAME.")
    options: dict[str, Any] = Field(default_factory=dict, description="The source's load_env options.")

    @field_validator("source")
    @classmethod
    def _an_adapter(cls, source: str) -> str:
        if not SCHEME.match(source):  # which adapters are installed, load_env says
            raise ValueError("must be another ecosystem's load_env ref, SCHEME:... (textarena:GAME, openenv:URL, ...)")
        if source.startswith("harbor:"):  # its tasks are files that a wrapped package does not carry yet
            raise ValueError("a Harbor task directory is loaded by path (harbor:PATH), not wrapped")
        return source

    def resolved_options(self, root: Path) -> dict[str, Any]:
        """The options with the files they name made absolute, from ``root``."""
        options = dict(self.options)
        for key in PATH_OPTIONS:
            value = options.get(key)
            if isinstance(value, str):
                options[key] = str((root / value).resolve())
            elif isinstance(value, list):
                options[key] = [str((root / str(item)).resolve()) for item in value]
        return options

    def named_files(self) -> list[str]:
        """The files the options name, relative to the environment's directory."""
        named: list[str] = []
        for key in PATH_OPTIONS:
            value = self.options.get(key)
            named += [value] if isinstance(value, str) else [str(item) for item in value or []]
        return named


def read_wrapped(file: Path) -> WrappedSpec | None:
    """The wrapped spec in ``file`` (an environment.yaml), or None when it declares an environment itself."""
    import yaml

    try:
        raw = yaml.safe_load(file.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None  # load_spec says what is wrong with it
    if not isinstance(raw, dict) or "source" not in raw or isinstance(raw.get("dataset"), dict):
        return None
    try:
        return WrappedSpec.model_validate(raw)
    except ValidationError as error:
        raise SpecError(
            [
                SpecProblem(str(file), None, ".".join(map(str, problem["loc"])), problem["msg"])
                for problem in error.errors()
            ]
        ) from None
