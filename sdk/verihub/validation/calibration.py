"""Judge calibration: agreement with labelled examples, at validate time and, as drift, during runs."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from verihub.environment.core import Environment
from verihub.errors import DataError, UsageError
from verihub.grading.judge import JudgeError
from verihub.spec.models import LayerKind

__all__ = ["CalibrationReport", "DriftMonitor", "acalibrate", "calibration_items"]

logger = logging.getLogger("verihub.grading.judge")


@dataclass
class CalibrationReport:
    items: int = 0
    agreed: int = 0
    min_agreement: float = 0.0
    faults: int = 0
    disagreements: list[str] = field(default_factory=list)

    @property
    def agreement(self) -> float:
        return self.agreed / self.items if self.items else 0.0

    @property
    def ok(self) -> bool:
        return self.items > 0 and self.faults == 0 and self.agreement >= self.min_agreement


def calibration_items(env: Environment) -> list[dict[str, Any]]:
    """The environment's labelled examples: task columns plus ``completion`` and ``expected``."""
    spec = env.spec.calibration
    if spec is None:
        return []
    items = []
    for number, line in enumerate((env.root / spec.file).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        item = json.loads(line)
        if not isinstance(item, dict) or "completion" not in item or not isinstance(item.get("expected"), int | float):
            raise DataError(f"{spec.file}:{number}: each line needs 'completion' and a numeric 'expected'")
        items.append(item)
    return items


async def acalibrate(env: Environment, items: list[dict[str, Any]] | None = None) -> CalibrationReport:
    """Ask the environment's judge about each labelled example; count verdicts within tolerance."""
    spec = env.spec.calibration
    judge = env.verifier.judge
    if spec is None or judge is None:
        raise UsageError(f"{env.id} has no calibration set or no judge to calibrate")
    layers = {layer.spec.name: layer for layer in env.verifier.layers if layer.spec.layer is LayerKind.JUDGE}
    default_layer = next(iter(layers.values()))
    items = calibration_items(env) if items is None else items
    report = CalibrationReport(min_agreement=spec.min_agreement)

    async def one(item: dict[str, Any]) -> None:
        layer = layers.get(item.get("layer", ""), default_layer)
        try:
            verdict = await judge.judge(
                rubric=layer.rubric,
                messages=env.render(item),
                completion=item["completion"],
                model=layer.spec.model or env.spec.eval.judge_model,
            )
        except JudgeError as error:
            report.faults += 1
            report.disagreements.append(f"judge fault: {error}")
            return
        report.items += 1
        if abs(verdict.score - float(item["expected"])) <= spec.tolerance:
            report.agreed += 1
        elif len(report.disagreements) < 10:
            report.disagreements.append(
                f"expected {item['expected']:g}, judge said {verdict.score:g} ({verdict.reason[:80]}): "
                f"{item['completion'][:60]!r}"
            )

    await asyncio.gather(*(one(item) for item in items))
    report.items += report.faults
    return report


class DriftMonitor:
    """Every ``drift_every`` grades, re-grade ``drift_items`` calibration items (in turn) and warn when
    agreement falls under ``min_agreement``. Call :meth:`after_grade` once per grade."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.spec = env.spec.calibration
        self.items = calibration_items(env)
        self.grades = 0
        self._next = 0
        self._lock: asyncio.Lock | None = None  # checks run one after another, in order
        self.history: list[float] = []

    @property
    def active(self) -> bool:
        return bool(self.spec and self.items and self.env.verifier.judge is not None)

    async def after_grade(self) -> CalibrationReport | None:
        if not self.active:
            return None
        assert self.spec is not None
        self.grades += 1
        if self.grades % self.spec.drift_every:
            return None
        chosen = [
            self.items[(self._next + i) % len(self.items)] for i in range(min(self.spec.drift_items, len(self.items)))
        ]
        self._next += len(chosen)
        self._lock = self._lock or asyncio.Lock()
        async with self._lock:
            report = await acalibrate(self.env, chosen)
            self.history.append(report.agreement)
        if not report.ok:
            logger.warning(
                "judge drift in %s: agreement %.0f%% on %d calibration items (minimum %.0f%%)",
                self.env.id,
                100 * report.agreement,
                report.items,
                100 * report.min_agreement,
            )
        return report
