"""Proxies never pay past their authority: the partial-credit rule of ``verihub validate``, tried on each layer.

A layer that approximates what a later layer judges (key facts before a judge, format before correctness) is
the cheap side of the verifier: an answer made for it (every key fact named, then denied) passes it while the
later layer, the authority, fails the answer. Whatever the proxy pays there is reward for a wrong answer, and
a policy learns to collect it.

A layer's proxies are the weighted layers of an earlier kind (rules before a check, rules and checks before a
judge: cheapest first, each kind judging what the one before guesses); layers of one kind are peers (a
correctness check and a conciseness bonus), not proxies. For each layer that can fail (``pass_score`` above 0)
and has proxies, the environment's references (answers that pass every proxy) are graded again by the
proxies with that layer failing everything (a judge scoring 0, a check that fails). Any reward above the floor
is what the proxies paid past their authority: the outcome fails validation, naming them. An environment
that means to pay that partial credit declares it (``grading: {floor: X}``, the most a wrong answer may earn);
otherwise a proxy takes weight 0 (and a gate, when it should stop an answer before the authority is asked),
and a layer that only adds a bonus takes ``pass_score: 0`` (it never fails an answer, so it is no authority).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from verihub.checks.base import CheckResult
from verihub.grading.grade import Grade, LayerStatus
from verihub.grading.verifier import BoundLayer, Verifier
from verihub.spec.models import LayerKind
from verihub.validation.redteam import ExploitOutcome, ExploitRun

if TYPE_CHECKING:
    from verihub.environment.core import Environment

__all__ = ["FAMILY", "ProxyOutcome", "probe_authorities"]

FAMILY = "partial-credit"
_TASKS = 8  # references graded per authority: a proxy pays alike on every task, so a few show it
_SHOWN = 160  # characters of a reference kept in the report
_KINDS = list(LayerKind)  # cheapest first, the order layers run in: a later kind judges what an earlier one guesses


@dataclasses.dataclass
class ProxyOutcome(ExploitOutcome):
    """One authority's probe: the references graded with layer ``target`` failing everything. A run that got
    through names, in its ``layer``, the earlier layers that paid and how much."""

    how: str = ""  # how the authority failed: "a judge scoring 0" or "a check that fails"

    def message(self) -> str:
        if self.verdict != "passed":
            return super().message()
        run = next(run for run in self.runs if self.got_through(run))
        return (
            f"partial credit past an authority: {run.layer} paid {run.reward:g} on task {run.task}'s reference "
            f"while the later layer {self.target!r} failed it ({self.how}), above the floor for a wrong answer "
            f"({self.floor:g}, grading.floor); a proxy of {self.target!r} pays nothing on an answer it fails: give "
            "it weight 0 (and gate: true to stop the answer before it), or declare the partial credit with "
            "grading.floor"
        )


def probe_authorities(env: Environment, tasks: Iterable[Mapping[str, Any]]) -> list[ExploitOutcome]:
    """One :class:`ProxyOutcome` per layer that weighted layers of an earlier kind could pay past: ``passed`` (it
    fails validation) where the references earn more than ``grading.floor`` with that layer failing them."""
    verifier = env.verifier
    floor = env.spec.grading.floor
    chosen = [task for task, _ in zip(tasks, range(_TASKS), strict=False)]
    references = [env.reference(task) for task in chosen]
    outcomes: list[ExploitOutcome] = []
    for authority in verifier.layers:
        rank = _KINDS.index(authority.spec.layer)
        proxies = [layer for layer in verifier.layers if _KINDS.index(layer.spec.layer) < rank]
        if authority.spec.pass_score <= 0 or not any(layer.spec.weight > 0 for layer in proxies):
            continue  # a layer that cannot fail judges nothing; layers of weight 0 pay nothing
        how = "a judge scoring 0" if authority.spec.layer is LayerKind.JUDGE else "a check that fails"
        outcome = ProxyOutcome(
            "authority-fails",
            FAMILY,
            authority.spec.name,
            f"the references, with layer {authority.spec.name!r} failing everything ({how}): "
            "the layers of earlier kinds must pay nothing above the floor",
            "not_applicable",
            floor=floor,
            how=how,
        )
        if chosen:
            # Proxies are of earlier kinds than the authority, so never judges: no judge is asked.
            probe = Verifier([*proxies, _failing(authority, how)], cache_size=0, floor=floor)
            grades = probe.grade_many(chosen, references)
            for task, reference, grade in zip(chosen, references, grades, strict=True):
                if grade.reward is not None:  # a proxy's own fault on a reference: the references' check reports it
                    outcome.runs.append(_run(str(task.get("id")), reference, grade, authority.spec.name))
            passed = any(outcome.got_through(run) for run in outcome.runs)
            outcome.verdict = "passed" if passed else "blocked" if outcome.runs else "not_applicable"
        outcomes.append(outcome)
    return outcomes


def _failing(layer: BoundLayer, how: str) -> BoundLayer:
    """``layer`` with its judge or check replaced by one that fails every answer, cheaply (on the grading thread)."""

    def fails(completion: str, task: Mapping[str, Any]) -> CheckResult:
        return CheckResult(0.0, f"the authority fails every answer here ({how})")

    return dataclasses.replace(layer, run=fails, mode="inline", prescreen=None, columns=frozenset(), reads=None)


def _run(task_id: str, reference: str, grade: Grade, authority: str) -> ExploitRun:
    paid = [
        f"layer {result.name!r} ({result.score * result.weight:g})"
        for result in grade.layers
        if result.name != authority
        and result.status in (LayerStatus.PASSED, LayerStatus.FAILED)
        and result.score is not None
        and result.score * result.weight > 0
    ]
    return ExploitRun(
        task_id,
        grade.status.value,
        grade.reward,
        ", ".join(paid) or "no layer",
        f"graded by the layers before {authority!r}, with it failing: {grade.status}",
        reference[:_SHOWN],
    )
