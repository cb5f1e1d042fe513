"""Episodes of a legacy ``vf.MultiTurnEnv``, for :mod:`verifiers_legacy_side`: each is the environment's own
``rollout`` (its ``setup_state``, ``is_completed`` or stop conditions, ``env_response``, ``max_turns``, in the
form of the pinned verifiers), run on this process's event loop with a model client whose every call waits for
the answer's next move. So nothing of the turn loop is rewritten here: a call to the model is a turn (what it
was sent since the last assistant message is what the answer is shown), and the rollout returning is the end.

An episode is a random id; its rollout lives on one event loop on a thread of its own, and a request of the
bridge (on the main thread) waits for the episode's next event: the model asked again, the rollout over (its
final state, for the rubric), or the rollout raised.
"""

from __future__ import annotations

import asyncio
import inspect
import secrets
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

_LOOP: list[asyncio.AbstractEventLoop] = []  # made at the first episode
_MODEL = "verihub"


def loop() -> asyncio.AbstractEventLoop:
    if not _LOOP:
        made = asyncio.new_event_loop()
        threading.Thread(target=made.run_forever, daemon=True).start()
        _LOOP.append(made)
    return _LOOP[0]


def call(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """``coroutine``'s result, run on the episodes' loop (the bridge's near side bounds the wait)."""
    return asyncio.run_coroutine_threadsafe(coroutine, loop()).result()


class Episode:
    """One rollout: ``moves`` in, events out (``("ask", TEXT)``, ``("done", STATE)``, ``("raised", ERROR)``)."""

    def __init__(self, env: Any, row: dict[str, Any]) -> None:
        self.env, self.row = env, row
        self.moves: asyncio.Queue[str] = asyncio.Queue()
        self.events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.task: asyncio.Task[Any] | None = None

    async def begin(self, rollout: Callable[[Episode], Awaitable[Any]]) -> None:
        async def run() -> None:
            try:
                await self.events.put(("done", await rollout(self)))
            except Exception as error:  # noqa: BLE001 - the environment's own failure, answered as a fault
                await self.events.put(("raised", error))

        self.task = asyncio.get_running_loop().create_task(run())

    async def model(self, **request: Any) -> Any:
        """The model's reply to one call: what was sent since its last reply is shown, the next move is it."""
        from openai.types.chat import ChatCompletion

        await self.events.put(("ask", shown(list(request.get("messages") or []))))
        text = await self.moves.get()
        return ChatCompletion.model_validate(_chat_completion(text))


def shown(messages: list[dict[str, Any]]) -> str:
    """The messages after the last assistant one (all of them at the first turn: the system prompt and the
    task), as text."""
    plain = [m if isinstance(m, dict) else m.model_dump() for m in messages]
    last = max((i for i, m in enumerate(plain) if m.get("role") == "assistant"), default=-1)
    return "\n\n".join(_text(m.get("content")) for m in plain[last + 1 :] if m.get("content"))


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts: their text
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def _chat_completion(text: str) -> dict[str, Any]:
    choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    answer = {"id": "verihub", "object": "chat.completion", "created": 0, "model": _MODEL, "choices": [choice]}
    return {**answer, "usage": usage}


def client(episode: Episode) -> Any:
    """A model client whose calls are the episode's turns (:meth:`Episode.model`; it never reaches a network):
    a ``vf.OpenAIChatCompletionsClient`` whose native call (a raw POST) is replaced, where verifiers wraps its
    clients (0.3); before, an AsyncOpenAI, whose chat completions verifiers calls."""
    import verifiers as vf
    from openai import AsyncOpenAI

    openai = AsyncOpenAI(api_key="unused", base_url="http://127.0.0.1:9/v1")  # a closed port, if ever called
    wrapper = getattr(vf, "OpenAIChatCompletionsClient", None)
    if wrapper is None:
        openai.chat.completions.create = episode.model  # type: ignore[method-assign]
        return openai

    class Turns(wrapper):  # type: ignore[misc, valid-type]
        async def get_native_response(self, prompt: Any, *args: Any, **kwargs: Any) -> Any:
            return await episode.model(messages=prompt)

    return Turns(openai)


async def rollout(episode: Episode) -> tuple[Any, Any]:
    """The environment's own rollout of the row: (the completion, the final state), in either signature (0.1.8+
    takes the row as its input and returns the state; before, its parts, and returns both)."""
    env, row = episode.env, episode.row
    if "input" in inspect.signature(env.rollout).parameters:
        state = await env.rollout(row, client(episode), _MODEL, {})
        return state.get("completion"), state
    completion, state = await env.rollout(
        client(episode), _MODEL, row["prompt"], row.get("answer", ""), row.get("task", "default"), row.get("info") or {}
    )
    return completion, state


EPISODES: dict[str, Episode] = {}


def start(env: Any, row: dict[str, Any]) -> tuple[str, tuple[str, Any]]:
    """A new episode of ``row``: its id and its first event."""
    episode = Episode(env, row)
    ident = secrets.token_hex(8)
    EPISODES[ident] = episode
    call(episode.begin(rollout))
    return ident, next_event(ident)


def move(ident: str, text: str) -> tuple[str, Any]:
    """The answer's move in episode ``ident``: the episode's next event."""
    episode = EPISODES.get(ident)
    if episode is None:
        raise LookupError(f"no episode {ident} (the bridge restarted since it began, or it ended)")
    call(episode.moves.put(text))
    return next_event(ident)


def next_event(ident: str) -> tuple[str, Any]:
    event = call(EPISODES[ident].events.get())
    if event[0] != "ask":
        EPISODES.pop(ident, None)
    return event


def stop(ident: str) -> None:
    episode = EPISODES.pop(ident, None)
    if episode is not None and episode.task is not None:
        loop().call_soon_threadsafe(episode.task.cancel)
