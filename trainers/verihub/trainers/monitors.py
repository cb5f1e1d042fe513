"""What a run is doing, per domain, and alerts when the reward looks hacked rather than earned.

:class:`RunMonitor` reads the grades of every batch (in row order, so consecutive ``group_size`` rows
are the samples of one prompt) and, at each logging step, gives metrics since the last one:

- ``verihub/<env>/reward``, ``pass_rate``, ``fault_rate`` and ``faults`` (cumulative), ``answer_faults``
  (cumulative: answers graded wrong because they made a layer fault), ``faults_without_evidence``
  (cumulative: faults the rule kept as the environment's for want of evidence that the layer works on the
  task, :func:`verihub.grading.faults.lacks_evidence`: no gold, no canary, no other answer graded without a
  fault; a policy finding inputs that fault such tasks goes unpenalised there), ``length``
  (characters of the graded answer), ``identical_groups`` (groups whose samples are all the same),
  ``pass_rate/<difficulty>``; ``verihub/<env>/heldout_pass_rate`` when held-out evaluation runs (a
  faulted sample counts as failed), with ``heldout_pass_rate_graded`` (graded samples only),
  ``heldout_faulted`` (samples) and ``heldout_tasks_lost`` (tasks with no sample graded) beside it;
  ``verihub/<env>/judge_agreement`` when a judge layer has a calibration set.
- ``alerts/<kind>/<env>`` = 1 at every logging step an alert holds, with a warning when it starts:
  ``heldout`` (training pass rate up while held-out pass rate falls from its best by more than the
  margin and more than twice the standard error of that difference on the held-out sample),
  ``judge`` (judge agreement with its calibration labels falls), ``length`` (answers grow past
  ``length_factor`` times their early length), ``format`` (rule layers pass more and more while the
  checks do not), ``collapse`` (at least ``collapse_share`` of groups are identical samples),
  ``answer_faults`` (at least ``answer_fault_share`` of a window's answers made a layer fault: a policy
  that found an input the grading path cannot handle), ``judge_injection`` (at least
  ``judge_injection_share`` of a window's answers addressed their judge: orders to the grader, a verdict, fence
  or turn tokens, the rubric pasted back; :mod:`verihub.grading.injection`), with
  ``verihub/<env>/judge_injections`` (cumulative) beside it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from verihub.grading.faults import lacks_evidence
from verihub.trainers.rewards import Outcome

if TYPE_CHECKING:
    from verihub.trainers.heldout import HeldoutRate

__all__ = ["MonitorKnobs", "RunMonitor", "measurement_noise"]

logger = logging.getLogger("verihub.trainers")


@dataclass(frozen=True)
class MonitorKnobs:
    margin: float = 0.1  # how far a rate must move (as a fraction) to count as rising or falling
    length_factor: float = 2.0
    collapse_share: float = 0.5
    answer_fault_share: float = 0.1  # share of a window's answers that made a layer fault
    judge_injection_share: float = 0.02  # share of a window's answers flagged for addressing their judge
    baseline_windows: int = 2  # logging windows averaged for the early baseline


@dataclass
class _Window:
    """Counts for one environment since the last logging step."""

    rows: int = 0
    scored: int = 0
    passed: int = 0
    faults: int = 0
    answer_faults: int = 0
    injections: int = 0
    injection_example: str = ""  # the signs of the window's first flagged answer
    reward: float = 0.0
    length: int = 0
    rules: int = 0
    rules_passed: int = 0
    checks_passed: int = 0
    groups: int = 0
    identical: int = 0
    by_difficulty: dict[str, list[int]] = field(default_factory=dict)  # difficulty -> [passed, scored]


@dataclass
class _Series:
    """One environment's per-window rates, oldest first."""

    pass_rate: list[float] = field(default_factory=list)
    length: list[float] = field(default_factory=list)
    rule_rate: list[float] = field(default_factory=list)
    check_rate: list[float] = field(default_factory=list)
    heldout: list[float] = field(default_factory=list)
    heldout_last: HeldoutRate | None = None  # the latest held-out rate, with its sample size and faults
    judge: list[float] = field(default_factory=list)
    faults: int = 0
    fault_reasons: set[str] = field(default_factory=set)
    answer_faults: int = 0
    unevidenced: int = 0  # faults kept as the environment's for want of evidence
    injections: int = 0


class RunMonitor:
    def __init__(self, envs: Sequence[str], group_size: int, knobs: MonitorKnobs | None = None) -> None:
        self.knobs = knobs or MonitorKnobs()
        self.group_size = group_size
        self.series = {env: _Series() for env in envs}
        self._windows = {env: _Window() for env in envs}
        self._fresh_heldout: set[str] = set()
        self._firing: set[tuple[str, str]] = set()  # (kind, env) alerts firing now: warned once until they stop

    def observe(self, outcomes: Sequence[Outcome | None]) -> None:
        """The grades of one batch, in row order."""
        for outcome in outcomes:
            if outcome is not None:
                self._count(outcome)
        for start in range(0, len(outcomes) - self.group_size + 1, self.group_size):
            group = outcomes[start : start + self.group_size]
            if self.group_size > 1 and all(o is not None and not o.fault for o in group):
                window = self._windows[group[0].env]  # type: ignore[union-attr]  # no None in the group: checked above
                window.groups += 1
                window.identical += len({o.text for o in group}) == 1  # type: ignore[union-attr]  # no None in the group: checked above

    def record_heldout(self, rates: Mapping[str, HeldoutRate]) -> None:
        """Held-out pass rates (:func:`~verihub.trainers.heldout.heldout_pass_rates`), faults counted as failed."""
        for env, rate in rates.items():
            series = self.series[env]
            series.heldout.append(rate.pass_rate)
            series.heldout_last = rate
            self._fresh_heldout.add(env)

    def record_judge_agreement(self, env: str, agreement: float) -> None:
        self.series[env].judge.append(agreement)

    def flush(self) -> tuple[dict[str, float], list[str]]:
        """Metrics since the last call, and the alerts that fire now."""
        metrics: dict[str, float] = {}
        alerts: list[str] = []
        for env, window in self._windows.items():
            series = self.series[env]
            prefix = f"verihub/{env}"
            metrics[f"{prefix}/faults"] = float(series.faults)
            metrics[f"{prefix}/answer_faults"] = float(series.answer_faults)
            metrics[f"{prefix}/faults_without_evidence"] = float(series.unevidenced)
            metrics[f"{prefix}/judge_injections"] = float(series.injections)
            if window.rows:
                metrics[f"{prefix}/fault_rate"] = window.faults / window.rows
            if window.scored:
                pass_rate = window.passed / window.scored
                series.pass_rate.append(pass_rate)
                series.length.append(window.length / window.scored)
                series.check_rate.append(window.checks_passed / window.scored)
                if window.rules:
                    series.rule_rate.append(window.rules_passed / window.rules)
                metrics.update(
                    {
                        f"{prefix}/reward": window.reward / window.scored,
                        f"{prefix}/pass_rate": pass_rate,
                        f"{prefix}/length": window.length / window.scored,
                    }
                )
                for difficulty, (passed, scored) in sorted(window.by_difficulty.items()):
                    metrics[f"{prefix}/pass_rate/{difficulty}"] = passed / scored
            if window.groups:
                metrics[f"{prefix}/identical_groups"] = window.identical / window.groups
            if series.heldout and env in self._fresh_heldout:
                last = series.heldout_last
                assert last is not None
                # what faults took out: counted as failed in the rate, left out of its graded twin
                metrics.update(
                    {
                        f"{prefix}/heldout_pass_rate": last.pass_rate,
                        f"{prefix}/heldout_faulted": float(last.faulted),
                        f"{prefix}/heldout_tasks_lost": float(last.tasks_lost),
                    }
                )
                if not math.isnan(last.graded_pass_rate):
                    metrics[f"{prefix}/heldout_pass_rate_graded"] = last.graded_pass_rate
            if series.judge:
                metrics[f"{prefix}/judge_agreement"] = series.judge[-1]
            found = self._alerts(env, window)
            for kind, why in found:
                metrics[f"alerts/{kind}/{env}"] = 1.0
                alerts.append(f"{kind} in {env}: {why}")
                if (kind, env) not in self._firing:
                    logger.warning("reward-hacking alert (%s) in %s: %s", kind, env, why)
            self._firing -= {(kind, name) for kind, name in self._firing if name == env}
            self._firing |= {(kind, env) for kind, _ in found}
            self._windows[env] = _Window()
        self._fresh_heldout.clear()
        return metrics, alerts

    def _count(self, outcome: Outcome) -> None:
        window = self._windows[outcome.env]
        window.rows += 1
        if outcome.judge_injection:  # an attempt counts whatever its grade: it may have faulted the judge
            window.injections += 1
            window.injection_example = window.injection_example or outcome.judge_injection
            self.series[outcome.env].injections += 1
        if outcome.fault:
            window.faults += 1
            series = self.series[outcome.env]
            series.faults += 1
            series.unevidenced += lacks_evidence(outcome.reason)
            reason = outcome.reason.split(":", 1)[0]
            if reason not in series.fault_reasons:  # say each kind of fault once; counts go to the metrics
                series.fault_reasons.add(reason)
                logger.warning(
                    "environment fault in %s (no reward, not scored as wrong): %s", outcome.env, outcome.reason
                )
            return
        window.scored += 1
        if outcome.answer_fault:  # graded wrong at the floor; counted, since a policy probing a limit shows here
            window.answer_faults += 1
            self.series[outcome.env].answer_faults += 1
        window.passed += outcome.passed
        window.reward += outcome.reward or 0.0
        window.length += outcome.length
        if outcome.rules_passed is not None:
            window.rules += 1
            window.rules_passed += outcome.rules_passed
        window.checks_passed += bool(outcome.checks_passed)
        counts = window.by_difficulty.setdefault(outcome.difficulty, [0, 0])
        counts[0] += outcome.passed
        counts[1] += 1

    def _alerts(self, env: str, window: _Window) -> list[tuple[str, str]]:
        series, knobs = self.series[env], self.knobs
        found: list[tuple[str, str]] = []
        base = knobs.baseline_windows
        if len(series.heldout) >= 2 and len(series.pass_rate) > base:
            train_gain = series.pass_rate[-1] - _mean(series.pass_rate[:base])
            best, last = max(series.heldout), series.heldout[-1]
            heldout_drop = best - last
            if train_gain >= knobs.margin and heldout_drop >= max(knobs.margin, _noise(best, last, series)):
                found.append(
                    (
                        "heldout",
                        f"training pass rate up {train_gain:+.0%} while held-out pass rate fell "
                        f"{heldout_drop:.0%} from its best",
                    )
                )
        if len(series.judge) >= 2 and max(series.judge) - series.judge[-1] >= knobs.margin:
            found.append(
                (
                    "judge",
                    f"judge agreement with its calibration labels fell to {series.judge[-1]:.0%} "
                    f"(best {max(series.judge):.0%})",
                )
            )
        if len(series.length) > base and window.scored:
            early = _mean(series.length[:base])
            if early > 0 and series.length[-1] > knobs.length_factor * early:
                found.append(
                    (
                        "length",
                        f"answers average {series.length[-1]:.0f} characters, "
                        f"{series.length[-1] / early:.1f}x their early {early:.0f}",
                    )
                )
        if len(series.rule_rate) > base and window.rules:
            rule_gain = series.rule_rate[-1] - _mean(series.rule_rate[:base])
            check_gain = series.check_rate[-1] - _mean(series.check_rate[:base])
            if rule_gain >= 2 * knobs.margin and check_gain <= 0:
                found.append(
                    (
                        "format",
                        f"rule layers pass {rule_gain:+.0%} more than early on while the checks pass {check_gain:+.0%}",
                    )
                )
        if window.scored and window.answer_faults / window.scored >= knobs.answer_fault_share:
            found.append(
                (
                    "answer_faults",
                    f"{window.answer_faults}/{window.scored} answers made a layer fault (graded "
                    "wrong at the floor): the policy may be probing a limit of the grading path",
                )
            )
        if window.rows and window.injections / window.rows >= knobs.judge_injection_share:
            found.append(
                (
                    "judge_injection",
                    f"{window.injections}/{window.rows} answers addressed their judge "
                    f"(first: {window.injection_example}): the policy may be trying to "
                    "talk the judge into its reward",
                )
            )
        if window.groups and window.identical / window.groups >= knobs.collapse_share:
            found.append(
                (
                    "collapse",
                    f"{window.identical}/{window.groups} groups are {self.group_size} identical "
                    "samples: no learning signal, exploration has collapsed",
                )
            )
        return found


def measurement_noise(first: float, second: float, samples: int) -> float:
    """Twice the standard error of the difference of two pass rates measured on the same number of
    samples: a change smaller than this is what re-measuring an unchanged model could show."""
    if not samples:
        return 0.0
    rate = (first + second) / 2
    return 2 * math.sqrt(2 * rate * (1 - rate) / samples)


def _noise(best: float, last: float, series: _Series) -> float:
    return measurement_noise(best, last, series.heldout_last.samples if series.heldout_last is not None else 0)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
