"""Every exception verihub raises on purpose, in one place (the hub server's refusals, which travel over
HTTP with their codes, in :mod:`verihub.hub.errors`).

All derive from :class:`VerihubError`; each family also subclasses the built-in a caller would
naturally catch (``ValueError`` for bad input, ``LookupError`` for things not found), and each
carries the data needed to act on it. Modules import them from here (and re-export what their own API
names). An exception that never leaves the module raising it (control flow: a retry, a worker gone) lives
beside its use instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "REASON_CHARS",
    "ActionRefusedError",
    "BodyTooLarge",
    "CheckError",
    "CheckNotFoundError",
    "CorruptResultsError",
    "DataError",
    "EnvNotFoundError",
    "EvalResultsError",
    "ExposedError",
    "FileMissingError",
    "FrameError",
    "GenerationError",
    "GraderError",
    "GraderInfraError",
    "JudgeError",
    "ListenError",
    "MissingDependencyError",
    "NotFoundError",
    "RemoteEnvError",
    "ResumeMismatchError",
    "RolloutStalledError",
    "RolloutWorkerError",
    "SandboxInfraError",
    "SandboxStateError",
    "SandboxUnavailable",
    "SessionError",
    "SpecError",
    "SpecProblem",
    "TargetExistsError",
    "TemplateNotFoundError",
    "UnknownDatasetError",
    "UsageError",
    "VerifiersError",
    "VerihubError",
    "WeightSyncError",
    "describe_error",
]

REASON_CHARS = 500  # a fault's reason, as grades, rows and error frames carry it


def describe_error(error: BaseException | tuple[str, str], limit: int = REASON_CHARS) -> str:
    """How verihub writes a fault it caught: ``Type: message`` (the type alone without a message), cut at
    ``limit`` characters. The one formatter for grade reasons, layer details and error frames; an error
    caught in another process comes as its (type name, message)."""
    kind, message = error if isinstance(error, tuple) else (type(error).__name__, str(error))
    return (f"{kind}: {message}" if message else kind)[:limit]


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


class SandboxStateError(VerihubError, ValueError):
    """A jail cannot start from the work dir it was given: the state is past what its limits restore (its
    files' size once written, its inodes: ``Snapshot.cost``), or the jail failed while restoring it. Not an
    infrastructure fault: the state may be an answer's, so a grade weighs it by evidence like any other fault
    (the task's own state restores, or it does not). ``why`` says what the state takes or how restoring it
    failed."""

    def __init__(self, why: str) -> None:
        self.why = why
        super().__init__(f"the jail cannot start from this work dir: {why}")


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


class EvalResultsError(VerihubError, ValueError):
    """An eval's output directory cannot be used as asked; ``directory`` says which."""

    def __init__(self, directory: Path, message: str) -> None:
        self.directory = directory
        super().__init__(message)


class ResumeMismatchError(EvalResultsError):
    """``--resume`` was asked to extend results of a different run; ``fields`` maps each field that differs
    to how (``"earlier 0.7, now 0.0"``)."""

    def __init__(self, directory: Path, fields: dict[str, str]) -> None:
        self.fields = fields
        lines = "\n".join(f"  {name}: {how}" for name, how in fields.items())
        super().__init__(
            directory,
            f"cannot resume {relative_display(directory)}: it holds results of a different "
            f"run ({', '.join(fields)} {'differs' if len(fields) == 1 else 'differ'}):\n{lines}\nresume with the "
            "earlier run's settings, or "
            "write to a new --out (or drop --resume to start over there)",
        )


class CorruptResultsError(EvalResultsError):
    """A results file is damaged where no crash can have left it; ``path`` and ``line`` say where."""

    def __init__(self, path: Path, line: int, problem: str) -> None:
        self.path, self.line = path, line
        super().__init__(
            path.parent,
            f"{relative_display(path)}:{line}: {problem}; the file is damaged beyond what "
            "a crash leaves (at most a torn last line): move it away, or write to a new --out",
        )


class GenerationError(VerihubError, RuntimeError):
    """The backend failed after its retries (the environment's fault, never the model's)."""


class JudgeError(VerihubError, RuntimeError):
    """The judge gave no usable verdict after its retries (an environment fault)."""


class GraderError(VerihubError, ValueError):
    """A grader pool cannot be used as given (a bad URL, no URL at all)."""


class GraderInfraError(VerihubError, RuntimeError):
    """The grader's own machinery failed, not a check on an answer: a worker process or a bridge that did not
    start, a library's import in one that ran past its start limit, no worker free within the wait's bound,
    evidence jobs that never returned. Like :class:`SandboxInfraError`, a grade turns this into ``env_error``
    whatever the evidence shows (:mod:`verihub.grading.faults`)."""


class VerifiersError(VerihubError):
    """A ``verifiers:`` taskset failed: its code raised, or the process that scores it died or stalled."""


class RemoteEnvError(VerihubError):
    """The remote environment failed: unreachable, slow, a malformed reply or an error frame (``code``)."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class FrameError(VerihubError, ValueError):
    """A WebSocket frame that breaks OpenEnv's protocol (``code``: the error code it earns), or, with ``sent``,
    an error frame the other end sent (``code``: its code)."""

    def __init__(self, message: str, code: str, *, sent: bool = False) -> None:
        super().__init__(message)
        self.code, self.sent = code, sent


class ActionRefusedError(RemoteEnvError):
    """The server refused the action as invalid (its ``VALIDATION_ERROR``): the answer's fault."""


class UnknownDatasetError(EnvNotFoundError):
    """``reasoning-gym:NAME`` names no reasoning-gym dataset; ``suggestions`` holds close names."""

    def __init__(self, name: str, available: list[str], suggestions: list[str]) -> None:
        self.ref, self.available, self.suggestions = "reasoning-gym:" + name, available, suggestions
        hint = f" Did you mean {', '.join(map(repr, suggestions))}?" if suggestions else ""
        VerihubError.__init__(
            self,
            f"reasoning-gym has no dataset {name!r}.{hint} `verihub envs --reasoning-gym` lists all {len(available)}.",
        )


class ListenError(VerihubError, OSError):
    """The address is taken or not ours to bind."""


class ExposedError(VerihubError, ValueError):
    """A server without a token on an address other machines reach: its grades state answers."""


class BodyTooLarge(VerihubError, ValueError):
    """A request body past the server's limit; each server answers it with its own 413."""


class SessionError(VerihubError, ValueError):
    """The caller broke the protocol: a malformed action, or a step after the session ended."""


class WeightSyncError(VerihubError, RuntimeError):
    """The server does not answer as the trainer's policy does after a weight sync: training stops rather
    than learn from rollouts of weights it believes it sent."""


class UsageError(VerihubError, ValueError):
    """An argument or setting given to verihub cannot be used: the message names it and says what would."""


class DataError(VerihubError, ValueError):
    """Data verihub reads cannot be used as declared: a task's column, a judge's verdict, a server's grade, a
    results, metrics or trajectories file; the message says which and where."""


class NotFoundError(VerihubError, KeyError):
    """A split, a layer or a name the object at hand does not have; the message lists what it has."""

    __str__ = Exception.__str__  # the message as written, not KeyError's quoted repr


class FileMissingError(VerihubError, FileNotFoundError):
    """A file verihub was pointed at does not exist; the message says what to point at."""


class TargetExistsError(VerihubError, FileExistsError):
    """What verihub would create exists already; nothing was written."""


class CheckError(VerihubError, RuntimeError):
    """A check reached no verdict (the task's tests did not finish, a scorer returned NaN): a fault, whose
    fault the attribution decides (verihub.grading.faults)."""


class RolloutWorkerError(VerihubError, RuntimeError):
    """The asynchronous trainer's rollout worker stopped, or its thread ended."""


class RolloutStalledError(RolloutWorkerError, TimeoutError):
    """The rollout worker produced nothing for longer than the trainer waits."""
