"""Any OpenAI-compatible chat-completions endpoint, over httpx, with retries and backoff."""

from __future__ import annotations

import asyncio
import json
import os
import random
from typing import Any

import httpx

from verihub.generation.base import Generation, GenerationError, Message, Sampling, ToolCall

__all__ = ["OpenAIBackend"]

_RETRIES = 5
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class OpenAIBackend:
    """``POST {base_url}/chat/completions``. All ``n`` samples of a prompt go out as one request, so
    the server's prefix cache shares the prompt; a server that returns fewer is asked for the rest."""

    def __init__(self, model: str, base_url: str, *, api_key: str | None = None, timeout_s: float = 600.0,
                 max_connections: int = 256) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        key = api_key if api_key is not None else os.environ.get(os.environ.get("VERIHUB_API_KEY_ENV", "OPENAI_API_KEY"))
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.AsyncClient(
            base_url=self.base_url, headers=headers, timeout=timeout_s,
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
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
            body = self._body(messages, sampling, sampling.n - len(generations), tools)
            generations += _parse(await self._post(body))
        return generations[: sampling.n]

    def _body(self, messages: list[Message], sampling: Sampling, n: int, tools: list[dict[str, Any]] | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model, "messages": messages, "temperature": sampling.temperature,
            "top_p": sampling.top_p, "max_tokens": sampling.max_tokens, "n": n,
        }
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if tools:
            body["tools"] = tools
        return body

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        problem = ""
        for attempt in range(_RETRIES):
            if attempt:
                await asyncio.sleep(min(8.0, 0.25 * 2**attempt) * (0.5 + random.random()))
            try:
                response = await self._client.post("/chat/completions", json=body)
            except httpx.TransportError as error:
                problem = f"{type(error).__name__}: {error}"
                continue
            if response.status_code in _RETRY_STATUS:
                problem = f"HTTP {response.status_code}: {response.text[:200]}"
                continue
            if response.status_code != 200:
                raise GenerationError(f"{self.base_url} answered HTTP {response.status_code}: {response.text[:300]}")
            try:
                return dict(response.json())
            except json.JSONDecodeError:
                problem = f"not JSON: {response.text[:200]}"
        raise GenerationError(f"{self.base_url} failed after {_RETRIES} attempts: {problem}")


def _parse(payload: dict[str, Any]) -> list[Generation]:
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices:
        raise GenerationError(f"the response has no choices: {str(payload)[:200]}")
    usage = payload.get("usage") or {}
    prompt_tokens = int(usage.get("prompt_tokens") or 0)
    completion_tokens = int(usage.get("completion_tokens") or 0) // len(choices)  # per sample, on average
    generations = []
    for choice in sorted(choices, key=lambda c: c.get("index", 0)):
        message = choice.get("message") or {}
        calls = [_tool_call(call) for call in message.get("tool_calls") or []]
        generations.append(Generation(
            text=message.get("content") or "", tool_calls=calls, finish_reason=choice.get("finish_reason") or "",
            prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
        ))
    return generations


def _tool_call(call: dict[str, Any]) -> ToolCall:
    function = call.get("function") or {}
    raw = function.get("arguments") or ""
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        arguments = None
    return ToolCall(id=str(call.get("id") or ""), name=str(function.get("name") or ""),
                    arguments=arguments if isinstance(arguments, dict) else None,
                    raw_arguments=raw if isinstance(raw, str) else json.dumps(raw))
