"""The gold self-check behind ``verihub validate``: references must pass, negatives must fail, legal play must be
graded (:mod:`verihub.validation.play`), and every exploit known against the verifier must be rejected (the
red-team suite, :mod:`verihub.validation.redteam`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from verihub.environment.core import Environment
from verihub.grading.grade import Grade, GradeStatus, LayerStatus
from verihub.validation.calibration import CalibrationReport, acalibrate
from verihub.validation.play import legal_play_faults
from verihub.validation.redteam import ExploitOutcome, run_exploits

__all__ = ["LayerTally", "ValidationReport", "validate_env"]

_SHOWN_FAILURES = 10


@dataclass
class LayerTally:
    """How one layer did on the references and on the negatives."""

    name: str
    layer: str
    gate: bool
    references_passed: int = 0
    references_ran: int = 0
    negatives_failed: int = 0
    negatives_ran: int = 0
    faults: int = 0
    skipped: int = 0
    time_s: float = 0.0

    @property
    def runs(self) -> int:
        return self.references_ran + self.negatives_ran


@dataclass
class ValidationReport:
    env_id: str
    version: str
    min_pass_rate: float
    references: int = 0
    references_passed: int = 0
    negatives: int = 0
    negatives_rejected: int = 0
    faults: int = 0
    layers: list[LayerTally] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # the first few, with reasons
    judge_skipped: bool = False
    calibration: CalibrationReport | None = None  # the judge's agreement with the labelled examples
    attacks: bool = True  # whether the red-team suite ran
    exploits: list[ExploitOutcome] = field(default_factory=list)  # one per exploit, with its runs
    exploits_need_judge: int = 0  # judge-injection exploits not run: no judge is configured
    held_out_repeats: int = 0  # tasks of another split that pose a training task's prompt
    exploit_floor: float = 0.0  # grading.floor: the most an exploit may earn
    tasks_without_evidence: int = 0  # tasks checked where the fault rule has no evidence (reported, not a failure)
    legal_play_faults: int = 0  # legal moves (declared, or listed by a game) graded as faults: verihub.validation.play

    def exploit_tally(self, target: str | None = None) -> tuple[int, int]:
        """(blocked, run) over the exploits of ``target`` (a layer name, or every exploit)."""
        ran = [o for o in self.exploits if o.verdict != "not_applicable" and target in (None, o.target)]
        return sum(o.verdict == "blocked" for o in ran), len(ran)

    def fault_tally(self) -> tuple[int, int]:
        """(forced, run) over the fault-forcing exploits: how many made a grade fault (or grow super-linearly)."""
        ran = [o for o in self.exploits if o.family == "fault-forcing" and o.verdict != "not_applicable"]
        return sum(o.failed for o in ran), len(ran)

    @property
    def answer_faults(self) -> int:
        """Exploit attempts graded wrong because they made a layer fault (the answer's fault, penalised)."""
        return sum(run.answer_fault for outcome in self.exploits for run in outcome.runs)

    @property
    def max_exploit_reward(self) -> float | None:
        """The highest reward any exploit earned (None when none ran): above ``exploit_floor``, one got through."""
        return max((reward for o in self.exploits if (reward := o.max_reward) is not None), default=None)

    @property
    def reference_pass_rate(self) -> float:
        return self.references_passed / self.references if self.references else 1.0

    @property
    def ok(self) -> bool:
        return (
            self.references > 0
            and self.reference_pass_rate >= self.min_pass_rate
            and self.negatives_rejected == self.negatives
            and self.faults == 0
            and (self.calibration is None or self.calibration.ok)
            and not any(outcome.failed for outcome in self.exploits)
            and self.held_out_repeats == 0
            and self.legal_play_faults == 0
        )


def validate_env(
    env: Environment, *, min_pass_rate: float | None = None, attacks: bool = True, grader: Any = None
) -> ValidationReport:
    """Grade every task's reference (must pass) and negatives (must fail); tally per layer. With
    ``attacks`` (the default), run the red-team suite too: every exploit must be rejected."""
    gold = env.spec.gold
    report = ValidationReport(
        env.id,
        env.version,
        gold.min_pass_rate if min_pass_rate is None else min_pass_rate,
        judge_skipped=env.verifier.judge is None and env.verifier.on_missing_judge == "skip",
        attacks=attacks,
        exploit_floor=env.spec.grading.floor,
    )
    report.layers = [
        LayerTally(layer.spec.name, layer.spec.layer.value, layer.spec.gate) for layer in env.verifier.layers
    ]
    splits = [gold.split] if gold.split is not None else env.split_names
    tasks = [task for name in splits for task in _first(env.tasks(name), gold.max_tasks)]
    references = [env.reference(task) for task in tasks]
    negatives = [(task, text) for task in tasks for text in env.negatives(task)]
    grading = grader or env.verifier  # a RemoteGrader: every grade on `verihub serve` servers
    reference_grades = grading.grade_many(tasks, references)
    negative_grades = grading.grade_many([task for task, _ in negatives], [text for _, text in negatives])

    for fault in legal_play_faults(env, tasks):  # noted first: an adapter's references (its prompts) may all fail
        report.legal_play_faults += 1
        _note(report, fault.message())
    for task, grade in zip(tasks, reference_grades, strict=True):
        report.references += 1
        _tally(report, grade, reference=True)
        if grade.passed:
            report.references_passed += 1
        else:
            _note(report, f"reference for task {task['id']} {_why(grade)}")
    for (task, _), grade in zip(negatives, negative_grades, strict=True):
        report.negatives += 1
        _tally(report, grade, reference=False)
        if grade.status is GradeStatus.WRONG:
            report.negatives_rejected += 1
        elif grade.status is GradeStatus.OK:
            _note(report, f"negative for task {task['id']} was accepted (reward {grade.reward:g})")
        else:
            _note(report, f"negative for task {task['id']} {_why(grade)}")
    for repeat in _held_out_repeats(env):
        report.held_out_repeats += 1
        _note(report, repeat)
    if env.spec.calibration is not None and env.verifier.judge is not None:
        report.calibration = asyncio.run(acalibrate(env))
    if attacks:
        report.exploits, report.exploits_need_judge = run_exploits(env, grader)
        for outcome in report.exploits:
            if outcome.failed:
                _note(report, outcome.message())
    # tasks where a fault would stay the environment's for want of evidence (verihub.grading.faults): no gold, no
    # canary, and no answer graded here without a fault (with a grader, only the gold or canary counts)
    report.tasks_without_evidence = sum(not env.verifier.has_evidence(task) for task in tasks)
    return report


def _held_out_repeats(env: Environment) -> Iterator[str]:
    """Tasks outside the train split whose prompt, up to case and spacing, is a training task's: their
    pass rate would measure memory, not skill. (Equivalents that read differently, like a + b and b + a,
    are for the spec's ``dataset.group_by``.)"""
    if "train" not in env.split_names or len(env.split_names) < 2 or not env.prompts_identify_tasks:
        return

    def prompt(task: Mapping[str, Any]) -> str:
        return " ".join(" ".join(m["content"] for m in env.render(task)).casefold().split())

    seen = {prompt(task): task["id"] for task in env.tasks("train")}
    for name in env.split_names:
        if name != "train":
            for task in env.tasks(name):
                twin = seen.get(prompt(task))
                if twin is not None:
                    yield (
                        f"{name} task {task['id']} poses the same prompt as train task {twin}: a held-out task "
                        "must not repeat a training one (give equivalent tasks one dataset.group_by value)"
                    )


def _first(dataset: Iterable[Mapping[str, Any]], limit: int | None) -> Iterable[Mapping[str, Any]]:
    for index, task in enumerate(dataset):
        if limit is not None and index >= limit:
            return
        yield task


def _tally(report: ValidationReport, grade: Grade, *, reference: bool) -> None:
    if grade.reward is None:
        report.faults += 1
    if not grade.layers:  # a fault before any layer (a grader server that never answered)
        return
    for tally, result in zip(report.layers, grade.layers, strict=True):
        tally.time_s += result.time_s
        if result.status is LayerStatus.SKIPPED:
            tally.skipped += 1
        elif result.status in (LayerStatus.ERROR, LayerStatus.TIMEOUT):
            tally.faults += 1
        elif reference:
            tally.references_ran += 1
            tally.references_passed += result.status is LayerStatus.PASSED
        else:
            tally.negatives_ran += 1
            tally.negatives_failed += result.status is LayerStatus.FAILED


def _why(grade: Grade) -> str:
    if grade.reward is None:
        return f"hit an environment fault ({grade.status}): {grade.reason}"
    failed = [f"{r.name}: {r.detail or 'failed'}" for r in grade.layers if r.status is LayerStatus.FAILED]
    return f"failed ({'; '.join(failed)})"


def _note(report: ValidationReport, message: str) -> None:
    if len(report.failures) < _SHOWN_FAILURES:
        report.failures.append(message)
