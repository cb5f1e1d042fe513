"""The layered verifier engine: rule -> check -> judge, gates, weights, and faults that are never zeros.

Layers run cheapest first. A *stage* is a run of layers of one kind that ends at a gate or where the
kind changes; the layers of a stage run concurrently, and a failed gate skips every later stage.
Checks marked ``inline`` run right on the grading thread (their cost is bounded by construction);
the others run in worker threads, worker processes (:mod:`verihub.grading._pools`) or as coroutines.

Every layer's ``timeout_s`` holds in every mode and counts the check's own running time: an offloaded
check past its limit is cut off (its worker thread replaced, its worker process killed), and an
inline check, which cannot be pre-empted, is reported as ``timeout`` when its measured time exceeds
the limit. A check that raises, returns something that is not a score, or runs past its limit turns
the whole grade into ``env_error`` or ``timeout`` with reward ``None`` and the reason: an environment
fault is never scored as a wrong answer. Whether such a fault is the environment's or the answer's is
decided by evidence (:mod:`verihub.grading.faults`), gathered apart from every answer being graded
(:mod:`verihub.grading._apart`): a fault the answer alone causes is ``wrong`` at the environment's floor, so
no wrong answer can opt out of its penalty. An answer longer than
``max_answer_chars`` is such a fault before any layer runs. Both grading paths (all-inline and general)
turn layer outcomes into a grade with the same function, :meth:`Verifier._conclude`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hashlib
import itertools
import pickle
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter
from typing import Any, Literal, cast

from verihub._sync import run_sync
from verihub.checks.base import BoundCheck, CheckResult, Mode
from verihub.checks.registry import BUILTIN_CHECKS, resolve_check
from verihub.errors import UsageError, describe_error
from verihub.grading import _apart, _pools
from verihub.grading.faults import Source, answer_fault_reason, attribute, blames_answer, reference_task
from verihub.grading.grade import Grade, GradeStatus, LayerResult, LayerStatus
from verihub.grading.injection import flagged, injection_signs, judge_result
from verihub.grading.judge import Judge, JudgeError
from verihub.sandbox.tools import WORKDIR
from verihub.sandbox.types import Snapshot
from verihub.spec.models import LayerKind, LayerSpec, SandboxSpec

__all__ = ["BoundLayer", "Verifier"]

Task = Mapping[str, Any]
# What running one layer gave: its score (None unless the check ran and scored), the detail, the
# seconds it ran, and a status only where the score does not decide it (ERROR, TIMEOUT, SKIPPED).
Outcome = tuple[float | None, str, float, LayerStatus | None]
# The completion, what of the task the layers read, and (terminal-state tasks) a digest of the work dir.
CacheKey = tuple[Any, ...]
ReferenceIs = Literal["gold", "canary", "placeholder"]

_CANCEL_S = 10.0  # how long a check past its limit may take to end once cancelled (its clean-up)
_NO_JUDGE = "no judge configured for this judge layer (a judge model: --judge-model, or the spec's eval.judge_model)"
_KIND_ORDER = {LayerKind.RULE: 0, LayerKind.CHECK: 1, LayerKind.JUDGE: 2}
_PASSED, _FAILED, _SKIPPED = LayerStatus.PASSED, LayerStatus.FAILED, LayerStatus.SKIPPED
_ERROR, _TIMEOUT, _ANSWER_FAULT = LayerStatus.ERROR, LayerStatus.TIMEOUT, LayerStatus.ANSWER_FAULT
_OK, _WRONG = GradeStatus.OK, GradeStatus.WRONG
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
    columns: frozenset[str] = frozenset()  # dataset columns the check declares (the loader checks they exist)
    reads: frozenset[str] | None = None  # every task column the grade can depend on; None: unknown
    prescreen: BoundCheck | None = None  # an offloaded check's cheap first step, run on the grading thread

    @classmethod
    def from_spec(cls, spec: LayerSpec, root: Path, sandbox: SandboxSpec | None = None) -> BoundLayer:
        """Resolve and bind the layer's check (judge layers read their rubric instead)."""
        if spec.layer is LayerKind.JUDGE:
            return cls(spec, None, "async", rubric=(root / str(spec.rubric)).read_text())
        check = resolve_check(str(spec.use))
        run, params = check.bind(spec.args, root, sandbox)
        columns = frozenset(params.columns() if params is not None else ())
        # Built-in checks read exactly the columns they declare; another check may read any column.
        reads = columns if BUILTIN_CHECKS.get(check.name) is check else None
        prescreen = check.bind_prescreen(spec.args, params) if check.mode in ("thread", "process") else None
        return cls(spec, run, check.mode, columns=columns, reads=reads, prescreen=prescreen)


class Verifier:
    """Grades completions with an ordered list of layers. Thread-safe; one instance per environment.

    ``judge`` scores judge layers; without one they are environment faults (``on_missing_judge="error"``)
    or left out of the grade (``"skip"``, used by ``validate`` when no judge model is configured).

    ``reference`` gives a task's reference answer and ``reference_is`` what it is: a right answer (``gold``),
    one the layers handle without a fault on every task (``canary``), or no evidence (``placeholder``). The
    evidence that decides whose fault a fault is (:mod:`~verihub.grading.faults`) is the gold or canary, else
    another answer to the task this verifier graded without a fault, still in its memory (its cache); without
    any, a fault stays the environment's. ``floor`` is the reward of a grade an answer fault ends, and of an
    answer longer than ``max_answer_chars`` (None: no limit).

    ``cache_size`` grades are remembered (0: none), the oldest dropped first. Repeats come close together
    (a GRPO group's identical answers, an eval's samples of one task), so a few thousand cover them; a
    larger cache costs memory (each key holds its completion) and time: CPython's full collections walk
    every cached grade (at 100,000 a steady flow of cheap grades ran 12-20% slower than at 8,192).
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
        cache_size: int = 8192,
        reference: Callable[[Task], str] | None = None,
        reference_is: ReferenceIs = "gold",
        floor: float = 0.0,
        max_answer_chars: int | None = None,
    ) -> None:
        if not layers:
            raise UsageError("a verifier needs at least one layer")
        self.layers = sorted(layers, key=lambda layer: _KIND_ORDER[layer.spec.layer])
        self.stages = _split_stages(self.layers)
        self.judge, self.judge_model, self.render = judge, judge_model, render
        self.on_missing_judge = on_missing_judge
        self.max_concurrency = max_concurrency
        self.reference, self.floor, self.max_answer_chars = reference, floor, max_answer_chars
        self.reference_is = reference_is
        # Grades under way, by task: evidence from memory is looked for once those of its task have ended. Kept
        # where memory is the only evidence (no gold), so the gold path pays nothing for it.
        self._in_flight: dict[Any, set[concurrent.futures.Future[None]]] = {}
        self._in_flight_lock = threading.Lock()
        # the longest a grade stays in flight: its layers' limits, for it and its retry
        self._longest_grade = 2 * sum(layer.spec.timeout_s for layer in layers) + 5.0
        self._longest = max_answer_chars if max_answer_chars is not None else float("inf")
        self.all_inline = all(layer.mode == "inline" for layer in self.layers)
        # (inline grades end before another starts on this thread: nothing to wait for)
        self._tracks = (reference_is != "gold" or reference is None) and not self.all_inline
        # What the rules and the inline fast path read per layer, unpacked once instead of per grade.
        specs = [layer.spec for layer in self.layers]
        self._rules = [(s.name, s.layer.value, s.weight, s.pass_score, s.gate) for s in specs]
        self._stop_below = [s.pass_score if s.gate else float("-inf") for s in specs]
        # Read only when every layer is inline: check layers, whose run is set.
        self._inline_plan = [(cast(BoundCheck, layer.run), layer.spec.timeout_s) for layer in self.layers]
        self._skipped_after_gate = [_skipped(layer, "an earlier gate failed") for layer in self.layers]
        self._skipped_after_fault = [
            _skipped(layer, "grading stopped at an environment fault") for layer in self.layers
        ]
        # The cache keys on what the layers read of a task: the columns every layer declares when all
        # of them do (built-in checks), else the whole task.
        self._key_columns: tuple[str, ...] | None = None
        if all(layer.reads is not None for layer in self.layers):
            self._key_columns = tuple(sorted(set().union(*(layer.reads or () for layer in self.layers)) - {WORKDIR}))
        self._cache: dict[CacheKey, Grade] = {}
        self._cache_size = cache_size
        self._limits: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        # One inline layer (most rule and check verifiers): the whole grade in one precompiled function.
        self._single_inline = self._compile_single_inline() if self.all_inline and len(self.layers) == 1 else None

    # -- public API --------------------------------------------------------------------------------

    def grade(self, task: Task, completion: str) -> Grade:
        """Grade one completion. Use :meth:`agrade` from async code."""
        if self._single_inline is not None:
            return self._single_inline(task, completion)
        if len(completion) > self._longest:
            return self.too_long(len(completion))
        key = self._key(task, completion)
        cached = self._cache.get(key) if key is not None else None
        if cached is not None:
            return cached
        landed = self._take_off(key)
        try:
            grade = self._grade_once(task, completion)
            if grade.reward is None:
                grade = self._attribute(task, completion, landed)
            return self._remember(key, grade)
        finally:
            landed()

    async def agrade(self, task: Task, completion: str) -> Grade:
        """Grade one completion without blocking the event loop."""
        if self._single_inline is not None:
            return self._single_inline(task, completion)
        if len(completion) > self._longest:
            return self.too_long(len(completion))
        key = self._key(task, completion)
        cached = self._cache.get(key) if key is not None else None
        if cached is not None:
            return cached
        landed = self._take_off(key)
        try:
            grade = self._grade_inline(task, completion) if self.all_inline else await self._agrade(task, completion)
            if grade.reward is None:
                grade = await self._aattribute(task, completion, landed)
            return self._remember(key, grade)
        finally:
            landed()

    def grade_many(self, tasks: Iterable[Task], completions: Iterable[str]) -> list[Grade]:
        """Grade pairs; offloaded checks of different pairs run concurrently."""
        if self.all_inline:
            grade = self._single_inline or self.grade
            return [grade(task, completion) for task, completion in zip(tasks, completions, strict=True)]
        return run_sync(self.agrade_many(tasks, completions))

    async def agrade_many(self, tasks: Iterable[Task], completions: Iterable[str]) -> list[Grade]:
        pairs = list(zip(tasks, completions, strict=True))
        if self.all_inline:
            grade = self._single_inline or self.grade
            return [grade(task, completion) for task, completion in pairs]
        return list(await asyncio.gather(*(self.agrade(task, completion) for task, completion in pairs)))

    def clear_cache(self) -> None:
        self._cache.clear()

    def has_evidence(self, task: Task) -> bool:
        """Whether the fault rule has evidence for ``task`` (:mod:`~verihub.grading.faults`): a gold reference or
        canary that fits it, or another answer to it graded without a fault in this verifier's memory."""
        if self.reference is not None and self.reference_is != "placeholder":
            if reference_task(task, self.reference) is not None:
                return True
        return self._seen(task, None, None, right_only=False) is not None

    # -- whose fault (verihub.grading.faults) ---------------------------------------------------------

    def _grade_once(self, task: Task, completion: str, *, apart: bool = False) -> Grade:
        """One grade, uncached and unattributed."""
        if self.all_inline:
            return self._grade_inline(task, completion)
        return run_sync(self._agrade(task, completion, apart=apart))

    async def _agrade_once(self, task: Task, completion: str, *, apart: bool = False) -> Grade:
        """One grade, uncached and unattributed, without blocking the event loop; ``apart``: as evidence of the
        fault rule, where no other answer's grade can stall it (:mod:`verihub.grading._apart`)."""
        return self._grade_inline(task, completion) if self.all_inline else await self._agrade(task, completion, apart)

    def _attribute(self, task: Task, completion: str, landed: Callable[[], None] = lambda: None) -> Grade:
        """The grade of an answer whose first grade faulted (:meth:`_aattribute`), from sync code."""
        if self.all_inline:
            return _complete(self._aattribute(task, completion, landed))  # inline layers: it never suspends
        return run_sync(self._aattribute(task, completion, landed))

    async def _aattribute(self, task: Task, completion: str, landed: Callable[[], None] = lambda: None) -> Grade:
        """The grade of an answer whose first grade faulted: a retry, then evidence that the layer works on this
        task, graded now (never a cached grade: one from before an outage says nothing about the layer during
        it), then the answer once more; every one of them apart from the answers being graded. ``landed`` notes
        that this grade no longer counts as in flight (it is about to wait for those that do)."""
        retry = await self._agrade_once(task, completion, apart=True)
        if retry.reward is not None:
            return retry
        faulted = next(result for result in retry.layers if result.status in (_ERROR, _TIMEOUT))
        landed()  # this grade now waits for others of its task: none waits for it (no two wait on each other)
        found = await self._evidence(task, completion, faulted.name, right_only=faulted.status is _TIMEOUT)
        if found is None:
            return attribute(retry, None, self.floor)
        source, evidence_task, text = found
        if text == completion:  # the answer is the reference (or canary) itself
            return attribute(retry, None, self.floor, source=source, is_source=True)
        evidence = await self._agrade_once(evidence_task, text, apart=True)
        if source != "answer":
            self._remember(self._key(evidence_task, text), evidence)
        if blames_answer(retry, evidence):  # still faulting after the evidence did not: not an outage's
            retry = await self._agrade_once(task, completion, apart=True)
            if retry.reward is not None:
                return retry
        return attribute(retry, evidence, self.floor, source=source)

    async def _evidence(
        self, task: Task, completion: str, layer: str, *, right_only: bool
    ) -> tuple[Source, Task, str] | None:
        """What to grade as evidence that ``layer`` works on ``task``: the gold reference or the canary, else
        another answer to the task that this verifier graded through that layer without a fault (:meth:`_seen`;
        looked for again once the grades of the task then in flight have ended, their retries included: a batch's
        right answers are evidence for its hostile ones). ``right_only``: the fault is a timeout, and only an
        answer graded right is evidence for it (a scorer's time depends on the path an answer takes through it:
        a fast wrong answer says nothing of a right one's time)."""
        if self.reference is not None and self.reference_is != "placeholder":
            found = reference_task(task, self.reference)
            if found is not None:
                return ("reference" if self.reference_is == "gold" else "canary"), *found
        seen = self._seen(task, completion, layer, right_only=True)
        if seen is None and (pending := self._pending(self._key(task, completion))):
            await asyncio.wait([asyncio.wrap_future(future) for future in pending], timeout=self._longest_grade)
            seen = self._seen(task, completion, layer, right_only=True)
        if seen is None and not right_only:
            seen = self._seen(task, completion, layer, right_only=False)
        return None if seen is None else ("answer", task, seen)

    def _seen(self, task: Task, completion: str | None, layer: str | None, *, right_only: bool) -> str | None:
        """The latest answer to ``task`` but ``completion`` (nor a placeholder reference: a prompt is no answer)
        that this verifier remembers grading without a fault in ``layer`` (any layer, when None): ``right_only``,
        graded ``ok`` with the layer passed; else also graded wrong there, fault-free, as the issue's rule reads
        (a fault-free grade of another answer shows the scorer runs on the task). A scorer that faults on right
        answers alone would then have such an answer blame a right one: a right answer is looked for first,
        and for a timeout it is the only evidence. None if it remembers none. Terminal-state tasks are left out:
        another answer's grade is of its own work dir."""
        key = self._key(task, "")
        if key is None or len(key) != 2:
            return None
        placeholder = None
        if self.reference is not None and self.reference_is == "placeholder":
            placeholder = reference_task(task, self.reference)
        excluded = {completion, placeholder[1] if placeholder is not None else None}
        clean = (_PASSED,) if right_only else (_PASSED, _FAILED)
        for (text, content, *rest), grade in reversed(list(self._cache.items())):
            if rest or content != key[1] or text in excluded or grade.reward is None:
                continue
            if right_only and grade.status is not _OK:
                continue
            if layer is None and grade.answer_fault is None:
                return text
            if any(result.name == layer and result.status in clean for result in grade.layers):
                return text
        return None

    def _take_off(self, key: CacheKey | None) -> Callable[[], None]:
        """Note a grade of ``key``'s task under way; the function returned notes its end (once, however often
        it is called)."""
        if not self._tracks or key is None or len(key) != 2:
            return _nothing
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        with self._in_flight_lock:
            self._in_flight.setdefault(key[1], set()).add(future)

        def landed() -> None:
            with self._in_flight_lock:
                if future.done():
                    return
                flying = self._in_flight.get(key[1])
                if flying is not None:
                    flying.discard(future)
                    if not flying:
                        del self._in_flight[key[1]]
                future.set_result(None)

        return landed

    def _pending(self, key: CacheKey | None) -> list[concurrent.futures.Future[None]]:
        if key is None or len(key) != 2:
            return []
        with self._in_flight_lock:
            return list(self._in_flight.get(key[1], ()))

    def too_long(self, chars: int) -> Grade:
        """The grade of an answer (or a turn) of ``chars`` characters, past ``max_answer_chars``: an answer
        fault before any layer runs (a remote grader gives it without sending the answer)."""
        detail = (
            f"the answer has {chars:,} characters, past this environment's limit of "
            f"{self.max_answer_chars:,} (max_answer_chars)"
        )
        first = self.layers[0].spec
        layers = (
            LayerResult(first.name, first.layer.value, _ANSWER_FAULT, None, first.weight, 0.0, detail),
            *self._skipped_after_fault[1:],
        )
        return _new_grade((_WRONG, self.floor, layers, answer_fault_reason(first.name, detail)))

    # -- cache -------------------------------------------------------------------------------------

    def _key(self, task: Task, completion: str) -> CacheKey | None:
        # A grade depends on the completion and on what the layers read of the task, never on its id
        # alone: the same id with another answer or other tests is another key. The dict hashes the
        # key and compares it on a hit, so two different contents never share a grade. A
        # terminal-state grade also keys on a digest of the final work dir. None: not cacheable.
        columns = self._key_columns
        content: Any
        if columns is None:
            content = _task_content(task)
            if content is None:
                return None
        elif not columns:
            content = None  # no layer reads the task
        elif len(columns) == 1:
            content = task.get(columns[0])
            if content.__class__ is not str and (content := _canonical(content)) is None:
                return None
        else:
            content = tuple(value if value.__class__ is str else _canonical(value) for value in map(task.get, columns))
            if None in content:
                return None
        if WORKDIR in task:
            return completion, content, _state_digest(task[WORKDIR])
        return completion, content

    def _remember(self, key: CacheKey | None, grade: Grade) -> Grade:
        # Faults are not cached: the next attempt must really retry.
        if key is not None and self._cache_size and grade.reward is not None:
            if len(self._cache) >= self._cache_size:
                self._evict()
            self._cache[key] = grade
        return grade

    def _evict(self) -> None:
        """Drop the oldest quarter of the cache at once. (Dropping one entry per grade costs a scan past
        every slot freed before it: 50 us a grade once 100,000 grades are cached.)"""
        cache = self._cache
        self._cache = dict(itertools.islice(cache.items(), max(1, len(cache) // 4), None))

    # -- the rules: layer outcomes -> grade (both paths) ---------------------------------------------

    def _ends(self, index: int, outcome: Outcome) -> bool:
        """Whether this outcome ends grading: an environment fault, or a failed gate."""
        score, _, _, status = outcome
        if status is None:
            return score < self._stop_below[index]  # type: ignore[operator]  # a score is set where the status is None (ran)
        return status is not _SKIPPED

    def _conclude(self, outcomes: Sequence[Outcome]) -> Grade:
        """The grade from the outcomes of the layers that ran, in layer order, up to the one that ended
        grading: statuses by ``pass_score``, the weighted reward, skipped layers after a failed gate,
        and a fault that makes the whole grade ``env_error``/``timeout`` with reward None."""
        results: list[LayerResult] = []
        reward = 0.0
        all_passed = True
        rules = self._rules
        index = -1
        for score, detail, seconds, status in outcomes:
            index += 1
            name, kind, weight, pass_score, gate = rules[index]
            if status is None:
                passed = score >= pass_score  # type: ignore[operator]  # a score is set where the status is None (ran)
                results.append(
                    _new_layer_result((name, kind, _PASSED if passed else _FAILED, score, weight, seconds, detail))
                )
                reward += weight * score  # type: ignore[operator]  # a score is set where the status is None (ran)
                if not passed:
                    all_passed = False
                    if gate:
                        results.extend(self._skipped_after_gate[index + 1 :])
                        break
                continue
            results.append(_new_layer_result((name, kind, status, None, weight, seconds, detail)))
            if status is not _SKIPPED:  # a fault: nothing after it runs or counts
                results.extend(self._skipped_after_fault[index + 1 :])
                if status is _ANSWER_FAULT:  # a check said the answer is malformed
                    return _new_grade((_WRONG, self.floor, tuple(results), answer_fault_reason(name, detail)))
                fault = GradeStatus.TIMEOUT if status is _TIMEOUT else GradeStatus.ENV_ERROR
                return _new_grade((fault, None, tuple(results), f"layer {name!r}: {detail}"))
        return _new_grade((_OK if all_passed else _WRONG, reward, tuple(results), ""))

    # -- the synchronous fast path (every layer inline) ----------------------------------------------

    def _compile_single_inline(self) -> Callable[[Task, str], Grade]:
        """grade() for one inline layer, with what it reads unpacked once: the cache key, the check, its
        timing and the Grade, in one call (its cost is benchmarked against calling the check directly,
        bench/verifier_bench.py). Anything unusual (a fault, an odd output, a key of several columns)
        takes the general steps, which decide the same way."""
        run, timeout = self._inline_plan[0]
        name, kind, weight, pass_score, _ = self._rules[0]
        column = self._key_columns[0] if self._key_columns is not None and len(self._key_columns) == 1 else None
        no_columns = self._key_columns == ()
        key_of, conclude, remember, size = self._key, self._conclude, self._remember, self._cache_size
        result_class, new, layer_result, grade_class = CheckResult, tuple.__new__, LayerResult, Grade
        longest, too_long, attribute_ = self._longest, self.too_long, self._attribute

        def grade(task: Task, completion: str) -> Grade:
            if len(completion) > longest:
                return too_long(len(completion))
            if WORKDIR in task:
                key = key_of(task, completion)
            elif column is not None:
                value = task.get(column)
                key = (completion, value) if value.__class__ is str else key_of(task, completion)
            else:
                key = (completion, None) if no_columns else key_of(task, completion)
            cache = self._cache
            if key is not None and (cached := cache.get(key)) is not None:
                return cached
            start = perf_counter()
            try:
                output = run(completion, task)
            except Exception:  # noqa: BLE001 - a fault: whose, the evidence decides
                return remember(key, attribute_(task, completion))
            seconds = perf_counter() - start
            if (
                output.__class__ is not result_class
                or not 0.0 <= (score := output.score) <= 1.0
                or seconds > timeout
                or output.answer_fault
            ):
                graded = conclude((_inline_outcome(output, seconds, timeout),))
                return remember(key, graded if graded.reward is not None else attribute_(task, completion))
            reward = weight * score
            if score >= pass_score:
                layer = new(layer_result, (name, kind, _PASSED, score, weight, seconds, output.detail))
                graded = new(grade_class, (_OK, reward, (layer,), ""))
            else:
                layer = new(layer_result, (name, kind, _FAILED, score, weight, seconds, output.detail))
                graded = new(grade_class, (_WRONG, reward, (layer,), ""))
            if key is not None and size:  # what _remember does, without the call
                if len(cache) >= size:
                    self._evict()
                self._cache[key] = graded
            return graded

        return grade

    def _grade_inline(self, task: Task, completion: str) -> Grade:
        # The hot path for cheap checks: its cost is benchmarked against calling the check directly
        # (bench/verifier_bench.py), hence the unpacked plan and the one-layer shortcut.
        plan = self._inline_plan
        if len(plan) == 1:
            run, timeout = plan[0]
            return self._conclude((_run_inline(run, completion, task, timeout),))
        outcomes: list[Outcome] = []
        for index, (run, timeout) in enumerate(plan):
            outcome = _run_inline(run, completion, task, timeout)
            outcomes.append(outcome)
            if self._ends(index, outcome):
                break
        return self._conclude(outcomes)

    # -- the general path ---------------------------------------------------------------------------

    async def _agrade(self, task: Task, completion: str, apart: bool = False) -> Grade:
        outcomes: list[Outcome] = []
        index = 0
        for stage in self.stages:
            if len(stage) == 1:
                ran = [await self._run_layer(stage[0], task, completion, apart)]
            else:
                ran = await asyncio.gather(*(self._run_layer(layer, task, completion, apart) for layer in stage))
            outcomes += ran
            ended = any(self._ends(index + offset, outcome) for offset, outcome in enumerate(ran))
            index += len(stage)
            if ended:
                break
        return self._conclude(outcomes)

    async def _run_layer(self, layer: BoundLayer, task: Task, completion: str, apart: bool = False) -> Outcome:
        timeout = layer.spec.timeout_s
        if layer.mode == "inline":
            return _run_inline(layer.run, completion, task, timeout)  # type: ignore[arg-type]  # an inline layer is a check layer: its run is set
        if layer.spec.layer is LayerKind.JUDGE and self.judge is None:
            if self.on_missing_judge == "skip":
                return None, "no judge configured", 0.0, _SKIPPED
            return None, _NO_JUDGE, 0.0, _ERROR
        if layer.prescreen is not None and (decided := _run_prescreen(layer.prescreen, completion, task, timeout)):
            return decided
        start = perf_counter()
        try:
            if layer.mode in ("thread", "process"):
                output, seconds = await self._offload(layer, task, completion, apart)
            elif apart and layer.spec.layer is not LayerKind.JUDGE:  # a check's coroutine, on a loop of its own
                running = _apart.run_apart(cast(BoundCheck, layer.run), (completion, task), timeout, "coroutine")
                output, seconds = await asyncio.wrap_future(running)
            elif apart:  # a judge's evidence: its backend belongs to this loop; never queued behind the batch's calls
                start = perf_counter()
                output, seconds = await _own_time(self._judge(layer, task, completion), timeout)
            else:
                async with self._limit():
                    start = perf_counter()
                    output, seconds = await _own_time(self._coroutine(layer, task, completion), timeout)
            if seconds > timeout:
                raise _pools.CheckTimeout(seconds=seconds)
            score, detail = _as_score(output)
        except TimeoutError as error:  # CheckTimeout too: the check's own time, never time it waited
            own = error.seconds if isinstance(error, _pools.CheckTimeout) else None
            return None, f"ran past {timeout:g}s", perf_counter() - start if own is None else own, _TIMEOUT
        except Exception as error:  # noqa: BLE001 - any failure of a check is an environment fault
            return None, describe_error(error), perf_counter() - start, _ERROR
        return score, detail, seconds, None if score is not None else _ANSWER_FAULT

    def _offload(self, layer: BoundLayer, task: Task, completion: str, apart: bool = False) -> Any:
        """An awaitable of (check output, seconds the check ran) from a worker thread or process, which
        enforces the layer's limit from the moment the check starts; ``apart``: a thread or a process of the
        job's own (:func:`verihub.grading._apart.run_apart`), never a pool's queue."""
        run = cast(BoundCheck, layer.run)  # offloaded layers are check layers
        if apart:
            args = (completion, dict(task)) if layer.mode == "process" else (completion, task)
            return asyncio.wrap_future(_apart.run_apart(run, args, layer.spec.timeout_s, layer.mode))  # type: ignore[arg-type]  # thread or process here
        if layer.mode == "process":
            # Worker processes get a plain dict: a datasets row or other mapping may not pickle.
            future = _pools.process_workers().submit(run, (completion, dict(task)), layer.spec.timeout_s)
        else:
            future = _pools.thread_workers().submit(run, (completion, task), layer.spec.timeout_s)
        return asyncio.wrap_future(future)

    def _coroutine(self, layer: BoundLayer, task: Task, completion: str) -> Any:
        if layer.spec.layer is LayerKind.JUDGE:
            return self._judge(layer, task, completion)
        return layer.run(completion, task)  # type: ignore[misc]  # a check layer: its run is set

    async def _judge(self, layer: BoundLayer, task: Task, completion: str) -> CheckResult:
        assert self.judge is not None
        messages = self.render(task) if self.render is not None else []
        signs = injection_signs(completion, layer.rubric)  # flagged whatever the judge makes of it
        try:
            verdict = await self.judge.judge(
                rubric=layer.rubric,
                messages=messages,
                completion=completion,
                model=layer.spec.model or self.judge_model,
            )
        except JudgeError as error:
            raise JudgeError(flagged(str(error), signs)) from error
        return judge_result(verdict.score, verdict.reason, completion, signs)

    def _limit(self) -> asyncio.Semaphore:
        """The semaphore bounding coroutine checks and judges on the running loop (asyncio primitives
        belong to one loop); worker threads and processes queue jobs themselves."""
        loop = asyncio.get_running_loop()
        limit = self._limits.get(loop)
        if limit is None:
            limit = self._limits[loop] = asyncio.Semaphore(self.max_concurrency)
        return limit


def _nothing() -> None:
    pass


async def _own_time(coroutine: Coroutine[Any, Any, Any], limit_s: float) -> tuple[Any, float]:
    """``coroutine``'s result and its own time, within ``limit_s`` of it: time it spends in
    :func:`verihub.grading._pools.waiting` (a worker or a bridge starting, another answer's lock) is not its own."""
    clock = _pools.Clock()
    token = _pools.CLOCK.set(clock)
    try:
        task = asyncio.ensure_future(coroutine)  # runs in a copy of this context: the clock with it
    finally:
        _pools.CLOCK.reset(token)
    try:
        while (left := limit_s - clock.own()) > 0:
            done, _ = await asyncio.wait({task}, timeout=left)
            if done:
                return task.result(), clock.own()
    finally:
        if not task.done():
            task.cancel()
            # its clean-up (a session's close) runs now, before the layer's outcome, and never on a loop that
            # run_sync closes next; bounded, as a clean-up that ignores its cancellation would otherwise hold it
            await asyncio.wait({task}, timeout=_CANCEL_S)
            if task.done() and not task.cancelled():
                task.exception()  # what it raised while ending: no verdict reads it, nor a warning at exit
    raise _pools.CheckTimeout(f"ran past {limit_s:g}s", limit_s)


def _complete[T](coroutine: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that never suspends (one that grades inline layers only), run here."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    coroutine.close()
    raise RuntimeError("an inline grade suspended")


def _state_digest(state: Any) -> str:
    """A digest of a work dir's content (see :meth:`Snapshot.digest`: names, kinds, modes, link targets
    and bytes, not times), so equal final states share a grade and different ones never do."""
    if isinstance(state, Snapshot):
        return state.digest()
    return hashlib.sha256(repr(state).encode()).hexdigest()


def _run_inline(run: BoundCheck, completion: str, task: Task, timeout: float) -> Outcome:
    """Run an inline check on this thread. It cannot be pre-empted, so its limit is checked after the
    fact: the built-in inline checks have a bounded cost by construction, and one that still runs
    past ``timeout_s`` is reported as a timeout."""
    start = perf_counter()
    try:
        output = run(completion, task)
    except Exception as error:  # noqa: BLE001 - any failure of a check is an environment fault
        return None, describe_error(error), perf_counter() - start, _ERROR
    return _inline_outcome(output, perf_counter() - start, timeout)


def _inline_outcome(output: Any, seconds: float, timeout: float) -> Outcome:
    """What an inline check's output and measured time make of its layer."""
    score: float | None
    try:
        if output.__class__ is CheckResult and 0.0 <= output.score <= 1.0 and not output.answer_fault:
            score, detail = output.score, output.detail
        else:
            score, detail = _as_score(output)  # raises with the reason
    except Exception as error:  # noqa: BLE001 - an output that is no score is an environment fault
        return None, describe_error(error), seconds, _ERROR
    if seconds > timeout:
        return None, f"ran past {timeout:g}s (an inline check, measured after it returned)", seconds, _TIMEOUT
    if score is None:
        return None, detail, seconds, _ANSWER_FAULT
    return score, detail, seconds, None


def _run_prescreen(run: BoundCheck, completion: str, task: Task, timeout: float) -> Outcome | None:
    """An offloaded check's first step, run inline: its outcome, or None when it did not decide."""
    start = perf_counter()
    try:
        output = run(completion, task)
        if output is None:
            return None
        score, detail = _as_score(output)
    except Exception as error:  # noqa: BLE001 - any failure of a check is an environment fault
        return None, describe_error(error), perf_counter() - start, _ERROR
    seconds = perf_counter() - start
    if seconds > timeout:
        return None, f"ran past {timeout:g}s (measured after its inline first step returned)", seconds, _TIMEOUT
    return score, detail, seconds, None if score is not None else _ANSWER_FAULT


def _task_content(task: Task) -> bytes | None:
    """A digest of every column of a task but the work dir (keyed by its own digest); None when
    something in it does not pickle."""
    try:
        content = pickle.dumps(sorted((key, value) for key, value in task.items() if key != WORKDIR), protocol=5)
    except Exception:  # noqa: BLE001 - an unpicklable task is graded, just not cached
        return None
    return hashlib.sha256(content).digest()


def _canonical(value: Any) -> bytes | None:
    """A non-string column value as a key part that only equal values of the same type share (1, 1.0
    and True are different answers to `exact`); None when it does not pickle."""
    try:
        return pickle.dumps(value, protocol=5)
    except Exception:  # noqa: BLE001 - graded, just not cached
        return None


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


def _as_score(output: Any) -> tuple[float | None, str]:
    """A check's output as (score, detail), the score None for :meth:`CheckResult.malformed`; raises for
    anything that is not a score in [0, 1]."""
    if output.__class__ is CheckResult:
        if output.answer_fault:
            return None, output.detail or "the check found the answer malformed"
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


def _skipped(layer: BoundLayer, why: str) -> LayerResult:
    return LayerResult(layer.spec.name, layer.spec.layer.value, LayerStatus.SKIPPED, None, layer.spec.weight, 0.0, why)
