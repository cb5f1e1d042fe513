"""NVIDIA NeMo-Gym's environments (``nemo-gym`` 0.7): one of its resources servers and rows in its format, as a
verihub environment.

>>> rows = "rows.jsonl"  # NeMo-Gym's rows: responses_create_params, expected_answer, ...
>>> env = verihub.load_env("nemo-gym:equivalence_rule", data=rows, reference="{expected_answer}")  # doctest: +SKIP
>>> env = verihub.load_env("nemo-gym:mcqa", data=rows, reference="\\\\boxed{{{expected_answer}}}")  # doctest: +SKIP

NeMo-Gym needs Python >= 3.13.14, so it runs in an interpreter of its own (``VERIHUB_NEMO_GYM_PYTHON``, or this
one when it has NeMo-Gym; ``scripts/setup.sh --nemo-gym`` builds that Python from Debian's source package and
makes ``.venv-nemo-gym``). A bridge process there (:mod:`verihub.adapters.bridges.nemo_gym_side`) builds the
named server, ``resources_servers.NAME.app`` of the nemo-gym package, as NeMo-Gym builds it, and calls its
routes in process: no port is opened, so nothing else on the machine reaches it.

- **tasks**: the rows of ``data``, a JSONL file in NeMo-Gym's format (``responses_create_params`` with its
  ``input``, text or messages, and ``instructions``, beside the fields the server's ``/verify`` reads, such as
  ``expected_answer``), the first ``size`` of them (default: all), split 80/20 into ``train`` and ``eval``
  (``seed`` shuffles them first). A task's id is the row's ``uuid`` or ``id``, else ``FILE-00000`` on.
- **prompt**: the row's messages as they are (``instructions`` first, as the system message; a ``developer``
  message is one too); a row whose input holds anything but text is refused when it loads.
- **verifier**: one check layer, ``verify``: ``/seed_session`` with the row, then ``/verify`` with the
  completion as the model's one reply (a Responses API output message); its ``reward``, rescaled from
  ``reward_range`` (default ``[0, 1]``), is the score (passing at 1), the reply's other numbers its detail.
  ``config`` sets the server's own config fields (``grading_rule`` for equivalence_rule).
- **gold**: ``reference``, a template over the row's fields, is the answer the server must grade right
  (``validate``'s gold check, and the fault rule's evidence); without one the prompt stands in (a placeholder,
  never evidence), as for other adapted environments.

Rows that offer tools (``responses_create_params.tools``, the same in every row) make a multi-turn tool
environment (``max_turns``, default 8): the model calls the row's tools, each call posted to the server's route
in the episode's own server session, and the episode's output items (messages, calls, their outputs) are what
``/verify`` grades at its end (:mod:`verihub.adapters._nemo_gym_session`). The server raising (NeMo-Gym's
middleware answers 500), any answer but 200, a reply without a numeric reward or one outside ``reward_range``,
the bridge dying or a call past ``timeout_s`` is a fault with its reason (``env_error``), never a 0; whose fault
follows verihub's one rule (:mod:`verihub.grading.faults`). Answers share the server's bridge, one call at a time;
the rule's evidence is verified on a bridge of its own (:func:`~verihub.adapters._bridge.bridge_pool`).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field

from verihub import settings
from verihub.adapters._bridge import BridgeProcess, bridge_pool, held
from verihub.checks.base import CheckParams, CheckResult, check
from verihub.environment.core import Environment
from verihub.errors import GraderInfraError, RemoteEnvError, SpecError, SpecProblem
from verihub.grading._apart import apart
from verihub.grading._pools import START_S, Pool

__all__ = ["PREFIX", "NemoGymServer", "load_nemo_gym"]

PREFIX = "nemo-gym:"
OPTIONS = ("data", "size", "seed", "config", "reference", "reward_range", "timeout_s", "python", "max_turns")
DEFAULT_TURNS = 8
_SERVER_NAME = re.compile(r"[a-z][a-z0-9_]{0,100}")
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


class NemoGymServer(CheckParams):
    """Which resources server, on which rows, in which interpreter (the task source's and the check's arguments)."""

    server: str
    data: str = Field(description="The JSONL file of NeMo-Gym rows.")
    config: dict[str, Any] = Field(default_factory=dict, description="The server's own config fields.")
    reference: str | None = Field(None, description="A template over a row's fields: the answer graded right.")
    reward_range: tuple[float, float] = (0.0, 1.0)
    python: str = Field(description="The interpreter that has NeMo-Gym.")
    size: int | None = Field(None, ge=1)
    timeout_s: float = Field(60.0, gt=0, le=3600)

    def columns(self) -> set[str]:
        return {"row"}


_BRIDGES: dict[str, tuple[BridgeProcess, Pool[BridgeProcess]]] = {}
_BRIDGES_LOCK = threading.Lock()
_LOADED: dict[str, dict[str, Any]] = {}  # a server's load answer, by its parameters


def _key(params: NemoGymServer) -> str:
    """What tells one server's bridges from another's: the server, its config, the interpreter, the limit."""
    return params.model_dump_json(include={"server", "config", "python", "timeout_s"})


def _bridges(params: NemoGymServer) -> tuple[BridgeProcess, Pool[BridgeProcess]]:
    """The shared bridge of ``params``' server, and the pool of those that verify the fault rule's evidence."""
    key = _key(params)
    with _BRIDGES_LOCK:
        if key not in _BRIDGES:

            def new() -> BridgeProcess:
                return BridgeProcess(
                    params.python,
                    "nemo_gym_side.py",
                    what=f"NeMo-Gym resources server {params.server!r}",
                    timeout_s=params.timeout_s,
                    error=RemoteEnvError,
                    ready=lambda process: _load(process, key, params),
                )

            _BRIDGES[key] = (new(), bridge_pool(new, f"NeMo-Gym server {params.server!r}"))
        return _BRIDGES[key]


def _load(process: BridgeProcess, key: str, params: NemoGymServer) -> None:
    """A bridge's first request: the server built there (outside any grade's time)."""
    _LOADED[key] = process.ask(
        {"op": "load", "server": params.server, "config": params.config}, max(START_S, params.timeout_s)
    )


def ask(params: NemoGymServer, request: dict[str, Any], *, episode: bool = False) -> dict[str, Any]:
    """One request to the server's bridge: the evidence's own bridge when the fault rule gathers it, except for an
    ``episode``'s requests, which go where the episode lives (the shared bridge)."""
    shared, pool = _bridges(params)
    if apart() and not episode:  # the fault rule's evidence: never behind another answer on the shared bridge
        with held(pool) as process:
            return process.ask(request)
    with shared.held():
        return shared.ask(request)


def _loaded(params: NemoGymServer) -> dict[str, Any]:
    """The server's load answer (its class, NeMo-Gym's version); loading it is NeMo-Gym's failure, said as such."""
    shared, _ = _bridges(params)
    try:
        with shared.held():
            shared.ensure()
    except GraderInfraError as error:
        if isinstance(error.__cause__, RemoteEnvError):
            raise error.__cause__ from None
        raise
    return _LOADED[_key(params)]


def nemo_gym_spec(
    ref: str,
    *,
    data: str | Path | None = None,
    size: int | None = None,
    seed: int | None = None,
    config: Mapping[str, Any] | None = None,
    reference: str | None = None,
    reward_range: list[float] | tuple[float, float] | None = None,
    timeout_s: float = 60.0,
    python: str | None = None,
    max_turns: int = DEFAULT_TURNS,
) -> tuple[Any, NemoGymServer, list[dict[str, Any]]]:
    """The :class:`~verihub.spec.loader.LoadedSpec` of ``nemo-gym:SERVER`` on ``data`` (see the module
    docstring), its parameters and the rows' tools (Responses API function tools; none for single replies), the
    server built and its rows read, so that a bad row or server fails here, saying which."""
    from verihub.adapters.openenv import SPLIT
    from verihub.spec.lines import LineMap
    from verihub.spec.loader import LoadedSpec
    from verihub.spec.models import EnvSpec

    server = ref.removeprefix(PREFIX).strip()
    if not _SERVER_NAME.fullmatch(server):
        raise SpecError([SpecProblem(ref, None, "server", f"must name a NeMo-Gym resources server, got {server!r}")])
    if data is None:
        raise SpecError([SpecProblem(ref, None, "data", "is required: a JSONL file of NeMo-Gym rows")])
    params = NemoGymServer(
        server=server,
        data=str(Path(data).resolve()),
        config=dict(config or {}),
        reference=reference,
        reward_range=tuple(reward_range) if reward_range is not None else (0.0, 1.0),
        python=python or settings.nemo_gym_python(),
        size=size,
        timeout_s=timeout_s,
    )
    low, high = params.reward_range
    if not low < high:
        raise SpecError(
            [SpecProblem(ref, None, "reward_range", f"must be [low, high] with low < high, got {[low, high]}")]
        )
    rows = tasks(0, 0, **params.model_dump())  # the rows' problems, now
    tools = json.loads(rows[0]["row"])["responses_create_params"].get("tools") or []
    if any((json.loads(row["row"])["responses_create_params"].get("tools") or []) != tools for row in rows):
        raise SpecError(
            [SpecProblem(params.data, None, "tools", "differ between rows: one environment offers one set")]
        )
    if tools and (isinstance(max_turns, bool) or not isinstance(max_turns, int) or not 1 <= max_turns <= 100):
        raise SpecError([SpecProblem(ref, None, "max_turns", f"must be an integer from 1 to 100, got {max_turns!r}")])
    loaded = _loaded(params)
    version = loaded["versions"].get("nemo-gym", "0.0.0")
    spec = EnvSpec.model_validate(
        {
            "id": "nemo-gym-" + server.replace("_", "-"),
            "version": version if re.fullmatch(r"\d{1,9}\.\d{1,9}\.\d{1,9}", version) else "0.0.0",
            "domain": "nemo-gym",
            "description": f"NeMo-Gym's resources server {server} ({loaded['server']}, nemo-gym {version}) on "
            f"{Path(params.data).name}.",
            "tags": ["nemo-gym"],
            "dataset": {
                "source": f"{__name__}:tasks",
                "size": len(rows),
                "seed": seed or 0,
                "args": params.model_dump(),
                "split": SPLIT,
            },
            "prompt": {"messages": "messages"},
            "interaction": {"kind": "multi_turn", "max_turns": max_turns} if tools else {},
            "verifier": [
                {
                    "name": "verify",
                    "layer": "check",
                    "use": f"{__name__}:verify",
                    "args": params.model_dump(),
                    "timeout_s": 2 * timeout_s + 5,
                }
            ],
            "gold": (
                {"reference": "{reference}", "min_pass_rate": 1.0}
                if reference is not None  # the rows' own right answer
                else {"reference": "{prompt}", "reference_is": "placeholder", "min_pass_rate": 0.0}
            ),
        }
    )
    return LoadedSpec(spec, Path(PREFIX + server) / "environment.yaml", LineMap()), params, tools


def tasks(n: int, seed: int, **params: Any) -> list[dict[str, Any]]:
    """The rows of ``data`` as tasks (the dataset generator): the first ``size`` (or ``n``) of them."""
    ref = NemoGymServer(**params)
    path = Path(ref.data)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError([SpecProblem(str(path), None, "data", f"cannot be read: {error}")]) from None
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(_task(json.loads(line), path, len(rows), ref.reference))
        except (ValueError, KeyError, TypeError, IndexError) as error:
            raise SpecError([SpecProblem(str(path), number, "row", str(error))]) from None
        if ref.size is not None and len(rows) == ref.size:
            break
    if len(rows) < 5:
        raise SpecError([SpecProblem(str(path), None, "data", f"holds {len(rows)} rows; at least 5 are needed")])
    ids = [row["id"] for row in rows]
    if len(set(ids)) != len(ids):
        raise SpecError([SpecProblem(str(path), None, "data", "two rows share an id (uuid or id)")])
    return rows[:n] if n else rows


def _task(row: Any, path: Path, index: int, reference: str | None) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise TypeError(f"a row is a JSON object, not {type(row).__name__}")
    params = row.get("responses_create_params")
    if not isinstance(params, dict) or "input" not in params:
        raise KeyError("responses_create_params.input is missing")
    tools = params.get("tools") or []
    if not isinstance(tools, list) or any(not isinstance(t, dict) or t.get("type") != "function" for t in tools):
        raise ValueError("responses_create_params.tools: verihub plays function tools only")
    messages = ([{"role": "system", "content": str(params["instructions"])}] if params.get("instructions") else []) + (
        [{"role": "user", "content": params["input"]}]
        if isinstance(params["input"], str)
        else _messages(params["input"])
    )
    if not messages or messages[-1]["role"] != "user":
        raise ValueError("the row's input does not end with a user message")
    task = {
        "id": str(row.get("uuid") or row.get("id") or f"{path.stem}-{index:05d}"),
        "row": json.dumps(row),
        "messages": json.dumps(messages),
        "prompt": messages[-1]["content"],
    }
    if reference is not None:
        try:
            task["reference"] = reference.format(**row)
        except (KeyError, IndexError, ValueError) as error:
            raise ValueError(f"reference {reference!r} cannot be filled from the row: {error!r}") from None
    return task


def _messages(items: Any) -> list[dict[str, str]]:
    if not isinstance(items, list):
        raise TypeError("responses_create_params.input is text or a list of messages")
    messages = []
    for item in items:
        role = _ROLES.get(str(item.get("role"))) if isinstance(item, dict) else None
        if role is None or item.get("type", "message") != "message":
            raise ValueError(f"an input item verihub cannot pose: {json.dumps(item)[:200]}")
        content = item.get("content")
        if isinstance(content, list):  # parts: text only
            if any(
                not isinstance(part, dict) or part.get("type") not in ("input_text", "output_text", "text")
                for part in content
            ):
                raise ValueError("a message holds a part other than text (an image, a file): not posed here")
            content = "".join(str(part.get("text", "")) for part in content)
        if not isinstance(content, str):
            raise TypeError("a message's content is text or a list of text parts")
        messages.append({"role": role, "content": content})
    return messages


@check(params=NemoGymServer, mode="thread")
def verify(completion: str, task: Mapping[str, Any], params: NemoGymServer) -> CheckResult:
    """The server's ``/verify`` reward for the completion as the model's reply, rescaled; its numbers in the detail."""
    answer = ask(params, {"op": "verify", "row": json.loads(str(task["row"])), "completion": completion})
    return CheckResult(*scored(params, answer))


def scored(params: NemoGymServer, answer: Mapping[str, Any]) -> tuple[float, str]:
    """A ``/verify`` answer's reward rescaled from ``reward_range``, and its numbers as a detail; RemoteEnvError
    for a reward outside the range."""
    reward = float(answer["reward"])
    low, high = params.reward_range
    if not low <= reward <= high:
        raise RemoteEnvError(
            f"NeMo-Gym server {params.server!r} rewarded {reward:g}, outside reward_range [{low:g}, {high:g}]"
        )
    shown = ", ".join(f"{name} {value:g}" for name, value in sorted(answer.get("metrics", {}).items()))
    return (reward - low) / (high - low), f"reward {reward:g}" + (f"; {shown}" if shown else "")


def load_nemo_gym(
    ref: str,
    *,
    size: int | None = None,
    seed: int | None = None,
    config: Mapping[str, Any] | None = None,
    judge: Any = None,
    on_missing_judge: Any = "error",
    **options: Any,
) -> Environment:
    """``verihub.load_env("nemo-gym:SERVER", data=PATH)`` (the ``verihub.adapters`` entry point ``nemo-gym``):
    ``options`` are :func:`nemo_gym_spec`'s keywords, also given in the ref (``nemo-gym:mcqa?data=rows.jsonl``)."""
    from verihub.adapters.openenv import ref_options

    ref, given = ref_options(ref)
    chosen = (("size", size), ("seed", seed), ("config", config))
    merged = {**given, **options, **{key: value for key, value in chosen if value is not None}}
    if unknown := sorted(set(merged) - set(OPTIONS)):
        raise TypeError(f"nemo-gym: environments take no {', '.join(unknown)} (options: {', '.join(OPTIONS)})")
    loaded, params, tools = nemo_gym_spec(ref, **merged)
    if tools:
        from verihub.adapters._nemo_gym_session import NemoGymEnvironment

        return NemoGymEnvironment(loaded, params, tools, judge=judge, on_missing_judge=on_missing_judge)
    return Environment(loaded, judge=judge, on_missing_judge=on_missing_judge)
