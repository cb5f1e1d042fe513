"""``verihub eval ... --push``: an eval's ``results.parquet`` and ``metadata.json`` to a results dataset on the
hub (the layout is :mod:`verihub.hub.results`), through the same backend seam as ``verihub push``.

The rules, so that results mean what they say:

- A run is pushed only when it finished (``complete: true``), names the environment it is pushed for, and
  that environment has the run's version published (and is visible to the pusher).
- Results go beside the environment (``OWNER/NAME-results``) when the pusher may write to its namespace,
  else into the pusher's own (``USER/OWNER-NAME-results``); either is private when the environment is.
  Nobody's upload can appear under the owner's namespace, and the leaderboard names the namespace each
  row came from.
- Pushing a run that is already there (the same ``metadata.json``) changes nothing.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from verihub.errors import VerihubError
from verihub.hub.errors import CommitConflictError, HubError
from verihub.hub.results import (
    CARD,
    METADATA,
    RESULTS,
    RUNS,
    CardRun,
    RunRecord,
    linked_environment,
    results_card,
    results_repo_for,
    run_folder,
    run_of,
)
from verihub.ids import RepoId

if TYPE_CHECKING:
    from verihub.hub.pipeline import Hub

__all__ = ["ResultsPushed", "push_results"]

ATTEMPTS = 5  # commits tried while concurrent pushes move the dataset's main branch


@dataclass(frozen=True)
class ResultsPushed:
    environment: RepoId
    version: str
    dataset: RepoId
    run: str
    private: bool
    created: bool  # False: this run was there already


def push_results(hub: Hub, out: Path, environment: RepoId | None = None) -> ResultsPushed:
    """Push the eval in the directory ``out`` as results of ``environment`` (default: the pusher's own
    environment of the id the run names)."""
    metadata, results = _read(out, METADATA), _read(out, RESULTS)
    try:
        record = RunRecord.parse(metadata)
    except ValueError as error:
        raise VerihubError(f"{out / METADATA}: {error}") from None
    user, writable = hub._identity()
    if environment is None:
        try:
            environment = RepoId(user, record.environment)
        except ValueError as error:
            raise VerihubError(f"name the environment's hub repository (--results-for OWNER/NAME): {error}") from None
    if record.environment != environment.name:
        raise VerihubError(f"{out} holds results of the environment {record.environment!r}, not of {environment}")
    env_private = hub._is_private(environment)  # RepoNotFoundError when the pusher cannot see it
    versions = hub.versions(environment)
    if record.environment_version not in versions:
        raise VerihubError(
            f"{environment} has no published version {record.environment_version} (published: "
            f"{', '.join(versions) or 'none'}): push the environment first, results link to a release"
        )
    dataset = results_repo_for(environment, user, writable)
    private = env_private  # PrivacyMismatchError if the dataset exists and is public
    hub._ensure_repo(dataset, private=private, package=False)
    for _ in range(ATTEMPTS):
        head, files = hub._files_at_main(dataset)
        runs = _runs(hub, dataset, head, files)
        same = next((folder for folder, (blob, _) in runs.items() if blob == _blob(metadata)), None)
        if same is not None:
            return ResultsPushed(environment, record.environment_version, dataset, same, private, False)
        if CARD in files:
            linked = linked_environment(hub._read_file(dataset, CARD, head or "main").decode("utf-8", "replace"))
            if linked is not None and linked != environment:
                raise VerihubError(f"{dataset} holds results of {linked}, not of {environment}")
        folder = run_folder(record, datetime.datetime.now(datetime.UTC))
        listed = [CardRun(name, parsed) for name, (_, parsed) in sorted(runs.items()) if parsed is not None]
        card = results_card(environment, dataset.owner, [*listed, CardRun(folder, record)])
        upload = {f"{RUNS}/{folder}/{METADATA}": metadata, f"{RUNS}/{folder}/{RESULTS}": results, CARD: card.encode()}
        try:
            hub._commit_files(
                dataset,
                upload,
                f"eval results: {record.model} on {environment}@{record.environment_version}",
                parent=head,
            )
        except CommitConflictError:  # another push came first: list again, so its run stays on the card
            continue
        return ResultsPushed(environment, record.environment_version, dataset, folder, private, True)
    raise HubError(f"could not commit to {dataset}: concurrent pushes kept moving its main branch; try again")


def _runs(
    hub: Hub, dataset: RepoId, head: str | None, files: dict[str, str]
) -> dict[str, tuple[str, RunRecord | None]]:
    """The runs already in the dataset: folder -> (metadata blob, the record, None if it does not parse)."""
    found: dict[str, tuple[str, RunRecord | None]] = {}
    for path, blob in files.items():
        folder = run_of(path)
        if folder is None or head is None:
            continue
        try:
            parsed: RunRecord | None = RunRecord.parse(hub._read_file(dataset, path, head))
        except ValueError:
            parsed = None
        found[folder] = (blob, parsed)
    return found


def _read(out: Path, name: str) -> bytes:
    try:
        return (out / name).read_bytes()
    except FileNotFoundError:
        raise VerihubError(f"{out} has no {name}: push the directory `verihub eval --out` wrote") from None


def _blob(content: bytes) -> str:
    from verihub.hub.pipeline import blob_id

    return blob_id(content)
