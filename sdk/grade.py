"""What grading returns: a Grade made of per-layer results, each saying why."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NamedTuple

__all__ = ["Grade", "GradeStatus", "LayerResult", "LayerStatus"]


class GradeStatus(StrEnum):
    OK = "ok"  # every layer that ran passed
    WRONG = "wrong"  # the answer failed a layer: a real, trainable signal
    ENV_ERROR = "env_error"  # the environment failed (a check raised): reward is None, never 0
    TIMEOUT = "timeout"  # a layer ran past its limit: reward is None, never 0


class LayerStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"  # an earlier gate failed, or the grade already hit an environment fault
    ERROR = "error"
    TIMEOUT = "timeout"


# Grades are NamedTuples: immutable (cached grades are shared) and cheap to build (the engine makes
# one per layer per grade, and its overhead is benchmarked against calling the check directly).


class LayerResult(NamedTuple):
    name: str
    layer: str
    status: LayerStatus
    score: float | None
    weight: float
    time_s: float = 0.0
    detail: str = ""


class Grade(NamedTuple):
    """The verdict on one completion. ``reward`` is None exactly when ``status`` is an environment fault."""

    status: GradeStatus
    reward: float | None
    layers: tuple[LayerResult, ...]
    reason: str = ""

    @property
    def passed(self) -> bool:
        return self.status is GradeStatus.OK

    @property
    def is_env_fault(self) -> bool:
        return self.reward is None

    @property
    def time_s(self) -> float:
        return sum(layer.time_s for layer in self.layers)

    def layer(self, name: str) -> LayerResult:
        for result in self.layers:
            if result.name == name:
                return result
        raise KeyError(f"no layer {name!r}; layers: {[r.name for r in self.layers]}")

    def to_dict(self) -> dict[str, Any]:
        return {**self._asdict(), "layers": [layer._asdict() for layer in self.layers]}
