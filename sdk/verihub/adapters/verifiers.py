"""Prime Intellect's ``verifiers`` (0.4, its v1 ``Taskset``/``Task`` API) tasksets as verihub environments; the
same ``verifiers:`` id loads a legacy environment (a ``load_environment`` module, verifiers 0.1.x to 0.3.1) where
the interpreter's verifiers still has that API (:mod:`verihub.adapters._verifiers_legacy`).

>>> env = verihub.load_env("verifiers:my_taskset", size=200)  # doctest: +SKIP
>>> env = verihub.load_env("verifiers:my_taskset?size=50", config={"split": "test"})  # doctest: +SKIP

verifiers pins packages verihub's lock cannot share, so it runs in an interpreter of its own
(``VERIHUB_VERIFIERS_PYTHON``, or this one when it has verifiers): verihub starts
:mod:`verihub.adapters.bridges.verifiers_side` there, once per taskset and process, and talks to it over pipes.

- **tasks**: the taskset's first ``size`` tasks (default 100), split 80/20 into ``train`` and ``eval``
  (``seed`` shuffles them first); the taskset module is found as verifiers finds it (an installed package
  exporting one ``vf.Taskset`` in ``__all__``, or one on ``paths``), its config from ``config``.
- **prompt**: the task's prompt as text, after its system prompt when it has one.
- **verifier**: one check layer, ``rubric``: the task's own ``score`` (its ``@vf.reward`` functions and
  judges) on a trace that ends in the completion as the model's reply. The layer's score is the rewards'
  weighted mean (verifiers' weighted sum over the weights), each function's score in its detail; it passes
  at 1. Rewards that need a runtime (a sandbox of verifiers' own) cannot run here: they are named in the
  detail, and a taskset whose every reward needs one is refused when it loads, as one whose tasks need a
  container is.

Scoring is the taskset's code: any exception in it, a reward that is no number, the bridge dying or taking
longer than ``timeout_s`` is a fault with its reason (``env_error``), never a 0. Whose fault follows verihub's
one rule (:mod:`verihub.grading.faults`): a taskset ships no gold, so the evidence is another reply to the
task that its scorer took without a fault (never the task's prompt: a scorer strict about its input raises
on it). Answers share the taskset's bridge, one score at a time; the rule's evidence is scored by a bridge
process of its own (:func:`~verihub.adapters._bridge.bridge_pool`), so a reply that stalls the shared bridge
stalls no other reply's evidence. Each bridge loads the taskset itself, and one that loads other tasks than the
first (a taskset whose load is not deterministic) is refused: its scores would be of other tasks. (What the
comparison sees is what verihub poses: the tasks' ids and prompts, and the rewards; a load that keeps those and
changes only what its scorer checks against goes unseen.)
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from pydantic import Field

from verihub import settings
from verihub.adapters._bridge import BridgeProcess, bridge_pool, held
from verihub.adapters.openenv import OpenEnvEnvironment, Remote
from verihub.checks.base import CheckParams, CheckResult, check
from verihub.environment.core import Environment
from verihub.errors import GraderInfraError, SpecError, SpecProblem, VerifiersError
from verihub.grading._apart import apart
from verihub.grading._pools import START_S

__all__ = ["PREFIX", "Bridge", "TasksetRef", "VerifiersError", "load_verifiers", "rubric"]

PREFIX = "verifiers:"
OPTIONS = ("size", "seed", "config", "paths", "python", "timeout_s", "reward_range")
DEFAULT_SIZE = 100
_TASKSET_ID = re.compile(r"[A-Za-z_][\w.-]{0,100}")


class TasksetRef(CheckParams):
    """Which taskset, in which interpreter (the task source's and the check's arguments)."""

    taskset: str
    config: dict[str, Any] = Field(default_factory=dict)
    paths: list[str] = Field(default_factory=list, description="Directories put first on the bridge's sys.path.")
    python: str = Field(description="The interpreter that has verifiers.")
    size: int = Field(DEFAULT_SIZE, ge=1)
    timeout_s: float = Field(60.0, gt=0, le=3600)

    def columns(self) -> set[str]:
        return {"index"}


class Bridge:
    """The bridge process of one taskset (:class:`~verihub.adapters._bridge.BridgeProcess`), its taskset loaded,
    and the bridges that score the fault rule's evidence (:func:`~verihub.adapters._bridge.bridge_pool`), each for
    one score at a time. Every bridge loads the taskset itself; one whose tasks differ from the first load's (a
    taskset whose load is not deterministic) is refused, as it would score another task than the one posed."""

    SIDE = "verifiers_side.py"  # the far side, in verihub.adapters.bridges
    _open: dict[str, Bridge] = {}
    _open_lock = threading.Lock()

    def __init__(self, ref: TasksetRef) -> None:
        self.ref = ref
        self.loaded: dict[str, Any] = {}  # the first load's answer: the tasks verihub poses
        self._digest: str | None = None  # of those tasks
        self._loaded_lock = threading.Lock()
        self.process = self._new()
        self.apart = bridge_pool(self._new, f"verifiers taskset {ref.taskset!r}")

    def _new(self) -> BridgeProcess:
        return BridgeProcess(
            self.ref.python,
            self.SIDE,
            what=f"verifiers taskset {self.ref.taskset!r}",
            timeout_s=self.ref.timeout_s,
            error=VerifiersError,
            ready=self._load,
        )

    @classmethod
    def of(cls, ref: TasksetRef) -> Self:
        key = ref.model_dump_json()
        with cls._open_lock:
            if key not in cls._open:
                cls._open[key] = cls(ref)
            return cls._open[key]  # type: ignore[return-value]  # each subclass has an _open of its own

    def tasks(self) -> dict[str, Any]:
        """The taskset's load answer: its tasks, rewards and versions."""
        try:
            with self.process.held():
                self.process.ensure()
        except GraderInfraError as error:  # loading the environment: the taskset's own failure, said as such
            if isinstance(error.__cause__, VerifiersError):
                raise error.__cause__ from None
            raise
        return self.loaded

    def score(self, index: int, completion: str) -> dict[str, list[float] | None]:
        return self.scored(index, completion)["rewards"]

    def scored(self, index: int, completion: str) -> dict[str, Any]:
        """The far side's whole answer to scoring ``completion`` as the reply to task ``index``."""
        request = {"op": "score", "index": index, "completion": completion}
        if apart():  # the fault rule's evidence: never behind another reply on the shared bridge
            with held(self.apart) as process:
                return process.ask(request)
        with self.process.held():
            return self.process.ask(request)

    def close(self) -> None:
        """Close every bridge process of this taskset (a later use starts them again)."""
        with self._open_lock:
            if self._open.get(self.ref.model_dump_json()) is self:
                del self._open[self.ref.model_dump_json()]
        self.apart.close()
        self.process.close()

    def _load(self, process: BridgeProcess) -> None:
        """A bridge's first request (:meth:`BridgeProcess.ensure`): the taskset loaded there, the same tasks as
        the first load's or refused."""
        answer = process.ask(self._load_request(), max(START_S, self.ref.timeout_s))
        digest = _digest(answer)
        with self._loaded_lock:
            if self._digest is None:
                self._digest, self.loaded = digest, answer
            elif digest != self._digest:
                raise VerifiersError(
                    f"verifiers taskset {self.ref.taskset!r} loaded other tasks in a new bridge process than "
                    "at first (its load is not deterministic): a score there would be of another task than the "
                    "one posed"
                )

    def _load_request(self) -> dict[str, Any]:
        return {
            "op": "load",
            "taskset": self.ref.taskset,
            "config": self.ref.config,
            "limit": self.ref.size,
            "paths": self.ref.paths,
        }


def _digest(loaded: dict[str, Any]) -> str:
    """What a load gave, as verihub poses and scores it: the tasks (their ids, prompts, system prompts, in order)
    and the rewards."""
    rows = [loaded.get("tasks"), loaded.get("rewards"), loaded.get("runtime_rewards")]
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=repr).encode()).hexdigest()


def verifiers_spec(
    ref: str,
    *,
    size: int | None = None,
    seed: int | None = None,
    config: Mapping[str, Any] | None = None,
    paths: list[str] | None = None,
    python: str | None = None,
    timeout_s: float = 60.0,
    reward_range: list[float] | None = None,
) -> tuple[Any, TasksetRef | Remote]:
    """The :class:`~verihub.spec.loader.LoadedSpec` of ``verifiers:TASKSET`` (see the module docstring): a legacy
    environment (:mod:`verihub.adapters._verifiers_legacy`) where the interpreter's verifiers has that API and
    the module a ``load_environment``, else a v1 taskset."""
    from verihub.adapters import _verifiers_legacy as legacy

    taskset = ref.removeprefix(PREFIX).strip()
    if not _TASKSET_ID.fullmatch(taskset):
        raise SpecError([SpecProblem(ref, None, "taskset", f"must name a verifiers taskset module, got {taskset!r}")])
    size = DEFAULT_SIZE if size is None else size
    if not isinstance(size, int) or isinstance(size, bool) or size < 5:
        raise SpecError([SpecProblem(ref, None, "size", f"must be an integer of at least 5, got {size!r}")])
    target = TasksetRef(
        taskset=taskset,
        config=dict(config or {}),
        paths=[str(Path(p).resolve()) for p in paths or []],
        python=python or settings.verifiers_python(),
        size=size,
        timeout_s=timeout_s,
    )
    if legacy.capable(target.python):
        found = legacy.legacy_spec(ref, target, seed=seed, reward_range=reward_range)
        if found is not None:
            return found
    if reward_range is not None:
        raise SpecError([SpecProblem(ref, None, "reward_range", "is for legacy environments (load_environment)")])
    loaded = Bridge.of(target).tasks()
    if loaded["rewards"] and set(loaded["rewards"]) <= set(loaded["runtime_rewards"]):
        raise SpecError(
            [
                SpecProblem(
                    ref,
                    None,
                    "rewards",
                    "every reward function needs a runtime (verifiers' "
                    f"sandbox), which verihub does not run: {', '.join(loaded['rewards'])}",
                )
            ]
        )
    if not loaded["rewards"]:
        raise SpecError([SpecProblem(ref, None, "rewards", "the taskset's tasks declare no reward")])
    return loaded_spec(target, loaded, seed, module=__name__, kind="taskset"), target


def loaded_spec(target: TasksetRef, loaded: dict[str, Any], seed: int | None, *, module: str, kind: str) -> Any:
    """The spec of a loaded taskset or environment: its tasks from ``module``'s ``tasks``, graded by ``module``'s
    ``rubric`` check, both with ``target`` as their arguments."""
    from verihub.adapters.openenv import SPLIT
    from verihub.spec.lines import LineMap
    from verihub.spec.loader import LoadedSpec
    from verihub.spec.models import EnvSpec

    taskset, timeout_s = target.taskset, target.timeout_s
    version = loaded["versions"].get(taskset.split(".")[0], "0.0.0")
    with_system = any(task["system"] for task in loaded["tasks"])
    arguments = target.model_dump()
    spec = EnvSpec.model_validate(
        {
            "id": "verifiers-" + re.sub(r"[^a-z0-9._-]+", "-", taskset.lower()),
            "version": version if re.fullmatch(r"\d{1,9}\.\d{1,9}\.\d{1,9}", version) else "0.0.0",
            "domain": "verifiers",
            "description": f"The verifiers {kind} {taskset} (verifiers {loaded['versions'].get('verifiers', '?')}).",
            "tags": ["verifiers"],
            "dataset": {
                "source": f"{module}:tasks",
                "size": len(loaded["tasks"]),
                "seed": seed or 0,
                "args": arguments,
                "split": SPLIT,
            },
            "prompt": {"system": "{system}", "user": "{prompt}"} if with_system else {"user": "{prompt}"},
            "verifier": [
                {
                    "name": "rubric",
                    "layer": "check",
                    "use": f"{module}:rubric",
                    "args": arguments,
                    "timeout_s": 2 * timeout_s + 5,
                }
            ],
            # a taskset ships no oracle answers: the prompt is only what validate sends, never evidence
            "gold": {"reference": "{prompt}", "reference_is": "placeholder", "min_pass_rate": 0.0},
        }
    )
    return LoadedSpec(spec, Path(PREFIX + taskset) / "environment.yaml", LineMap())


def tasks(n: int, seed: int, **ref: Any) -> list[dict[str, Any]]:
    """The taskset's first ``n`` tasks as rows (the dataset generator)."""
    return rows(Bridge.of(TasksetRef(**ref)).tasks(), n)


def rows(loaded: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """A load answer's first ``n`` tasks as dataset rows."""
    return [
        {"id": f"{task['id']}", "index": index, "prompt": task["prompt"], "system": task["system"]}
        for index, task in enumerate(loaded["tasks"][:n])
    ]


@check(params=TasksetRef, mode="thread")
def rubric(completion: str, task: Mapping[str, Any], params: TasksetRef) -> CheckResult:
    """The task's own rewards for the completion as the reply: their weighted mean, each in the detail."""
    bridge = Bridge.of(params)
    rewards = bridge.score(int(task["index"]), completion)
    scored = {name: value for name, value in rewards.items() if value is not None}
    skipped = sorted(set(bridge.loaded["runtime_rewards"]) | {name for name, value in rewards.items() if value is None})
    weight = sum(value[1] for value in scored.values())
    if not scored or weight <= 0:
        raise VerifiersError(
            f"verifiers taskset {params.taskset!r} scored no reward with a positive weight "
            f"(skipped: {', '.join(skipped) or 'none'})"
        )
    score = sum(value[0] * value[1] for value in scored.values()) / weight
    if not 0.0 <= score <= 1.0:
        raise VerifiersError(f"verifiers taskset {params.taskset!r}: a weighted reward of {score:g}, outside [0, 1]")
    detail = ", ".join(f"{name} {value[0]:g} (x{value[1]:g})" for name, value in sorted(scored.items()))
    if skipped:
        detail += f"; not run (they need a runtime): {', '.join(skipped)}"
    return CheckResult(score, detail)


def load_verifiers(
    ref: str,
    *,
    size: int | None = None,
    seed: int | None = None,
    config: Mapping[str, Any] | None = None,
    **options: Any,
) -> Environment:
    """``verihub.load_env("verifiers:TASKSET")``: ``options`` are :func:`verifiers_spec`'s keywords (``config``
    the taskset's config); ``judge`` and ``on_missing_judge`` go to the environment."""
    from verihub.adapters.openenv import ref_options

    env_options = {key: options.pop(key) for key in ("judge", "on_missing_judge") if key in options}
    ref, given = ref_options(ref)
    merged = {
        **given,
        **options,
        **{key: value for key, value in (("size", size), ("seed", seed), ("config", config)) if value is not None},
    }
    if unknown := sorted(set(merged) - set(OPTIONS)):
        raise TypeError(f"verifiers: environments take no {', '.join(unknown)} (options: {', '.join(OPTIONS)})")
    loaded, target = verifiers_spec(ref, **merged)
    if isinstance(target, Remote):  # a multi-turn legacy environment: played as episodes
        return OpenEnvEnvironment(loaded, target, **env_options)
    return Environment(loaded, **env_options)
