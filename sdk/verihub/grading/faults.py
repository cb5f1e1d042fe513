"""Whose fault a fault is: the one rule, decided by evidence rather than by the exception's type.

A layer that raised or ran past its limit on an answer is retried once. A fault the retry clears was
transient: the retry's grade stands. One that repeats is put to the task's gold reference (graded under
the same layers and limits; for a terminal-state task, on the task's untouched work dir): if the
reference runs that layer without a fault (and, for a time limit, in at most a quarter of the time the
answer ran, so a loaded machine is not blamed on the answer), the layer works on this task and only this
answer breaks it. The answer is graded once more, after the reference: a fault that is still there is the
answer's (:func:`as_answer_fault`: ``wrong`` at the environment's floor, the layer marked ``answer_fault``
with the fault in its detail); an outage that came and went around the reference is not. If the reference
faults too, or never reaches the layer, or the task has no reference, it stays the environment's
(``env_error``/``timeout``, reward None), and so does a fault the infrastructure reports as its own (the
sandbox failed or was killed from outside: :class:`~verihub.errors.SandboxInfraError`), whatever the
reference shows: an outage that spared the reference must not make a right answer wrong. An answer that
could make the sandbox report such a fault would escape its penalty; the red-team suite's fault-forcing
family exists to find one (an argument past the kernel's limit was one, now the program's own failure). A check may also
say so itself with
:meth:`verihub.checks.base.CheckResult.malformed`.

The no-fault path pays nothing; a fault costs two more grades of the answer and one of the reference. The
reference is graded anew for each fault, never taken from the cache: a grade from before an outage began
would blame the outage on every answer graded during it. The answer's verdict is cached like any other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from verihub.errors import SandboxInfraError, SandboxUnavailable
from verihub.grading.grade import Grade, GradeStatus, LayerResult, LayerStatus

__all__ = ["answer_fault_reason", "as_answer_fault", "attribute", "blames_answer", "reference_task"]

_FAULTS = (LayerStatus.ERROR, LayerStatus.TIMEOUT)
_RAN = (LayerStatus.PASSED, LayerStatus.FAILED)
# Faults the infrastructure names as its own, as the verifier writes a layer's fault ("Type: message")
_INFRASTRUCTURE = tuple(f"{error.__name__}: " for error in (SandboxInfraError, SandboxUnavailable))
_HEADROOM = 4  # a time limit is the answer's when the reference ran the layer in a quarter of the answer's time


def answer_fault_reason(layer: str, detail: str) -> str:
    """The reason of a grade an answer fault ended (the same text for every way one is found)."""
    return f"layer {layer!r}: answer fault: {detail}"


def as_answer_fault(fault: Grade, floor: float) -> Grade:
    """``fault`` (an environment fault's grade) made the answer's: its faulted layer ``answer_fault``, the
    grade ``wrong`` with reward ``floor``."""
    layers = list(fault.layers)
    index = next(index for index, layer in enumerate(layers) if layer.status in _FAULTS)
    faulted = layers[index]
    detail = f"{faulted.status.value}: {faulted.detail}"
    layers[index] = faulted._replace(status=LayerStatus.ANSWER_FAULT, score=None, detail=detail)
    return Grade(GradeStatus.WRONG, floor, tuple(layers), answer_fault_reason(faulted.name, detail))


def blames_answer(fault: Grade, evidence: Grade | None) -> bool:
    """Whether ``evidence`` (the reference's grade, or None when the task has none) shows that the layer
    ``fault`` (a repeated fault of an answer) stopped at works on this task."""
    faulted = _faulted(fault)
    found = _layer(evidence, faulted.name) if evidence is not None else None
    if found is None or found.status not in _RAN or faulted.detail.startswith(_INFRASTRUCTURE):
        return False
    return faulted.status is not LayerStatus.TIMEOUT or found.time_s * _HEADROOM <= faulted.time_s


def attribute(fault: Grade, evidence: Grade | None, floor: float, *, is_reference: bool = False) -> Grade:
    """The rule's verdict: ``fault`` made the answer's when the evidence blames it, else kept, with why.
    ``is_reference``: the answer is the task's reference itself, which cannot be evidence about itself."""
    if blames_answer(fault, evidence):
        return as_answer_fault(fault, floor)
    found = _layer(evidence, _faulted(fault).name) if evidence is not None else None
    if _faulted(fault).detail.startswith(_INFRASTRUCTURE):
        why = "the infrastructure reports the fault as its own"
    elif is_reference:
        why = "the answer is the task's reference: its fault is the environment's"
    elif evidence is None:
        why = "the task has no reference to tell whose fault it is"
    elif found is not None and found.status in _FAULTS:
        why = "the task's reference faults there too"
    elif found is not None and found.status in _RAN:
        why = f"the task's reference took {found.time_s:.2f}s there: the machine, not this answer, is slow"
    else:
        why = "the task's reference does not reach that layer"
    return fault._replace(reason=f"{fault.reason} ({why})")


def reference_task(
    task: Mapping[str, Any], reference: Callable[[Mapping[str, Any]], str]
) -> tuple[Mapping[str, Any], str] | None:
    """What the reference is graded as, for ``task``: the reference's text, and for a terminal-state task
    the task with its untouched work dir in place of the answer's. None when there is no reference."""
    from verihub.sandbox.tools import WORKDIR, task_files
    from verihub.sandbox.types import Snapshot

    try:
        text = reference(task)
        if WORKDIR in task:
            task = {**task, WORKDIR: Snapshot.of(task_files(task) or {})}
    except Exception:  # noqa: BLE001 - a reference template the task does not fit: no evidence
        return None
    return task, text


def _faulted(grade: Grade) -> LayerResult:
    return next(layer for layer in grade.layers if layer.status in _FAULTS)


def _layer(grade: Grade, name: str) -> LayerResult | None:
    return next((layer for layer in grade.layers if layer.name == name), None)
