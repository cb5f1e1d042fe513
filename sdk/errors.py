"""Every exception verihub raises on purpose, in one place.

All derive from :class:`VerihubError`; each family also subclasses the built-in a caller would
naturally catch (``ValueError`` for bad input, ``LookupError`` for things not found), and each
carries the data needed to act on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CheckNotFoundError",
    "EnvNotFoundError",
    "MissingDependencyError",
    "SandboxInfraError",
    "SandboxUnavailable",
    "SpecError",
    "SpecProblem",
    "TemplateNotFoundError",
    "VerihubError",
]


class VerihubError(Exception):
    """Base class of every error verihub raises on purpose."""


@dataclass(frozen=True, slots=True)
class SpecProblem:
    """One problem in an environment spec: where it is and what is wrong."""

    file: str
    line: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class SpecError(VerihubError, ValueError):
    """An environment spec was refused; ``problems`` lists every problem found, not just the first."""

    def __init__(self, problems: list[SpecProblem]) -> None:
        self.problems = problems
        count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
        super().__init__(f"invalid environment spec ({count}):\n" + "\n".join(f"  {p}" for p in problems))


class EnvNotFoundError(VerihubError, LookupError):
    """No environment matches a name or path; ``suggestions`` holds close names that exist."""

    def __init__(self, ref: str, available: list[str], suggestions: list[str], reason: str | None = None) -> None:
        self.ref, self.available, self.suggestions = ref, available, suggestions
        hint = f" Did you mean {', '.join(map(repr, suggestions))}?" if suggestions else ""
        installed = ", ".join(available) if available else "none"
        reason = reason or "not a directory with environment.yaml, and no installed environment has that name"
        super().__init__(f"no environment {ref!r}: {reason}.{hint} Installed: {installed}.")


class CheckNotFoundError(VerihubError, LookupError):
    """A verifier layer names a check that is neither built in, published, nor importable."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        super().__init__(reason)


class SandboxUnavailable(VerihubError, RuntimeError):
    """No safe sandbox can run here; the message says why and what to install."""


class SandboxInfraError(VerihubError, RuntimeError):
    """The sandbox failed (not the code it ran) after retries; a grade turns this into env_error."""


class TemplateNotFoundError(VerihubError, LookupError):
    """``verihub init`` was asked for a template that does not exist."""


def relative_display(path: Path) -> str:
    """A path as users want to read it in messages: relative to the working directory if under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


class MissingDependencyError(VerihubError, ImportError):
    """A feature needs a package that is not installed; the message says how to install it."""
