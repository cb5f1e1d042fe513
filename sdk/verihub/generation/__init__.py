"""Generation backends behind one interface, chosen by a model string.

    backend = load_backend("openai:Qwen/Qwen2.5-1.5B-Instruct@http://127.0.0.1:8000/v1")
    generations = await backend.generate(messages, Sampling(n=4, temperature=0.7))

Model strings: ``openai:MODEL@URL`` (any OpenAI-compatible chat endpoint: ``vllm serve``,
``transformers serve``, OpenAI itself; without ``@URL`` it is OpenAI's API; the API key is read from
``OPENAI_API_KEY``, or the variable ``VERIHUB_API_KEY_ENV`` names, and never logged), ``hf:PATH_OR_ID``
(a local transformers model on CPU; needs ``verihub[train]``) and ``vllm:PATH_OR_ID`` (a vLLM server
on loopback that verihub starts and stops: :mod:`.vllm_server`; ``verihub[vllm]`` on a GPU, or
``scripts/setup.sh --vllm`` on a CPU). Imports only :mod:`verihub.errors` and :mod:`verihub.settings`.
"""

from __future__ import annotations

from verihub.errors import UsageError
from verihub.generation.base import Backend, Generation, GenerationError, Sampling, ToolCall

__all__ = ["Backend", "Generation", "GenerationError", "Sampling", "ToolCall", "load_backend"]

_KINDS = ("openai", "hf", "vllm")


def load_backend(model: str, *, adapter: str | None = None, concurrency: int | None = None) -> Backend:
    """The backend a model string names; ValueError saying the accepted forms otherwise.

    ``adapter`` is a LoRA adapter directory (what ``verihub train --lora`` saves) loaded on top of a local
    model; an endpoint serves its adapters itself (``vllm serve --lora-modules``). ``concurrency`` is how
    many requests the caller keeps in flight: an endpoint's backend keeps that many connections open
    (default 256).
    """
    kind, _, rest = model.partition(":")
    if adapter is not None and kind not in ("hf", "vllm"):
        raise UsageError(
            f"--adapter works with hf: and vllm: models; {model!r} is an endpoint: serve the adapter "
            "there (vllm serve BASE --enable-lora --lora-modules NAME=DIR) and name it as the model"
        )
    if kind == "openai" and rest:
        from verihub.generation.openai import OpenAIBackend

        name, _, url = rest.partition("@")
        base_url = url or "https://api.openai.com/v1"
        if concurrency is None:
            return OpenAIBackend(name, base_url)
        return OpenAIBackend(name, base_url, max_connections=concurrency)
    if kind == "hf" and rest:
        from verihub.generation.local import HFBackend

        return HFBackend(rest, adapter)
    if kind == "vllm" and rest:
        from verihub.generation.vllm_server import VLLMBackend

        return VLLMBackend(rest, adapter, concurrency=concurrency)
    raise UsageError(
        f"model {model!r}: use openai:MODEL@URL, hf:PATH_OR_ID or vllm:PATH_OR_ID (kinds: {', '.join(_KINDS)})"
    )
