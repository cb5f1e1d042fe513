"""The ``environment.yaml`` schema: pydantic models, one per section.

These models check structure and single-field rules. Checks that need the outside world (data files,
check names, dataset columns) live in :mod:`verihub.spec.loader`, which also turns every problem into a
``file:line: field.path: message`` report.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, field_validator, model_validator

from verihub.checks.exploit import Family

__all__ = [
    "DatasetSpec",
    "CalibrationSpec",
    "EnvSpec",
    "EvalSpec",
    "ExploitSpec",
    "FewShotExample",
    "GoldSpec",
    "InteractionSpec",
    "LayerKind",
    "LayerSpec",
    "PromptSpec",
    "SandboxSpec",
    "SourceKind",
    "DATA_FILE_FORMATS",
    "FieldError",
]

# The suffixes a local dataset file may have, and the `datasets` builder that reads each.
DATA_FILE_FORMATS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)
_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
SANDBOX_TOOLS = frozenset({"python", "bash"})  # built-in tools that run in the sandbox
# The default answer-size limit: a token is rarely longer than 16 characters, so a model's answer within
# eval.max_tokens fits; the floor leaves room for a longer training budget.
_CHARS_PER_TOKEN, _MIN_ANSWER_CHARS = 16, 16384
# The most any environment may admit: such an answer, JSON-escaped at its worst (12 bytes a character, an
# astral one as two \u escapes), still fits one WebSocket frame of `verihub serve` (1 MiB), so every limit
# of the remote path holds whatever the edge lets through.
MAX_ANSWER_CHARS = 80_000


class FieldError(ValueError):
    """A cross-field rule broken by one field: ``at`` (relative to the model) is where to point."""

    def __init__(self, at: str | tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.at = (at,) if isinstance(at, str) else at


class _Section(BaseModel):
    """Base of every spec section: unknown keys are errors and a loaded spec never changes."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceKind(StrEnum):
    FILE = "file"
    GENERATOR = "generator"
    HUB = "hub"


class DatasetSpec(_Section):
    """Where the tasks come from and how they are split."""

    source: str = Field(
        description="A local file relative to the environment (.jsonl, .json, .csv, .parquet), a seeded "
        "generator 'module:function' called as function(n=size, seed=seed, **args), or a Hugging Face "
        "dataset id."
    )
    config: str | None = Field(None, description="Dataset configuration name (Hugging Face datasets only).")
    split: dict[str, float | str] = Field(
        default_factory=lambda: dict[str, float | str](train=1.0),
        description="Split name -> fraction of the shuffled source (fractions sum to at most 1), or split "
        "name -> name of a split the source already has (Hugging Face datasets).",
    )
    seed: int = Field(0, description="Seed for the generator and for the shuffle that carves fractional splits.")
    size: int | None = Field(None, ge=1, description="Number of tasks a generator makes (generators only).")
    args: dict[str, Any] = Field(default_factory=dict, description="Extra keyword arguments for a generator.")
    group_by: str | None = Field(
        None,
        description="Column naming each task's equivalence class (e.g. 'a+b' for both '2 + 3' and '3 + 2'): "
        "tasks with the same value always land in the same fractional split, so no held-out task has an "
        "equivalent in training.",
    )

    @property
    def kind(self) -> SourceKind:
        if any(self.source.endswith(suffix) for suffix in DATA_FILE_FORMATS):
            return SourceKind.FILE
        if _IMPORT_PATH.match(self.source):
            return SourceKind.GENERATOR
        return SourceKind.HUB

    @field_validator("split", mode="before")
    @classmethod
    def _no_booleans(cls, split: Any) -> Any:
        if isinstance(split, dict):
            for name, value in split.items():
                if isinstance(value, bool):
                    raise FieldError(str(name), f"split {name!r} must be a fraction or a split name, got {value!r}")
        return split

    @field_validator("split")
    @classmethod
    def _split_is_fractions_or_names(cls, split: dict[str, float | str]) -> dict[str, float | str]:
        if not split:
            raise ValueError("must name at least one split")
        values = list(split.values())
        if all(isinstance(v, str) for v in values):
            return split
        if not all(isinstance(v, float | int) and not isinstance(v, bool) for v in values):
            raise ValueError("use either fractions for every split or source split names for every split")
        for name, fraction in split.items():
            if not 0 < float(fraction) <= 1:
                raise ValueError(f"fraction for {name!r} must be > 0 and <= 1, got {fraction}")
        if sum(values) > 1 + 1e-9:  # type: ignore[arg-type]  # every value is a number here: checked above
            raise ValueError(f"fractions sum to {sum(values):g}; they must sum to at most 1")  # type: ignore[arg-type]  # every value is a number here: checked above
        return split

    @model_validator(mode="after")
    def _generator_rules(self) -> DatasetSpec:
        if self.kind is SourceKind.GENERATOR:
            if self.size is None:
                raise FieldError("size", "a generator source needs 'size' (how many tasks to make)")
        elif self.size is not None or self.args:
            field = "size" if self.size is not None else "args"
            raise FieldError(field, "'size' and 'args' apply only to a generator source ('module:function')")
        if self.config is not None and self.kind is not SourceKind.HUB:
            raise FieldError("config", "'config' applies only to a Hugging Face dataset id")
        if self.kind is not SourceKind.HUB and any(isinstance(v, str) for v in self.split.values()):
            raise FieldError("split", "split values must be fractions for a file or generator source")
        return self


class FewShotExample(_Section):
    user: str = Field(description="A user turn, used as written (no placeholders).")
    assistant: str = Field(description="The assistant's answer to it.")


class PromptSpec(_Section):
    """How a task becomes chat messages: a ``user`` template filled from the task's columns, or a ``messages``
    column that already holds them (datasets made for other ecosystems). Templates use Python format syntax:
    {column}; {{ for a brace."""

    # Exactly one of user and messages (as text: a null is not given), in the JSON schema as in validation.
    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [{"required": [name], "properties": {name: {"type": "string"}}} for name in ("user", "messages")]
        }
    )

    system: str | None = Field(
        None,
        description="System message template. With 'messages', prepended only when the task's messages do "
        "not begin with a system message.",
    )
    user: str | None = Field(
        None, description="User message template, filled from the task's columns. Give this or 'messages'."
    )
    messages: str | None = Field(
        None,
        min_length=1,
        exclude_if=lambda column: column is None,  # a template-mode spec dumps (and digests) as it always did
        description="Instead of 'user': the column holding each task's chat messages, a list of {role, "
        "content} (role system, user or assistant, content text, the last message the user's) or JSON text "
        "of one. The messages are posed as they are, never filled as templates.",
    )
    few_shot: list[FewShotExample] = Field(
        default_factory=list, description="Examples placed before the task (after the system message)."
    )

    @model_validator(mode="after")
    def _user_or_messages(self) -> PromptSpec:
        if self.user is None and self.messages is None:
            raise FieldError(
                "user",
                "required field is missing: give 'user' (a template) or 'messages' (a column of chat messages)",
            )
        if self.user is not None and self.messages is not None:
            raise FieldError("messages", "give 'user' (a template) or 'messages' (a column of chat messages), not both")
        return self


class InteractionSpec(_Section):
    """Single answer, or several turns with tools."""

    kind: Literal["single_turn", "multi_turn"] = "single_turn"
    max_turns: int = Field(1, ge=1, le=1000, description="Most assistant turns in one rollout.")
    tools: list[str] = Field(
        default_factory=list,
        description="Tools the model may call: built-in 'python' or 'bash' (run in the sandbox) or 'module:function'.",
    )

    @field_validator("tools")
    @classmethod
    def _tool_names(cls, tools: list[str]) -> list[str]:
        for tool in tools:
            if tool not in SANDBOX_TOOLS and not _IMPORT_PATH.match(tool):
                raise ValueError(f"unknown tool {tool!r}: use 'python', 'bash' or an import path 'module:function'")
        return tools

    @property
    def sandboxed(self) -> bool:
        """Rollouts run a sandbox (a built-in tool) and are graded on its terminal state."""
        return any(tool in SANDBOX_TOOLS for tool in self.tools)

    @model_validator(mode="after")
    def _single_turn_has_no_tools(self) -> InteractionSpec:
        if self.kind == "single_turn" and (self.tools or self.max_turns != 1):
            raise FieldError("tools" if self.tools else "max_turns", "tools and max_turns > 1 need kind: multi_turn")
        return self


class LayerKind(StrEnum):
    """Verifier layers, cheapest first. The engine always runs them in this order."""

    RULE = "rule"
    CHECK = "check"
    JUDGE = "judge"


# A rule layer usually only gates (weight 0); checks and judges score (weight 1).
_DEFAULT_WEIGHT = {LayerKind.RULE: 0.0, LayerKind.CHECK: 1.0, LayerKind.JUDGE: 1.0}


class LayerSpec(_Section):
    """One verifier layer."""

    name: str = Field(pattern=r"^[A-Za-z_][\w-]*$", description="Unique name, shown in grades and reports.")
    layer: LayerKind = Field(description="rule (format, protocol, safety), check (deterministic) or judge (LLM).")
    use: str | None = Field(
        None,
        description="The check to run: a built-in name (see `verihub checks`), a name published in the "
        "'verihub.checks' entry-point group, or 'module:function'. Not used by judge layers.",
    )
    args: dict[str, Any] = Field(default_factory=dict, description="Arguments of the check, validated by it.")
    gate: bool = Field(False, description="If this layer fails, the layers after it are skipped.")
    weight: Annotated[float, Field(ge=0)] = Field(
        None,  # type: ignore[assignment]  # filled per layer kind below
        description="Weight of this layer's score in the reward. Default: 0 for rule, 1 for check and judge.",
    )
    pass_score: float = Field(1.0, ge=0, le=1, description="Score at or above which the layer counts as passed.")
    timeout_s: float = Field(10.0, gt=0, description="Time limit; past it the grade is a timeout, never a 0.")
    rubric: str | None = Field(None, description="Judge layers: rubric file, relative to the environment.")
    model: str | None = Field(None, description="Judge layers: model to use, overriding eval.judge_model.")

    @model_validator(mode="before")
    @classmethod
    def _default_weight(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("weight") is None:
            try:
                kind = LayerKind(str(data.get("layer")))
            except ValueError:
                return data  # the 'layer' field reports its own error
            return {**data, "weight": _DEFAULT_WEIGHT[kind]}
        return data

    @model_validator(mode="after")
    def _fields_fit_the_kind(self) -> LayerSpec:
        if self.layer is LayerKind.JUDGE:
            if self.rubric is None:
                raise FieldError("rubric", "a judge layer needs 'rubric' (a file relative to the environment)")
            if self.use is not None or self.args:
                raise FieldError(
                    "use" if self.use is not None else "args",
                    "a judge layer takes 'rubric' and 'model', not 'use' or 'args'",
                )
        else:
            if self.use is None:
                raise FieldError("use", f"a {self.layer.value} layer needs 'use' (the check to run)")
            if self.rubric is not None or self.model is not None:
                raise FieldError(
                    "rubric" if self.rubric is not None else "model", "'rubric' and 'model' apply only to judge layers"
                )
        return self


_JAIL_OWN = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/etc", "/proc", "/dev", "/work", "/tmp")
_MAX_ALIASES = 8


def _alias_pairs(value: Any) -> Any:
    """``sandbox.aliases`` as sorted (path, target) pairs: each path absolute and outside the jail's own
    directories, each target /work, /tmp or a path below them."""
    if isinstance(value, dict):
        value = sorted(value.items())
    if not isinstance(value, list | tuple) or len(value) > _MAX_ALIASES:
        raise ValueError(f"must be a mapping of at most {_MAX_ALIASES} PATH: TARGET entries")
    pairs = []
    for pair in value:
        if not isinstance(pair, list | tuple) or len(pair) != 2 or not all(isinstance(part, str) for part in pair):
            raise ValueError(f"each alias is PATH: TARGET, both text; got {pair!r}")
        path, target = pair
        for part in (path, target):
            if not re.fullmatch(r"(/[\w.-]+)+", part) or any(piece in (".", "..") for piece in part.split("/")):
                raise ValueError(f"{part!r}: an alias's path and target are absolute, with no . or .. parts")
        if any(path == own or path.startswith(own + "/") for own in _JAIL_OWN):
            raise ValueError(f"{path!r} is the jail's own; an alias goes elsewhere (e.g. /app)")
        if not any(target == own or target.startswith(own + "/") for own in ("/work", "/tmp")):
            raise ValueError(f"{path!r} points at {target!r}; an alias points into /work or /tmp")
        pairs.append((path, target))
    return tuple(pairs)


class SandboxSpec(_Section):
    """Limits for code the environment runs in the sandbox (model-written code, sandboxed tools).

    The same model is the ``limits`` argument of :func:`verihub.sandbox.run`.
    """

    memory_mb: int = Field(512, ge=16, description="Address-space limit in MiB.")
    wall_s: float = Field(20.0, gt=0, description="Wall-clock limit per run in seconds.")
    cpu_s: float | None = Field(None, gt=0, description="CPU-time limit in seconds (default: wall_s).")
    network: bool = Field(False, description="Allow network access (off unless the task needs it).")
    max_procs: int = Field(32, ge=1, description="Most processes and threads at once.")
    max_file_mb: int = Field(16, ge=1, description="Largest file a run may write, in MiB.")
    max_output_kb: int = Field(
        1024, ge=1, description="Most stdout plus stderr kept, in KiB; past it the run is stopped."
    )
    disk_mb: int = Field(64, ge=1, description="Size of the work dir and /tmp (each a fresh tmpfs), in MiB.")
    aliases: Annotated[
        tuple[tuple[str, str], ...],
        BeforeValidator(_alias_pairs),
        WithJsonSchema({"type": "object", "additionalProperties": {"type": "string"}}),
    ] = Field(
        (),
        description="Paths in the jail that are symlinks into its work dir (/work) or /tmp, as PATH: TARGET "
        "(e.g. {/app: /work} for a task written for a container whose WORKDIR is /app).",
    )

    @property
    def cpu_limit_s(self) -> float:
        return self.cpu_s if self.cpu_s is not None else self.wall_s


class GradingSpec(_Section):
    """What a wrong answer earns, and the answer size grading admits."""

    floor: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Reward of a wrong answer at its worst: what an answer "
        "fault earns, and the most an exploit may earn before `validate` counts it as getting through.",
    )
    max_answer_chars: int | None = Field(
        None,
        ge=1,
        le=MAX_ANSWER_CHARS,
        description="Longest answer graded; a longer "
        "one is wrong before any layer runs. Default: 16 characters per token of "
        f"eval.max_tokens per turn, at least 16384; at most {MAX_ANSWER_CHARS:,}.",
    )


class EvalSpec(_Section):
    """Defaults for `verihub eval`; command-line flags override them."""

    split: str = Field("eval", description="Split to evaluate on.")
    n: int = Field(50, ge=1, description="Number of tasks.")
    k: int = Field(1, ge=1, description="Samples per task (pass@k).")
    temperature: float = Field(1.0, ge=0, le=2)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(1024, ge=1)
    judge_model: str | None = Field(None, description="Model for judge layers that do not name one.")


class CalibrationSpec(_Section):
    """Labelled examples that check the judge: (task columns, completion, expected score) per line."""

    file: str = Field(
        description="JSON lines relative to the environment: the task's columns plus "
        "'completion' and 'expected' (a score in [0, 1])."
    )
    tolerance: float = Field(0.25, ge=0, le=1, description="A verdict agrees when within this of the expected score.")
    min_agreement: float = Field(0.8, ge=0, le=1, description="`verihub validate` fails below this share of agreement.")
    drift_every: int = Field(200, ge=1, description="During long runs, re-grade calibration items every N grades.")
    drift_items: int = Field(4, ge=1, description="How many calibration items each drift check re-grades.")


class ExploitSpec(_Section):
    """An attack of the environment's own that the verifier must reject (run by `validate` with the
    exploits every check declares). A completion that passes, or makes the grade a fault, fails validation."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", description="Unique name, shown in reports.")
    family: Annotated[Family, BeforeValidator(Family.parse)] = Field(
        description=f"One of: {', '.join(Family)} (the families of the threat model)."
    )
    description: str = Field("", description="What the attack tries.")
    completion: str = Field(description="Template over the task's columns giving the completion, like gold.reference.")
    files: dict[str, str] | None = Field(
        None,
        description="Terminal-state environments (sandboxed tools): files the exploit leaves in the final "
        "work dir, over the task's initial ones (path and text are templates over the task's columns).",
    )
    tasks: int = Field(3, ge=1, le=100, description="How many tasks of the eval split it runs on.")


class GoldSpec(_Section):
    """Reference answers the verifier must accept and negatives it must reject (checked by `validate`)."""

    reference: str = Field(
        description="Template giving, per task, a completion that must pass, e.g. '\\\\boxed{{{answer}}}'."
    )
    reference_is: Literal["gold", "canary", "placeholder"] = Field(
        "gold",
        description="What the reference is, as evidence of whose fault a fault is: 'gold', a right answer; "
        "'canary', an answer the verifier handles without a fault on every task, right or not (set min_pass_rate "
        "to 0); 'placeholder', no evidence (an environment with no gold answers: the fault rule then takes "
        "another answer to the task graded without a fault, in the same verifier's memory).",
    )
    negatives: list[str] = Field(default_factory=list, description="Templates giving completions that must fail.")
    exploits: list[ExploitSpec] = Field(
        default_factory=list, description="Attacks of the environment's own, run after the ones its checks declare."
    )
    min_pass_rate: float = Field(1.0, ge=0, le=1, description="Share of references that must pass.")
    split: str | None = Field(None, description="Split to check (default: every split).")
    max_tasks: int | None = Field(None, ge=1, description="Check at most this many tasks per split.")

    @field_validator("exploits")
    @classmethod
    def _unique_names(cls, exploits: list[ExploitSpec]) -> list[ExploitSpec]:
        names = [exploit.name for exploit in exploits]
        for index, name in enumerate(names):
            if name in names[:index]:
                raise FieldError((index, "name"), f"exploit name {name!r} is used twice")
        return exploits


class EnvSpec(_Section):
    """A whole ``environment.yaml``."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", description="Name: lowercase letters, digits, '.', '_', '-'.")
    version: str = Field(description="Semantic version MAJOR.MINOR.PATCH; a published version never changes.")
    domain: str = Field(description="Domain used for mixing and per-domain metrics, e.g. math, code.")
    description: str
    tags: list[str] = Field(default_factory=list)
    license: str | None = None
    dataset: DatasetSpec
    prompt: PromptSpec
    interaction: InteractionSpec = Field(default_factory=InteractionSpec)
    verifier: list[LayerSpec] = Field(min_length=1, description="Verifier layers; run rule -> check -> judge.")
    sandbox: SandboxSpec = Field(default_factory=SandboxSpec)
    eval: EvalSpec = Field(default_factory=EvalSpec)
    grading: GradingSpec = Field(default_factory=GradingSpec)
    gold: GoldSpec
    calibration: CalibrationSpec | None = Field(None, description="Labelled examples for judge layers.")

    @property
    def max_answer_chars(self) -> int:
        """The longest answer graded (``grading.max_answer_chars``, or its default from ``eval.max_tokens``)."""
        declared = self.grading.max_answer_chars
        if declared is not None:
            return declared
        return min(
            MAX_ANSWER_CHARS,
            max(_MIN_ANSWER_CHARS, _CHARS_PER_TOKEN * self.eval.max_tokens * self.interaction.max_turns),
        )

    @field_validator("version")
    @classmethod
    def _semver(cls, version: str) -> str:
        if not _SEMVER.match(version):
            raise ValueError(f"must be a semantic version like 1.2.0, got {version!r}")
        return version

    @model_validator(mode="after")
    def _exploit_files_need_a_work_dir(self) -> EnvSpec:
        for index, exploit in enumerate(self.gold.exploits):
            if exploit.files is not None and not self.interaction.sandboxed:
                raise FieldError(
                    ("gold", "exploits", index, "files"),
                    "'files' (a final work dir) applies only "
                    "to environments with sandboxed tools (interaction.tools: [bash] or [python])",
                )
        return self
