"""What grading returns: a Grade made of per-layer results, each saying why."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from enum import StrEnum
from json.encoder import encode_basestring_ascii as _text
from typing import Any, NamedTuple

from verihub.errors import DataError, NotFoundError

__all__ = ["Grade", "GradeStatus", "LayerResult", "LayerStatus", "grade_detail", "grade_from_detail", "grades_json"]


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
    ANSWER_FAULT = "answer_fault"  # the layer faulted, and the evidence says the answer caused it: failed, at the floor


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
    def answer_fault(self) -> LayerResult | None:
        """The layer this answer made fault (the grade is then ``wrong`` at the environment's floor), if any."""
        for result in self.layers:
            if result.status is LayerStatus.ANSWER_FAULT:
                return result
        return None

    @property
    def time_s(self) -> float:
        return sum(layer.time_s for layer in self.layers)

    def layer(self, name: str) -> LayerResult:
        for result in self.layers:
            if result.name == name:
                return result
        raise NotFoundError(f"no layer {name!r}; layers: {[r.name for r in self.layers]}")

    def to_dict(self) -> dict[str, Any]:
        return {**self._asdict(), "layers": [layer._asdict() for layer in self.layers]}


# The JSON form `verihub serve` sends and the grader pool reads back (weights and times stay local).


def grade_detail(grade: Grade) -> dict[str, Any]:
    """A grade as JSON: status, reward, reason and each layer's verdict."""
    return {
        "status": str(grade.status),
        "reward": grade.reward,
        "reason": grade.reason,
        "layers": [
            {
                "name": layer.name,
                "layer": layer.layer,
                "status": str(layer.status),
                "score": layer.score,
                "detail": layer.detail,
            }
            for layer in grade.layers
        ],
    }


def grades_json(grades: Iterable[Grade]) -> bytes:
    """``{"grades": [grade_detail(grade), ...]}`` as compact JSON, written directly: for a batch of cheap grades
    building the dicts and ``json.dumps`` cost a fifth of the grading. What was written is remembered, by
    content, for grades and for layers (verdicts and details repeat from grade to grade)."""
    return b'{"grades":[' + ",".join(map(_grade_json, grades)).encode() + b"]}"


def _grade_json(grade: Grade) -> str:
    status, reward, layers, reason = grade
    keys = [(layer[0], layer[1], layer[2], layer[3], layer[6]) for layer in layers]  # weight and time_s unsent
    key: tuple[Any, ...] | None = (status, reward, reason, *keys)
    try:
        text = _GRADES.get(key)  # type: ignore[arg-type]  # None never reaches here: it is set only below
    except TypeError:  # a detail or reason that is no string (and unhashable): written each time
        key = text = None
    if text is None:
        text = (
            f'{{"status":{_text(status)},"reward":{_number(reward)},"reason":{_string(reason)},'
            f'"layers":[{",".join(map(_layer_json, layers, keys))}]}}'
        )
        _remember(_GRADES, key, text)
    return text


def _layer_json(layer: LayerResult, key: tuple[Any, ...] | None) -> str:
    try:
        text = _LAYERS.get(key)  # type: ignore[arg-type]  # a None key (unhashable) raises TypeError too
    except TypeError:
        key, text = None, None
    if text is None:
        name, kind, status, score, _, _, detail = layer
        text = (
            f'{{"name":{_text(name)},"layer":{_text(kind)},"status":{_text(status)},"score":{_number(score)},'
            f'"detail":{_string(detail)}}}'
        )
        _remember(_LAYERS, key, text)
    return text


def _remember(texts: dict[tuple[Any, ...], str], key: tuple[Any, ...] | None, text: str) -> None:
    if key is not None and len(text) <= _MAX_REMEMBERED:  # a long detail is written each time
        if len(texts) >= _MAX_TEXTS:
            texts.clear()  # forgotten all at once: a full memo costs no more than an empty one
        texts[key] = text


def _string(value: str) -> str:
    if value.__class__ is str:
        return _text(value)
    return json.dumps(value, default=str)  # a check's detail that is no string (None, a number): as json.dumps did


def _number(value: float | None) -> str:
    if value is None:
        return "null"
    if value.__class__ is float and value - value == 0:  # finite: its repr is its JSON
        return float.__repr__(value)
    return json.dumps(value)  # what json.dumps makes of anything else (an int, inf)


_GRADES: dict[tuple[Any, ...], str] = {}
_LAYERS: dict[tuple[Any, ...], str] = {}
_MAX_TEXTS = 4096  # remembered grades, and layers
_MAX_REMEMBERED = 1024  # characters of a remembered grade's or layer's JSON


def grade_from_detail(detail: Mapping[str, Any], weights: Mapping[str, float]) -> Grade:
    """The :class:`Grade` a server's JSON grade (:func:`verihub.environment.session.grade_detail`) stands for;
    ValueError if it is not one (a fault with a reward, a reward out of range, an unknown status)."""
    status, reward = GradeStatus(detail["status"]), detail["reward"]
    if (reward is None) != (status in _FAULT_STATUSES):
        raise DataError(f"status {status} with reward {reward!r}")
    if reward is not None:
        if isinstance(reward, bool) or not isinstance(reward, int | float) or not math.isfinite(reward):
            raise DataError(f"reward {reward!r} is not a number")
        reward = float(reward)
    layers = []
    for layer in detail["layers"]:
        score = layer["score"]
        if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)):
            raise DataError(f"score {score!r} is not a number")
        layers.append(
            LayerResult(
                str(layer["name"]),
                str(layer["layer"]),
                LayerStatus(layer["status"]),
                None if score is None else float(score),
                weights.get(str(layer["name"]), 0.0),
                0.0,
                str(layer.get("detail") or ""),
            )
        )
    return Grade(status, reward, tuple(layers), str(detail.get("reason") or ""))


_FAULT_STATUSES = (GradeStatus.ENV_ERROR, GradeStatus.TIMEOUT)
