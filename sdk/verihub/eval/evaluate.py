"""``verihub eval``: rollouts of an environment against a model, metrics, and results on disk.

Results go to ``OUT/rollouts.jsonl`` as each rollout finishes (so a killed run loses nothing), then to
``OUT/results.parquet`` (``datasets.load_dataset("parquet", data_files=...)`` opens it) and
``OUT/metadata.json`` (:mod:`verihub.eval._outdir`). ``resume=True`` refuses ``OUT`` unless an earlier run of
the same model, sampling, tasks and environment content wrote it, keeps its ok/wrong rollouts and
reruns the rest.

Every headline rate (``pass@1``, ``pass@k``, ``mean_reward``, ``layer_pass_rate``) is over the rollouts
asked for, tasks x k, and counts one that faulted (``env_error``, ``timeout``) or never came back as not
passed, reward 0: a fault can lower a rate, never raise it. Each has a ``*_graded`` twin over the graded
rollouts only; ``rollouts_faulted`` and ``tasks_lost`` say how much faults took out of those.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verihub.environment.core import Environment
from verihub.errors import UsageError
from verihub.eval._outdir import METADATA_FILE, RESULTS_FILE, ROLLOUTS_FILE, RunDirectory, RunIdentity, eval_output
from verihub.eval.rollout import Rollout, RolloutEngine
from verihub.generation import Backend, Sampling, load_backend
from verihub.grading.faults import lacks_evidence
from verihub.serve.graders import GraderPool
from verihub.validation.calibration import DriftMonitor

# The file names are here for callers that read the results.
__all__ = ["METADATA_FILE", "RESULTS_FILE", "ROLLOUTS_FILE", "EvalReport", "aevaluate", "evaluate", "pass_at_k"]


@dataclass
class EvalReport:
    """One evaluation. ``metrics`` (see :func:`metrics`) holds every rate with the faults behind it:
    ``rollouts`` asked, ``rollouts_faulted``, ``tasks_lost`` and the ``*_graded`` twins."""

    env_id: str
    env_version: str
    model: str
    sampling: dict[str, Any]
    tasks: int
    k: int
    rollouts: list[Rollout]
    wall_s: float
    rerun: int = 0  # rollouts this run produced (the rest came from a previous run)
    metrics: dict[str, Any] = field(default_factory=dict)
    domain: str = ""
    notes: list[str] = field(default_factory=list)  # what resuming repaired (a torn last line dropped)


def pass_at_k(samples: int, correct: int, k: int) -> float:
    """Unbiased pass@k from ``samples`` attempts of which ``correct`` passed (Chen et al., 2021);
    with fewer samples than ``k``, pass@samples."""
    if samples <= 0:
        return float("nan")
    k = min(k, samples)
    if samples - correct < k:
        return 1.0
    return 1.0 - math.comb(samples - correct, k) / math.comb(samples, k)


def metrics(task_ids: Sequence[str], k: int, rollouts: Sequence[Rollout]) -> dict[str, Any]:
    """The rates of ``k`` rollouts asked for on each of ``task_ids``, with what faults took out of them.

    Headline: each task's estimate uses its ``k`` rollouts asked for, a faulted or missing one counting as
    not passed (reward 0), averaged over every task. ``*_graded``: each task's estimate uses its graded
    rollouts only, averaged over the tasks with any (``tasks_lost`` have none); ``mean_reward_graded`` and
    ``layer_pass_rate_graded`` are over graded rollouts. ``rollouts_faulted`` counts faulted and missing
    rollouts; ``tasks_with_faults``, the tasks that have one. ``answer_faults`` counts graded rollouts whose
    answer made a layer fault (graded wrong at the floor, :mod:`verihub.grading.faults`), by layer in
    ``answer_faults_by_layer``; ``faults_without_evidence``, faulted rollouts the fault rule could not weigh for
    want of evidence that the layer works on the task (:func:`~verihub.grading.faults.lacks_evidence`);
    ``judge_injections``, rollouts whose answer addressed its judge (orders, a verdict, fence or turn tokens,
    the rubric pasted back: :mod:`verihub.grading.injection`), whatever their grade, by sign in
    ``judge_injections_by_sign``: what the training monitors count and alert on.
    """
    by_task: dict[str, list[Rollout]] = {task_id: [] for task_id in task_ids}
    for rollout in rollouts:
        by_task[rollout.task_id].append(rollout)
    asked = len(by_task) * k
    graded = [rollout for rollout in rollouts if rollout.reward is not None]
    faulted = asked - len(graded)
    passed = {task_id: sum(r.status == "ok" for r in group) for task_id, group in by_task.items()}
    scored = {task_id: sum(r.reward is not None for r in group) for task_id, group in by_task.items()}
    kept = [task_id for task_id in by_task if scored[task_id]]
    layer_runs: Counter[str] = Counter()
    layer_passes: Counter[str] = Counter()
    for rollout in graded:
        for name, layer_passed in rollout.layers_passed.items():
            if layer_passed is not None:
                layer_runs[name] += 1
                layer_passes[name] += layer_passed
    reasons = Counter(_fault_kind(r.reason) for r in rollouts if r.reward is None)
    if asked > len(rollouts):
        reasons["no rollout came back"] += asked - len(rollouts)
    reward = sum(r.reward for r in graded)  # type: ignore[misc]  # graded rollouts have a reward
    answer_faults = Counter(r.answer_fault for r in graded if r.answer_fault)
    flagged = [r.judge_injection for r in rollouts if r.judge_injection]
    return {
        "rollouts": asked,
        "rollouts_graded": len(graded),
        "rollouts_faulted": faulted,
        "tasks": len(by_task),
        "tasks_lost": len(by_task) - len(kept),
        "tasks_with_faults": sum(scored[task_id] < k for task_id in by_task),
        "pass@1": _mean([pass_at_k(k, passed[t], 1) for t in by_task]),
        f"pass@{k}": _mean([pass_at_k(k, passed[t], k) for t in by_task]),
        "mean_reward": reward / asked if asked else float("nan"),
        "layer_pass_rate": {name: layer_passes[name] / (runs + faulted) for name, runs in layer_runs.items()},
        "pass@1_graded": _mean([pass_at_k(scored[t], passed[t], 1) for t in kept]),
        f"pass@{k}_graded": _mean([pass_at_k(scored[t], passed[t], k) for t in kept]),
        "mean_reward_graded": reward / len(graded) if graded else float("nan"),
        "layer_pass_rate_graded": {name: layer_passes[name] / runs for name, runs in layer_runs.items()},
        "env_error_rate": faulted / asked if asked else 0.0,
        "env_errors_by_reason": dict(reasons),
        "answer_faults": answer_faults.total(),
        "answer_faults_by_layer": dict(answer_faults),
        "faults_without_evidence": sum(lacks_evidence(r.reason) for r in rollouts if r.reward is None),
        "judge_injections": len(flagged),
        "judge_injections_by_sign": dict(Counter(sign for signs in flagged for sign in signs.split(", "))),
        "prompt_tokens": sum(r.prompt_tokens for r in rollouts),
        "completion_tokens": sum(r.completion_tokens for r in rollouts),
    }


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _fault_kind(reason: str) -> str:
    return reason.split(":", 1)[0][:60] if reason else "unknown"


def evaluate(env: Environment, model: str | Backend, **options: Any) -> EvalReport:
    """:func:`aevaluate`, for code that is not async."""
    return asyncio.run(aevaluate(env, model, **options))


async def aevaluate(
    env: Environment,
    model: str | Backend,
    *,
    n: int | None = None,
    k: int | None = None,
    sampling: Sampling | None = None,
    split: str | None = None,
    concurrency: int = 32,
    out: Path | str | None = None,
    resume: bool = False,
    on_rollout: Callable[[Rollout], None] | None = None,
    graders: GraderPool | Sequence[str] | None = None,
) -> EvalReport:
    """Evaluate ``env`` on ``n`` tasks of ``split`` with ``k`` samples each (defaults: the spec's ``eval:``).

    With ``graders`` (a :class:`~verihub.serve.graders.GraderPool`, or the URLs of ``verihub serve`` processes
    for one made and closed here) grading and tool sessions run on those servers, not in this process.

    With ``out``, results are written there; ``resume`` extends the run already there (raises
    :class:`~verihub.errors.ResumeMismatchError` naming each field in which it differs).
    """
    if resume and out is None:
        raise UsageError("resume needs out: the directory that holds the earlier run's results")
    defaults = env.spec.eval
    n, k, split = n or defaults.n, k or defaults.k, split or defaults.split
    sampling = sampling or Sampling(
        temperature=defaults.temperature, top_p=defaults.top_p, max_tokens=defaults.max_tokens
    )
    dataset = env.dataset(split)
    tasks = [dataset[i] for i in range(min(n, len(dataset)))]
    task_ids = [str(task["id"]) for task in tasks]
    backend = load_backend(model, concurrency=concurrency) if isinstance(model, str) else model
    settings = {**sampling.model_dump(), "n": k}
    run: RunDirectory | None = None
    kept: dict[tuple[str, int], Rollout] = {}
    owned = graders is not None and not isinstance(graders, GraderPool)
    pool = graders if isinstance(graders, GraderPool) else GraderPool(list(graders)) if graders is not None else None
    try:
        if out is not None:
            run = RunDirectory(Path(out), _identity(env, backend.model, split, tasks, k, settings, Path(out)))
            kept = run.start({(task_id, index) for task_id in task_ids for index in range(k)}, resume=resume)
        wanted = [(task, index) for task in tasks for index in range(k) if (str(task["id"]), index) not in kept]
        drift = DriftMonitor(env)
        rows: dict[tuple[str, int], dict[str, Any]] = {}  # each fresh rollout's record, made once for both files

        async def record(rollout: Rollout) -> None:
            if run is not None:
                row = rows[(rollout.task_id, rollout.sample)] = rollout.row()
                run.append(row)
            if on_rollout is not None:
                on_rollout(rollout)
            await drift.after_grade()

        start = time.perf_counter()
        engine = RolloutEngine(
            env,
            backend,
            sampling,
            concurrency=concurrency,
            grader=pool.grader(env, split) if pool is not None else None,
        )
        fresh = await engine.run(tasks, wanted, record) if wanted else []
        rollouts = sorted([*kept.values(), *fresh], key=lambda r: (r.task_id, r.sample))
        report = EvalReport(
            env.id,
            env.version,
            backend.model,
            settings,
            len(tasks),
            k,
            rollouts,
            time.perf_counter() - start,
            rerun=len(fresh),
            domain=env.domain,
            notes=list(run.notes) if run is not None else [],
        )
        report.metrics = metrics(task_ids, k, rollouts)
        if drift.history:
            report.metrics["judge_drift_agreement"] = drift.history
        if run is not None:
            run.finish(
                [rows.get((rollout.task_id, rollout.sample)) or rollout.row() for rollout in rollouts],
                {"wall_s": report.wall_s, "metrics": report.metrics},
            )
    finally:
        if run is not None:
            run.close()
        if isinstance(model, str):
            await backend.aclose()
        if owned and pool is not None:
            await pool.aclose()
    return report


def _identity(
    env: Environment, model: str, split: str, tasks: list[Any], k: int, sampling: dict[str, Any], out: Path
) -> RunIdentity:
    from verihub import __version__
    from verihub.environment.digest import content_manifest, manifest_digest

    content = content_manifest(env, tasks, skip=eval_output(out))
    return RunIdentity(
        environment=env.id,
        environment_version=env.version,
        environment_source=env.load_report.source if env.load_report is not None else None,
        model=model,
        split=split,
        tasks=len(tasks),
        k=k,
        sampling=sampling,
        judge_model=getattr(env.verifier.judge, "override", None),
        verihub_version=__version__,
        environment_digest=manifest_digest(content),
        environment_content=content,
    )
