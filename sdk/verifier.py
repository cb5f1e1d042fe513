"""The layered verifier engine: rule -> check -> judge, gates, weights, and faults that are never zeros.

Layers run cheapest first. A *stage* is a run of layers of one kind that ends at a gate or where the
kind changes; the layers of a stage run concurrently, and a failed gate skips every later stage.
Checks marked ``inline`` run right on the grading thread (they are microseconds); the others run in a
thread pool, a process pool or as coroutines, each bounded by a semaphore sized to its pool so that
a check's time limit starts when it actually starts.

A check that raises, returns something that is not a score, or runs past ``timeout_s`` turns the whole
grade into ``env_error`` or ``timeout`` with reward ``None`` and the reason: an environment fault is
never scored as a wrong answer.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import io
import tarfile
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter
from typing import Any, Literal

from verihub import _pools
from verihub.checks.base import BoundCheck, CheckResult, Mode
from verihub.checks.registry import resolve_check
from verihub.dataset import task_id
from verihub.grade import Grade, GradeStatus, LayerResult, LayerStatus
from verihub.judge import Judge
from verihub.sandbox.types import Snapshot
from verihub.spec import LayerKind, LayerSpec, SandboxSpec
from verihub.tools import WORKDIR

__all__ = ["BoundLayer", "Verifier"]

Task = Mapping[str, Any]
Outcome = tuple[LayerStatus, float | None, str, float]  # status, score, detail, seconds
CacheKey = tuple[str, str] | tuple[str, str, str]  # task id, completion[, digest of the final work dir]

_KIND_ORDER = {LayerKind.RULE: 0, LayerKind.CHECK: 1, LayerKind.JUDGE: 2}
_PASSED, _FAILED, _OK, _WRONG = LayerStatus.PASSED, LayerStatus.FAILED, GradeStatus.OK, GradeStatus.WRONG
# Process jobs in flight per worker: jobs queued behind the running one hide the round trip to it.
_PROCESS_QUEUE_DEPTH = 4
# Build the NamedTuples from a complete field tuple, skipping their keyword-handling constructors.
_new_layer_result = functools.partial(tuple.__new__, LayerResult)
_new_grade = functools.partial(tuple.__new__, Grade)


@dataclass(frozen=True, slots=True)
class BoundLayer:
    """A layer ready to run: its spec plus the check bound to its arguments."""

    spec: LayerSpec
    run: BoundCheck | None  # None for judge layers
    mode: Mode
    rubric: str = ""  # judge layers: the rubric text
    columns: frozenset[str] = frozenset()  # dataset columns the check reads

    @classmethod
    def from_spec(cls, spec: LayerSpec, root: Path, sandbox: SandboxSpec | None = None) -> BoundLayer:
        """Resolve and bind the layer's check (judge layers read their rubric instead)."""
        if spec.layer is LayerKind.JUDGE:
            return cls(spec, None, "async", rubric=(root / str(spec.rubric)).read_text())
        check = resolve_check(str(spec.use))
        run, params = check.bind(spec.args, root, sandbox)
        return cls(spec, run, check.mode, columns=frozenset(params.columns() if params is not None else ()))


class Verifier:
    """Grades completions with an ordered list of layers. Thread-safe; one instance per environment.

    ``judge`` scores judge layers; without one they are environment faults (``on_missing_judge="error"``)
    or left out of the grade (``"skip"``, used by ``validate`` when no judge model is configured).
    """

    def __init__(
        self,
        layers: Sequence[BoundLayer],
        *,
        judge: Judge | None = None,
        judge_model: str | None = None,
        render: Callable[[Task], list[dict[str, str]]] | None = None,
        on_missing_judge: Literal["error", "skip"] = "error",
        max_concurrency: int = 64,
        cache_size: int = 100_000,
    ) -> None:
        if not layers:
            raise ValueError("a verifier needs at least one layer")
        self.layers = sorted(layers, key=lambda layer: _KIND_ORDER[layer.spec.layer])
        self.stages = _split_stages(self.layers)
        self.judge, self.judge_model, self.render = judge, judge_model, render
        self.on_missing_judge = on_missing_judge
        self.max_concurrency = max_concurrency
        self.all_inline = all(layer.mode == "inline" for layer in self.layers)
        # What the inline fast path reads per layer, unpacked once instead of per grade.
        self._inline_plan = [
            (layer.run, layer.spec.name, layer.spec.layer.value, layer.spec.weight, layer.spec.pass_score, layer.spec.gate)
            for layer in self.layers
        ]
        self._cache: dict[CacheKey, Grade] = {}
        self._cache_size = cache_size
        self._limits: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Mode, asyncio.Semaphore]] = (
            weakref.WeakKeyDictionary()
        )
        self._skipped_after_gate = [_skipped(layer, "an earlier gate failed") for layer in self.layers]
        self._skipped_after_fault = [_skipped(layer, "grading stopped at an environment fault") for layer in self.layers]

    # -- public API --------------------------------------------------------------------------------

    def grade(self, task: Task, completion: str) -> Grade:
        """Grade one completion. Use :meth:`agrade` from async code."""
        key = self._key(task, completion)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if self.all_inline:
            grade = self._grade_inline(task, completion)
        else:
            grade = _run_sync(self._agrade(task, completion), "grade")
        return self._remember(key, grade)

    async def agrade(self, task: Task, completion: str) -> Grade:
        """Grade one completion without blocking the event loop."""
        key = self._key(task, completion)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        grade = self._grade_inline(task, completion) if self.all_inline else await self._agrade(task, completion)
        return self._remember(key, grade)

    def grade_many(self, tasks: Iterable[Task], completions: Iterable[str]) -> list[Grade]:
        """Grade pairs; offloaded checks of different pairs run concurrently."""
        if self.all_inline:
            grade = self.grade
            return [grade(task, completion) for task, completion in zip(tasks, completions, strict=True)]
        return _run_sync(self.agrade_many(tasks, completions), "grade_many")

    async def agrade_many(self, tasks: Iterable[Task], completions: Iterable[str]) -> list[Grade]:
        pairs = list(zip(tasks, completions, strict=True))
        if self.all_inline:
            return [self.grade(task, completion) for task, completion in pairs]
        return list(await asyncio.gather(*(self.agrade(task, completion) for task, completion in pairs)))

    def clear_cache(self) -> None:
        self._cache.clear()

    # -- cache -------------------------------------------------------------------------------------

    @staticmethod
    def _key(task: Task, completion: str) -> CacheKey:
        # The dict hashes the completion (str hashes are cached) and compares it on a hit, so two
        # completions can never share a grade. The verifier belongs to one environment version.
        # A terminal-state grade also keys on a digest of the final work dir: the same last words
        # over different files are different answers.
        identifier = task.get("id")
        key = (identifier if identifier.__class__ is str else task_id(task)), completion
        if WORKDIR in task:
            return (*key, _state_digest(task[WORKDIR]))  # type: ignore[return-value]
        return key  # type: ignore[return-value]

    def _remember(self, key: CacheKey, grade: Grade) -> Grade:
        # Faults are not cached: the next attempt must really retry.
        if self._cache_size and grade.reward is not None:
            if len(self._cache) >= self._cache_size:
                del self._cache[next(iter(self._cache))]  # oldest first
            self._cache[key] = grade
        return grade

    # -- the synchronous fast path (every layer inline) ----------------------------------------------

    def _grade_inline(self, task: Task, completion: str) -> Grade:
        # The hot path for cheap checks: its cost is benchmarked against calling the check directly
        # (bench/verifier_bench.py), hence the unpacked plan and the inlined score conversion.
        results: list[LayerResult] = []
        reward = 0.0
        all_passed = True
        start = perf_counter()
        for index, (run, name, kind, weight, pass_score, gate) in enumerate(self._inline_plan):
            try:
                output = run(completion, task)
                if output.__class__ is CheckResult:
                    score, detail = output.score, output.detail
                    if not 0.0 <= score <= 1.0:
                        score, detail = _as_score(output)  # raises with the reason
                else:
                    score, detail = _as_score(output)
            except Exception as error:  # noqa: BLE001 - any failure of a check is an environment fault
                return self._fault(results, index, (LayerStatus.ERROR, None, _describe(error), perf_counter() - start))
            end = perf_counter()
            passed = score >= pass_score
            results.append(_new_layer_result((name, kind, _PASSED if passed else _FAILED, score, weight, end - start, detail)))
            start = end
            reward += weight * score
            if not passed:
                all_passed = False
                if gate:
                    results.extend(self._skipped_after_gate[index + 1 :])
                    break
        return _new_grade((_OK if all_passed else _WRONG, reward, tuple(results), ""))

    # -- the general path ---------------------------------------------------------------------------

    async def _agrade(self, task: Task, completion: str) -> Grade:
        results: list[LayerResult] = []
        reward = 0.0
        all_passed = True
        done = 0
        for stage in self.stages:
            outcomes = await asyncio.gather(*(self._run_layer(layer, task, completion) for layer in stage))
            gate_failed = False
            for layer, outcome in zip(stage, outcomes, strict=True):
                status, score, detail, seconds = outcome
                if status in (LayerStatus.ERROR, LayerStatus.TIMEOUT):
                    return self._fault(results, done, outcome)
                spec = layer.spec
                results.append(LayerResult(spec.name, spec.layer.value, status, score, spec.weight, seconds, detail))
                done += 1
                if status is LayerStatus.SKIPPED:
                    continue
                reward += spec.weight * float(score or 0.0)
                if status is LayerStatus.FAILED:
                    all_passed = False
                    gate_failed = gate_failed or spec.gate
            if gate_failed:
                results.extend(self._skipped_after_gate[done:])
                break
        return Grade(GradeStatus.OK if all_passed else GradeStatus.WRONG, reward, tuple(results))

    async def _run_layer(self, layer: BoundLayer, task: Task, completion: str) -> Outcome:
        if layer.mode == "inline":
            start = perf_counter()
            try:
                score, detail = _as_score(layer.run(completion, task))  # type: ignore[misc]
            except Exception as error:  # noqa: BLE001
                return LayerStatus.ERROR, None, _describe(error), perf_counter() - start
            return _passed_or_failed(layer, score), score, detail, perf_counter() - start
        if layer.spec.layer is LayerKind.JUDGE and self.judge is None:
            if self.on_missing_judge == "skip":
                return LayerStatus.SKIPPED, None, "no judge configured", 0.0
            return LayerStatus.ERROR, None, "no judge configured for this judge layer", 0.0
        timeout = layer.spec.timeout_s
        async with self._limit(layer.mode):
            start = perf_counter()
            try:
                # Process jobs may wait in the pool's queue behind one job per worker; the outer deadline
                # allows for that, and the limit itself applies to the time the check really ran.
                deadline = timeout * (1 + _PROCESS_QUEUE_DEPTH) if layer.mode == "process" else timeout
                output, seconds = await asyncio.wait_for(self._start(layer, task, completion), deadline)
                if seconds > timeout:
                    raise TimeoutError
                score, detail = _as_score(output)
            except TimeoutError:
                return LayerStatus.TIMEOUT, None, f"ran past {timeout:g}s", perf_counter() - start
            except BrokenProcessPool:
                _pools.reset_process_pool()
                return LayerStatus.ERROR, None, "a check worker process died", perf_counter() - start
            except Exception as error:  # noqa: BLE001
                return LayerStatus.ERROR, None, _describe(error), perf_counter() - start
            return _passed_or_failed(layer, score), score, detail, seconds

    def _start(self, layer: BoundLayer, task: Task, completion: str) -> Any:
        """An awaitable of (check output, seconds the check ran) for one offloaded layer."""
        if layer.spec.layer is LayerKind.JUDGE:
            return _timed_coroutine(self._judge(layer, task, completion))
        if layer.mode == "async":
            return _timed_coroutine(layer.run(completion, task))  # type: ignore[misc]
        pool = _pools.process_pool() if layer.mode == "process" else _pools.thread_pool()
        # Process workers get a plain dict: a datasets row or other mapping may not pickle.
        payload = dict(task) if layer.mode == "process" else task
        return asyncio.get_running_loop().run_in_executor(pool, _call_timed, layer.run, completion, payload)

    async def _judge(self, layer: BoundLayer, task: Task, completion: str) -> CheckResult:
        assert self.judge is not None
        messages = self.render(task) if self.render is not None else []
        verdict = await self.judge.judge(
            rubric=layer.rubric, messages=messages, completion=completion, model=layer.spec.model or self.judge_model
        )
        return CheckResult(verdict.score, verdict.reason)

    def _limit(self, mode: Mode) -> asyncio.Semaphore:
        """The semaphore for ``mode`` on the running loop (asyncio primitives belong to one loop)."""
        loop = asyncio.get_running_loop()
        limits = self._limits.get(loop)
        if limits is None:
            size = _pools.cpu_count()
            limits = {
                "process": asyncio.Semaphore(size * _PROCESS_QUEUE_DEPTH),
                "thread": asyncio.Semaphore(min(32, size + 4)),
                "async": asyncio.Semaphore(self.max_concurrency),
            }
            self._limits[loop] = limits
        return limits[mode]

    def _fault(self, results: list[LayerResult], index: int, outcome: Outcome) -> Grade:
        status, _, detail, seconds = outcome
        layer = self.layers[index]
        spec = layer.spec
        results.append(LayerResult(spec.name, spec.layer.value, status, None, spec.weight, seconds, detail))
        results.extend(self._skipped_after_fault[index + 1 :])
        grade_status = GradeStatus.TIMEOUT if status is LayerStatus.TIMEOUT else GradeStatus.ENV_ERROR
        return Grade(grade_status, None, tuple(results), reason=f"layer {spec.name!r}: {detail}")


def _state_digest(state: Any) -> str:
    """A digest of a work dir's content: names, kinds, modes, link targets and bytes (not times), so
    equal final states share a grade and different ones never do."""
    digest = hashlib.sha256()
    if not isinstance(state, Snapshot):
        digest.update(repr(state).encode())
        return digest.hexdigest()
    if state.tar:
        with tarfile.open(fileobj=io.BytesIO(state.tar), mode="r:") as archive:
            members = sorted(archive.getmembers(), key=lambda member: member.name.removeprefix("./"))
            for member in members:
                header = f"{member.name.removeprefix('./')}\0{member.type!r}\0{member.mode:o}\0{member.linkname}\0{member.size}\0"
                digest.update(header.encode())
                if member.isfile():
                    extracted = archive.extractfile(member)
                    digest.update(extracted.read() if extracted is not None else b"")
    return digest.hexdigest()


def _call_timed(run: BoundCheck, completion: str, task: Task) -> tuple[Any, float]:
    """Runs in the worker, so that the time limit counts the check's own time, not its queueing."""
    start = perf_counter()
    output = run(completion, task)
    return output, perf_counter() - start


async def _timed_coroutine(coroutine: Any) -> tuple[Any, float]:
    start = perf_counter()
    output = await coroutine
    return output, perf_counter() - start


def _split_stages(layers: list[BoundLayer]) -> list[list[BoundLayer]]:
    stages: list[list[BoundLayer]] = []
    current: list[BoundLayer] = []
    for layer in layers:
        if current and current[-1].spec.layer is not layer.spec.layer:
            stages.append(current)
            current = []
        current.append(layer)
        if layer.spec.gate:
            stages.append(current)
            current = []
    if current:
        stages.append(current)
    return stages


def _as_score(output: Any) -> tuple[float, str]:
    """A check's output as (score, detail); raises for anything that is not a score in [0, 1]."""
    if output.__class__ is CheckResult:
        score, detail = output.score, output.detail
    elif output is True or output is False:
        return (1.0 if output else 0.0), ""
    elif isinstance(output, int | float) and not isinstance(output, bool):
        score, detail = output, ""
    else:
        raise TypeError(f"check returned {type(output).__name__}; expected bool, a number in [0, 1] or CheckResult")
    if not 0.0 <= score <= 1.0:  # also false for NaN
        raise ValueError(f"check returned score {score!r}, outside [0, 1]")
    return float(score), detail


def _passed_or_failed(layer: BoundLayer, score: float) -> LayerStatus:
    return LayerStatus.PASSED if score >= layer.spec.pass_score else LayerStatus.FAILED


def _skipped(layer: BoundLayer, why: str) -> LayerResult:
    return LayerResult(layer.spec.name, layer.spec.layer.value, LayerStatus.SKIPPED, None, layer.spec.weight, 0.0, why)


def _describe(error: BaseException) -> str:
    message = str(error) or repr(error)
    return f"{type(error).__name__}: {message}"[:500]


def _run_sync(coroutine: Any, name: str) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    coroutine.close()
    raise RuntimeError(f"{name}() was called from a running event loop; use `await a{name}(...)` instead")


