"""What a push derives from a package's source, beside its ``dist/``: the files that make the repository an RL
environment dataset as the Hugging Face Hub defines one, and the record of the release.

- ``README.md``: the dataset card. The author's card with its front-matter completed: ``tags`` (``rl-environment``
  and ``verihub`` first, then the spec's and the author's), ``pretty_name``, ``license`` and ``configs`` naming
  the task splits, so the Hub lists the repository among RL environments and its viewer and
  ``datasets.load_dataset("OWNER/NAME")`` read the tasks.
- ``data/<split>-00000-of-00001.parquet``: each split's tasks as ``env.tasks(split)`` gives them (a generator's
  are those its declared ``size`` and ``seed`` make), at most :data:`MAX_ROWS` a split, the card saying so.
- ``.verihub/release.json`` (:class:`ReleaseRecord`): the source files' git blob ids (what a re-push of the
  version is compared with: the derived files may differ with the tools that made them, the source may not),
  the sha256 of each file of ``dist/`` (what ``verihub install`` checks a download against, on a hub without a
  pip index) and the package's hub dependencies, by repository id.

Everything here is a function of the source (and the built ``dist/``): the same source derives the same files.
"""

from __future__ import annotations

import hashlib
import io
import json
from typing import TYPE_CHECKING

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verihub.errors import DataError
from verihub.hub import cards
from verihub.hub.roles import ROLE_TAGS
from verihub.ids import RepoId

if TYPE_CHECKING:
    from verihub.environment.core import Environment

__all__ = [
    "CARD",
    "DATA_DIR",
    "MAX_ROWS",
    "RELEASE_RECORD",
    "ReleaseRecord",
    "dataset_card",
    "task_tables",
]

CARD = "README.md"
DATA_DIR = "data"
RELEASE_RECORD = ".verihub/release.json"
MAX_ROWS = 10_000  # tasks of a split written to data/: a viewer's sample, not a copy of a vast generator


class ReleaseRecord(BaseModel):
    """``.verihub/release.json``: what a release is, recorded in its own commit."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    source: dict[str, str] = Field(description="Source path -> git blob id, as pushed (the derived files left out).")
    dist: dict[str, str] = Field(description="File name in dist/ -> sha256, for this version's wheel and sdist.")
    hub_dependencies: dict[str, str] = Field(
        default_factory=dict, description="OWNER/NAME -> version specifier of the dependencies the hub provides."
    )

    def encode(self) -> bytes:
        return (json.dumps(self.model_dump(), indent=1, sort_keys=True) + "\n").encode()

    @classmethod
    def decode(cls, data: bytes, where: str) -> ReleaseRecord:
        try:
            return cls.model_validate_json(data)
        except ValidationError as error:
            raise DataError(
                f"{where}: {RELEASE_RECORD} is not a release record ({error.error_count()} problems)"
            ) from None

    def wheel(self) -> tuple[str, str] | None:
        """(file name, sha256) of this release's wheel."""
        return next(((name, sha) for name, sha in sorted(self.dist.items()) if name.endswith(".whl")), None)


def task_tables(env: Environment) -> tuple[dict[str, bytes], dict[str, int]]:
    """``data/<split>-00000-of-00001.parquet`` of every split, and how many tasks each split has in all. Plain rows
    (a generator's, a JSON Lines file's) are typed by pyarrow's JSON reader, without importing ``datasets`` (nor
    pandas, which pyarrow loads to convert Python objects)."""
    import pyarrow as pa
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    tables: dict[str, bytes] = {}
    counts: dict[str, int] = {}
    for split in env.split_names:
        tasks = env.tasks(split)
        counts[split] = len(tasks)
        as_format = getattr(tasks, "with_format", None)
        if as_format is not None:  # a datasets.Dataset (a source on a hub): its own Arrow table
            table = as_format("arrow")[:MAX_ROWS]
        else:
            lines = "".join(json.dumps(dict(task), default=str) + "\n" for task in tasks[:MAX_ROWS]).encode()
            try:  # one block: every row's values decide each column's type
                table = pj.read_json(io.BytesIO(lines), read_options=pj.ReadOptions(block_size=len(lines) + 1))
            except (pa.ArrowInvalid, pa.ArrowTypeError):  # values Arrow cannot type alone: as `datasets` stores them
                table = env.dataset(split).with_format("arrow")[:MAX_ROWS]
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        tables[f"{DATA_DIR}/{split}-00000-of-00001.parquet"] = buffer.getvalue()
    return tables, counts


def dataset_card(
    readme: bytes | None,
    *,
    repo: RepoId,
    pretty_name: str,
    description: str,
    license: str | None,
    tags: list[str],
    environment: bool,
    splits: dict[str, int],
) -> bytes:
    """The card: the author's ``readme`` (front-matter and body) completed for the Hub. ``splits``: each split's
    task count (an environment's; a verifier package has none)."""
    front, text = cards.split((readme or b"").decode("utf-8", "replace"))
    own_tags = cards.tags(front)
    first = ROLE_TAGS["env" if environment else "verifier"]
    front["tags"] = list(dict.fromkeys([*first, *tags, *own_tags]))
    front.setdefault("pretty_name", pretty_name)
    front.setdefault("license", (license or "unknown").lower())
    if splits:
        files = [{"split": split, "path": f"{DATA_DIR}/{split}-00000-of-00001.parquet"} for split in splits]
        front["configs"] = [{"config_name": "default", "data_files": files}]
    body = text.strip() or f"# {pretty_name}\n\n{description}".strip()
    return (
        f"---\n{yaml.safe_dump(front, sort_keys=False, allow_unicode=True)}---\n\n{body}\n\n"
        f"{_usage(repo, environment, splits)}"
    ).encode()


def _usage(repo: RepoId, environment: bool, splits: dict[str, int]) -> str:
    lines = ["## Use it with verihub", "", "```bash", "pip install verihub"]
    if environment:
        lines += [
            f"verihub eval hf://datasets/{repo} --model MODEL    # installs the package at its release, then grades",
            "```",
            "",
            "```python",
            "import verihub",
            f'env = verihub.load_env("hf://datasets/{repo}")  # or: verihub install {repo}; load_env("{repo}")',
            "```",
        ]
    else:
        lines += [f"verihub install {repo}    # its checks join the `verihub checks` list", "```"]
    if any(count > MAX_ROWS for count in splits.values()):
        shown = ", ".join(f"{split} {min(count, MAX_ROWS):,} of {count:,}" for split, count in splits.items())
        lines += ["", f"`{DATA_DIR}/` holds the first tasks of each split ({shown}); the package makes them all."]
    return "\n".join(lines) + "\n"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
