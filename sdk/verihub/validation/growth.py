"""Growth probing: find a layer whose time grows faster than the answer, without knowing its pattern.

Each fault-forcing shape (:data:`verihub.checks.attacks.faults.SHAPES`) is graded in the environment's answer
form at ``max_answer_chars``, at half of it and at a few characters, and each layer's time is read from the
grade. What a layer takes beyond its time on the few characters (a sandbox's start, a judge's round trip)
is the part that grows with the answer: a layer where that part passes :data:`FLOOR_S` at the limit and
more than :data:`RATIO` times what it was at half is super-linear there (a linear step doubles, a quadratic
one quadruples), and a longer answer, a slower machine or a tighter limit turns it into a timeout. Times
are the best of two gradings (the cache cleared between; the sizes take turns, so a busy spell slows one
grading of each size, not all of one), and a finding is measured again, best of four, before it counts: a
busy machine must not fail an environment, nor hide a quadratic step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from verihub.checks.attacks.faults import SHAPES, in_answer_form
from verihub.grading.grade import LayerStatus

if TYPE_CHECKING:
    from verihub.environment.core import Environment
    from verihub.validation.redteam import ExploitOutcome

__all__ = ["FLOOR_S", "RATIO", "probe_growth"]

FLOOR_S = 0.25  # seconds a layer may grow by at the limit, whatever its curve, before its curve matters
RATIO = 3.0  # time at the largest size over time at half of it: 2 for a linear step, 4 for a quadratic one
_BASE = 8  # characters of payload in the smallest answer: the layer's cost that does not grow
_RAN = (LayerStatus.PASSED, LayerStatus.FAILED, LayerStatus.ANSWER_FAULT, LayerStatus.TIMEOUT, LayerStatus.ERROR)


def probe_growth(env: Environment, task: Mapping[str, Any], target: str) -> list[ExploitOutcome]:
    """One outcome per shape: ``fault`` where a layer's time grows super-linearly on it, else ``blocked``."""
    from verihub.validation.redteam import ExploitOutcome

    limit = env.spec.max_answer_chars
    sizes = (_BASE, limit // 2, limit)
    outcomes = []
    for shape, payload_of in SHAPES.items():
        name = f"growth-{shape}"
        description = f"the {shape} shape at {limit // 2:,} and {limit:,} characters: each layer's time"
        completions = [in_answer_form(env.spec, task, payload_of, size) for size in sizes]
        if any(completion is None for completion in completions):
            outcomes.append(ExploitOutcome(name, "fault-forcing", target, description, "not_applicable"))
            continue
        found = ""
        for repeats in (2, 4):  # a finding is measured again before it counts
            base, half, full = _layer_times(env, task, completions, repeats)  # type: ignore[arg-type]  # no None left
            found = _super_linear(base, half, full, limit)
            if not found:
                break
        outcome = ExploitOutcome(name, "fault-forcing", target, description, "fault" if found else "blocked")
        outcome.error = found
        outcomes.append(outcome)
    return outcomes


def _layer_times(
    env: Environment, task: Mapping[str, Any], completions: list[str], repeats: int
) -> list[dict[str, float]]:
    """Each layer's seconds on each completion, the best of ``repeats`` gradings. The sizes take turns, so a
    busy spell of the machine slows one grading of each rather than every grading of one."""
    best: list[dict[str, float]] = [{} for _ in completions]
    for _ in range(repeats):
        for completion, times in zip(completions, best, strict=True):
            env.verifier.clear_cache()
            for layer in env.verifier.grade(task, completion).layers:
                if layer.status in _RAN:
                    times[layer.name] = min(times.get(layer.name, float("inf")), layer.time_s)
    return best


def _super_linear(base: dict[str, float], half: dict[str, float], full: dict[str, float], limit: int) -> str:
    """Why a layer is super-linear between half the limit and the limit, or ""."""
    for layer, seconds in full.items():
        if layer not in half:
            continue
        floor = base.get(layer, 0.0)
        grown, grown_half = seconds - floor, max(half[layer] - floor, 1e-3)
        if grown > FLOOR_S and grown > RATIO * grown_half:
            return (
                f"layer {layer!r} took {half[layer]:.3f}s at {limit // 2:,} characters and {seconds:.3f}s at "
                f"{limit:,} ({grown / grown_half:.1f}x beyond its {floor:.3f}s on a few, for 2x the length): "
                "super-linear in the answer's length"
            )
    return ""
