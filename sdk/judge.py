"""The seam between judge layers and a model that grades against a rubric.

The verifier engine calls a :class:`Judge`; the model-backed implementation (any OpenAI-compatible
endpoint) plugs in here. Without a judge, judge layers are environment faults, never zeros.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["Judge", "JudgeVerdict"]


@dataclass(frozen=True, slots=True)
class JudgeVerdict:
    score: float  # in [0, 1]
    reason: str = ""


class Judge(Protocol):
    async def judge(
        self, *, rubric: str, messages: list[dict[str, str]], completion: str, model: str | None
    ) -> JudgeVerdict:
        """Score ``completion`` (the answer to ``messages``) against ``rubric``; raise on outage."""
        ...
