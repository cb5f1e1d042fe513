"""The key of a vLLM server, on TRL's requests to it.

TRL's ``VLLMClient`` (``trl.experimental.async_grpo.vllm_client``: weight sync, pause and resume, server
info) calls the module-level ``requests.get``/``post`` with no headers, and the servers verihub starts answer
nothing without their key (:mod:`verihub.generation._vllm_path.verihub_vllm_key`). :func:`keyed` puts a
stand-in for ``requests`` in that module whose ``get`` and ``post`` add the key of the server a URL is on
(registered by its base URL, so no key reaches another address) and which is ``requests`` in all else.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import requests

__all__ = ["keyed"]


class _KeyedRequests:
    """``requests``, with each registered server's key on the requests sent to it."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module
        self.keys: dict[str, str] = {}
        self.lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:  # requests.ConnectionError, .Timeout, ...: requests' own
        return getattr(self.module, name)

    def get(self, url: str, **kwargs: Any) -> requests.Response:
        return self.module.get(url, **self._with_key(url, kwargs))

    def post(self, url: str, **kwargs: Any) -> requests.Response:
        return self.module.post(url, **self._with_key(url, kwargs))

    def _with_key(self, url: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            key = next((key for base, key in self.keys.items() if url == base or url.startswith(base + "/")), None)
        if key is None:
            return kwargs
        return {**kwargs, "headers": {**(kwargs.get("headers") or {}), "Authorization": f"Bearer {key}"}}


@contextmanager
def keyed(base_url: str, key: str | None) -> Iterator[None]:
    """While inside, TRL's vLLM client sends ``key`` with every request to ``base_url`` (None: nothing changes)."""
    if key is None:
        yield
        return
    from trl.experimental.async_grpo import vllm_client

    stand_in: Any = vllm_client.requests
    if not isinstance(stand_in, _KeyedRequests):
        stand_in = vllm_client.requests = _KeyedRequests(stand_in)  # type: ignore[assignment]  # a stand-in
    base = base_url.rstrip("/")
    with stand_in.lock:
        stand_in.keys[base] = key
    try:
        yield
    finally:
        with stand_in.lock:
            stand_in.keys.pop(base, None)
