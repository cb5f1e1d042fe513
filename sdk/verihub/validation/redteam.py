"""The red-team suite behind ``verihub validate``: every exploit known against an environment's verifier.

The exploits come from three places: each layer's check (``Check.exploits``; judge layers get the judge
injections, when a judge is configured), the ones every verifier must resist
(:mod:`verihub.checks.attacks.common`, and the fault-forcing ones sized to the environment's limits,
:mod:`verihub.checks.attacks.faults`), and the environment's own ``gold.exploits``. Each runs on a few
tasks, chosen deterministically (spread over the eval split, then the other splits; the tasks where it
does not apply are passed over). An exploit is *blocked* when every attempt grades ``wrong`` at no more
than the environment's floor (``grading.floor``, the reward of a wrong answer at its worst); one that grades
``ok``, or earns more than the floor on a wrong grade (partial credit), got through, and one that makes the
grade ``env_error`` or ``timeout`` is a hole too: a fault is never penalised, so a policy learns to cause it.
Growth probing (:mod:`verihub.validation.growth`) adds one outcome per fault-forcing shape: a fault where a
layer's time grows super-linearly with the answer. The authority probe (:mod:`verihub.validation.authority`)
adds one per layer that earlier weighted layers could pay past: the references graded with that layer failing
everything must earn no more than the floor.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from verihub.checks.attacks import common, faults, judge
from verihub.checks.exploit import Attempt, Exploit
from verihub.checks.registry import resolve_check
from verihub.errors import describe_error
from verihub.grading.grade import Grade, GradeStatus, LayerStatus
from verihub.sandbox.tools import WORKDIR, task_files, with_workdir
from verihub.spec.models import ExploitSpec, LayerKind

if TYPE_CHECKING:
    from verihub.environment.core import Environment

__all__ = ["EVERY_VERIFIER", "GOLD", "ExploitOutcome", "ExploitRun", "Verdict", "run_exploits"]

Verdict = Literal["blocked", "passed", "fault", "error", "not_applicable"]
EVERY_VERIFIER = "(every verifier)"  # the target of the exploits every verifier must resist
GOLD = "(gold.exploits)"  # the target of the environment's own exploits
_SCANNED = 200  # tasks looked at per exploit, at most, to find the ones it applies to
_SPREAD = 0.6180339887498949  # golden-ratio steps spread the chosen tasks over a split
_SHOWN = 160  # characters of an attempt's completion kept in the report
_EPSILON = 1e-9  # a weighted sum of scores may land a rounding error above a floor it equals


@dataclass
class ExploitRun:
    """One attempt of an exploit on one task, and what the verifier made of it."""

    task: str
    status: str  # the grade's status: ok, wrong, env_error or timeout
    reward: float | None
    layer: str  # the layer that rejected it, or the one that faulted ("" when every layer passed)
    detail: str
    completion: str  # its first characters
    answer_fault: bool = False  # wrong because it made a layer fault (verihub.grading.faults)


@dataclass
class ExploitOutcome:
    """An exploit's result over its tasks. ``target`` is the layer whose check declares it, or
    :data:`EVERY_VERIFIER`, or :data:`GOLD`."""

    name: str
    family: str
    target: str
    description: str
    verdict: Verdict
    runs: list[ExploitRun] = field(default_factory=list)
    error: str = ""
    floor: float = 0.0  # the environment's grading.floor: a run earning more got through

    @property
    def failed(self) -> bool:
        return self.verdict in ("passed", "fault", "error")

    @property
    def max_reward(self) -> float | None:
        """The highest reward any attempt earned (None when none was graded with a reward)."""
        return max((run.reward for run in self.runs if run.reward is not None), default=None)

    def got_through(self, run: ExploitRun) -> bool:
        """Whether ``run`` beat the verifier: graded ``ok``, or rewarded above the floor while ``wrong``."""
        return run.status == GradeStatus.OK or (run.reward is not None and run.reward > self.floor + _EPSILON)

    def message(self) -> str:
        """Why this exploit fails validation (for a failed one)."""
        label = f"exploit {self.name!r} ({self.family})"
        if self.verdict == "error":
            return f"{label} could not be run: {self.error}"
        if self.verdict == "passed":
            run = next(run for run in self.runs if self.got_through(run))
            where = "every layer" if self.target in (EVERY_VERIFIER, GOLD) else f"layer {self.target!r}"
            if run.status == GradeStatus.OK:
                return f"{label} got through {where} on task {run.task}: graded ok, reward {run.reward:g}"
            return (
                f"{label} got through {where} on task {run.task}: graded {run.status} but rewarded "
                f"{run.reward:g}, above the floor for a wrong answer ({self.floor:g}, grading.floor)"
            )
        faulted = next((run for run in self.runs if run.status != GradeStatus.WRONG), None)
        if faulted is None:  # growth probing: no fault yet, a layer whose cost will make one
            return f"{label}: {self.error}"
        return (
            f"{label} made layer {faulted.layer!r} fault on task {faulted.task} ({faulted.status}: {faulted.detail}); "
            "a fault is never penalised, so it is a hole"
        )


@dataclass(frozen=True)
class _Target:
    label: str
    exploit: Exploit
    params: Any


def run_exploits(env: Environment, grader: Any = None) -> tuple[list[ExploitOutcome], int]:
    """Run the red-team suite against ``env``'s verifier: the outcome of every exploit, and how many
    were skipped because they need a judge and none is configured. ``grader`` (a
    :class:`~verihub.serve.graders.RemoteGrader`) grades the text attempts on ``verihub serve`` servers
    instead; attempts that leave a work dir, and growth probing (it reads each layer's time), stay here."""
    targets, skipped = _targets(env)
    tasks = _tasks(env)
    outcomes: list[ExploitOutcome] = []
    graded: list[tuple[ExploitOutcome, str, Mapping[str, Any], str]] = []
    for target in targets:
        exploit = target.exploit
        outcome = ExploitOutcome(
            exploit.name,
            exploit.family.value,
            target.label,
            exploit.description,
            "not_applicable",
            floor=env.spec.grading.floor,
        )
        outcomes.append(outcome)
        try:
            for task, attempt in _attempts(target, tasks):
                grading = task if attempt.workdir is None else with_workdir(task, _snapshot(attempt.workdir))
                graded.append((outcome, str(task.get("id")), grading, attempt.completion))
        except Exception as error:  # noqa: BLE001 - a broken exploit is reported, never raised
            outcome.verdict, outcome.error = "error", f"{describe_error(error)}"[:300]
    remote = [grader is not None and WORKDIR not in task for _, _, task, _ in graded]
    grades = _grade(env.verifier, [pair for pair, far in zip(graded, remote, strict=True) if not far])
    there = iter(_grade(grader, [pair for pair, far in zip(graded, remote, strict=True) if far]) if grader else ())
    here = iter(grades)
    grades = [next(there) if far else next(here) for far in remote]
    for (outcome, task_id, _, completion), grade in zip(graded, grades, strict=True):
        if outcome.verdict != "error":
            outcome.runs.append(_run(task_id, completion, grade))
    for outcome in outcomes:
        outcome.verdict = _verdict(outcome)
    if tasks:
        from verihub.validation.authority import probe_authorities
        from verihub.validation.growth import probe_growth

        outcomes[:0] = probe_authorities(env, tasks)  # first: where a proxy pays, exploits get through for it
        outcomes += probe_growth(env, tasks[0], EVERY_VERIFIER)
    return outcomes, skipped


def _grade(grader: Any, graded: list[tuple[ExploitOutcome, str, Mapping[str, Any], str]]) -> list[Grade]:
    return grader.grade_many([task for _, _, task, _ in graded], [text for _, _, _, text in graded]) if graded else []


def _targets(env: Environment) -> tuple[list[_Target], int]:
    targets: list[_Target] = []
    skipped = 0
    for layer in env.verifier.layers:
        spec = layer.spec
        if spec.layer is LayerKind.JUDGE:
            if env.verifier.judge is None:
                skipped += len(judge.EXPLOITS)
            else:
                targets += [_Target(spec.name, exploit, judge.JudgeTarget(layer.rubric)) for exploit in judge.EXPLOITS]
            continue
        check = resolve_check(str(spec.use))
        _, params = check.bind(spec.args, env.root, env.spec.sandbox)
        bound = params if params is not None else dict(spec.args)
        targets += [_Target(spec.name, exploit, bound) for exploit in check.exploits]
    targets += [_Target(EVERY_VERIFIER, exploit, None) for exploit in (*common.EXPLOITS, *faults.exploits(env.spec))]
    targets += [_Target(GOLD, _from_spec(exploit), None) for exploit in env.spec.gold.exploits]
    return targets, skipped


def _from_spec(spec: ExploitSpec) -> Exploit:
    """An exploit from ``gold.exploits``: templates over the task's columns."""

    def build(task: Mapping[str, Any], params: Any) -> Attempt:
        if spec.files is None:
            return Attempt(spec.completion.format_map(task))
        left = {path.format_map(task): text.format_map(task) for path, text in spec.files.items()}
        return Attempt(spec.completion.format_map(task), workdir={**(task_files(task) or {}), **left})

    return Exploit(spec.name, spec.family, spec.description, build, tasks=spec.tasks)


def _tasks(env: Environment) -> list[Mapping[str, Any]]:
    """The tasks exploits may run on, best first: spread over the eval split (or gold.split), then the others."""
    names = env.split_names
    first = env.spec.gold.split or ("eval" if "eval" in names else names[0])
    chosen: list[Mapping[str, Any]] = []
    for name in [first, *(name for name in names if name != first)]:
        split = env.tasks(name)
        order = sorted(range(len(split)), key=lambda index: (index * _SPREAD) % 1.0)
        chosen += [split[index] for index in order[: _SCANNED - len(chosen)]]
        if len(chosen) >= _SCANNED:
            break
    return chosen


def _attempts(target: _Target, tasks: list[Mapping[str, Any]]) -> Iterator[tuple[Mapping[str, Any], Attempt]]:
    found = 0
    for task in tasks:
        attempt = target.exploit.attempt(task, target.params)
        if attempt is not None:
            yield task, attempt
            found += 1
            if found == target.exploit.tasks:
                return


def _snapshot(workdir: Mapping[str, str]) -> Any:
    from verihub.sandbox.types import Snapshot

    return Snapshot.of(dict(workdir))


def _run(task_id: str, completion: str, grade: Grade) -> ExploitRun:
    if grade.status is GradeStatus.OK:
        layer, detail = "", ""
    else:
        stopping = (
            (LayerStatus.FAILED, LayerStatus.ANSWER_FAULT)
            if grade.status is GradeStatus.WRONG
            else (LayerStatus.ERROR, LayerStatus.TIMEOUT)
        )
        stopped = next((result for result in grade.layers if result.status in stopping), None)
        layer = stopped.name if stopped is not None else ""
        detail = (stopped.detail if stopped is not None else "") or grade.reason
    return ExploitRun(
        task_id,
        grade.status.value,
        grade.reward,
        layer,
        detail[:300],
        completion[:_SHOWN],
        grade.answer_fault is not None,
    )


def _verdict(outcome: ExploitOutcome) -> Verdict:
    if outcome.verdict == "error":
        return "error"
    statuses = {run.status for run in outcome.runs}
    if any(outcome.got_through(run) for run in outcome.runs):
        return "passed"
    if statuses & {GradeStatus.ENV_ERROR, GradeStatus.TIMEOUT}:
        return "fault"
    return "blocked" if statuses else "not_applicable"
