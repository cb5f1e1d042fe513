"""reasoning-gym's procedural datasets as verihub environments.

>>> env = verihub.load_env("reasoning-gym:basic_arithmetic", size=200, seed=1, max_digits=3)  # doctest: +SKIP
>>> env = verihub.load_env("reasoning-gym:basic_arithmetic", difficulty=[0, 1, 2, 3])        # doctest: +SKIP
>>> env = verihub.load_env("reasoning-gym:leg_counting?size=100&seed=3&max_animals=4")       # doctest: +SKIP

Every dataset reasoning-gym registers (``verihub envs --reasoning-gym`` lists them) becomes an environment:

- **tasks**: ``size`` tasks (default 500) generated with ``seed`` (default 0) and split 0.8/0.2 into
  ``train`` and ``eval`` by one seeded shuffle. Settings are the fields of the dataset's config class
  (``min_digits=2``, ``config={...}``); ``difficulty`` picks levels of reasoning-gym's curriculum for
  the dataset: a level (``2``, every attribute at that level or its highest), a mapping of attribute
  levels (``{"num_digits": 3, "*": 1}``, ``*`` for the others), or a list of levels whose tasks are
  interleaved, each task's ``difficulty`` column naming its level (what the adaptive curriculum of
  :class:`~verihub.trainers.GRPOTrainer` buckets by). Settings given explicitly override the levels'.
  A dataset whose config has a ``difficulty`` field takes it as ``config={"difficulty": ...}`` (or as
  ``difficulty=`` when reasoning-gym defines no levels for it, as for gsm_symbolic).
- **prompt**: reasoning-gym's default system prompt (think, then the answer inside
  ``<answer></answer>``), the question as the user turn.
- **verifier**: a gate that the answer has a non-empty ``<answer>`` block, then the dataset's own
  ``score_answer`` on the last block's content (reasoning-gym's extraction), score in [0, 1], passing
  at 1 (partial credit counts in the reward).
- **gold**: ``<answer>{answer}</answer>`` must pass; a wrong answer (``wrong`` column) and the bare
  answer without tags must fail. Datasets with no single oracle answer (several are open-ended) lower
  ``gold.min_pass_rate`` to the share of tasks that have one.

The spec is an ordinary :class:`~verihub.EnvSpec` whose source is :func:`generate` and whose check is
:func:`score`, so the same environment can be written as an ``environment.yaml`` and published.
Task columns: ``id``, ``question``, ``answer``, ``wrong``, ``difficulty``, ``source_dataset``, ``index``
(the entry's index in the generating dataset), ``config`` (its settings, JSON) and ``entry`` (the
whole reasoning-gym entry as JSON that keeps tuples, sets, fractions and non-string keys, so that
``score_answer`` sees exactly what was generated; empty when it cannot, and then the entry is
regenerated from ``config`` and ``index``).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime
import difflib
import enum
import hashlib
import importlib
import io
import json
import math
import threading
from collections.abc import Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from verihub.checks.base import CheckParams, CheckResult, check
from verihub.errors import (
    CheckError,
    MissingDependencyError,
    SpecError,
    SpecProblem,
    UnknownDatasetError,
    UsageError,
    describe_error,
)

__all__ = [
    "DEFAULT_SIZE",
    "PREFIX",
    "DatasetInfo",
    "UnknownDatasetError",
    "generate",
    "load_reasoning_gym",
    "list_datasets",
    "parse_ref",
    "reasoning_gym_spec",
    "rg_version",
    "score",
    "show_setting",
]

PREFIX = "reasoning-gym:"
DEFAULT_SIZE = 500
MIN_SIZE = 3
SPLIT = {"train": 0.8, "eval": 0.2}
INSTALL_HINT = 'pip install "verihub[reasoning-gym]"'
# Datasets that do not stand alone: reasoning-gym's composite mixes other datasets (verihub mixes
# environments itself: a weighted list of environments in the trainers).
_EXCLUDED = {"composite"}
# A non-empty <answer> block (reasoning-gym grades the last one).
_ANSWER_PATTERN = r"<answer>\s*(?!</answer>)\S.*?</answer>"


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """One reasoning-gym dataset: its settings (config fields and defaults, without seed and size)
    and its curriculum's attributes with their number of levels (empty: no difficulty levels)."""

    name: str
    category: str
    description: str
    settings: dict[str, Any]
    levels: dict[str, int]

    @property
    def max_level(self) -> int | None:
        return max(self.levels.values()) - 1 if self.levels else None


# -- reasoning-gym, imported on first use ----------------------------------------------------------------


def _rg() -> Any:
    try:
        import reasoning_gym
    except ImportError as error:
        raise MissingDependencyError(
            f"reasoning-gym environments need the reasoning-gym package ({error}): {INSTALL_HINT}"
        ) from error
    return reasoning_gym


def _registry() -> tuple[dict[str, tuple[type, type]], dict[str, type]]:
    _rg()
    from reasoning_gym.factory import CURRICULA, DATASETS

    return {name: pair for name, pair in DATASETS.items() if name not in _EXCLUDED}, CURRICULA


def rg_version() -> str:
    """reasoning-gym's version as MAJOR.MINOR.PATCH (the version of every environment built from it)."""
    from importlib.metadata import version

    from packaging.version import Version

    _rg()
    release = (*Version(version("reasoning-gym")).release, 0, 0, 0)[:3]
    return ".".join(map(str, release))


def _category(dataset_cls: type) -> str:
    parts = dataset_cls.__module__.split(".")
    return parts[1] if len(parts) >= 3 else "reasoning"


def _summary(cls: type) -> str:
    doc = (cls.__doc__ or "").strip()
    return " ".join(doc.split("\n\n")[0].split())


def _settings(config_cls: type) -> dict[str, Any]:
    defaults: dict[str, Any] = {}
    for field in dataclasses.fields(config_cls):
        if field.name in ("seed", "size"):
            continue
        if field.default is not dataclasses.MISSING:
            defaults[field.name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            defaults[field.name] = field.default_factory()
        else:
            defaults[field.name] = None
    return defaults


def list_datasets() -> list[DatasetInfo]:
    """Every dataset reasoning-gym registers, by name."""
    datasets, curricula = _registry()
    infos = []
    for name, (dataset_cls, config_cls) in sorted(datasets.items()):
        levels: dict[str, int] = {}
        if name in curricula:
            levels = {attr: len(defn.levels) for attr, defn in curricula[name]().attributes.items()}
        infos.append(
            DatasetInfo(
                name,
                _category(dataset_cls),
                _summary(dataset_cls) or _summary(config_cls),
                _settings(config_cls),
                levels,
            )
        )
    return infos


def _resolve(name: str) -> str:
    datasets, _ = _registry()
    wanted = name.strip().replace("-", "_")
    if wanted in datasets:
        return wanted
    names = sorted(datasets)
    close = difflib.get_close_matches(wanted, names, n=3, cutoff=0.6)
    close += [each for each in names if wanted and wanted in each and each not in close]
    raise UnknownDatasetError(name, names, close[:5])


# -- JSON that keeps Python's types ------------------------------------------------------------------------

_TAGS = (
    "__tuple__",
    "__set__",
    "__frozenset__",
    "__items__",
    "__fraction__",
    "__decimal__",
    "__float__",
    "__date__",
    "__time__",
    "__datetime__",
    "__enum__",
    "__dataclass__",
)
_DATES = {datetime.date: "__date__", datetime.time: "__time__", datetime.datetime: "__datetime__"}


class _Unencodable(TypeError):
    pass


def _encode(value: Any) -> Any:
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if kind is list:
        return [_encode(item) for item in value]
    if kind is tuple:
        return {"__tuple__": [_encode(item) for item in value]}
    if kind in (set, frozenset):
        items = sorted((_encode(item) for item in value), key=lambda item: json.dumps(item, sort_keys=True))
        return {f"__{kind.__name__}__": items}
    if kind is dict:
        if all(type(key) is str for key in value) and not (len(value) == 1 and next(iter(value)) in _TAGS):
            return {key: _encode(item) for key, item in value.items()}
        return {"__items__": [[_encode(key), _encode(item)] for key, item in value.items()]}
    if kind is Fraction:
        return {"__fraction__": str(value)}
    if kind is Decimal:
        return {"__decimal__": str(value)}
    if kind in _DATES:
        return {_DATES[kind]: value.isoformat()}
    if kind.__module__.startswith("reasoning_gym."):  # its enums and option dataclasses, rebuilt by name
        if isinstance(value, enum.Enum):
            return {"__enum__": [kind.__module__, kind.__qualname__, value.name]}
        if dataclasses.is_dataclass(value):
            fields = {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
            return {"__dataclass__": [kind.__module__, kind.__qualname__, fields]}
    raise _Unencodable(f"{kind.__module__}.{kind.__qualname__}")


def _rg_class(module: str, qualname: str) -> Any:
    if not module.startswith("reasoning_gym."):
        raise ValueError(f"refusing to rebuild {module}.{qualname}: not a reasoning-gym class")
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def _tagged(obj: dict[str, Any]) -> Any:
    if len(obj) == 1:
        tag, value = next(iter(obj.items()))
        if tag == "__tuple__":
            return tuple(value)
        if tag == "__set__":
            return set(value)
        if tag == "__frozenset__":
            return frozenset(value)
        if tag == "__items__":
            return {key: item for key, item in value}
        if tag == "__fraction__":
            return Fraction(value)
        if tag == "__decimal__":
            return Decimal(value)
        if tag == "__float__":
            return float(value)
        if tag == "__date__":
            return datetime.date.fromisoformat(value)
        if tag == "__time__":
            return datetime.time.fromisoformat(value)
        if tag == "__datetime__":
            return datetime.datetime.fromisoformat(value)
        if tag == "__enum__":
            cls = _rg_class(value[0], value[1])
            if isinstance(cls, type) and issubclass(cls, enum.Enum):
                return cls[value[2]]
        if tag == "__dataclass__":
            cls = _rg_class(value[0], value[1])
            if isinstance(cls, type) and dataclasses.is_dataclass(cls):
                return cls(**value[2])
    return obj


def dumps(value: Any) -> str:
    """JSON text that :func:`loads` turns back into ``value`` with its tuples, sets, fractions, decimals,
    dates, non-string keys, and reasoning-gym's own enums and option dataclasses; raises TypeError for
    other types."""
    return json.dumps(_encode(value), ensure_ascii=False, sort_keys=False)


def loads(text: str) -> Any:
    return json.loads(text, object_hook=_tagged)


# -- settings and difficulty -------------------------------------------------------------------------------


def _problem(name: str, path: str, message: str) -> SpecProblem:
    return SpecProblem(PREFIX + name, None, path, message)


def _normalise_settings(name: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` checked against the dataset's config fields; strings become the enum members a
    field's default is made of (``transformation="uppercase"``). Raises SpecError naming each bad one."""
    datasets, _ = _registry()
    known = _settings(datasets[name][1])
    problems = []
    normal: dict[str, Any] = {}
    for key, value in settings.items():
        if key in ("seed", "size"):
            problems.append(_problem(name, key, f"pass {key} as load_env({key}=...), not as a setting"))
            continue
        if key not in known:
            close = difflib.get_close_matches(key, list(known), n=3)
            hint = f"did you mean {', '.join(map(repr, close))}? " if close else ""
            problems.append(_problem(name, key, f"unknown setting of {name}; {hint}settings: {', '.join(known)}"))
            continue
        try:
            value = _as_default_kind(value, known[key])
            _encode(value)
        except (TypeError, ValueError) as error:
            problems.append(_problem(name, key, str(error)))
            continue
        normal[key] = value
    if problems:
        raise SpecError(problems)
    return normal


def _as_default_kind(value: Any, default: Any) -> Any:
    members = default if isinstance(default, list | tuple) else [default]
    kinds = {type(member) for member in members}
    if len(kinds) != 1 or not issubclass(next(iter(kinds)), enum.Enum):
        try:
            _encode(value)
        except TypeError as error:
            raise TypeError(f"settings must be plain data (numbers, strings, lists, mappings), got {error}") from None
        return value
    cls = next(iter(kinds))

    def member(item: Any) -> Any:
        if isinstance(item, cls):
            return item
        for candidate in cls:
            if item == candidate.value or (isinstance(item, str) and item.lower() == candidate.name.lower()):
                return candidate
        raise ValueError(f"{item!r} is not one of {', '.join(str(m.value) for m in cls)}")

    if isinstance(default, list | tuple):
        if not isinstance(value, list | tuple) or isinstance(value, str):
            raise ValueError(f"must be a list of {', '.join(str(m.value) for m in cls)}")
        return [member(item) for item in value]
    return member(value)


def _plans(name: str, settings: Mapping[str, Any], difficulty: Any) -> list[tuple[str, dict[str, Any]]]:
    """(difficulty label, config keyword arguments) per difficulty level the tasks cycle through."""
    if difficulty is None:
        label = ",".join(f"{key}={_short(value)}" for key, value in sorted(settings.items())) or "default"
        return [(label, dict(settings))]
    _, curricula = _registry()
    if name not in curricula:
        raise SpecError(
            [
                _problem(
                    name,
                    "difficulty",
                    f"reasoning-gym defines no difficulty levels for {name}; "
                    "give its settings instead (`verihub envs --reasoning-gym`)",
                )
            ]
        )
    if isinstance(difficulty, Mapping):
        levels: list[Any] = [dict(difficulty)]
    elif isinstance(difficulty, Sequence) and not isinstance(difficulty, str):
        levels = list(difficulty)
        if not levels:
            raise SpecError([_problem(name, "difficulty", "an empty list of levels")])
    else:
        levels = [difficulty]
    plans = []
    for level in levels:
        label, values = _curriculum_values(name, curricula[name], level)
        plans.append((label, {**values, **settings}))
    return plans


def _curriculum_values(name: str, curriculum_cls: type, level: Any) -> tuple[str, dict[str, Any]]:
    curriculum = curriculum_cls()
    attributes = curriculum.attributes
    shown = ", ".join(f"{attr} 0-{len(defn.levels) - 1}" for attr, defn in attributes.items())
    top = max(len(defn.levels) for defn in attributes.values()) - 1

    def bad(message: str) -> SpecError:
        return SpecError([_problem(name, "difficulty", f"{message} (levels of {name}: {shown})")])

    def is_level(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    if is_level(level):
        if not 0 <= level <= top:
            raise bad(f"level {level} is out of range 0-{top}")
        curriculum.set_global_level(level)  # an attribute with fewer levels stays at its highest
        label = f"level-{level}"
    elif isinstance(level, Mapping):
        for attr, value in level.items():
            if attr != "*" and attr not in attributes:
                close = difflib.get_close_matches(str(attr), list(attributes), n=2)
                hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
                raise bad(f"{name} has no difficulty attribute {attr!r}{hint}")
            if not is_level(value):
                raise bad(f"the level of {attr!r} must be an integer, got {value!r}")
        if "*" in level:
            if not 0 <= level["*"] <= top:
                raise bad(f"level {level['*']} is out of range 0-{top}")
            curriculum.set_global_level(level["*"])
        for attr, value in level.items():
            if attr != "*":
                defn = attributes[attr]
                if not 0 <= value < len(defn.levels):
                    raise bad(f"level {value} of {attr!r} is out of range 0-{len(defn.levels) - 1}")
                curriculum.set_attr_level(attr, value)
        label = ",".join(f"{attr}={value}" for attr, value in level.items())
    else:
        raise bad(f"difficulty must be a level, a mapping of attribute levels or a list of them; got {level!r}")
    config = curriculum.generate_configuration()
    fields = []
    for defn in attributes.values():
        fields += (
            [defn.lower_field_name, defn.upper_field_name] if hasattr(defn, "lower_field_name") else [defn.field_name]
        )
    return label, {field: getattr(config, field) for field in fields}


def _short(value: Any, limit: int = 40) -> str:
    """A setting's value as a user would write it, cut to ``limit`` characters."""

    def plain(item: Any) -> Any:
        return item.value if isinstance(item, enum.Enum) else str(item)

    if isinstance(value, enum.Enum):
        value = value.value
    text = value if isinstance(value, str) else json.dumps(value, default=plain, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 3] + "..."


show_setting = _short


def _sub_seed(seed: int, level: int, levels: int) -> int:
    if levels == 1:
        return seed  # task i is reasoning_gym.create_dataset(name, seed=seed, ...)[i]
    digest = hashlib.sha256(f"{seed}/{level}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


# -- dataset instances (cached: scoring rebuilds them from a task's config) ----------------------------------

_instances: dict[tuple[str, str], Any] = {}
_instances_lock = threading.Lock()
_MAX_INSTANCES = 64


def _instance(name: str, config_text: str) -> Any:
    key = (name, config_text)
    with _instances_lock:
        found = _instances.get(key)
    if found is not None:
        return found
    created = _create(name, loads(config_text))
    with _instances_lock:
        if len(_instances) >= _MAX_INSTANCES:
            del _instances[next(iter(_instances))]
        return _instances.setdefault(key, created)


def _create(name: str, kwargs: Mapping[str, Any]) -> Any:
    datasets, _ = _registry()
    dataset_cls, config_cls = datasets[name]
    try:
        config = config_cls(**kwargs)
        if callable(getattr(config, "validate", None)):
            config.validate()
        return dataset_cls(config=config)
    except Exception as error:  # noqa: BLE001 - asserts, ValueErrors, TypeErrors of the config class
        settings = ", ".join(f"{key}={_short(value)}" for key, value in kwargs.items() if key not in ("seed", "size"))
        raise SpecError(
            [
                _problem(
                    name, "", f"reasoning-gym refuses the settings ({settings or 'defaults'}): {describe_error(error)}"
                )
            ]
        ) from error


# -- tasks --------------------------------------------------------------------------------------------------

_generated: dict[str, list[dict[str, Any]]] = {}  # the last generations, so that building a spec and then
_MAX_GENERATED = 2  # loading its dataset generate once


def generate(
    n: int, seed: int, dataset: str, config: Mapping[str, Any] | None = None, difficulty: Any = None
) -> list[dict[str, Any]]:
    """``n`` tasks of the reasoning-gym dataset ``dataset`` (a ``module:function`` dataset source).

    ``config`` holds settings of the dataset's config class; ``difficulty`` curriculum levels (see the
    module docstring). The same arguments always give the same tasks.
    """
    name = _resolve(dataset)
    settings = _normalise_settings(name, dict(config or {}))
    key = json.dumps([n, seed, name, _encode(settings), _encode(difficulty)])
    if key in _generated:
        return [dict(row) for row in _generated[key]]
    with contextlib.redirect_stdout(io.StringIO()):  # some generators print progress (bf's compiler)
        rows = _generate(n, seed, name, settings, difficulty, key)
    _generated[key] = rows
    while len(_generated) > _MAX_GENERATED:
        del _generated[next(iter(_generated))]
    return [dict(row) for row in rows]


def _generate(
    n: int, seed: int, name: str, settings: dict[str, Any], difficulty: Any, key: str
) -> list[dict[str, Any]]:
    plans = _plans(name, settings, difficulty)
    digest = hashlib.sha256(key.encode()).hexdigest()[:8]
    count = len(plans)
    levels = []
    for k, (label, kwargs) in enumerate(plans):
        size = max(1, len(range(k, n, count)))
        config_text = dumps({**kwargs, "seed": _sub_seed(seed, k, count), "size": size})
        instance = _create(name, loads(config_text))
        with _instances_lock:
            _instances[(name, config_text)] = instance
        levels.append((label, config_text, instance))
    rows = []
    for i in range(n):
        label, config_text, instance = levels[i % count]
        index = i // count
        try:
            entry = instance[index]
        except Exception as error:  # noqa: BLE001 - settings the config accepts but the generator cannot use
            kwargs = {key: value for key, value in loads(config_text).items() if key not in ("seed", "size")}
            shown = ", ".join(f"{key}={_short(value)}" for key, value in kwargs.items()) or "defaults"
            raise SpecError(
                [
                    _problem(
                        name,
                        "",
                        f"reasoning-gym could not generate task {index} with these "
                        f"settings ({shown}): {describe_error(error)}",
                    )
                ]
            ) from error
        answer = entry.get("answer")
        text = "" if answer is None else answer if isinstance(answer, str) else str(answer)
        rows.append(
            {
                "id": f"{name}-{digest}-{i:05d}",
                "question": str(entry["question"]),
                "answer": text,
                "wrong": _wrong_answer(instance, entry, text),
                "difficulty": label,
                "source_dataset": name,
                "index": index,
                "config": config_text,
                "entry": _entry_text(entry),
            }
        )
    return rows


def _entry_text(entry: dict[str, Any]) -> str:
    try:
        text = dumps(entry)
    except TypeError:
        return ""
    return text if loads(text) == entry else ""


def _wrong_answer(instance: Any, entry: dict[str, Any], answer: str) -> str:
    """An answer ``score_answer`` does not accept fully (for the gold negatives)."""
    candidates = []
    stripped = answer.strip()
    try:
        number = int(stripped)
        candidates += [str(number + 1), str(number - 1)]
    except ValueError:
        try:
            candidates.append(f"{float(stripped) + 1:g}")
        except ValueError:
            pass
    swaps = {"true": "False", "false": "True", "yes": "No", "no": "Yes"}
    if stripped.lower() in swaps:
        candidates.append(swaps[stripped.lower()])
    candidates += [stripped[::-1], "0", "1", "none", f"{stripped} 0", "wrong answer"]
    for candidate in candidates:
        if not candidate or candidate == stripped:
            continue
        try:
            if float(instance.score_answer(candidate, entry)) < 1.0:
                return candidate
        except Exception:  # noqa: BLE001, S112 - a candidate the scorer chokes on is just skipped
            continue
    return ""


_regenerated: dict[tuple[str, str, int], dict[str, Any]] = {}  # entries JSON cannot hold (dataset, config, index)
_MAX_REGENERATED = 4096


def _entry(task: Mapping[str, Any], instance: Any) -> dict[str, Any]:
    text = task.get("entry") or ""
    if text:
        return loads(text)
    key = (str(task["source_dataset"]), str(task["config"]), int(task["index"]))
    with _instances_lock:
        entry = _regenerated.get(key)
    if entry is None:
        entry = instance[key[2]]
        with _instances_lock:
            if len(_regenerated) >= _MAX_REGENERATED:
                del _regenerated[next(iter(_regenerated))]
            _regenerated[key] = entry
    return copy.deepcopy(entry)  # a scorer may not change what later grades see


# -- the check ----------------------------------------------------------------------------------------------


class ScoreParams(CheckParams):
    """No arguments: the task's ``source_dataset``, ``config``, ``index`` and ``entry`` say everything."""

    def columns(self) -> set[str]:
        return {"source_dataset", "config", "index", "entry"}


@check(params=ScoreParams, mode="thread")
def score(completion: str, task: Mapping[str, Any], params: ScoreParams) -> CheckResult:
    """The reasoning-gym dataset's own ``score_answer`` on the content of the last <answer> block."""
    from reasoning_gym.utils import extract_answer

    answer = extract_answer(completion)
    if answer is None:
        return CheckResult(0.0, "no <answer>...</answer> block")
    instance = _instance(str(task["source_dataset"]), str(task["config"]))
    entry = _entry(task, instance)
    try:
        value = float(instance.score_answer(answer, entry))
    except Exception as error:
        # A scorer that chokes on the model's answer but accepts the oracle's was given a bad answer;
        # one that chokes on the oracle's too is broken, and that is an environment fault.
        if entry.get("answer") is not None and answer != entry["answer"] and _scores_oracle(instance, entry):
            return CheckResult(0.0, f"score_answer raised {type(error).__name__} on this answer: {error}"[:300])
        raise
    if math.isnan(value):
        raise CheckError("score_answer returned NaN")
    value = min(1.0, max(0.0, value))
    if value >= 1.0:
        return CheckResult(1.0)
    expected = str(task.get("answer") or "")
    shown = f"; expected {expected[:80]!r}" if expected else ""
    return CheckResult(value, f"score_answer {value:g} for {answer[:80]!r}{shown}")


def _scores_oracle(instance: Any, entry: dict[str, Any]) -> bool:
    try:
        instance.score_answer(entry["answer"], entry)
    except Exception:  # noqa: BLE001 - a scorer that chokes on the entry cannot score it
        return False
    return True


# -- the environment spec -----------------------------------------------------------------------------------


def parse_ref(ref: str) -> tuple[str, dict[str, Any]]:
    """``reasoning-gym:NAME[?key=value&...]`` -> (NAME, options); values are read as YAML scalars,
    lists or mappings (``max_digits=3``, ``difficulty=[0,1,2]``, ``operators=["+","-"]``)."""
    import yaml

    body = ref.removeprefix(PREFIX)
    name, _, query = body.partition("?")
    options: dict[str, Any] = {}
    for part in filter(None, query.split("&")):
        key, equals, value = part.partition("=")
        if not equals:
            raise UsageError(f"{ref}: {part!r} is not key=value")
        text = unquote(value)
        try:
            options[unquote(key)] = yaml.safe_load(text) if text else ""
        except yaml.YAMLError:
            options[unquote(key)] = text
    return name, options


def reasoning_gym_spec(
    ref: str,
    *,
    size: int | None = None,
    seed: int | None = None,
    difficulty: Any = None,
    config: Mapping[str, Any] | None = None,
    **settings: Any,
) -> Any:
    """The :class:`~verihub.spec.loader.LoadedSpec` of ``reasoning-gym:NAME`` (``verihub.load_env``
    builds the environment from it): ``size`` tasks (default 500) from ``seed`` (default 0).
    Options in the ref's query string come first; keyword arguments override them. Raises :class:`UnknownDatasetError`,
    or :class:`~verihub.SpecError`
    naming each bad setting or level."""
    from verihub.spec.lines import LineMap
    from verihub.spec.loader import LoadedSpec
    from verihub.spec.models import EnvSpec

    raw_name, options = parse_ref(ref)
    name = _resolve(raw_name)
    from_ref = {key: options.pop(key) for key in ("size", "seed", "difficulty") if key in options}
    size = size if size is not None else from_ref.get("size", DEFAULT_SIZE)
    seed = seed if seed is not None else from_ref.get("seed", 0)
    difficulty = difficulty if difficulty is not None else from_ref.get("difficulty")
    merged = {**options, **dict(config or {}), **settings}
    problems = []
    if not isinstance(size, int) or isinstance(size, bool) or size < MIN_SIZE:
        problems.append(
            _problem(
                name,
                "size",
                f"must be an integer of at least {MIN_SIZE} (the train and eval splits each need a task), got {size!r}",
            )
        )
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        problems.append(_problem(name, "seed", f"must be a non-negative integer, got {seed!r}"))
    datasets, curricula = _registry()
    if difficulty is not None and name not in curricula and "difficulty" in _settings(datasets[name][1]):
        merged.setdefault("difficulty", difficulty)  # gsm_symbolic: no levels, but a setting of that name
        difficulty = None
    try:
        merged = _normalise_settings(name, merged)
    except SpecError as error:
        problems += error.problems
    if problems:
        raise SpecError(problems)

    rows = generate(size, seed, name, merged, difficulty)  # validates everything; loading reuses the rows
    dataset_cls, config_cls = datasets[name]
    category = _category(dataset_cls)
    with_answer = sum(1 for row in rows if row["answer"])
    args: dict[str, Any] = {"dataset": name}
    if merged:
        args["config"] = merged
    if difficulty is not None:
        args["difficulty"] = difficulty
    knobs = "; ".join(
        filter(
            None,
            [
                ", ".join(f"{key}={_short(value)}" for key, value in merged.items()),
                f"difficulty {_short(difficulty)}" if difficulty is not None else "",
            ],
        )
    )
    summary = _summary(dataset_cls) or _summary(config_cls) or f"reasoning-gym's {name} tasks."
    system = _rg().utils.SYSTEM_PROMPTS["default"].replace("{", "{{").replace("}", "}}")
    spec = EnvSpec.model_validate(
        {
            "id": "rg-" + name.replace("_", "-"),
            "version": rg_version(),
            "domain": category,
            "description": f"{summary} (reasoning-gym {name}{'; ' + knobs if knobs else ''})",
            "tags": ["reasoning-gym", category],
            "license": "Apache-2.0",
            "dataset": {"source": f"{__name__}:generate", "size": size, "seed": seed, "args": args, "split": SPLIT},
            "prompt": {"system": system, "user": "{question}"},
            "verifier": [
                {
                    "name": "format",
                    "layer": "rule",
                    "use": "regex",
                    "gate": True,
                    "args": {"pattern": _ANSWER_PATTERN, "flags": ["DOTALL"]},
                },
                {"name": "correct", "layer": "check", "use": f"{__name__}:score", "timeout_s": 30},
            ],
            "eval": {"max_tokens": 2048},
            "gold": {
                "reference": "<answer>{answer}</answer>",
                "negatives": ["<answer>{wrong}</answer>", "{answer}"],
                "min_pass_rate": math.floor(100 * with_answer / len(rows)) / 100,
            },
        }
    )
    file = Path(PREFIX + name) / "environment.yaml"
    return LoadedSpec(spec, file, LineMap())


def load_reasoning_gym(ref: str, *, judge: Any = None, on_missing_judge: Any = "error", **options: Any) -> Any:
    """``verihub.load_env("reasoning-gym:NAME")`` (the ``verihub.adapters`` entry point ``reasoning-gym``): the
    environment :func:`reasoning_gym_spec` describes, ``options`` its keywords."""
    from verihub.environment.core import Environment

    return Environment(reasoning_gym_spec(ref, **options), judge=judge, on_missing_judge=on_missing_judge)
