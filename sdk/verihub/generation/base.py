"""The generation interface: sampling settings in, one Generation per sample out."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from verihub.errors import GenerationError

__all__ = ["Backend", "Generation", "GenerationError", "Sampling", "ToolCall", "model_json"]

Message = dict[str, Any]


def model_json(text: str) -> Any:
    """JSON the model wrote (a tool call, its arguments), or None when it is none Python will read: not
    JSON, an integer past the digit limit (ValueError), nesting too deep (RecursionError). The model's
    mistake, never a crash of the loop that parses it."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


class Sampling(BaseModel):
    """Sampling settings, as the OpenAI chat API names them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float = Field(1.0, ge=0, le=2)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(1024, ge=1)
    n: int = Field(1, ge=1, description="Samples per request (the K of pass@k).")
    seed: int | None = Field(None, description="Sampling seed, where the backend supports one.")
    logprobs: bool = Field(
        False,
        description="Return each sampled token's log-probability, where the backend "
        "supports it (vLLM and other OpenAI-compatible servers, transformers).",
    )


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any] | None  # None when the model's arguments were not a JSON object
    raw_arguments: str = ""


@dataclass(frozen=True)
class Generation:
    """One sampled assistant turn."""

    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    logprobs: tuple[float, ...] | None = None  # one per completion token, when asked (Sampling.logprobs)

    def message(self) -> Message:
        """This turn as a chat message (OpenAI format), to append to the conversation."""
        message: Message = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.raw_arguments}}
                for call in self.tool_calls
            ]
        return message


class Backend(Protocol):
    """Anything that samples chat completions."""

    model: str

    async def generate(
        self, messages: list[Message], sampling: Sampling, tools: list[dict[str, Any]] | None = None
    ) -> list[Generation]:
        """``sampling.n`` generations for ``messages``; raises :class:`GenerationError` on failure."""
        ...

    async def aclose(self) -> None: ...
