"""GEM's environments (``gem-llm`` 0.1.0, the General Experience Maker) as verihub environments.

>>> env = verihub.load_env("gem:game:GuessTheNumber-v0-easy", size=50, seed=0)  # doctest: +SKIP
>>> env = verihub.load_env("gem:game:Sudoku-v0-easy?max_turns=30")  # options in the ref: the CLI's way

GEM pins packages verihub's lock cannot share (reasoning-gym 0.1.23, nltk 3.9.1), so its games run in an
interpreter of their own (``VERIHUB_GEM_PYTHON``, or this one when it has GEM; ``scripts/setup.sh --gem``
makes ``.venv-gem``): one bridge process per interpreter (:mod:`verihub.adapters.bridges.gem_side`) holds the
episodes. An episode plays as an OpenEnv remote's does (:mod:`verihub.adapters._local`), so tasks, sessions,
grading and their faults follow the same rules:

- **tasks**: task ``i`` is the environment reset with ``seed + i`` (``size`` tasks, default 100, split 0.8/0.2
  into ``train`` and ``eval``); its prompt is GEM's first observation. Loading checks that the environment
  reproduces its start from the seed.
- **turns**: each of the model's turns is its action, as text (GEM reads what it wants, such as
  ``\\boxed{5}``, from it); the observation and GEM's prompt for the next action come back, as the next user
  turn or the output of the one tool, ``act``. ``max_turns`` (default 20) bounds an episode; one GEM has not
  ended by then scores 0.
- **legal play**: ``verihub validate`` grades moves GEM's own ``sample_random_action`` draws at a task's start;
  one that faults fails validation (:mod:`verihub.validation.play`).
- **the grade** is the episode's return, taken when it ends: GEM's games pay progress a step at a time
  (Mastermind half a point a peg), so the step rewards are summed, then rescaled from ``reward_range``
  (default ``[0, 1]``); penalties (-0.1 for an invalid action) that take it below the range are a loss.

GEM raising, its bridge dying, or a call past ``timeout_s`` is a fault with its reason, never a 0. Whose fault
follows verihub's one rule (:mod:`verihub.grading.faults`): a game has no gold move, so the evidence is another
move graded on the task without a fault. Episodes share the bridge, one call at a time; the rule's evidence
plays on a bridge process of its own (:func:`~verihub.adapters._bridge.bridge_pool`), so an action that stalls
the shared bridge stalls no other answer's evidence.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from verihub import settings
from verihub.adapters._bridge import BridgeProcess, bridge_pool
from verihub.adapters._local import ACTION_SCHEMA, FIELD, LocalSession, Move, first_move, load_local, local_spec
from verihub.adapters._openenv_wire import RemoteEnvError, RemoteSession
from verihub.adapters.openenv import OpenEnvEnvironment, Remote, episodes
from verihub.checks.base import CheckResult, check
from verihub.errors import GraderInfraError, SpecProblem
from verihub.grading._apart import apart
from verihub.grading._pools import START_S, Pool

__all__ = ["PREFIX", "GemEnv", "GemSession", "load_gem"]

PREFIX = "gem:"
OPTIONS = ("size", "seed", "max_turns", "reward_range", "timeout_s", "python")
DEFAULT_SIZE, DEFAULT_TURNS = 100, 20
LEGAL_MOVES = 4  # drawn per task for validate's legal play
_ENV_ID = re.compile(r"[A-Za-z0-9][\w.:-]{0,100}")
_BRIDGES: dict[str, BridgeProcess] = {}
_APART: dict[str, Pool[BridgeProcess]] = {}  # bridges of the fault rule's evidence, by interpreter: one episode each
_BRIDGES_LOCK = threading.Lock()


class GemEnv(Remote):
    """Which GEM environment, in which interpreter (the task source's and the check's arguments)."""

    python: str = Field(description="The interpreter that has GEM.")

    def session(self) -> RemoteSession:
        return GemSession(self)

    def legal_plays(self, task: Mapping[str, Any]) -> list[str]:
        """First moves GEM's own ``sample_random_action`` draws at the task's start (none where it has none)."""
        process = bridge(self.python, self.timeout_s)
        seed = json.loads(str(task["reset"])).get("seed")
        with process.held():
            answer = process.ask({"op": "legal", "env": self.url.removeprefix(PREFIX), "seed": seed, "n": LEGAL_MOVES})
        return [str(move) for move in answer["moves"]]


def bridge(python: str, timeout_s: float) -> BridgeProcess:
    """The bridge process to GEM in ``python`` (one per interpreter and process)."""
    with _BRIDGES_LOCK:
        if python not in _BRIDGES:
            _BRIDGES[python] = _new_bridge(python, timeout_s)
        return _BRIDGES[python]


def apart_bridges(python: str, timeout_s: float) -> Pool[BridgeProcess]:
    """The bridge processes to GEM in ``python`` that play the fault rule's evidence, an episode each."""
    with _BRIDGES_LOCK:
        if python not in _APART:
            _APART[python] = bridge_pool(lambda: _new_bridge(python, timeout_s), f"GEM in {python}")
        return _APART[python]


def _new_bridge(python: str, timeout_s: float) -> BridgeProcess:
    # GEM's import is the far side's first request, before any episode's time
    return BridgeProcess(python, "gem_side.py", what="GEM", timeout_s=timeout_s, error=RemoteEnvError, ready=_ready)


def _ready(process: BridgeProcess) -> None:
    process.ask({"op": "ready"}, START_S)


class GemSession(LocalSession):
    """One episode, held by the bridge process."""

    def __init__(self, env: GemEnv) -> None:
        super().__init__(env.url, env.timeout_s, env.reward_range)
        self.python = env.python
        self.bridge = bridge(env.python, env.timeout_s)
        self.own: BridgeProcess | None = None  # the fault rule's evidence plays on a bridge of its own
        self.episode: str | None = None
        self.earned = 0.0  # the episode's rewards so far

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.own is not None:
            return self.own.ask(request)
        with self.bridge.held():
            return self.bridge.ask(request)

    def _playing(self) -> bool:
        """Whether the bridge that holds this episode still runs (a bridge that died took it with it)."""
        return (self.own or self.bridge).alive

    def start(self, options: Mapping[str, Any]) -> str:
        self.stop()
        if apart():
            self.own = apart_bridges(self.python, self.timeout_s).take()
        answer = self._ask({"op": "reset", "env": self.url.removeprefix(PREFIX), "seed": options.get("seed")})
        self.episode, self.earned = str(answer["episode"]), 0.0
        return str(answer["observation"])

    def move(self, text: str) -> Move:
        answer = self._ask({"op": "step", "episode": self.episode, "action": text})
        self.earned += float(answer["reward"])
        if not answer["done"]:
            return str(answer["observation"]), None, False
        self.episode = None  # the bridge dropped it
        return str(answer["observation"]), max(self.earned, self.reward_range[0]), True  # a penalty's net: a loss

    def stop(self) -> None:
        if self.episode is not None:
            episode, self.episode = self.episode, None
            try:
                if self._playing():  # (never a bridge started again just to close what it never held)
                    self._ask({"op": "close", "episode": episode})
            except (RemoteEnvError, GraderInfraError):
                pass  # a dead bridge took its episodes with it
        own, self.own = self.own, None
        if own is not None:
            apart_bridges(self.python, self.timeout_s).give_back(own)


def gem_spec(
    ref: str,
    *,
    size: int | None = None,
    seed: int | None = None,
    max_turns: int | None = None,
    reward_range: tuple[float, float] | list[float] | None = None,
    timeout_s: float = 30.0,
    python: str | None = None,
) -> tuple[Any, GemEnv]:
    """The :class:`~verihub.spec.loader.LoadedSpec` of ``gem:ENV`` (see the module docstring)."""
    env_id = ref.removeprefix(PREFIX).strip()
    problems, version = [], "0.0.0"
    env = GemEnv(
        url=PREFIX + env_id,
        action_field=FIELD,
        timeout_s=timeout_s,
        action_schema=ACTION_SCHEMA,
        reward_range=tuple(reward_range or (0.0, 1.0)),
        python=python or settings.gem_python(),
    )
    if not _ENV_ID.fullmatch(env_id):
        problems.append(
            SpecProblem(
                ref, None, "env", f"must name a GEM environment, like game:GuessTheNumber-v0-easy, got {env_id!r}"
            )
        )
    else:
        with bridge(env.python, timeout_s).held() as shared:
            described = shared.ask({"op": "describe", "env": env_id})
        version = str(described["version"])
        if not described["registered"]:
            problems.append(SpecProblem(ref, None, "env", f"GEM registers no environment {env_id!r}"))
    slug = re.sub(r"[^a-z0-9._-]+", "-", env_id.lower()).strip("-._")
    loaded = local_spec(
        env,
        ref=ref,
        env_id="gem-" + slug,
        version=version if re.fullmatch(r"\d+\.\d+\.\d+", version) else "0.0.0",
        domain="games",
        description=f"GEM's environment {env_id}.",
        tags=["gem", "game"],
        size=DEFAULT_SIZE if size is None else size,
        seed=seed or 0,
        max_turns=max_turns or DEFAULT_TURNS,
        source=f"{__name__}:tasks",
        check=f"{__name__}:gem_move",
        problems=problems,
    )
    return loaded, env


def tasks(n: int, seed: int, **env: Any) -> list[dict[str, Any]]:
    """``n`` episodes, reset with seeds ``seed`` .. ``seed + n - 1`` (the dataset generator)."""
    return episodes(GemEnv(**env), n, seed, "gem-" + re.sub(r"[^\w.-]+", "-", env["url"].removeprefix(PREFIX)))


@check(params=GemEnv, mode="async")
async def gem_move(completion: str, task: Mapping[str, Any], params: GemEnv) -> CheckResult:
    """GEM's reward with the completion as the first action; 0 if the episode goes on."""
    return await first_move(params, task, completion)


def load_gem(
    ref: str,
    *,
    size: int | None = None,
    seed: int | None = None,
    config: Mapping[str, Any] | None = None,
    **options: Any,
) -> OpenEnvEnvironment:
    """``verihub.load_env("gem:ENV")``: ``options`` (or ``config``) are :func:`gem_spec`'s keywords; ``judge``
    and ``on_missing_judge`` go to the environment."""
    return load_local(ref, gem_spec, OPTIONS, size=size, seed=seed, config=config, options=options)
