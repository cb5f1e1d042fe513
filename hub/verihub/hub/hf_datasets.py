"""``load_env("hf://datasets/ORG/NAME[@REV]")``: an RL environment dataset of a hub, as the Hugging Face Hub
defines one (a dataset repository tagged ``rl-environment`` and the frameworks that can load it).

The hub is the configured one (``hub=``/``--hub``, ``VERIHUB_HUB``, ``HF_ENDPOINT``, else huggingface.co:
:func:`verihub.settings.dataset_hub`); the revision (default ``main``) is resolved once to its commit, and
everything is read at that commit. What is loaded is decided by the card's tags and the files' layout:

- **verihub** (a package: ``environment.yaml`` and ``pyproject.toml``): installed at its release the way
  ``verihub install`` does (:mod:`verihub.hub.install`; ``REV`` must be a release tag, default the newest), then
  loaded by name. Options: ``allow_moved_tag``.
- **harbor** (task folders with ``task.toml``, at most :data:`~verihub.adapters.harbor.MAX_DEPTH` folders deep):
  the task folders' files are downloaded as regular files at the commit (bounded: :data:`MAX_FILES`,
  :data:`MAX_BYTES`; a link is never written nor followed) into ``$VERIHUB_HOME/datasets/``, then run through the
  Harbor adapter, whose refusals the load report names. Options: ``max_turns``, ``seed``.
- **verifiers** (a row table: ``prompt`` chat messages or ``question``, with ``answer`` and ``info``, as Prime
  Intellect's verifiers reads it): its data files are downloaded likewise and declared as an environment whose
  prompt is the ``prompt`` column's messages (or ``{question}``) and whose verifier is ``verifier=`` (a list of
  layers, as in environment.yaml) with ``reference=`` (the gold template), by default a ``\\boxed{}`` gate and
  ``math`` against ``answer``; the load report says which. Options: ``verifier``, ``reference``, ``system``.

Any other dataset (``openenv``, ``nemo-gym``, no RL framework) is refused with the reason. ``env.load_report``
(:class:`~verihub.environment.origin.LoadReport`) holds the pinned ``hf://datasets/ORG/NAME@<commit>``, which
eval results and training metrics record. Options can also ride on the ref: ``hf://datasets/o/n?max_turns=8``.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path, PurePosixPath
from typing import Any

from verihub import settings
from verihub.environment.core import Environment, load_env
from verihub.environment.origin import LoadReport
from verihub.errors import SpecError, SpecProblem, UsageError
from verihub.hub import cards
from verihub.hub.ids import Requirement, VersionSpec, release_version
from verihub.hub.roles import RL_ENVIRONMENT_TAG, role_of
from verihub.ids import RepoId, dist_name

__all__ = ["MAX_BYTES", "MAX_FILES", "DatasetRef", "load_hf_env"]

PREFIX = "hf://datasets/"
MAX_FILES = 20_000  # files one load may download
MAX_BYTES = 1 << 30  # bytes one load may download
_DATA_SUFFIXES = (".parquet", ".jsonl", ".json", ".csv")
_SPLIT_NAMES = {"train": "train", "test": "eval", "eval": "eval", "evaluation": "eval", "validation": "eval"}
_OPTIONS = {
    "verihub": ("allow_moved_tag",),
    "harbor": ("max_turns", "seed"),
    "verifiers": ("verifier", "reference", "system"),
}
_WHY_NOT = {
    "openenv": "an OpenEnv environment runs as a server: load it with openenv:URL (or openenv:OWNER/SPACE)",
    "nemo-gym": "a NeMo-Gym environment is graded by its resources server, which verihub does not run from a dataset",
}


@dataclass(frozen=True)
class DatasetRef:
    """``hf://datasets/ORG/NAME[@REV]``, parsed."""

    repo: RepoId
    revision: str | None

    @classmethod
    def parse(cls, ref: str) -> DatasetRef:
        if not ref.startswith(PREFIX):
            kind = ref.removeprefix("hf://").split("/", 1)[0]
            what = f"{kind} are not environments" if kind in ("models", "spaces") else "a model id is no environment"
            raise UsageError(f"{ref!r}: load hf://datasets/ORG/NAME[@REV] ({what}: RL environments are datasets)")
        body = ref[len(PREFIX) :]
        name, at, revision = body.partition("@")
        if at and not revision:
            raise UsageError(f"{ref!r}: name a revision after '@' (a tag, a branch or a commit), or leave it out")
        try:
            repo = RepoId.parse(name.strip("/"))
        except ValueError as error:
            raise UsageError(f"{ref!r}: {error}") from None
        return cls(repo, revision or None)


def load_hf_env(
    ref: str,
    *,
    hub: str | None = None,
    token: str | None = None,
    judge: Any = None,
    judge_model: str | None = None,
    on_missing_judge: Any = "error",
    size: int | None = None,
    seed: int | None = None,
    difficulty: Any = None,
    config: Mapping[str, Any] | None = None,
    **options: Any,
) -> Environment:
    """The environment ``hf://datasets/ORG/NAME[@REV]`` names (see the module docstring)."""
    from verihub.adapters.openenv import ref_options
    from verihub.hub import open_hub

    ref, given = ref_options(ref)
    options = {**given, **options, **({"seed": seed} if seed is not None else {})}
    unsupported = [name for name, value in (("size", size), ("difficulty", difficulty), ("config", config)) if value]
    if unsupported:
        raise TypeError(f"hf://datasets/ refs take no {', '.join(unsupported)} (a dataset's tasks are its rows)")
    dataset = DatasetRef.parse(ref)
    client = open_hub(settings.dataset_hub(hub), settings.hub_token(token))
    commit = client._resolve(dataset.repo, dataset.revision or "main")
    tree = client._tree(dataset.repo, commit)
    tags = _card_tags(client, dataset.repo, commit, tree)
    framework = _framework(dataset, tags, tree)
    unknown = sorted(set(options) - set(_OPTIONS[framework]))
    if unknown:
        raise TypeError(
            f"{ref} is a {framework} environment, which takes no {', '.join(unknown)} "
            f"(options: {', '.join(_OPTIONS[framework]) or 'none'})"
        )
    env_options = {"judge": judge, "on_missing_judge": on_missing_judge}
    if framework == "verihub":
        return _verihub(client, dataset, commit, judge_model=judge_model, **env_options, **options)
    cache = _materialise(client, dataset.repo, commit, _wanted(framework, tree), tree)
    pinned = f"{PREFIX}{dataset.repo}@{commit}"
    if framework == "harbor":
        from verihub.adapters.harbor import load_harbor

        env = load_harbor(f"harbor:{cache}", **env_options, **options)
        report = env.load_report
        env.spec = env.spec.model_copy(
            update={
                "id": _env_id(dataset.repo),
                "description": f"{env.spec.description.split(' from ')[0]} from {pinned}, run in verihub's jail.",
            }
        )
        env.load_report = LoadReport(
            pinned, "harbor", report.loaded if report else 0, report.left_out if report else ()
        )
        return env
    return _verifiers_rows(dataset, cache, pinned, tags, **env_options, **options)


# -- what the dataset is ---------------------------------------------------------------------------------


def _card_tags(client: Any, repo: RepoId, commit: str, tree: Mapping[str, tuple[str, int]]) -> list[str]:
    if "README.md" not in tree or tree["README.md"][1] > 1 << 20:
        return []
    return cards.tags(client._read_file(repo, "README.md", commit).decode("utf-8", "replace"))


def _framework(dataset: DatasetRef, tags: list[str], tree: Mapping[str, tuple[str, int]]) -> str:
    """The framework whose files these are: the card's tags, checked against the layout."""
    role = role_of(tree)
    if role == "env":
        return "verihub"
    if "verihub" in tags and role == "results":
        raise UsageError(f"{dataset.repo} holds eval results, not an environment")
    if "harbor" in tags or (not tags and _task_folders(tree)):
        if not _task_folders(tree):
            raise UsageError(f"{dataset.repo} is tagged harbor but holds no task folder (task.toml) to run")
        return "harbor"
    if "verifiers" in tags:
        if not _data_files(tree):
            raise UsageError(
                f"{dataset.repo} is tagged verifiers but holds no row table (.parquet, .jsonl, .json or .csv); a "
                "verifiers environment's grader is a Python package: load it with verifiers:MODULE"
            )
        return "verifiers"
    for tag in tags:
        if tag in _WHY_NOT:
            raise UsageError(f"{dataset.repo} is a {tag} environment: {_WHY_NOT[tag]}")
    listed = "tagged " + ", ".join(tags[:12]) if tags else "without tags"
    rl = "" if RL_ENVIRONMENT_TAG in tags else f" (RL environments carry the tag {RL_ENVIRONMENT_TAG})"
    raise UsageError(
        f"{dataset.repo} ({listed}) is no RL environment verihub can run{rl}: it loads verihub packages, Harbor "
        "task folders and verifiers row tables"
    )


def _task_folders(tree: Mapping[str, tuple[str, int]]) -> list[str]:
    """Folders holding a task.toml, at most MAX_DEPTH deep ("" for the root); a task's own folders hold none."""
    from verihub.adapters.harbor import MAX_DEPTH

    folders = sorted(
        str(PurePosixPath(path).parent) if "/" in path else ""
        for path in tree
        if PurePosixPath(path).name == "task.toml" and path.count("/") <= MAX_DEPTH
    )
    return [folder for folder in folders if not any(_inside(folder, other) for other in folders if other != folder)]


def _inside(path: str, folder: str) -> bool:
    return folder == "" or path.startswith(folder + "/")


def _data_files(tree: Mapping[str, tuple[str, int]]) -> list[str]:
    return sorted(
        path
        for path in tree
        if path.endswith(_DATA_SUFFIXES) and not path.startswith(".") and PurePosixPath(path).name != "package.json"
    )


def _wanted(framework: str, tree: Mapping[str, tuple[str, int]]) -> list[str]:
    if framework == "harbor":
        folders = _task_folders(tree)
        return sorted(path for path in tree if any(_inside(path, folder) for folder in folders))
    return sorted({"README.md", *_data_files(tree)} & set(tree))


# -- downloading ---------------------------------------------------------------------------------------


def _materialise(client: Any, repo: RepoId, commit: str, paths: list[str], tree: Mapping[str, tuple[str, int]]) -> Path:
    """``paths`` of ``commit`` as regular files in ``$VERIHUB_HOME/datasets/HUB/ORG/NAME/COMMIT``: downloaded once
    (a commit never changes), beside and then renamed into place, so a folder there is always complete."""
    total = sum(tree[path][1] for path in paths)
    if len(paths) > MAX_FILES or total > MAX_BYTES:
        raise UsageError(
            f"{repo}@{commit[:12]}: {len(paths):,} files of {total / 2**20:,.0f} MiB to load; verihub loads at most "
            f"{MAX_FILES:,} files and {MAX_BYTES >> 20:,} MiB from a dataset"
        )
    hub_key = hashlib.sha256(str(client.location).encode()).hexdigest()[:16]
    target = settings.verihub_home() / "datasets" / hub_key / repo.owner / repo.name / commit
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".download-", dir=target.parent))
    try:
        client._download(repo, commit, paths, scratch)
        _check_plain(scratch, paths)
        shutil.rmtree(scratch / ".cache", ignore_errors=True)  # the client's own bookkeeping
        try:
            os.rename(scratch, target)
        except OSError:  # another load of the same commit came first: its folder is as good
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def _check_plain(folder: Path, paths: list[str]) -> None:
    """Every file asked for is there as a regular file, and nothing is a link."""
    for directory, subdirectories, names in os.walk(folder):
        for name in [*subdirectories, *names]:
            if os.path.islink(os.path.join(directory, name)):
                raise UsageError(f"downloading wrote a link at {Path(directory, name).relative_to(folder)}; refused")
    missing = [path for path in paths if not (folder / path).is_file()]
    if missing:
        raise UsageError(f"the download lacks {', '.join(missing[:5])}")


# -- the three frameworks --------------------------------------------------------------------------------


def _verihub(
    client: Any,
    dataset: DatasetRef,
    commit: str,
    *,
    judge: Any,
    judge_model: str | None,
    on_missing_judge: Any,
    allow_moved_tag: bool = False,
) -> Environment:
    """A verihub package: installed at its release (the newest, or the one REV tags), then loaded by name."""
    repo = dataset.repo
    versions = client.versions(repo)
    if dataset.revision is None:
        if not versions:
            raise UsageError(f"{repo} has no release to install (release tags v<version>)")
        wanted = VersionSpec.parse("latest").best(versions)
    else:
        tagged = release_version(dataset.revision)
        at_commit = [v for v in versions if client._tag_target(repo, f"v{v}") == commit]
        if tagged is not None and tagged in versions:
            wanted = tagged
        elif at_commit:
            wanted = at_commit[-1]
        else:
            raise UsageError(
                f"{repo}@{dataset.revision} is no release: a verihub package loads at a release tag "
                f"({', '.join(f'v{v}' for v in versions) or 'none published'})"
            )
    tag_commit = client._tag_target(repo, f"v{wanted}")
    if not _installed(client, repo, wanted, tag_commit):
        client.install(Requirement(repo, VersionSpec.parse(wanted)), allow_moved_tag=allow_moved_tag)
        importlib.invalidate_caches()
    env = load_env(str(repo), judge=judge, judge_model=judge_model, on_missing_judge=on_missing_judge)
    env.load_report = LoadReport(
        f"{PREFIX}{repo}@{tag_commit}", "verihub", len(env.tasks(env.spec.eval.split)) if env.split_names else 0
    )
    return env


def _installed(client: Any, repo: RepoId, wanted: str, commit: str | None) -> bool:
    """Whether this interpreter has ``repo`` at ``wanted``, installed from the release tag's ``commit``."""
    from verihub.hub.install import Pins

    try:
        if version(dist_name(repo)) != wanted:
            return False
    except PackageNotFoundError:
        return False
    return Pins(client.location).commit(repo, wanted) == commit


def _env_id(repo: RepoId) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", repo.name.lower()).strip("-.")[:64] or "dataset"


def _verifiers_rows(
    dataset: DatasetRef,
    folder: Path,
    pinned: str,
    tags: list[str],
    *,
    judge: Any,
    on_missing_judge: Any,
    verifier: list[dict[str, Any]] | None = None,
    reference: str | None = None,
    system: str | None = None,
) -> Environment:
    """A verifiers row table declared as an environment (see the module docstring)."""
    import datasets
    from pydantic import ValidationError

    from verihub.spec.lines import LineMap
    from verihub.spec.loader import LoadedSpec, pydantic_problems
    from verihub.spec.models import EnvSpec

    loaded = datasets.load_dataset(str(folder))
    columns = set.intersection(*(set(split.column_names) for split in loaded.values()))
    split: dict[str, str] = {}
    for theirs in loaded:  # train stays train; the first of test, eval, validation becomes eval
        ours = _SPLIT_NAMES.get(theirs)
        if ours is not None and ours not in split:
            split[ours] = theirs
    split = split or {"train": next(iter(loaded))}
    if "prompt" in columns:
        prompt: dict[str, Any] = {"messages": "prompt"}
    elif "question" in columns:
        prompt = {"user": "{question}"}
    else:
        raise UsageError(
            f"{dataset.repo}: a verifiers row table has a prompt or a question column "
            f"(it has {', '.join(sorted(columns))})"
        )
    if system is not None:
        prompt["system"] = system
    notes = []
    if verifier is None:
        if "answer" not in columns:
            raise UsageError(
                f"{dataset.repo} has no answer column to check against: name its verifier layers "
                "(verifier=[...], as in environment.yaml) and a reference template"
            )
        verifier = [
            {"name": "format", "layer": "rule", "use": "boxed", "gate": True},
            {"name": "answer", "layer": "check", "use": "math", "args": {"field": "answer"}},
        ]
        reference = reference or "\\boxed{{{answer}}}"
        notes.append("graded by the default layers: format (one \\boxed{} answer, a gate), then math against answer")
    if reference is None:
        raise UsageError("verifier= needs reference= too: the template of an answer each task's verifier must accept")
    raw = {
        "id": _env_id(dataset.repo),
        "version": "0.0.0",
        "domain": "general",
        "description": f"The verifiers row table {pinned}.",
        "tags": sorted({*tags, "verifiers"}),
        "dataset": {"source": str(folder), "split": split},
        "prompt": prompt,
        "verifier": verifier,
        "eval": {"split": "eval" if "eval" in split else next(iter(split))},
        "gold": {"reference": reference},
    }
    try:
        spec = EnvSpec.model_validate(raw)
    except ValidationError as error:
        raise SpecError(
            [
                SpecProblem(pinned, None, ".".join(map(str, loc)), message)
                for loc, message in pydantic_problems(error, raw, EnvSpec)
            ]
        ) from None
    env = Environment(
        LoadedSpec(spec, folder / "environment.yaml", LineMap()), judge=judge, on_missing_judge=on_missing_judge
    )
    env.load_report = LoadReport(
        pinned, "verifiers", sum(len(env.tasks(name)) for name in env.split_names), notes=tuple(notes)
    )
    return env
