"""What grading returns: a Grade made of per-layer results, each saying why."""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, NamedTuple

__all__ = ["Grade", "GradeStatus", "LayerResult", "LayerStatus", "grade_detail", "grade_from_detail"]


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


# The JSON form `verihub serve` sends and the grader pool reads back (weights and times stay local).


def grade_detail(grade: Grade) -> dict[str, Any]:
    """A grade as JSON: status, reward, reason and each layer's verdict."""
    return {"status": str(grade.status), "reward": grade.reward, "reason": grade.reason,
            "layers": [{"name": layer.name, "layer": layer.layer, "status": str(layer.status), "score": layer.score,
                        "detail": layer.detail} for layer in grade.layers]}


def grade_from_detail(detail: Mapping[str, Any], weights: Mapping[str, float]) -> Grade:
    """The :class:`Grade` a server's JSON grade (:func:`verihub.session.grade_detail`) stands for;
    ValueError if it is not one (a fault with a reward, a reward out of range, an unknown status)."""
    status, reward = GradeStatus(detail["status"]), detail["reward"]
    if (reward is None) != (status in _FAULT_STATUSES):
        raise ValueError(f"status {status} with reward {reward!r}")
    if reward is not None:
        if isinstance(reward, bool) or not isinstance(reward, int | float) or not math.isfinite(reward):
            raise ValueError(f"reward {reward!r} is not a number")
        reward = float(reward)
    layers = []
    for layer in detail["layers"]:
        score = layer["score"]
        if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)):
            raise ValueError(f"score {score!r} is not a number")
        layers.append(LayerResult(str(layer["name"]), str(layer["layer"]), LayerStatus(layer["status"]),
                                  None if score is None else float(score), weights.get(str(layer["name"]), 0.0), 0.0,
                                  str(layer.get("detail") or "")))
    return Grade(status, reward, tuple(layers), str(detail.get("reason") or ""))


_FAULT_STATUSES = (GradeStatus.ENV_ERROR, GradeStatus.TIMEOUT)
