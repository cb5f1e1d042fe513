"""Multi-turn legacy ``verifiers`` environments (a ``vf.MultiTurnEnv``), played turn by turn as an OpenEnv
remote's episodes are (:mod:`verihub.adapters._local`), so eval, serve and training drive them like any other.

The far side keeps each episode (:mod:`verihub.adapters.bridges._verifiers_legacy_play`): the environment's own
rollout of a row, whose every call to the model waits for the answer's next move. A task is a row: its prompt
is what the rollout first sends the model (the row's system prompt and user message). Each move is the
assistant message; what ``env_response`` adds is the next observation; the rollout ending (``is_completed``,
its stop conditions, ``max_turns``) ends the episode, and the rubric scores its final state as
:func:`~verihub.adapters._verifiers_legacy.graded` scores a single reply: the weighted sum rescaled, and a paid
function's fault, an ``env_response`` or ``setup_state`` that raises, or a rollout that ends on an error is a
fault with its reason (``env_error``), never a 0 (but a ``vf.ModelError``, an empty reply, is the reply's: the
rubric scores the episode as it stands). Whose fault follows verihub's one rule, as for a game: the
evidence is another move the episode took without a fault. ``vf.ToolEnv`` and environments that need a remote
service are refused at load, with the reason (the far side's ``_load``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from verihub.adapters._bridge import BridgeProcess
from verihub.adapters._local import ACTION_SCHEMA, FIELD, LocalSession, Move, first_move, local_spec
from verihub.adapters._openenv_wire import RemoteEnvError, RemoteSession
from verihub.adapters._verifiers_legacy import LegacyBridge, LegacyRef, graded
from verihub.adapters.openenv import Remote, episodes
from verihub.checks.base import CheckResult, check
from verihub.errors import GraderInfraError, VerifiersError
from verihub.grading._apart import apart

__all__ = ["LegacyEpisodes", "LegacySession", "turns_spec"]

DEFAULT_TURNS = 20  # an environment that sets no max_turns of its own


class LegacyEpisodes(Remote):
    """A multi-turn legacy environment's episodes (the task source's and the check's arguments)."""

    ref: LegacyRef

    def session(self) -> RemoteSession:
        return LegacySession(self)


class LegacySession(LocalSession):
    """One episode, held by the environment's bridge (the fault rule's evidence: by one of its own)."""

    def __init__(self, remote: LegacyEpisodes) -> None:
        super().__init__(remote.url, remote.timeout_s, remote.reward_range)
        self.ref = remote.ref
        self.bridge = LegacyBridge.of(remote.ref)
        self.own: BridgeProcess | None = None
        self.episode: str | None = None

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.own is not None:
            return self.own.ask(request)
        with self.bridge.process.held():
            return self.bridge.process.ask(request)

    def start(self, options: Mapping[str, Any]) -> str:
        self.stop()
        self.bridge.tasks()  # loaded (a bridge that fails to is the grader's failure, said as such)
        if apart():
            self.own = self.bridge.apart.take()
        answer = self._ask({"op": "reset", "index": int(options["index"])})
        self.episode = str(answer["episode"])
        if answer["done"]:  # ended before the model's first turn: nothing to play
            raise RemoteEnvError(f"{self.url}: the rollout ended before the model's first turn")
        return str(answer["observation"])

    def move(self, text: str) -> Move:
        answer = self._ask({"op": "step", "episode": self.episode, "action": text})
        if not answer["done"]:
            return str(answer["observation"]), None, False
        self.episode = None  # the far side dropped it
        result = graded(self.ref, self.bridge.loaded["rewards"], answer)
        return result.detail, result.score, True

    def stop(self) -> None:
        if self.episode is not None:
            episode, self.episode = self.episode, None
            try:
                if (self.own or self.bridge.process).alive:  # a dead bridge took its episodes with it
                    self._ask({"op": "close", "episode": episode})
            except (VerifiersError, GraderInfraError):
                pass
        own, self.own = self.own, None
        if own is not None:
            self.bridge.apart.give_back(own)


def turns_spec(ref: str, legacy: LegacyRef, loaded: dict[str, Any], seed: int | None) -> tuple[Any, LegacyEpisodes]:
    """The spec of a loaded multi-turn legacy environment: its rows as episodes, the rubric at each one's end."""
    from verihub.adapters.verifiers import PREFIX

    remote = LegacyEpisodes(
        url=PREFIX + legacy.taskset,
        action_field=FIELD,
        action_schema=ACTION_SCHEMA,
        timeout_s=min(legacy.timeout_s, 600.0),
        ref=legacy,
    )
    turns = int(loaded["max_turns"])
    version = loaded["versions"].get(legacy.taskset.split(".")[0], "0.0.0")
    spec = local_spec(
        remote,
        ref=ref,
        env_id="verifiers-" + re.sub(r"[^a-z0-9._-]+", "-", legacy.taskset.lower()),
        version=version if re.fullmatch(r"\d{1,9}\.\d{1,9}\.\d{1,9}", version) else "0.0.0",
        domain="verifiers",
        description=f"The verifiers environment {legacy.taskset} (verifiers {loaded['versions']['verifiers']}), "
        "multi-turn.",
        tags=["verifiers", "multi-turn"],
        size=len(loaded["tasks"]),
        seed=seed or 0,
        max_turns=turns if turns > 0 else DEFAULT_TURNS,
        source=f"{__name__}:tasks",
        check=f"{__name__}:episode_move",
        problems=[],
    )
    return spec, remote


def tasks(n: int, seed: int, **remote: Any) -> list[dict[str, Any]]:
    """The environment's first ``n`` rows, each the episode ``reset(index=i)`` starts (the dataset generator)."""
    params = LegacyEpisodes(**remote)
    return episodes(params, n, seed, "row", reset=lambda index: {"index": index})


@check(params=LegacyEpisodes, mode="async")
async def episode_move(completion: str, task: Mapping[str, Any], params: LegacyEpisodes) -> CheckResult:
    """The rubric's score with the completion as the first move, if the episode ends there; 0 if it goes on."""
    return await first_move(params, task, completion)
