"""A multi-turn legacy verifiers environment (a ``vf.MultiTurnEnv``, the API of verifiers 0.1.x to 0.3.1) written
for verihub's tests: guess a number from 1 to 16 in at most ``max_turns`` turns, ``env_response`` answering
"higher" or "lower". verifiers 0.1.8 and later end it by stop conditions (``final_env_response`` set on a right
guess); before, by ``is_completed(messages, state)``, and ``env_response`` returns the state too. The rubric
pays the last guess being the number, and a weight-0 metric counts the guesses. ``fault``: ``env_response``
raises on the second guess, ``rubric`` adds a paid function that raises, ``tools`` returns a ``vf.ToolEnv``,
``sandbox`` a ``SandboxEnv``."""

from __future__ import annotations

import inspect
import re
from typing import Any

import verifiers as vf
from datasets import Dataset

SYSTEM = "Guess the number, from 1 to 16. Reply with one number a turn."
OLD = "messages" in inspect.signature(vf.MultiTurnEnv.is_completed).parameters  # 0.1.7 and before


def _content(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", "")
    return str(content or "")


def _role(message: Any) -> str:
    return str(message.get("role") if isinstance(message, dict) else getattr(message, "role", ""))


def _guesses(messages: Any) -> list[int | None]:
    said = [re.search(r"\d+", _content(m)) for m in messages or [] if _role(m) == "assistant"]
    return [int(found[0]) if found else None for found in said]


class GuessEnv(vf.MultiTurnEnv):
    def __init__(self, fault: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fault = fault

    async def setup_state(self, state: Any, **kwargs: Any) -> Any:
        state["hints"] = 0
        return state

    def _hint(self, messages: Any, state: Any) -> tuple[str, bool]:
        guesses = _guesses(messages)
        if self.fault == "env_response" and len(guesses) >= 2:
            raise RuntimeError("the hint service is down")
        state["hints"] += 1
        guess, number = guesses[-1], int(state["answer"])
        if guess == number:
            return "Correct!", True
        return ("higher" if guess is None or guess < number else "lower"), False

    if OLD:

        async def is_completed(self, messages: Any, state: Any, **kwargs: Any) -> bool:
            guesses = _guesses(messages)
            done = bool(guesses) and guesses[-1] == int(state["answer"])
            return done or len(guesses) >= self.max_turns

        async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
            text, _ = self._hint(messages, state)
            return [{"role": "user", "content": text}], state

    else:

        async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
            text, done = self._hint(messages, state)
            reply = [{"role": "user", "content": text}]
            if done:
                state["final_env_response"] = reply
            return reply


def load_environment(fault: str | None = None, max_turns: int = 6, **_: Any) -> Any:
    rows = [{"question": "I am thinking of a number.", "answer": str(n)} for n in (11, 3, 7, 14, 5, 9, 1, 16, 12, 6)]

    def guessed(completion: Any, answer: str, **kwargs: Any) -> float:
        guesses = _guesses(completion)
        return 1.0 if guesses and guesses[-1] == int(answer) else 0.0

    def guesses(completion: Any, **kwargs: Any) -> float:
        return float(len(_guesses(completion)))

    def broken(completion: Any, **kwargs: Any) -> float:
        raise KeyError("scores")

    funcs, weights = [guessed, guesses], [1.0, 0.0]
    if fault == "rubric":
        funcs, weights = [*funcs, broken], [*weights, 1.0]
    rubric = vf.Rubric(funcs=funcs, weights=weights)
    dataset = Dataset.from_list(rows)
    if fault == "tools":

        def hint(number: int) -> str:
            """Whether the number is higher or lower."""
            return "lower"

        return vf.ToolEnv(dataset=dataset, tools=[hint], system_prompt=SYSTEM, rubric=rubric, max_turns=max_turns)
    kind = SandboxEnv if fault == "sandbox" else GuessEnv
    return kind(fault, dataset=dataset, system_prompt=SYSTEM, rubric=rubric, max_turns=max_turns)


class SandboxEnv(GuessEnv):
    """A stand-in for verifiers' own SandboxEnv (found by its name), which cannot even be built offline: it wants
    prime-cli and Prime's API when it is made."""
