"""A legacy verifiers environment (the API of verifiers 0.1.x to 0.3.1) written for verihub's tests: sums posed
with a system prompt, answers parsed by an XMLParser, a rubric of a correctness reward, the parser's format
reward and a weight-0 metric saying whether the reply came as a typed message (verifiers 0.1.11 and later)
or a dict. ``plain`` takes the base Parser instead, and no format reward (which pays for any reply, even an
empty one). ``fault`` adds one more paid function for the seams: ``raises`` (always),
``raises_on_crash`` (on a reply saying CRASH only), ``text`` (returns the string "1.0", which the Rubric's
float() would take), ``nan``, or ``judge`` (a JudgeRubric whose judge is at ``judge_url``)."""

from __future__ import annotations

from typing import Any

import verifiers as vf
from datasets import Dataset

SYSTEM = "Add the numbers. Reply with the sum inside <answer></answer>."


def load_environment(
    fault: str | None = None, plain: bool = False, judge_url: str = "http://127.0.0.1:9/v1", **_: Any
) -> Any:
    pairs = zip(range(3, 13), range(20, 30), strict=True)
    rows = [{"question": f"What is {a} + {b}?", "answer": str(a + b)} for a, b in pairs]
    parser = vf.Parser() if plain else vf.XMLParser(["answer"], answer_field="answer")

    def correct(completion: Any, answer: str, **kwargs: Any) -> float:
        return 1.0 if (parser.parse_answer(completion) or "").strip() == answer else 0.0

    def typed(completion: Any, **kwargs: Any) -> float:
        return 0.0 if isinstance(completion[-1], dict) else 1.0

    funcs: list[Any] = [correct, typed] if plain else [correct, parser.get_format_reward_func(), typed]
    weights = [1.0, 0.0] if plain else [1.0, 0.25, 0.0]
    if fault == "judge":
        from openai import AsyncOpenAI

        client = AsyncOpenAI(base_url=judge_url, api_key="unused", max_retries=0, timeout=5.0)
        rubric: Any = vf.JudgeRubric(parser=parser, judge_client=client, judge_model="judge")

        async def judged(judge: Any, prompt: Any, completion: Any, answer: str, state: Any, **kwargs: Any) -> float:
            verdict = await judge(prompt, completion, answer, state)
            return 1.0 if "yes" in str(verdict).lower() else 0.0

        for func, weight in zip([*funcs, judged], [*weights, 1.0], strict=True):
            rubric.add_reward_func(func, weight=weight)
    else:
        extra = {"raises": _raises, "raises_on_crash": _raises_on_crash, "text": _text, "nan": _nan}
        if fault is not None:
            funcs, weights = [*funcs, extra[fault]], [*weights, 1.0]
        rubric = vf.Rubric(funcs=funcs, weights=weights, parser=parser)
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), system_prompt=SYSTEM, parser=parser, rubric=rubric)


def _raises(completion: Any, **kwargs: Any) -> float:
    raise RuntimeError("this scorer is broken")


def _raises_on_crash(completion: Any, **kwargs: Any) -> float:
    if "CRASH" in str(completion):
        raise ValueError("cannot read this reply")
    return 1.0


def _text(completion: Any, **kwargs: Any) -> Any:
    return "1.0"


async def _nan(completion: Any, **kwargs: Any) -> float:
    return float("nan")
