"""Whose fault a fault is: the one rule, decided by evidence rather than by the exception's type.

A layer that raised or ran past its limit on an answer is retried once. A fault the retry clears was transient: the
retry's grade stands. One that repeats is put to evidence that the layer works on this task, an answer known to pass
through it: the task's gold reference, else its declared canary, else another answer to the same task that this
verifier graded without a fault there (see below), each graded anew under the same layers and limits (for a
terminal-state task, the state the gold's or canary's commands leave on the task's initial files, else its untouched
work dir). If the evidence runs that layer without a fault (and, for a time limit, in at most a quarter of the time
the answer ran, so a loaded machine is not blamed on the answer), the layer works on this task and only this answer
breaks it. The answer is graded once more, after the evidence: a fault that is still there is the answer's
(:func:`as_answer_fault`: ``wrong`` at the environment's floor, the layer marked ``answer_fault`` with the fault in
its detail); an outage that came and went around the evidence is not. If the evidence faults too, or never reaches
the layer, it stays the environment's (``env_error``/``timeout``, reward None), and so does a fault the
infrastructure reports as its own, whatever the evidence shows: the sandbox failed or was killed from outside
(:class:`~verihub.errors.SandboxInfraError`), cannot run at all (:class:`~verihub.errors.SandboxUnavailable`), or
the grader's own machinery failed (:class:`~verihub.errors.GraderInfraError`: a worker process or bridge that did
not start, a library's import past its start limit, no worker free in time, evidence jobs that never returned). An
outage that spared the evidence must not make a right answer wrong. Every other fault, the sandbox's included (a
jail that cannot start from or restore the state an answer left), is weighed by the evidence: the reference's state
restores, so the answer's state is to blame. An answer that could make the sandbox or the grader report an
infrastructure fault would escape its penalty; the red-team suite's fault-forcing family exists to find one. A check
may also say so itself with :meth:`verihub.checks.base.CheckResult.malformed`.

**What counts as evidence.** Never a stand-in: an environment declares what its ``gold.reference`` is
(``gold.reference_is``): ``gold``, a right answer (the default); ``canary``, an answer the verifier handles
without a fault on every task though it need not be right (``validate`` checks that it does); ``placeholder``,
no evidence at all (an adapter's stand-in such as the task's prompt, for an ecosystem that ships no gold: a
verifiers taskset, a game). A placeholder is never graded as evidence, nor remembered as such. Without gold or
canary, the evidence is another answer to the task that this verifier graded through the layer without a fault:
one graded right (``ok``, the layer passed) first, else one graded wrong there without a fault (the issue's rule: a
fault-free grade shows the scorer runs on the task; a game graded one move at a time has no right first move). A
timeout takes a right answer only: a scorer's time depends on the path an answer takes, and a fast wrong answer
says nothing of a right one's time. What stays open: a scorer that raises on right answers only, on a task where
no right answer was seen, has a wrong answer's clean grade blame a right one. Such answers are remembered in
the verifier object's in-memory cache only (its ``cache_size`` latest grades): the grades this process made with
this :class:`~verihub.grading.verifier.Verifier`, not those of another process (a ``verihub serve`` grader, a
GraderPool's workers, a ``verihub validate`` run, an earlier training run), nor one evicted. With no evidence,
the fault stays the environment's and the grade's reason ends in :data:`NO_EVIDENCE` (:func:`lacks_evidence`
reads it: ``validate`` counts the tasks without evidence, the trainer's monitors the grades).

**Apart from the answer.** The retry, the evidence and the final grade run apart from the answers being graded
(:mod:`verihub.grading._apart`): a thread or coroutine check on a thread of its own (a coroutine on an event loop
of its own there), a process check in a worker process leased for it alone, an in-process game's episode in a
worker process of its own (every episode's is), and a bridge of another ecosystem (verifiers, GEM) serves them
from a bridge process of its own; none queues behind another answer's job in the grader's pools or locks. A
limit counts the work's own time: where it ran, less its waits for infrastructure
(:func:`~verihub.sandbox.clock.waiting`: a worker or a bridge to start or come free, another answer's lock on a
bridge, a jail of the sandbox's warm pool). What the evidence still shares: a thread or coroutine check runs in
the grading process and shares its GIL (a neighbour holding it slows the evidence's clock; process checks and
in-process games are apart from that); a judge layer's evidence runs on the caller's event loop (outside its
shared limit on judge calls) and asks the same judge backend and server as every answer; the machine's CPUs and
the sandbox's jails; an async check that calls ``verihub.sandbox.arun`` queues on that module's shared executor.
Where there is no gold, evidence from memory is looked for again once the grades of the same task then in flight
have ended (retries included; a grade waiting for evidence is no longer in flight, so none waits for another that
waits), so the right answers of a batch are evidence for its hostile ones whatever their order.

The no-fault path pays nothing; a fault costs two more grades of the answer and one of the evidence. The
evidence is graded anew for each fault, never taken from the cache: a grade from before an outage began
would blame the outage on every answer graded during it. The answer's verdict is cached like any other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from verihub.errors import GraderInfraError, SandboxInfraError, SandboxUnavailable
from verihub.grading.grade import Grade, GradeStatus, LayerResult, LayerStatus

__all__ = [
    "NO_EVIDENCE",
    "Source",
    "answer_fault_reason",
    "as_answer_fault",
    "attribute",
    "blames_answer",
    "lacks_evidence",
    "reference_task",
]

Source = Literal["reference", "canary", "answer"]
"""What the evidence graded: the task's gold reference, its declared canary, or another answer to it that this
verifier graded without a fault in that layer (remembered)."""
NO_EVIDENCE = (
    "no evidence that this layer works on this task: no gold reference or canary, and no other answer to it "
    "graded without a fault there"
)
_SOURCES: dict[str, str] = {
    "reference": "the task's reference",
    "canary": "the task's canary",
    "answer": "another answer to this task, graded before,",
}

_FAULTS = (LayerStatus.ERROR, LayerStatus.TIMEOUT)
_RAN = (LayerStatus.PASSED, LayerStatus.FAILED)
# Faults the infrastructure names as its own, as the verifier writes a layer's fault ("Type: message"): these exact
# types only. Any other fault of the sandbox (a jail that cannot start from or restore an answer's state) is weighed.
_INFRASTRUCTURE = tuple(f"{error.__name__}: " for error in (SandboxInfraError, SandboxUnavailable, GraderInfraError))
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


def attribute(
    fault: Grade, evidence: Grade | None, floor: float, *, source: Source = "reference", is_source: bool = False
) -> Grade:
    """The rule's verdict: ``fault`` made the answer's when ``evidence`` (the grade of ``source``) blames it, else
    kept, with why. ``is_source``: the answer is the task's reference (or canary) itself, which cannot be
    evidence about itself; ``evidence`` None and not ``is_source``: there is no evidence (:data:`NO_EVIDENCE`)."""
    if blames_answer(fault, evidence):
        return as_answer_fault(fault, floor)
    found = _layer(evidence, _faulted(fault).name) if evidence is not None else None
    name = _SOURCES[source]
    if _faulted(fault).detail.startswith(_INFRASTRUCTURE):
        why = "the infrastructure reports the fault as its own"
    elif is_source:
        why = f"the answer is the task's {source}: its fault is the environment's"
    elif evidence is None:
        why = NO_EVIDENCE
    elif found is not None and found.status in _FAULTS:
        why = f"{name} faults there too"
    elif found is not None and found.status in _RAN:
        why = f"{name} took {found.time_s:.2f}s there: the machine, not this answer, is slow"
    else:
        why = f"{name} does not reach that layer"
    return fault._replace(reason=f"{fault.reason} ({why})")


def lacks_evidence(reason: str) -> bool:
    """Whether a grade's ``reason`` says the rule kept a fault for want of evidence (:data:`NO_EVIDENCE`)."""
    return reason.endswith(f"({NO_EVIDENCE})")


def reference_task(
    task: Mapping[str, Any], reference: Callable[[Mapping[str, Any]], str]
) -> tuple[Mapping[str, Any], str] | None:
    """What the reference is graded as, for ``task``: the reference's text, and for a terminal-state task the
    state the reference leaves in place of the answer's: its ```bash commands run on the task's initial files (as
    a text grade runs them), else the untouched work dir. None when there is no reference."""
    from verihub.checks._extract import bash_commands
    from verihub.sandbox.tools import WORKDIR, task_files
    from verihub.sandbox.types import Snapshot

    try:
        text = reference(task)
        if WORKDIR in task and bash_commands(text):
            # the initial files are no right answer: tests that fault on a wrong state would fault there too
            task = {key: value for key, value in task.items() if key != WORKDIR}
        elif WORKDIR in task:
            task = {**task, WORKDIR: Snapshot.of(task_files(task) or {})}
    except Exception:  # noqa: BLE001 - a reference template the task does not fit: no evidence
        return None
    return task, text


def _faulted(grade: Grade) -> LayerResult:
    return next(layer for layer in grade.layers if layer.status in _FAULTS)


def _layer(grade: Grade, name: str) -> LayerResult | None:
    return next((layer for layer in grade.layers if layer.name == name), None)
