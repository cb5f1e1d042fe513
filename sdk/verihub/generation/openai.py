"""Any OpenAI-compatible chat-completions endpoint, over httpx2, with retries and backoff.

httpx2 (pydantic's maintained httpx; openai and huggingface_hub use it) rather than httpx 0.28: httpcore
1.x's pool scans every connection for every queued request and probes each idle socket on every
request it assigns, which at 32 requests in flight was the eval loop's largest cost.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
import ssl
from typing import Any

import httpx2
from pydantic import BaseModel, Field, ValidationError

from verihub import settings
from verihub.errors import describe_error
from verihub.generation.base import Generation, GenerationError, Message, Sampling, ToolCall, model_json

__all__ = ["OpenAIBackend"]

_RETRIES = 5
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class OpenAIBackend:
    """``POST {base_url}/chat/completions``. All ``n`` samples of a prompt go out as one request, so
    the server's prefix cache shares the prompt (greedy ones, at temperature 0, one request each); a
    server that returns fewer is asked for the rest."""

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        max_connections: int = 256,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        key = settings.api_key(api_key)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx2.AsyncClient(  # one connection per request in flight, each kept alive
            base_url=self.base_url,
            headers=headers,
            timeout=timeout_s,
            verify=_tls_context(),
            limits=httpx2.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        )

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIBackend(model={self.model!r}, base_url={self.base_url!r})"

    async def aclose(self) -> None:
        await self._client.aclose()

    async def generate(
        self, messages: list[Message], sampling: Sampling, tools: list[dict[str, Any]] | None = None
    ) -> list[Generation]:
        generations: list[Generation] = []
        while len(generations) < sampling.n:
            # greedy samples one at a time: vLLM refuses n > 1 at temperature 0
            wanted = sampling.n - len(generations) if sampling.temperature > 0 else 1
            body = self._body(messages, sampling, wanted, tools)
            generations += await self._post(body)
        return generations[: sampling.n]

    def _body(
        self, messages: list[Message], sampling: Sampling, n: int, tools: list[dict[str, Any]] | None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_tokens,
            "n": n,
        }
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.logprobs:
            body["logprobs"] = True
        if tools:
            body["tools"] = tools
        return body

    async def _post(self, body: dict[str, Any]) -> list[Generation]:
        problem = ""
        for attempt in range(_RETRIES):
            if attempt:
                await asyncio.sleep(min(8.0, 0.25 * 2**attempt) * (0.5 + random.random()))
            try:
                response = await self._client.post("/chat/completions", json=body)
            except httpx2.HTTPError as error:  # the connection failed, timed out, or the body would not decode
                problem = f"{describe_error(error)}"
                continue
            if response.status_code in _RETRY_STATUS:
                problem = f"HTTP {response.status_code}: {response.text[:200]}"
                continue
            if response.status_code != 200:
                raise GenerationError(f"{self.base_url} answered HTTP {response.status_code}: {response.text[:300]}")
            try:
                return _parse(_Completion.model_validate_json(response.content))
            except ValidationError as error:
                first = error.errors()[0]
                problem = (
                    f"not a chat completion ({'.'.join(map(str, first['loc'])) or 'body'}: {first['msg']}): "
                    f"{response.text[:200]}"
                )
        raise GenerationError(f"{self.base_url} failed after {_RETRIES} attempts: {problem}")


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The system's trust store, loaded once per process (about 50 ms each time otherwise)."""
    return httpx2.create_ssl_context()


# What an endpoint's answer must be; anything else is the endpoint's fault (retried, then env_error).
class _Function(BaseModel):
    name: str | None = None
    arguments: str | dict[str, Any] | None = None


class _Call(BaseModel):
    id: str | None = None
    function: _Function = Field(default_factory=_Function)


class _Message(BaseModel):
    content: str | None = None
    tool_calls: list[_Call] | None = None


class _TokenLogprob(BaseModel):
    logprob: float


class _Logprobs(BaseModel):
    content: list[_TokenLogprob] | None = None


class _Choice(BaseModel):
    index: int = 0
    message: _Message = Field(default_factory=_Message)
    finish_reason: str | None = None
    logprobs: _Logprobs | None = None


class _Usage(BaseModel):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _Completion(BaseModel):
    choices: list[_Choice] = Field(min_length=1)
    usage: _Usage | None = None


def _parse(payload: _Completion) -> list[Generation]:
    usage = payload.usage or _Usage()
    prompt_tokens = usage.prompt_tokens or 0
    completion_tokens = (usage.completion_tokens or 0) // len(payload.choices)  # per sample, on average
    generations = []
    for choice in sorted(payload.choices, key=lambda choice: choice.index):
        scored = choice.logprobs.content if choice.logprobs is not None else None
        logprobs = tuple(token.logprob for token in scored) if scored is not None else None
        generations.append(
            Generation(
                text=choice.message.content or "",
                tool_calls=[_tool_call(call) for call in choice.message.tool_calls or []],
                finish_reason=choice.finish_reason or "",
                prompt_tokens=prompt_tokens,
                completion_tokens=len(logprobs) if logprobs is not None else completion_tokens,  # exact, with logprobs
                logprobs=logprobs,
            )
        )
    return generations


def _tool_call(call: _Call) -> ToolCall:
    raw = call.function.arguments or ""
    arguments = model_json(raw) if isinstance(raw, str) else raw
    return ToolCall(
        id=call.id or "",
        name=call.function.name or "",
        arguments=arguments if isinstance(arguments, dict) else None,
        raw_arguments=raw if isinstance(raw, str) else json.dumps(raw),
    )
