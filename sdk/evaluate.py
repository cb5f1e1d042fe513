"""``verihub eval``: rollouts of an environment against a model, metrics, and results on disk.

Results go to ``OUT/rollouts.jsonl`` as each rollout finishes (so a killed run loses nothing), then to
``OUT/results.parquet`` (``datasets.load_dataset("parquet", data_files=...)`` opens it) and
``OUT/metadata.json``. ``resume=True`` keeps the ok/wrong rollouts already there and reruns the rest.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verihub.calibration import DriftMonitor
from verihub.environment import Environment
from verihub.generation import Backend, Sampling, load_backend
from verihub.rollout import Rollout, RolloutEngine

__all__ = ["EvalReport", "aevaluate", "evaluate", "pass_at_k"]

ROLLOUTS_FILE, RESULTS_FILE, METADATA_FILE = "rollouts.jsonl", "results.parquet", "metadata.json"
_KEPT = ("ok", "wrong")  # what --resume keeps; the rest (missing, env_error, timeout) is rerun


@dataclass
class EvalReport:
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


def pass_at_k(samples: int, correct: int, k: int) -> float:
    """Unbiased pass@k from ``samples`` attempts of which ``correct`` passed (Chen et al., 2021)."""
    if samples <= 0:
        return float("nan")
    k = min(k, samples)
    if samples - correct < k:
        return 1.0
    return 1.0 - math.comb(samples - correct, k) / math.comb(samples, k)


def metrics(rollouts: list[Rollout], k: int) -> dict[str, Any]:
    """Mean reward, pass@1, pass@k, per-layer pass rates, environment faults by reason, tokens."""
    valid = [r for r in rollouts if r.reward is not None]
    by_task: dict[str, list[Rollout]] = defaultdict(list)
    for rollout in valid:
        by_task[rollout.task_id].append(rollout)
    layer_runs: Counter[str] = Counter()
    layer_passes: Counter[str] = Counter()
    for rollout in valid:
        for name, passed in rollout.layers_passed.items():
            if passed is not None:
                layer_runs[name] += 1
                layer_passes[name] += passed
    faults = Counter(_fault_kind(r.reason) for r in rollouts if r.reward is None)
    per_task = [(len(group), sum(r.status == "ok" for r in group)) for group in by_task.values()]
    return {
        "rollouts": len(rollouts),
        "mean_reward": sum(r.reward for r in valid) / len(valid) if valid else float("nan"),  # type: ignore[misc]
        "pass@1": _mean([pass_at_k(n, c, 1) for n, c in per_task]),
        f"pass@{k}": _mean([pass_at_k(n, c, k) for n, c in per_task]),
        "layer_pass_rate": {name: layer_passes[name] / runs for name, runs in layer_runs.items()},
        "env_error_rate": (len(rollouts) - len(valid)) / len(rollouts) if rollouts else 0.0,
        "env_errors_by_reason": dict(faults),
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
) -> EvalReport:
    """Evaluate ``env`` on ``n`` tasks of ``split`` with ``k`` samples each (defaults: the spec's ``eval:``)."""
    defaults = env.spec.eval
    n, k = n or defaults.n, k or defaults.k
    sampling = sampling or Sampling(temperature=defaults.temperature, top_p=defaults.top_p,
                                    max_tokens=defaults.max_tokens)
    dataset = env.dataset(split or defaults.split)
    tasks = [dataset[i] for i in range(min(n, len(dataset)))]
    backend = load_backend(model) if isinstance(model, str) else model
    directory = Path(out) if out is not None else None
    kept = _previous(directory, tasks, k) if (directory is not None and resume) else {}
    wanted = [(task, index) for task in tasks for index in range(k) if (str(task["id"]), index) not in kept]
    log = _open_log(directory, append=resume)
    start = time.perf_counter()

    drift = DriftMonitor(env)

    async def record(rollout: Rollout) -> None:
        if log is not None:
            log.write(json.dumps(rollout.row()) + "\n")
            log.flush()
        if on_rollout is not None:
            on_rollout(rollout)
        await drift.after_grade()

    try:
        engine = RolloutEngine(env, backend, sampling, concurrency=concurrency)
        fresh = await engine.run(tasks, wanted, record) if wanted else []
    finally:
        if log is not None:
            log.close()
        if isinstance(model, str):
            await backend.aclose()
    rollouts = sorted([*kept.values(), *fresh], key=lambda r: (r.task_id, r.sample))
    report = EvalReport(env.id, env.version, model if isinstance(model, str) else backend.model,
                        {**sampling.model_dump(), "n": k}, len(tasks), k, rollouts, time.perf_counter() - start,
                        rerun=len(fresh), domain=env.domain)
    report.metrics = metrics(rollouts, k)
    if drift.history:
        report.metrics["judge_drift_agreement"] = drift.history
    if directory is not None:
        _write(directory, report)
    return report


def _open_log(directory: Path | None, *, append: bool) -> Any:
    if directory is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    return (directory / ROLLOUTS_FILE).open("a" if append else "w", encoding="utf-8")


def _previous(directory: Path, tasks: list[Any], k: int) -> dict[tuple[str, int], Rollout]:
    """Finished rollouts of an earlier run of the same tasks (the log's last word on each wins)."""
    wanted = {(str(task["id"]), index) for task in tasks for index in range(k)}
    found: dict[tuple[str, int], Rollout] = {}
    log = directory / ROLLOUTS_FILE
    if not log.exists():
        return found
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            rollout = Rollout.from_row(json.loads(line))
        except (json.JSONDecodeError, TypeError, KeyError):
            continue  # a line cut short when the run was killed
        key = (rollout.task_id, rollout.sample)
        if key in wanted:
            found[key] = rollout
    return {key: rollout for key, rollout in found.items() if rollout.status in _KEPT}


def _write(directory: Path, report: EvalReport) -> None:
    """results.parquet and metadata.json, each written to a temporary name and then moved in place."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from verihub import __version__

    rows = [rollout.row() for rollout in report.rollouts]
    partial = directory / f".{RESULTS_FILE}.partial"
    pq.write_table(pa.Table.from_pylist(rows) if rows else pa.table({"task_id": pa.array([], pa.string())}), partial)
    os.replace(partial, directory / RESULTS_FILE)
    metadata = {
        "environment": report.env_id, "environment_version": report.env_version, "model": report.model,
        "sampling": report.sampling, "tasks": report.tasks, "k": report.k, "seed": report.sampling.get("seed"),
        "verihub_version": __version__, "wall_s": report.wall_s, "metrics": report.metrics,
    }
    partial = directory / f".{METADATA_FILE}.partial"
    partial.write_text(json.dumps(metadata, indent=2, default=str))
    os.replace(partial, directory / METADATA_FILE)
