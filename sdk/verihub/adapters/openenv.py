"""OpenEnv environments (an OpenEnv server, a Hugging Face Space, an installed package) as verihub ones.

>>> env = verihub.load_env("openenv:http://127.0.0.1:8000", size=50, seed=1)  # doctest: +SKIP
>>> env = verihub.load_env("openenv:openenv/echo-env")  # a Space: https://openenv-echo-env.hf.space  # doctest: +SKIP
>>> env = verihub.load_env("openenv:echo_env")  # an installed package, served on loopback here  # doctest: +SKIP

- **where**: a URL, a Space id ``owner/space``, or an installed environment package ``module[:app]`` (its
  FastAPI app, ``module:app`` or ``module.server.app:app`` as OpenEnv lays packages out), which this
  process serves with uvicorn on a free loopback port.
- **tasks**: from a server with OpenEnv's task API, its splits (the first ``size`` tasks of each, default
  100, posed by ``reset(split=, index=)``). Otherwise episodes: task ``i`` is the one ``reset(seed=seed +
  i)`` starts (``size`` tasks, split 0.8/0.2 into ``train`` and ``eval``). The ``reset`` column holds the
  reset's options, ``prompt`` its observation as text (the observation's only string field, else its
  JSON without ``metadata``). Loading checks that the remote reproduces an episode: verihub poses a task
  and grades it in two sessions, so an environment that ignores the seed cannot be graded and is refused.
- **prompt**: the observation text as the user turn.
- **verifier**: one check layer: a fresh WebSocket session resets to the task (the observation
  must still be the prompt), steps once with the completion as the action and scores the remote's
  reward. The completion fills the action's only field (``action_field=`` names one when there are
  several); a field that is not a string takes the completion parsed as JSON.
- **multi-turn**: ``max_turns=N`` (N > 1) loads the remote as a multi-turn environment: ``env.session(task)``
  (what ``verihub eval`` drives) plays its episode through one tool whose arguments are the remote's action
  (:mod:`verihub.adapters._openenv_session`); its end's reward is the grade, at most N turns. Without it a
  task is one step, graded by the verifier. ``env.episode(task)`` drives an episode by hand, a turn's text
  as the action.

The remote is untrusted (TRUST.md): every reply is bounded (``max_reply_bytes``, default 1 MiB), every
request has a deadline (``timeout_s``, default 30), and anything but a finite reward inside
``reward_range`` (default ``[0, 1]``, rescaled to [0, 1]) is a fault: connection refused, timeouts,
malformed replies, the server's error frames, no reward, a reward out of range are faults with a reason,
never a 0. Whose fault follows verihub's one rule (:mod:`verihub.grading.faults`): the remote ships no gold
answers, so the evidence is another answer to the task that the remote took without a fault (never the
task's prompt: ``gold.reference_is: placeholder``). A fault that answer does not cause and this answer causes
every time (a remote that crashes, stalls or sends an out-of-range reward on this answer only) is the
answer's, ``wrong`` at the floor; one the evidence shares (a remote down), or one on a task where no answer
was taken without a fault (a remote broken on every action), is ``env_error``. The server refusing the action
(its ``VALIDATION_ERROR``) or a completion that is no valid action is the answer's
(:meth:`~verihub.checks.base.CheckResult.malformed`), and so no evidence.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import parse_qsl, quote

from pydantic import Field

from verihub._sync import run_sync
from verihub.adapters._openenv_wire import (
    MAX_REPLY_BYTES,
    ActionRefusedError,
    OwnLoop,
    RemoteEnvError,
    RemoteSession,
    fetch,
)
from verihub.checks.base import CheckParams, CheckResult, check
from verihub.environment.core import Environment
from verihub.errors import DataError, SpecError, SpecProblem, VerihubError

if TYPE_CHECKING:
    from verihub.environment.session import Session

__all__ = [
    "PREFIX",
    "OpenEnvEnvironment",
    "RemoteEnvError",
    "RemoteSession",
    "TaskSession",
    "base_url",
    "episodes",
    "first_step",
    "load_openenv",
    "openenv_spec",
    "remote_step",
    "tasks",
]

PREFIX = "openenv:"
DEFAULT_SIZE = 100
MIN_SIZE = 5
MAX_SPLITS = 64  # of a remote's task API
_ALL = "tasks"  # the one split a task API's tasks are loaded as, then regrouped by the remote's own splits
SPLIT = {"train": 0.8, "eval": 0.2}
_SPACE_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")


def parse_ref(ref: str) -> tuple[str, dict[str, Any]]:
    """``openenv:URL[?size=20&action_field=message&...]`` -> (the server's HTTP address, options)."""
    body, options = ref_options(ref)
    body = body.removeprefix(PREFIX).strip()
    return (serve_installed(body) if _MODULE_REF.match(body) else base_url(body)), options


def ref_options(ref: str) -> tuple[str, dict[str, Any]]:
    """``PREFIX:WHAT[?size=20&max_turns=10&...]`` -> (``PREFIX:WHAT``, options); option values are read as
    YAML scalars or lists (``reward_range=[-1,1]``), so that the CLI can pass them."""
    import yaml

    body, _, query = ref.partition("?")
    options: dict[str, Any] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        try:
            options[key] = yaml.safe_load(value) if value else ""
        except yaml.YAMLError:
            options[key] = value
    return body, options


def base_url(ref: str) -> str:
    """The server's HTTP address for ``openenv:URL`` or ``openenv:owner/space`` (a Hugging Face Space)."""
    body = ref.removeprefix(PREFIX).strip().rstrip("/")
    if body.startswith(("ws://", "wss://")):
        body = "http" + body.removeprefix("ws")
    if body.startswith(("http://", "https://")):
        return body
    if _SPACE_ID.match(body):
        owner, name = body.split("/")
        return f"https://{owner}-{name}".lower().replace("_", "-").replace(".", "-") + ".hf.space"
    raise VerihubError(f"{ref!r}: expected openenv:http(s)://HOST[:PORT] or openenv:OWNER/SPACE")


_MODULE_REF = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*)?$")
_served: dict[int, tuple[Any, str]] = {}  # the installed environments' apps this process serves, and where
_served_lock = threading.Lock()


def serve_installed(ref: str) -> str:
    """The loopback URL of the installed OpenEnv environment ``module[:app]`` (its FastAPI app, by default
    ``module:app`` or ``module.server.app:app`` as OpenEnv lays packages out), served by this process."""
    with _served_lock:
        app = _installed_app(ref)
        if id(app) in _served:  # the same app by another name: served once
            return _served[id(app)][1]
        import uvicorn

        from verihub.serve.gate import Gate
        from verihub.serve.listen import tcp_listener

        listener = tcp_listener("127.0.0.1", 0)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        # behind verihub serve's guard for a server without a token: a web page the user visits cannot
        # drive it (no DNS-rebound Host, no foreign Origin); this process's client sends neither
        server = uvicorn.Server(uvicorn.Config(Gate(app, token=None), log_level="warning"))
        threading.Thread(target=server.run, kwargs={"sockets": [listener]}, name=f"openenv:{ref}", daemon=True).start()
        deadline = time.monotonic() + 30
        while not server.started:
            if time.monotonic() > deadline:
                raise RemoteEnvError(f"the installed OpenEnv environment {ref} did not start serving within 30s")
            time.sleep(0.02)
        _served[id(app)] = (app, url)
        return url


def _installed_app(ref: str) -> Any:
    import importlib

    module, _, attribute = ref.partition(":")
    candidates = [(module, attribute)] if attribute else [(module, "app"), (module + ".server.app", "app")]
    for name, attr in candidates:
        try:
            found = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name is not None and name.startswith(error.name):
                continue  # not this layout; a missing dependency of the package is raised as it is
            raise
        app = getattr(found, attr, None)
        if callable(app):
            return app
    looked = " or ".join(f"{name}:{attr}" for name, attr in candidates)
    raise RemoteEnvError(
        f"no installed OpenEnv environment {ref!r} (no app at {looked}); pip install the "
        "environment's package, or give its server's URL (openenv:http://HOST:PORT)"
    )


def prompt_text(observation: Mapping[str, Any]) -> str:
    """An observation as the model reads it: its only string field, else its JSON (without metadata)."""
    fields = {key: value for key, value in observation.items() if key != "metadata"}
    texts = [value for value in fields.values() if isinstance(value, str)]
    if len(texts) == 1 and all(value is None or isinstance(value, str) for value in fields.values()):
        return texts[0]
    return json.dumps(fields, sort_keys=True, ensure_ascii=False)


# -- the task source and the check --------------------------------------------------------------------------


class Remote(CheckParams):
    """Where the remote is and how to talk to it (also the task generator's arguments)."""

    url: str
    action_field: str
    action_kind: Literal["text", "json"] = "text"
    timeout_s: float = Field(30.0, gt=0, le=600)
    max_reply_bytes: int = Field(MAX_REPLY_BYTES, ge=1024, le=64 << 20)
    reward_range: tuple[float, float] = (0.0, 1.0)
    action_schema: dict[str, Any] = Field(default_factory=dict, description="The action's JSON schema (/schema).")

    def columns(self) -> set[str]:
        return {"reset", "prompt"}

    def tool_parameters(self) -> dict[str, Any]:
        """The action's schema as a tool's parameters: its fields but ``metadata`` (OpenEnv's own)."""
        schema = self.action_schema
        fields = {name: value for name, value in (schema.get("properties") or {}).items() if name != "metadata"}
        required = [name for name in schema.get("required") or [] if name in fields]
        parameters = {"type": "object", "properties": fields, "required": required}
        if "$defs" in schema:
            parameters["$defs"] = schema["$defs"]
        return parameters

    def legal_plays(self, task: Mapping[str, Any]) -> list[str]:
        """Moves the remote itself calls legal at ``task``'s start, which ``verihub validate`` grades: none by
        default (a game that lists its moves in its observation has them read from there)."""
        return []

    def session(self) -> RemoteSession:
        return RemoteSession(
            self.url, timeout_s=self.timeout_s, max_reply_bytes=self.max_reply_bytes, reward_range=self.reward_range
        )

    def action(self, completion: str) -> dict[str, Any]:
        """The action a completion stands for; ValueError if it is none."""
        if self.action_kind == "text":
            return {self.action_field: completion}
        try:
            return {self.action_field: json.loads(completion)}
        except (ValueError, RecursionError) as error:
            raise DataError(f"the completion is not a JSON value for action field {self.action_field!r}") from error


async def start(remote: Remote, options: Mapping[str, Any]) -> tuple[RemoteSession, dict[str, Any]]:
    """A new session reset with ``options``, and the observation. A server at capacity (OpenEnv servers
    hold one session unless told otherwise) is asked again, backing off, until ``timeout_s`` has passed."""
    deadline = time.monotonic() + remote.timeout_s
    delay = 0.05
    while True:
        session = await remote.session().__aenter__()
        try:
            observation, _, _ = await session.reset(**options)
            return session, observation
        except RemoteEnvError as error:
            await session.close()
            if error.code != "CAPACITY_REACHED" or time.monotonic() + delay > deadline:
                raise
        except BaseException:
            await session.close()
            raise
        await asyncio.sleep(delay * (0.5 + random.random()))  # noqa: S311 - jitter, not a secret
        delay = min(1.0, 2 * delay)


async def pose(remote: Remote, task: Mapping[str, Any]) -> RemoteSession:
    """A session in ``task``'s episode, its prompt checked against the one the task was posed with."""
    options = json.loads(str(task["reset"]))
    session, observation = await start(remote, options)
    if prompt_text(observation) != task["prompt"]:
        await session.close()
        raise RemoteEnvError(f"{remote.url}: reset({_shown(options)}) no longer gives this task's prompt")
    return session


def _shown(options: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in options.items())


def tasks(n: int, seed: int, splits: list[tuple[str, int]] | None = None, **remote: Any) -> list[dict[str, Any]]:
    """The tasks (a dataset generator): with the remote's ``splits`` (its task API), the first ``n`` of each,
    posed by ``reset(split=, index=)``; else ``n`` episodes posed by ``reset(seed=seed + i)``."""
    params = Remote(**remote)
    if splits is None:
        return episodes(params, n, seed, "openenv-" + hashlib.sha256(f"{params.url}/{seed}".encode()).hexdigest()[:8])
    return _posed(
        params,
        [
            ({"split": name, "index": index}, f"{name}-{index:05d}", name)
            for name, count in splits
            for index in range(min(n, count))
        ],
    )


def episodes(
    remote: Remote, n: int, seed: int, prefix: str, reset: Callable[[int], dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """``n`` tasks, the episodes ``reset(seed=seed + i)`` starts (or ``reset(**reset(i))``), with ids
    ``PREFIX-00000`` on."""
    options = reset or (lambda index: {"seed": seed + index})
    return _posed(remote, [(options(i), f"{prefix}-{i:05d}", "") for i in range(n)])


def _posed(params: Remote, wanted: list[tuple[dict[str, Any], str, str]]) -> list[dict[str, Any]]:
    """The task rows for (reset options, id, the remote's split), checking that the remote reproduces one."""

    async def collect() -> list[dict[str, Any]]:
        rows = []
        session, _ = await start(params, wanted[0][0])
        async with session:
            for options, task_id, split in wanted:
                observation, _, _ = await session.reset(**options)
                rows.append(
                    {
                        "id": task_id,
                        "reset": json.dumps(options),
                        "prompt": prompt_text(observation),
                        "remote_split": split,
                    }
                )
            again, _, _ = await session.reset(**wanted[0][0])
        if prompt_text(again) != rows[0]["prompt"]:
            raise RemoteEnvError(
                f"{params.url} does not reproduce an episode (reset({_shown(wanted[0][0])}) gave two "
                "different observations), so verihub cannot pose a task and grade it later"
            )
        return rows

    if not wanted:
        raise RemoteEnvError(f"{params.url} lists no tasks")
    return run_sync(collect())


async def first_step(
    params: Remote, task: Mapping[str, Any], completion: str
) -> CheckResult | tuple[float | None, bool]:
    """The remote's (reward, done) for the completion as the first action of the task's episode; a
    completion that is no action, or one the remote refuses, is malformed (its CheckResult)."""
    try:
        action = params.action(completion)
    except ValueError as error:
        return CheckResult.malformed(str(error))
    async with await pose(params, task) as session:
        try:
            _, reward, done = await session.step(action)
        except ActionRefusedError as error:
            return CheckResult.malformed(f"the remote refused the action: {error}"[:300])
    return reward, done


@check(params=Remote, mode="async")
async def remote_step(completion: str, task: Mapping[str, Any], params: Remote) -> CheckResult:
    """The remote's reward for the completion as the action of the task's episode."""
    stepped = await first_step(params, task, completion)
    if isinstance(stepped, CheckResult):
        return stepped
    reward, done = stepped
    if reward is None and not done:
        raise RemoteEnvError(
            f"{params.url}: the episode goes on after the answer, with no reward yet (a multi-turn "
            "environment: load it with max_turns=N, or drive it turn by turn with env.episode(task))"
        )
    if reward is None:
        raise RemoteEnvError(f"{params.url} gave no reward for the step")
    return CheckResult(reward, "" if reward >= 1.0 else f"remote reward {reward:g}")


# -- the environment ----------------------------------------------------------------------------------------


def _task_splits(url: str, timeout_s: float, limit: int) -> tuple[list[tuple[str, int]], str] | None:
    """The remote's task API, when it has one: each split with its number of tasks, and the split to
    evaluate on (its first ``validation`` or ``test`` split, else its first)."""
    names = fetch(url, "/list_environments", timeout_s, limit)
    if not (isinstance(names, list) and len(names) == 1 and isinstance(names[0], str)):
        return None
    base = "/" + quote(names[0], safe="")
    listed = fetch(url, base + "/splits", timeout_s, limit)
    if not isinstance(listed, list) or not listed:
        return None
    if len(listed) > MAX_SPLITS:  # each costs a request, and its tasks a reset each
        raise RemoteEnvError(f"{url}{base}/splits lists {len(listed)} splits; verihub loads at most {MAX_SPLITS}")
    splits, kinds = [], {}
    for entry in listed:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not re.fullmatch(r"[\w.-]{1,64}", name):
            raise RemoteEnvError(
                f"{url}{base}/splits lists a split that is not {{name: a short word}}: {str(entry)[:80]}"
            )
        count = fetch(url, base + "/num_tasks", timeout_s, limit, {"split": name})
        count = count.get("num_tasks") if isinstance(count, dict) else None
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise RemoteEnvError(f"{url}{base}/num_tasks gave no task count for split {name!r}")
        splits.append((name, count))
        kinds[name] = entry.get("type")
    evaluate = next((name for name, _ in splits if kinds[name] in ("validation", "test")), splits[0][0])
    return splits, evaluate


def _action_schema(url: str, schema: Any) -> dict[str, Any]:
    action = schema.get("action") if isinstance(schema, dict) else None
    if not isinstance(action, dict) or not isinstance(action.get("properties"), dict):
        raise RemoteEnvError(f"{url}/schema holds no action schema with properties")
    return action


def _action_field(url: str, action: dict[str, Any], wanted: str | None) -> tuple[str, Literal["text", "json"]]:
    properties = action["properties"]
    fields = {name: value for name, value in properties.items() if name != "metadata" and isinstance(value, dict)}
    if wanted is None:
        listed = action.get("required")
        required = [name for name in listed if name in fields] if isinstance(listed, list) else []
        choices = required if len(required) == 1 else list(fields)
        if len(choices) != 1:
            raise SpecError(
                [
                    SpecProblem(
                        PREFIX + url,
                        None,
                        "action_field",
                        "the action has fields "
                        f"{', '.join(fields) or '(none)'}; name the one the completion fills: "
                        "load_env(..., action_field=NAME)",
                    )
                ]
            )
        wanted = choices[0]
    if wanted not in fields:
        raise SpecError(
            [
                SpecProblem(
                    PREFIX + url,
                    None,
                    "action_field",
                    f"the action has no field {wanted!r}; fields: {', '.join(fields)}",
                )
            ]
        )
    return wanted, "text" if fields[wanted].get("type") == "string" else "json"


OPTIONS = ("size", "seed", "action_field", "timeout_s", "max_reply_bytes", "reward_range", "max_turns")


def openenv_spec(ref: str, **given: Any) -> tuple[Any, Remote]:
    """The :class:`~verihub.spec.loader.LoadedSpec` of ``openenv:URL`` (see the module docstring) and how to
    reach the remote. Options in the ref's query string come first; keyword arguments override them."""
    url, options = parse_ref(ref)
    merged = {**options, **{key: value for key, value in given.items() if value is not None}}
    if unknown := sorted(set(merged) - set(OPTIONS)):
        raise TypeError(f"openenv: environments take no {', '.join(unknown)} (options: {', '.join(OPTIONS)})")
    return _spec(ref, url, **merged)


def _spec(
    ref: str,
    url: str,
    *,
    size: int | None = None,
    seed: int | None = None,
    action_field: str | None = None,
    timeout_s: float = 30.0,
    max_reply_bytes: int = MAX_REPLY_BYTES,
    reward_range: tuple[float, float] | list[float] = (0.0, 1.0),
    max_turns: int = 1,
) -> tuple[Any, Remote]:
    from verihub.spec.lines import LineMap
    from verihub.spec.loader import LoadedSpec
    from verihub.spec.models import EnvSpec

    size, seed = DEFAULT_SIZE if size is None else size, 0 if seed is None else seed

    def number(value: Any, integer: bool = False) -> bool:
        kinds = int if integer else int | float
        return isinstance(value, kinds) and not isinstance(value, bool) and math.isfinite(value)

    pair = list(reward_range) if isinstance(reward_range, list | tuple) else []
    rules = {
        "size": (
            number(size, True) and size >= MIN_SIZE,
            f"must be an integer of at least {MIN_SIZE} (the train and eval splits each need a task)",
            size,
        ),
        "seed": (number(seed, True) and seed >= 0, "must be a non-negative integer", seed),
        "reward_range": (
            len(pair) == 2 and all(map(number, pair)) and pair[0] < pair[1],
            "must be two finite numbers, low < high",
            reward_range,
        ),
        "timeout_s": (number(timeout_s) and 0 < timeout_s <= 600, "must be a number of seconds in (0, 600]", timeout_s),
        "max_reply_bytes": (
            number(max_reply_bytes, True) and 1024 <= max_reply_bytes <= 64 << 20,
            f"must be an integer in [1024, {64 << 20}]",
            max_reply_bytes,
        ),
        "max_turns": (
            number(max_turns, True) and 1 <= max_turns <= 1000,
            "must be an integer in [1, 1000] (the model's turns in an episode; 1: single-turn)",
            max_turns,
        ),
    }
    problems = [
        SpecProblem(ref, None, name, f"{rule}, got {value!r}") for name, (ok, rule, value) in rules.items() if not ok
    ]
    if problems:
        raise SpecError(problems)
    limit = min(max_reply_bytes, MAX_REPLY_BYTES)
    action = _action_schema(url, fetch(url, "/schema", timeout_s, limit))
    field, kind = _action_field(url, action, action_field)
    metadata = fetch(url, "/metadata", timeout_s, limit) or {}
    catalog = _task_splits(url, timeout_s, limit)
    name = str(metadata.get("name") or "remote") if isinstance(metadata, dict) else "remote"
    slug = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._")[:60] or "remote"
    version = str(metadata.get("version") or "") if isinstance(metadata, dict) else ""
    version = version if re.fullmatch(r"\d{1,9}\.\d{1,9}\.\d{1,9}", version) else "0.0.0"
    remote = {
        "url": url,
        "action_field": field,
        "action_kind": kind,
        "timeout_s": timeout_s,
        "max_reply_bytes": max_reply_bytes,
        "reward_range": list(reward_range),
        "action_schema": action,
    }
    spec = EnvSpec.model_validate(
        {
            "id": "openenv-" + slug,
            "version": version,  # what the remote says; verihub cannot pin what it serves
            "domain": "openenv",
            "description": f"The OpenEnv environment {name[:80]} at {url}.",
            "tags": ["openenv"],
            "dataset": {
                "source": f"{__name__}:tasks",
                "size": size,
                "seed": seed,
                "args": remote if catalog is None else {**remote, "splits": catalog[0]},
                "split": SPLIT if catalog is None else {_ALL: 1.0},
            },
            "eval": {} if catalog is None else {"split": catalog[1]},
            "prompt": {"user": "{prompt}"},
            "interaction": {"kind": "multi_turn", "max_turns": max_turns} if max_turns > 1 else {},
            "verifier": [
                {
                    "name": "remote",
                    "layer": "check",
                    "use": f"{__name__}:remote_step",
                    "args": remote,
                    "timeout_s": 3 * timeout_s + 5,
                }
            ],
            # a remote ships no oracle answers: the prompt is only what validate sends, never evidence
            "gold": {"reference": "{prompt}", "reference_is": "placeholder", "min_pass_rate": 0.0},
        }
    )
    loaded = LoadedSpec(spec, Path(PREFIX + url.replace("://", "/")) / "environment.yaml", LineMap())
    return loaded, Remote(**remote)


class OpenEnvEnvironment(Environment):
    """An :class:`~verihub.Environment` whose tasks and rewards come from an OpenEnv server.

    Loaded with ``max_turns`` > 1, :meth:`session` plays a task's remote episode turn by turn through a
    tool (what ``verihub eval`` drives); :meth:`episode` drives one by hand."""

    def __init__(self, loaded: Any, remote: Remote, **options: Any) -> None:
        super().__init__(loaded, **options)
        self.remote = remote
        if list(self._splits) == [_ALL]:  # the remote's task API: its splits, as it names them
            rows = self._splits[_ALL]
            names = list(dict.fromkeys(rows["remote_split"]))
            column = rows["remote_split"]
            self._splits = {name: rows.select([i for i, split in enumerate(column) if split == name]) for name in names}

    @property
    def graded_remotely(self) -> bool:
        return True

    @property
    def prompts_identify_tasks(self) -> bool:
        return "splits" in self.spec.dataset.args  # the remote's task API; not its episodes from seeds

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """A multi-turn remote's one tool, :data:`~verihub.adapters._openenv_session.TOOL`: its action."""
        if self.spec.interaction.kind != "multi_turn":
            return []
        from verihub.adapters._openenv_session import action_tool

        return [action_tool(self.remote.tool_parameters())]

    def session(self, task: Mapping[str, Any], *, sandbox: Any = None) -> Session:
        """A multi-turn remote's episode as a :class:`~verihub.environment.session.Session` (its tool calls are the
        remote's steps); a single-turn remote's, the one-step session graded by the verifier."""
        if self.spec.interaction.kind != "multi_turn":
            return super().session(task, sandbox=sandbox)
        from verihub.adapters._openenv_session import OpenEnvSession

        return OpenEnvSession(self, task)

    def episode(self, task: Mapping[str, Any]) -> TaskSession:
        """The task's remote episode, turn by turn, for a multi-turn remote."""
        return TaskSession(self.remote, task)

    def legal_plays(self, task: Mapping[str, Any]) -> list[str]:
        """The remote's legal first moves at ``task`` (:class:`~verihub.validation.play.LegalPlays`)."""
        return self.remote.legal_plays(task)


class TaskSession(OwnLoop):
    """One task's remote episode: ``reset() -> observation``, ``step(action) -> (observation, reward | None,
    done, info)``, ``close()``; async as ``areset``/``astep``/``aclose``, sync otherwise.

    A fault ends the episode: ``reward`` None, ``done`` True, ``info`` ``{"status": "env_error", "reason"}``;
    an action the remote refuses scores 0 and ends it (``info["status"]`` ``"wrong"``)."""

    def __init__(self, remote: Remote, task: Mapping[str, Any]) -> None:
        self.remote, self.task = remote, task
        self._session: RemoteSession | None = None

    async def areset(self) -> str:
        await self.aclose()
        self._session = await pose(self.remote, self.task)
        return str(self.task["prompt"])

    async def astep(self, action: str) -> tuple[str, float | None, bool, dict[str, Any]]:
        if self._session is None:
            return "", None, True, {"status": "env_error", "reason": "step before reset (or after the episode ended)"}
        try:
            observation, reward, done = await self._session.step(self.remote.action(action))
        except (ValueError, ActionRefusedError) as error:
            await self.aclose()
            return "", 0.0, True, {"status": "wrong", "reason": str(error)[:300]}
        except RemoteEnvError as error:
            await self.aclose()
            return "", None, True, {"status": "env_error", "reason": str(error)}
        if done:
            await self.aclose()
            if reward is None:
                reason = "the episode ended without a reward"
                return prompt_text(observation), None, True, {"status": "env_error", "reason": reason}
        return prompt_text(observation), reward, done, {}

    async def astate(self) -> dict[str, Any]:
        if self._session is None:
            raise RemoteEnvError("no episode is running")
        return await self._session.state()

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def __aenter__(self) -> TaskSession:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    def __enter__(self) -> TaskSession:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def reset(self) -> str:
        return self._sync(self.areset())

    def step(self, action: str) -> tuple[str, float | None, bool, dict[str, Any]]:
        return self._sync(self.astep(action))

    def state(self) -> dict[str, Any]:
        return self._sync(self.astate())

    def close(self) -> None:
        if self._loop is not None:
            self._sync(self.aclose())
            self._stop_loop()


def load_openenv(
    ref: str,
    *,
    size: int | None = None,
    seed: int | None = None,
    config: Mapping[str, Any] | None = None,
    **options: Any,
) -> OpenEnvEnvironment:
    """``verihub.load_env("openenv:...")``: ``options`` (or ``config``) are :func:`openenv_spec`'s keywords;
    the others (``judge``, ``on_missing_judge``) go to the environment."""
    env_options = {key: options.pop(key) for key in ("judge", "on_missing_judge") if key in options}
    loaded, remote = openenv_spec(ref, size=size, seed=seed, **{**dict(config or {}), **options})
    try:
        return OpenEnvEnvironment(loaded, remote, **env_options)
    except SpecError as error:  # the task source's remote failure, said plainly
        cause = error.__cause__
        if isinstance(cause, RemoteEnvError):
            raise cause from None
        raise
