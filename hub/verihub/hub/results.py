"""Eval results on the hub: the layout of a results dataset, read and written by one set of rules.

A results repository is a dataset (``repo_type="dataset"``) for one environment repository::

    README.md                        the card; its front-matter links the environment: verihub: {environment:
    OWNER/NAME}
    runs/<run>/metadata.json         what ``verihub eval --out`` (or ``verihub regrade --out``) wrote: the run's
                                     identity, the verifier that graded it and its metrics, unchanged
    runs/<run>/results.parquet       one row per rollout, unchanged

``verihub eval ... --push`` writes it (:mod:`verihub.hub.results_push`); the server derives the environment's
leaderboard from it (:mod:`verihub.hub.leaderboard`). Both read a run's metadata with :meth:`RunRecord.parse`,
so what the client refuses to push is what the server refuses to show.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verihub.errors import DataError
from verihub.hub import cards
from verihub.ids import RepoId

__all__ = [
    "CARD",
    "MAX_METADATA_BYTES",
    "METADATA",
    "RESULTS",
    "RUNS",
    "CardRun",
    "RunRecord",
    "linked_environment",
    "results_card",
    "results_repo_for",
    "run_folder",
    "run_of",
]

RUNS, METADATA, RESULTS, CARD = "runs", "metadata.json", "results.parquet", "README.md"
MAX_METADATA_BYTES = 4 << 20  # an eval's metadata holds a manifest of the environment's files: generous, bounded
_RUN = re.compile(r"^runs/([A-Za-z0-9][A-Za-z0-9._-]{0,120})/metadata\.json$")


class _Metrics(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    pass_at_1: float = Field(alias="pass@1", ge=0, le=1, allow_inf_nan=False)
    rollouts: int = Field(ge=0)
    rollouts_faulted: int = Field(ge=0)
    tasks: int = Field(ge=0)
    tasks_lost: int = Field(ge=0)


class _Verifier(BaseModel):
    """``graded_by``: the environment version whose verifier graded a run's rollouts."""

    model_config = ConfigDict(extra="ignore")

    version: str = Field(min_length=1, max_length=100)


class _Regrade(BaseModel):
    """``regraded_from``: what graded a regraded run's answers first."""

    model_config = ConfigDict(extra="ignore")

    graded_by: _Verifier | None = None


class RunRecord(BaseModel):
    """What a leaderboard shows of one eval run, checked: the fields ``metadata.json`` must have, with
    numbers where numbers belong (anything else in the file is kept in the dataset, never shown).

    ``environment_version`` is the version the run's answers were made under; ``graded_by`` the version whose
    verifier graded them (the same for an eval; a regrade's, ``verihub regrade``, names another and says what it
    was ``regraded_from``). Results from before ``graded_by`` was recorded were graded by their own version."""

    model_config = ConfigDict(extra="ignore")

    environment: str = Field(max_length=200)
    environment_version: str = Field(max_length=100)
    graded_by: _Verifier | None = None
    regraded_from: _Regrade | None = None
    model: str = Field(min_length=1, max_length=300)
    k: int = Field(ge=1, le=100_000)
    sampling: dict[str, Any] = Field(default_factory=dict)
    complete: bool
    metrics: _Metrics

    @classmethod
    def parse(cls, data: bytes) -> RunRecord:
        """ValueError naming what is wrong: too large, not JSON, a field missing or of the wrong type, or a
        run that never finished."""
        if len(data) > MAX_METADATA_BYTES:
            raise DataError(f"metadata.json is larger than {MAX_METADATA_BYTES >> 20} MiB")
        try:
            record = cls.model_validate_json(data)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'file'}: {e['msg']}" for e in error.errors()[:4]
            )
            raise DataError(f"metadata.json is not an eval's metadata ({problems})") from None
        if not record.complete:
            raise DataError("metadata.json is of an eval that did not finish (complete: false)")
        return record

    @property
    def graded_version(self) -> str:
        """The version whose verifier graded this run: what its leaderboard row names."""
        return self.graded_by.version if self.graded_by is not None else self.environment_version

    @property
    def answers_version(self) -> str | None:
        """For a regraded run, the version its answers were made under (None for an eval's own grades)."""
        return self.environment_version if self.regraded_from is not None else None

    def version_text(self) -> str:
        """``2.0.0``, or for a regraded run ``2.0.0 (regraded; answers made under 1.0.0)``."""
        answers = self.answers_version
        return self.graded_version + (f" (regraded; answers made under {answers})" if answers else "")

    @property
    def pass_at_k(self) -> float | None:
        """pass@k for the run's k (None when k is 1 or the value is not a rate)."""
        value = (self.metrics.model_extra or {}).get(f"pass@{self.k}") if self.k > 1 else None
        return float(value) if isinstance(value, int | float) and 0 <= value <= 1 else None

    def sampling_text(self) -> str:
        """``temperature=0.7 top_p=1.0 max_tokens=512``: the plain values of the sampling settings."""
        shown = [
            (key, value)
            for key, value in sorted(self.sampling.items())
            if key != "n" and value is not None and isinstance(value, str | int | float | bool)
        ]
        return " ".join(f"{key}={value}" for key, value in shown)[:200]


def run_of(path: str) -> str | None:
    """The run a repository path is the metadata of (``runs/<run>/metadata.json``), else None."""
    match = _RUN.match(path)
    return match.group(1) if match else None


def linked_environment(card: str) -> RepoId | None:
    """The environment a results card's front-matter links (``verihub: {environment: OWNER/NAME}``)."""
    section = cards.front_matter(card).get("verihub")
    value = section.get("environment") if isinstance(section, dict) else None
    try:
        return RepoId.parse(value) if isinstance(value, str) else None
    except ValueError:
        return None


def results_repo_for(environment: RepoId, user: str, writable: tuple[str, ...]) -> RepoId:
    """Where a user's results for ``environment`` go: beside it (``OWNER/NAME-results``) when the user may
    write to its namespace, else into the user's own (``USER/OWNER-NAME-results``), so nobody else's upload
    can sit in the owner's namespace."""
    if environment.owner in writable:
        return RepoId(environment.owner, _bounded(f"{environment.name}-results"))
    return RepoId(user, _bounded(f"{environment.owner}-{environment.name}-results"))


def run_folder(record: RunRecord, when: datetime.datetime) -> str:
    """``2026-12-01T143000Z-<model>``: a run's folder, in the order runs were pushed."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", record.model.lower()).strip("-._")[:60] or "model"
    return f"{when.strftime('%Y-%m-%dT%H%M%SZ')}-{slug}"


@dataclass(frozen=True)
class CardRun:
    folder: str
    record: RunRecord


def results_card(environment: RepoId, pusher: str, runs: list[CardRun]) -> str:
    """The dataset card: front-matter that links the environment (and a config per run, so that
    ``load_dataset(REPO, RUN)`` works on huggingface.co), then a table of the runs."""
    front = {
        "tags": ["verihub", "eval-results"],
        "verihub": {"environment": str(environment)},
        "configs": [{"config_name": run.folder, "data_files": f"{RUNS}/{run.folder}/{RESULTS}"} for run in runs],
    }
    rows = []
    for run in runs:
        record, metrics = run.record, run.record.metrics
        pass_k = f"{record.pass_at_k:.3f}" if record.pass_at_k is not None else "–"
        cells = [
            run.folder,
            record.version_text(),
            record.model,
            record.sampling_text() or "–",
            f"{metrics.tasks} x {record.k}",
            f"{metrics.pass_at_1:.3f}",
            f"pass@{record.k} {pass_k}",
            f"{metrics.rollouts_faulted}/{metrics.rollouts}",
            f"{metrics.tasks_lost}/{metrics.tasks}",
            run.folder[:10],
        ]
        rows.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return (
        f"---\n{yaml.safe_dump(front, sort_keys=False)}---\n\n"
        f"# Eval results for {environment}\n\n"
        f"Runs of `verihub eval` against [{environment}](/datasets/{environment}), pushed by `{pusher}` with "
        "`verihub eval --push`. Each run is a folder under `runs/`: `metadata.json` (the environment's id, "
        "version and content digest, the verifier that graded the run (`graded_by`: its own version, or for a "
        "run regraded with `verihub regrade` another, and what it was `regraded_from`), the model, sampling, k "
        "and every metric, with the faults behind each "
        'rate) and `results.parquet` (one row per rollout: `datasets.load_dataset("parquet", '
        "data_files=...)` opens it).\n\n"
        "| run | verifier version | model | sampling | tasks x k | pass@1 | pass@k | faulted rollouts | "
        "tasks lost | date |\n|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n"
    )


def _cell(text: str) -> str:
    """Table cell text: one line, no column breaks, no markup."""
    return re.sub(r"([\\`*_\[\]<>|])", r"\\\1", " ".join(text.split()))[:200]


def _bounded(name: str) -> str:
    return name[:96].rstrip("-._")
