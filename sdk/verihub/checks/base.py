"""What a check is, how its arguments are bound, and what it may return."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationInfo, model_validator

from verihub.checks.exploit import Exploit
from verihub.spec.models import SandboxSpec

__all__ = ["Check", "CheckOutput", "CheckParams", "CheckResult", "Mode", "SandboxParams", "as_check", "check"]

Mode = Literal["inline", "thread", "process", "async"]
"""Where a check runs: ``inline`` on the grading thread (only for fast, pure checks), ``thread`` in a
thread pool, ``process`` in a process pool (CPU-heavy work, uses every core), ``async`` as a coroutine."""


@dataclass(frozen=True, slots=True)
class CheckResult:
    """A score in [0, 1] and, optionally, why. ``answer_fault``: the answer is malformed for this check
    (see :meth:`malformed`)."""

    score: float
    detail: str = ""
    answer_fault: bool = False

    @classmethod
    def malformed(cls, detail: str) -> CheckResult:
        """The answer cannot be checked because of what it is (too deep, too large, not parseable where the
        task demands a form): the layer is an answer fault, the grade ``wrong`` at the environment's floor and
        counted in ``answer_faults``. What raising would otherwise have meant, said without raising (a raise
        is an environment fault until the task's reference shows the layer works)."""
        return cls(0.0, detail, True)


CheckOutput = bool | float | int | CheckResult
BoundCheck = Callable[[str, Mapping[str, Any]], Any]


class CheckParams(BaseModel):
    """Base for a check's arguments (the ``args:`` of a layer). Unknown arguments are errors.

    Validators may read the environment's directory as ``info.context["root"]`` to resolve files, and
    its sandbox limits as ``info.context["sandbox"]``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    def columns(self) -> set[str]:
        """Dataset columns this check reads; the loader verifies that they exist."""
        return set()


class SandboxParams(CheckParams):
    """Base for the arguments of a check that runs code in the sandbox: :attr:`limits` are the environment's
    ``sandbox:`` section."""

    _limits: SandboxSpec = PrivateAttr(default_factory=SandboxSpec)

    @model_validator(mode="after")
    def _limits_from_the_environment(self, info: ValidationInfo) -> SandboxParams:
        self._limits = (info.context or {}).get("sandbox") or SandboxSpec()
        return self

    @property
    def limits(self) -> SandboxSpec:
        return self._limits


@dataclass(frozen=True, slots=True)
class Check:
    """A named scoring function plus how to validate its arguments and where to run it.

    ``fn`` is called as ``fn(completion, task, params)`` when ``params`` is a :class:`CheckParams`
    model, otherwise as ``fn(completion, task, **args)``. ``exploits`` are the attacks known against
    this kind of check: ``verihub validate`` runs them and fails if the verifier lets one through.
    """

    name: str
    fn: Callable[..., Any]
    params: type[CheckParams] | None = None
    mode: Mode = "thread"
    description: str = ""
    exploits: tuple[Exploit, ...] = ()
    prescreen: Callable[..., Any] | None = None
    """For a thread or process check: a cheap first step with ``fn``'s signature that the engine runs on
    the grading thread; it returns the result when it can decide without the costly work, or None,
    and only then is ``fn`` sent to a worker (``fn`` must decide the same way when called alone)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "exploits", _exploits(self.name, self.exploits))

    def bind(
        self, args: Mapping[str, Any], root: Path | None = None, sandbox: Any = None
    ) -> tuple[BoundCheck, CheckParams | None]:
        """Validate ``args`` and return a two-argument callable; raises pydantic's ``ValidationError``
        or ``TypeError`` naming the bad argument. ``root`` and the environment's ``sandbox`` limits
        reach the params' validators as ``info.context``."""
        if self.params is not None:
            params = self.params.model_validate(dict(args), context={"root": root, "sandbox": sandbox})
            return functools.partial(self.fn, params=params), params
        signature = inspect.signature(self.fn)
        signature.bind("completion", {}, **args)  # raises TypeError for unknown or missing arguments
        return (functools.partial(self.fn, **args) if args else self.fn), None

    def bind_prescreen(self, args: Mapping[str, Any], params: CheckParams | None) -> BoundCheck | None:
        """:attr:`prescreen` bound like :meth:`bind` bound ``fn`` (to its validated ``params``, or ``args``)."""
        if self.prescreen is None:
            return None
        if params is not None:
            return functools.partial(self.prescreen, params=params)
        return functools.partial(self.prescreen, **args) if args else self.prescreen


_ATTRIBUTE = "__verihub_check__"


def check(
    name: str | None = None,
    *,
    params: type[CheckParams] | None = None,
    mode: Mode | None = None,
    description: str | None = None,
    exploits: Iterable[Exploit] = (),
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare how a function is used as a check; the function itself is returned unchanged.

    >>> @check(mode="inline")
    ... def non_empty(completion, task):
    ...     return bool(completion.strip())
    >>> as_check(non_empty).mode
    'inline'

    The default mode is ``async`` for coroutine functions and ``thread`` otherwise. Use ``process``
    only for checks importable by name in a fresh interpreter (installed packages). ``exploits``
    (:class:`~verihub.checks.Exploit`) are the attacks known against the check, which ``verihub validate``
    runs against every environment that uses it.
    """

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        setattr(fn, _ATTRIBUTE, _make(fn, name, params, mode, description, tuple(exploits)))
        return fn

    return wrap


def as_check(obj: Any, name: str | None = None) -> Check:
    """The :class:`Check` for ``obj``: a Check, a function decorated with :func:`check`, or a plain
    function (mode ``thread``, or ``async`` for a coroutine function)."""
    if isinstance(obj, Check):
        return obj
    declared = getattr(obj, _ATTRIBUTE, None)
    if isinstance(declared, Check):
        return declared
    if callable(obj):
        return _make(obj, name, None, None, None)
    raise TypeError(f"{obj!r} is not a check: expected a function or a verihub Check")


def _make(
    fn: Callable[..., Any],
    name: str | None,
    params: type[CheckParams] | None,
    mode: Mode | None,
    description: str | None,
    exploits: tuple[Exploit, ...] = (),
) -> Check:
    chosen: Mode = mode or ("async" if inspect.iscoroutinefunction(fn) else "thread")
    doc = description if description is not None else (inspect.getdoc(fn) or "").split("\n\n")[0]
    return Check(name=name or fn.__name__, fn=fn, params=params, mode=chosen, description=doc, exploits=exploits)


def _exploits(check: str, exploits: Iterable[Exploit]) -> tuple[Exploit, ...]:
    declared = tuple(exploits)
    for exploit in declared:
        if not isinstance(exploit, Exploit):
            raise TypeError(f"check {check!r}: exploits must be verihub Exploit objects, got {type(exploit).__name__}")
    names = [exploit.name for exploit in declared]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"check {check!r} declares the exploit {duplicates[0]!r} twice")
    return declared
