"""An environment: tasks, how each becomes a prompt, and how an answer to it is graded."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from verihub.environment.dataset import Split, SplitError, as_dataset, load_splits
from verihub.environment.installed import (
    adapter_for,
    adapter_schemes,
    hub_env_entry_point,
    installed_env_dir,
    installed_envs,
    ref_scheme,
)
from verihub.environment.origin import LoadReport
from verihub.errors import (
    DataError,
    EnvNotFoundError,
    NotFoundError,
    SpecError,
    SpecProblem,
    UsageError,
    describe_error,
)
from verihub.grading.grade import Grade
from verihub.grading.judge import Judge
from verihub.grading.verifier import BoundLayer, Verifier
from verihub.spec.loader import (
    LoadedSpec,
    column_locations,
    find_spec_file,
    load_spec,
    template_fields,
    template_locations,
)
from verihub.spec.models import EnvSpec
from verihub.spec.wrapped import read_wrapped

if TYPE_CHECKING:
    from datasets import Dataset

    from verihub.environment.session import Session
    from verihub.sandbox import Sandbox

__all__ = ["Completion", "Environment", "load_env", "task_messages"]

Task = Mapping[str, Any]
Message = dict[str, str]
_ROLES = ("system", "user", "assistant")  # the roles a task's own messages (prompt.messages) may have
Completion = str | Sequence[Mapping[str, Any]]
"""The model's answer: text, or the chat messages of a rollout (the last assistant message is graded)."""


class Environment:
    """Tasks plus a verifier. Build one with :func:`load_env`.

    >>> env = load_env("envs/arithmetic")                      # doctest: +SKIP
    >>> task = env.dataset("eval")[0]                          # doctest: +SKIP
    >>> env.grade(task, "\\\\boxed{42}").reward                 # doctest: +SKIP
    """

    def __init__(
        self,
        loaded: LoadedSpec,
        *,
        judge: Judge | None = None,
        on_missing_judge: Literal["error", "skip"] = "error",
    ) -> None:
        self.spec: EnvSpec = loaded.spec
        self.root: Path = loaded.root
        self.load_report: LoadReport | None = None  # set by a loader from elsewhere (verihub.environment.origin)
        self._loaded = loaded
        layers = [BoundLayer.from_spec(layer, self.root, self.spec.sandbox) for layer in self.spec.verifier]
        self.verifier = Verifier(
            layers,
            judge=judge,
            judge_model=self.spec.eval.judge_model,
            render=self.render,
            on_missing_judge=on_missing_judge,
            reference=self.reference,
            reference_is=self.spec.gold.reference_is,
            floor=self.spec.grading.floor,
            max_answer_chars=self.spec.max_answer_chars,
        )
        try:
            self._splits: dict[str, Split] = load_splits(self.spec.dataset, self.root)
        except SplitError as error:
            raise SpecError([loaded.problem(error.loc, str(error))]) from None
        except Exception as error:  # noqa: BLE001 - whatever `datasets` or a generator raises, say where
            message = f"cannot load tasks from {self.spec.dataset.source!r}: {describe_error(error)}"
            raise SpecError([loaded.problem(("dataset", "source"), message[:600])]) from error
        self._check_columns()

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def version(self) -> str:
        return self.spec.version

    @property
    def domain(self) -> str:
        return self.spec.domain

    def __repr__(self) -> str:
        return f"<Environment {self.id}@{self.version} ({self.domain}) from {self.root}>"

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The schemas (OpenAI form) of the tools a model may call in this environment's sessions."""
        if self.spec.interaction.kind != "multi_turn":
            return []
        from verihub.environment.session import _toolset

        return _toolset(self).schemas

    @property
    def graded_remotely(self) -> bool:
        """Whether this environment's rewards come from a remote it talks to itself (an OpenEnv server), so
        that a pool of ``verihub serve`` graders has nothing to do for it."""
        return False

    @property
    def prompts_identify_tasks(self) -> bool:
        """Whether two tasks with one prompt are one task (``validate`` then refuses one in train and eval). Not
        so for episodes started from seeds (a game's hidden number, its opponent's moves)."""
        return True

    @property
    def split_names(self) -> list[str]:
        return list(self._splits)

    def dataset(self, split: str = "train") -> Dataset:
        """The tasks of one split, as a `datasets.Dataset` with an ``id`` column."""
        return as_dataset(self.tasks(split))

    def tasks(self, split: str = "train") -> Sequence[Mapping[str, Any]]:
        """The tasks of one split, the rows :meth:`dataset` holds, without importing `datasets` where the
        source allows (a generator or a flat JSON Lines file): what validation and the red-team suite read."""
        try:
            return self._splits[split]
        except KeyError:
            raise NotFoundError(f"{self.id} has no split {split!r}; splits: {', '.join(self._splits)}") from None

    def render(self, task: Task) -> list[Message]:
        """The chat messages that pose ``task`` to a model: the system message, the few-shot examples, then the
        user template filled from the task, or (``prompt.messages``) the task's own messages, as they are (a
        system message of theirs first, in place of the system template).

        Raises :class:`~verihub.errors.DataError` for a task whose messages are not chat messages."""
        prompt = self.spec.prompt
        own = task_messages(task, prompt.messages) if prompt.messages is not None else None
        messages: list[Message] = []
        if own and own[0]["role"] == "system":
            messages.append(own.pop(0))
        elif prompt.system is not None:
            messages.append({"role": "system", "content": prompt.system.format_map(task)})
        for shot in prompt.few_shot:
            messages += [{"role": "user", "content": shot.user}, {"role": "assistant", "content": shot.assistant}]
        if own is not None:
            return messages + own
        assert prompt.user is not None  # a spec gives exactly one of user and messages
        messages.append({"role": "user", "content": prompt.user.format_map(task)})
        return messages

    def reference(self, task: Task) -> str:
        """A completion for ``task`` that the verifier must accept."""
        return self.spec.gold.reference.format_map(task)

    def negatives(self, task: Task) -> list[str]:
        """Completions for ``task`` that the verifier must reject."""
        return [template.format_map(task) for template in self.spec.gold.negatives]

    def grade(self, task: Task, completion: Completion) -> Grade:
        return self.verifier.grade(task, completion_text(completion))

    async def agrade(self, task: Task, completion: Completion) -> Grade:
        return await self.verifier.agrade(task, completion_text(completion))

    def session(self, task: Task, *, sandbox: Sandbox | None = None) -> Session:
        """One episode on ``task`` (:mod:`verihub.environment.session`): ``reset()``, then ``step(action)``
        until done."""
        from verihub.environment.session import Session

        return Session(self, task, sandbox=sandbox)

    def _check_columns(self) -> None:
        """Every placeholder, every column the spec names and every column a check reads must exist in every
        split."""
        columns = set.intersection(*(set(split.column_names) for split in self._splits.values()))
        shown = ", ".join(sorted(columns))
        problems: list[SpecProblem] = []
        for loc, name in column_locations(self.spec):
            if name not in columns:
                problems.append(self._loaded.problem(loc, f"{name!r} is not a dataset column (columns: {shown})"))
        for loc, template in template_locations(self.spec):
            for name in sorted(template_fields(template) - columns):
                problems.append(
                    self._loaded.problem(loc, f"placeholder {{{name}}} is not a dataset column (columns: {shown})")
                )
        for layer in self.verifier.layers:
            index = self.spec.verifier.index(layer.spec)
            for name in sorted(layer.columns - columns):
                loc = ("verifier", index, "args", "field") if "field" in layer.spec.args else ("verifier", index)
                problems.append(
                    self._loaded.problem(
                        loc, f"check reads column {name!r}, which the dataset lacks (columns: {shown})"
                    )
                )
        if problems:
            raise SpecError(sorted(problems, key=lambda p: p.line or 0))


def task_messages(task: Task, column: str) -> list[Message]:
    """The chat messages ``task[column]`` holds (a list of {role, content} mappings, or JSON text of one), as
    plain {role, content} dicts, other keys dropped. They are data: never filled as templates.

    Raises :class:`~verihub.errors.DataError` naming the task, the column and what is wrong."""
    value = task.get(column)

    def refused(problem: str) -> DataError:
        return DataError(f"task {task.get('id')!r}: column {column!r}: {problem}")

    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError) as error:
            raise refused(f"holds text that is not JSON chat messages ({describe_error(error, 120)})") from None
    if not isinstance(value, list | tuple):
        raise refused(f"must hold chat messages (a list of {{role, content}}), got {type(value).__name__}")
    messages: list[Message] = []
    for index, message in enumerate(value):
        if not isinstance(message, Mapping):
            raise refused(f"message {index} must be a mapping of role and content, got {type(message).__name__}")
        role, content = message.get("role"), message.get("content")
        if role not in _ROLES:
            raise refused(f"message {index}: role must be one of {', '.join(_ROLES)}, got {role!r:.60}")
        if not isinstance(content, str):
            raise refused(f"message {index} ({role}): content must be text, got {type(content).__name__}")
        messages.append({"role": role, "content": content})
    if not messages:
        raise refused("holds no messages")
    if messages[-1]["role"] != "user":
        last = messages[-1]["role"]
        raise refused(f"the last message is the {last}'s; it must be the user's (the one the model answers)")
    return messages


def completion_text(completion: Completion) -> str:
    if isinstance(completion, str):
        return completion
    for message in reversed(completion):
        if message.get("role") == "assistant":
            return str(message.get("content") or "")
    raise UsageError("the completion's messages hold no assistant message to grade")


def load_env(
    ref: str | Path,
    *,
    judge: Judge | None = None,
    judge_model: str | None = None,
    on_missing_judge: Literal["error", "skip"] = "error",
    size: int | None = None,
    seed: int | None = None,
    difficulty: Any = None,
    config: Mapping[str, Any] | None = None,
    **settings: Any,
) -> Environment:
    """Load an environment from a directory (or its environment.yaml) or by installed name, or build one
    from a reasoning-gym dataset: ``load_env("reasoning-gym:basic_arithmetic", size=200, seed=1,
    difficulty=2, max_digits=3)``, or from an OpenEnv server: ``load_env("openenv:http://HOST:PORT")``
    (or ``openenv:OWNER/SPACE``, or an installed OpenEnv package ``openenv:MODULE``). ``reasoning-gym:``
    refs take ``size`` (default 500), ``seed`` (default 0), ``difficulty`` (curriculum levels), ``config``
    and other keyword arguments (the dataset's settings); see :mod:`verihub.adapters.reasoning_gym`.
    ``openenv:`` refs take ``size``, ``seed``, ``action_field``, ``timeout_s``, ``max_reply_bytes`` and
    ``reward_range`` (tasks are the remote's episodes, rewards its own); see :mod:`verihub.adapters.openenv`.
    ``textarena:GAME`` refs (a textarena game, played in this process) take ``size``, ``seed``, ``max_turns``,
    ``players``, ``opponent``, ``reward_range`` and ``timeout_s``; see :mod:`verihub.adapters.textarena`.
    ``skyrl-gym:ENV`` refs (a skyrl-gym environment, on the tasks of a dataset file) take ``data``, ``size``,
    ``max_turns``, ``env_config``, ``reward_range`` and ``timeout_s``; see :mod:`verihub.adapters.skyrl_gym`.
    ``verifiers:TASKSET`` refs (Prime Intellect's verifiers, scored in its own interpreter: a v1 taskset or a
    legacy ``load_environment`` module) take ``size``, ``seed``, ``config`` (the taskset's, or
    ``load_environment``'s keywords), ``paths``, ``python``, ``timeout_s`` and, for a legacy one,
    ``reward_range``; see :mod:`verihub.adapters.verifiers`. ``harbor:PATH`` refs (Harbor tasks, run in verihub's
    jail) take ``max_turns`` and ``seed``; see :mod:`verihub.adapters.harbor`. ``gem:ENV`` refs (GEM's environments, in
    GEM's own interpreter) take ``size``, ``seed``, ``max_turns``, ``reward_range``, ``timeout_s`` and ``python``;
    see :mod:`verihub.adapters.gem`. Refs of a scheme an installed package registers in the ``verihub.adapters``
    entry-point group go to its loader: ``hf://datasets/ORG/NAME[@REV]`` (the hub's: an RL environment dataset of
    a hub, at a pinned revision; ``hub``, ``token`` and the options of the framework it holds) is
    :func:`verihub.hub.hf_datasets.load_hf_env`; ``nemo-gym:SERVER`` (a NeMo-Gym resources server on rows of its
    format, in NeMo-Gym's own interpreter) takes ``data``, ``size``, ``seed``, ``config``, ``reference``,
    ``reward_range``, ``timeout_s``, ``python`` and ``max_turns``: :mod:`verihub.adapters.nemo_gym`.
    Other refs take none of these.

    A directory that holds an environment.yaml wins over an installed environment of the same name.
    Judge layers use ``judge``; else a :class:`~verihub.grading.judge.ModelJudge` for ``judge_model`` (which
    overrides the spec) or for the model the spec names; with none, they follow ``on_missing_judge``.

    Raises :class:`~verihub.errors.SpecError` for an invalid spec (every problem, with lines) and
    :class:`~verihub.errors.EnvNotFoundError` for a name that is neither.
    """
    scheme = ref_scheme(str(ref))
    if scheme is not None and not Path(ref).exists():  # another ecosystem's environment: its adapter loads it
        loader = adapter_for(str(ref))
        if loader is None:
            schemes = adapter_schemes()
            raise EnvNotFoundError(
                str(ref),
                [f"{name}:" for name in schemes],
                [f"{name}:" for name in difflib.get_close_matches(scheme, schemes, n=2)],
                f"no installed adapter loads {scheme}: refs (a package adds one in the verihub.adapters entry-point "
                "group)",
            )
        if judge is None and judge_model:
            from verihub.grading.judge import ModelJudge

            judge = ModelJudge(judge_model)
        given = {"size": size, "seed": seed, "difficulty": difficulty, "config": config, "judge": judge}
        # a loader returns an Environment, as the group promises; it is given only what the caller gave
        return loader(
            str(ref),
            on_missing_judge=on_missing_judge,
            **{name: value for name, value in given.items() if value is not None},
            **settings,
        )
    given = {"size": size, "seed": seed, "difficulty": difficulty, "config": config}
    unexpected = sorted([name for name, value in given.items() if value is not None] + list(settings))
    if unexpected:
        raise TypeError(
            f"load_env() got unexpected keyword arguments {', '.join(unexpected)} "
            "(environments of other ecosystems take them: reasoning-gym:, openenv:, ...)"
        )
    path = Path(ref)
    if not find_spec_file(path).is_file():
        path = _installed_env_dir(str(ref), path)
    wrapped = read_wrapped(find_spec_file(path))
    if wrapped is not None:  # another ecosystem's environment, under this file's identity
        if ref_scheme(wrapped.source) not in adapter_schemes():
            problem = f"{wrapped.source!r} names no installed adapter (installed: {', '.join(adapter_schemes())})"
            raise SpecError([SpecProblem(str(find_spec_file(path)), None, "source", problem)])
        env = load_env(
            wrapped.source,
            judge=judge,
            judge_model=judge_model,
            on_missing_judge=on_missing_judge,
            **wrapped.resolved_options(find_spec_file(path).parent),
        )
        identity = {
            "id": wrapped.id,
            "version": wrapped.version,
            "tags": wrapped.tags or env.spec.tags,
            "description": wrapped.description or env.spec.description,
            "domain": wrapped.domain or env.spec.domain,
            "license": wrapped.license,
        }
        env.spec = env.spec.model_copy(update=identity)
        return env
    loaded = load_spec(path)
    if judge is None and (judge_model or _names_a_judge_model(loaded.spec)):
        from verihub.grading.judge import ModelJudge

        judge = ModelJudge(judge_model)
    return Environment(loaded, judge=judge, on_missing_judge=on_missing_judge)


def _installed_env_dir(ref: str, path: Path) -> Path:
    """Where an installed environment lives: ``owner/name`` (a hub package) or a bare entry-point name."""
    if path.exists():
        load_spec(path)  # raises the precise "no environment.yaml here" error
    installed = installed_envs()
    if ref.count("/") == 1:
        from verihub.ids import RepoId, dist_name

        entry_point = hub_env_entry_point(dist_name(RepoId.parse(ref)))
        if entry_point is None:
            raise EnvNotFoundError(ref, sorted(installed), [], f"it is not installed here (verihub install {ref})")
        return installed_env_dir(entry_point)
    providers = installed.get(ref, [])
    if len(providers) > 1:
        owners = ", ".join(sorted(str(ep.dist.name) if ep.dist else ep.value for ep in providers))
        raise EnvNotFoundError(
            ref, sorted(installed), [], f"several installed packages provide it ({owners}); load it as owner/name"
        )
    if not providers:
        names = sorted(installed)
        raise EnvNotFoundError(ref, names, difflib.get_close_matches(ref, names, n=3))
    return installed_env_dir(providers[0])


def _names_a_judge_model(spec: EnvSpec) -> bool:
    judges = [layer for layer in spec.verifier if layer.layer == "judge"]
    return bool(judges) and all(layer.model or spec.eval.judge_model for layer in judges)
