"""Legacy ``verifiers`` environments (0.1.x to 0.3.1) as they were published, behind ``load_env("verifiers:MODULE")``.

>>> env = verihub.load_env("verifiers:sophistry_bench_sprint", config={"n_items": 20})  # doctest: +SKIP

A module exposing ``load_environment(**kwargs)`` that returns a ``vf.SingleTurnEnv`` with a ``vf.Rubric`` (most
published environments) is legacy. verifiers 0.4.0 deleted that API and such packages pin only
``verifiers>=0.1.x``, so they run in an interpreter whose verifiers still has it (``VERIHUB_VERIFIERS_PYTHON``,
or this one): ``scripts/setup.sh --verifiers`` makes ``.venv-verifiers-legacy`` with 0.3.1, the last such release.
That interpreter runs :mod:`verihub.adapters.bridges.verifiers_legacy_side` through the same bridge as v1 tasksets
(:class:`~verihub.adapters.verifiers.Bridge`: one shared process, the fault rule's evidence in processes of its
own, a load that is not deterministic refused).

- **tasks**: the environment's own rows (its eval dataset, else its dataset; ``config`` is
  ``load_environment``'s keywords), the first ``size``, posed as the row's system prompt and user message.
- **verifier**: one check layer, ``rubric``: the rubric's own ``score_rollout`` on the row and the completion as
  the reply, in the message form that verifiers passes (typed from 0.1.11, dicts before). Each reward function
  is a line of the detail, weight-0 metrics too (shown, not paid). The score is the rubric's weighted sum
  rescaled from ``reward_range`` to [0, 1]; without one, the range is derived from the weights as if each
  function scored in [0, 1] (from the sum of the negative weights to that of the positive ones), and a sum
  outside it is a fault that asks for ``reward_range``.
- **multi-turn**: a ``vf.MultiTurnEnv`` is played turn by turn, its rubric scoring the episode's end
  (:mod:`verihub.adapters._verifiers_legacy_turns`); a ``vf.ToolEnv`` and one that needs a remote service are
  refused at load, saying why.
- **faults**: a paid function that raises, returns what is no finite number, or calls a judge that cannot be
  reached is a fault with its reason, never the 0.0 the Rubric logs for it; whose fault, the answer's or the
  environment's, is verihub's one rule (:mod:`verihub.grading.faults`) as for v1 tasksets. A weight-0 metric's
  fault changes no reward: it is named in the detail.
"""

from __future__ import annotations

import functools
import math
import re
import subprocess
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from verihub.adapters.openenv import Remote
from verihub.adapters.verifiers import Bridge, TasksetRef, loaded_spec, rows
from verihub.checks.base import CheckResult, check
from verihub.errors import GraderInfraError, SpecError, SpecProblem, VerifiersError, describe_error

__all__ = ["LegacyBridge", "LegacyRef", "capable", "legacy_spec", "rubric", "tasks"]

_PROBE = "from importlib.metadata import version; print(version('verifiers'))"


class LegacyRef(TasksetRef):
    """A legacy environment: ``taskset`` is its module, ``config`` the keywords of its ``load_environment``."""

    reward_range: tuple[float, float] | None = Field(
        None, description="The rubric's weighted sum's [low, high]; derived from the weights when not given."
    )


class NotLegacy(Exception):
    """The module has no ``load_environment``: a v1 taskset, for the other far side."""


class LegacyBridge(Bridge):
    """:class:`~verihub.adapters.verifiers.Bridge` to the legacy far side."""

    SIDE = "verifiers_legacy_side.py"
    _open: dict[str, Bridge] = {}

    def _load_request(self) -> dict[str, Any]:
        return {
            "op": "load",
            "module": self.ref.taskset,
            "args": self.ref.config,
            "limit": self.ref.size,
            "paths": self.ref.paths,
        }

    def tasks(self) -> dict[str, Any]:
        try:
            return super().tasks()
        except GraderInfraError as error:
            if isinstance(error.__cause__, NotLegacy):
                raise error.__cause__ from None
            raise

    def _load(self, process: Any) -> None:
        super()._load(process)
        if not self.loaded.get("legacy"):
            raise NotLegacy(self.ref.taskset)


@functools.cache
def capable(python: str) -> bool:
    """Whether ``python``'s verifiers still has the legacy API (below 0.4.0)."""
    try:
        found = subprocess.run([python, "-P", "-c", _PROBE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    match = re.match(r"(\d+)\.(\d+)", found.stdout.strip())
    return found.returncode == 0 and match is not None and (int(match[1]), int(match[2])) < (0, 4)


def legacy_spec(
    ref: str, target: TasksetRef, *, seed: int | None, reward_range: list[float] | None
) -> tuple[Any, LegacyRef | Remote] | None:
    """The spec of the legacy environment ``target`` names and its check's arguments (a multi-turn one's: its
    episodes), or None when its module is no legacy one."""
    if reward_range is not None and (
        len(reward_range) != 2 or not all(math.isfinite(v) for v in reward_range) or reward_range[0] >= reward_range[1]
    ):
        raise SpecError([SpecProblem(ref, None, "reward_range", f"must be [low, high], low < high: {reward_range!r}")])
    legacy = LegacyRef(**target.model_dump(), reward_range=tuple(reward_range) if reward_range else None)
    bridge = LegacyBridge.of(legacy)
    try:
        loaded = bridge.tasks()
    except NotLegacy:
        bridge.close()
        return None
    low, high = _range(legacy, loaded["rewards"])
    if not high > low:
        raise SpecError([SpecProblem(ref, None, "rewards", "the rubric has no reward function with a weight")])
    if loaded.get("max_turns", 1) != 1:  # a vf.MultiTurnEnv: its episodes played turn by turn
        from verihub.adapters._verifiers_legacy_turns import turns_spec

        return turns_spec(ref, legacy, loaded, seed)
    return loaded_spec(legacy, loaded, seed, module=__name__, kind="environment"), legacy


def _range(ref: LegacyRef, rewards: list[list[Any]]) -> tuple[float, float]:
    """The weighted sum's declared range, else the one the weights give functions scoring in [0, 1]."""
    if ref.reward_range is not None:
        return ref.reward_range
    weights = [float(weight) for _, weight in rewards]
    return sum(min(w, 0.0) for w in weights), sum(max(w, 0.0) for w in weights)


def tasks(n: int, seed: int, **ref: Any) -> list[dict[str, Any]]:
    """The environment's first ``n`` rows (the dataset generator)."""
    return rows(LegacyBridge.of(LegacyRef(**ref)).tasks(), n)


def _fault(what: str, kind: str, detail: str) -> str:
    """A reward function's fault as the far side reports it: ``raised`` an exception, or ``returned`` a value."""
    if what == "raised":
        return f"raised {describe_error((kind, detail))}"
    return f"returned {kind} {detail}, not a finite number"


@check(params=LegacyRef, mode="thread")
def rubric(completion: str, task: Mapping[str, Any], params: LegacyRef) -> CheckResult:
    """The rubric's weighted sum for the completion as the reply, rescaled to [0, 1]; each function in the detail."""
    bridge = LegacyBridge.of(params)
    return graded(params, bridge.loaded["rewards"], bridge.scored(int(task["index"]), completion))


def graded(params: LegacyRef, rewards: list[list[Any]], answer: Mapping[str, Any]) -> CheckResult:
    """The far side's score (of a reply, or of a played episode's end) as verihub's: the weighted sum rescaled
    to [0, 1], each function in the detail; a paid function's fault, or a sum outside the range, raised."""
    weights = {name: float(weight) for name, weight in rewards}
    faults = {name: _fault(*what) for name, what in answer["faults"].items()}
    if paid := [name for name in faults if weights.get(name)]:
        raise VerifiersError(
            f"verifiers environment {params.taskset!r}: "
            + "; ".join(f"reward function {name} {faults[name]}" for name in paid)
            + " (the Rubric would have logged it and scored 0.0)"
        )
    reward = float(answer["reward"])
    if not math.isfinite(reward):  # a weight-0 metric's nan, times its 0: the paid functions' sum
        reward = sum(float(answer["scores"][name]) * weight for name, weight in weights.items() if weight)
    low, high = _range(params, rewards)
    score = (reward - low) / (high - low)
    if not -1e-9 <= score <= 1 + 1e-9:
        how = "declared" if params.reward_range else "derived from the weights, for functions scoring in [0, 1]"
        raise VerifiersError(
            f"verifiers environment {params.taskset!r}: a weighted reward of {reward:g}, outside its range "
            f"[{low:g}, {high:g}] ({how}; give reward_range=[LOW, HIGH])"
        )
    lines = [
        f"{name} not scored: {faults[name]} (x0)"
        if name in faults
        else f"{name} {_shown(answer['scores'].get(name))} (x{weight:g})"
        for name, weight in weights.items()
    ]
    return CheckResult(min(1.0, max(0.0, score)), ", ".join(lines))


def _shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, int | float) else str(value)
