"""Whose fault a fault is: the one rule, decided by evidence rather than by the exception's type.

A layer that raised or ran past its limit on an answer is retried once. A fault the retry clears was
transient: the retry's grade stands. One that repeats is put to the task's gold reference (graded under
the same layers and limits; for a terminal-state task, on the task's untouched work dir): if the
reference runs that layer without a fault, the layer works on this task and only this answer breaks it,
so the fault is the answer's (:func:`as_answer_fault`: ``wrong`` at the environment's floor, the layer
marked ``answer_fault`` with the fault in its detail). If the reference faults too, or never reaches the
layer, or the task has no reference, it stays the environment's (``env_error``/``timeout``, reward None).
A check may also say so itself with :meth:`verihub.checks.base.CheckResult.malformed`.

The no-fault path pays nothing; a fault costs one more grade of the answer and one of the reference (the
reference's grade is cached like any other).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from verihub.grading.grade import Grade, GradeStatus, LayerResult, LayerStatus

__all__ = ["answer_fault_reason", "as_answer_fault", "attribute", "reference_task"]

_FAULTS = (LayerStatus.ERROR, LayerStatus.TIMEOUT)
_RAN = (LayerStatus.PASSED, LayerStatus.FAILED)


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


def attribute(fault: Grade, evidence: Grade | None, floor: float) -> Grade:
    """The rule: ``fault`` (a repeated fault of an answer) against ``evidence`` (the reference's grade, or
    None when the task has none)."""
    faulted = next(layer for layer in fault.layers if layer.status in _FAULTS)
    found = _layer(evidence, faulted.name) if evidence is not None else None
    if found is not None and found.status in _RAN:
        return as_answer_fault(fault, floor)
    if evidence is None:
        why = "the task has no reference to tell whose fault it is"
    elif found is not None and found.status in _FAULTS:
        why = "the task's reference faults there too"
    else:
        why = "the task's reference does not reach that layer"
    return fault._replace(reason=f"{fault.reason} ({why})")


def reference_task(task: Mapping[str, Any], reference: Callable[[Mapping[str, Any]], str]) -> tuple[
        Mapping[str, Any], str] | None:
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


def _layer(grade: Grade, name: str) -> LayerResult | None:
    return next((layer for layer in grade.layers if layer.name == name), None)
