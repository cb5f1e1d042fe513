"""Local models: ``hf:PATH_OR_ID`` (transformers, runs on CPU) and ``vllm:PATH_OR_ID`` (vLLM's offline
engine). Tool calls follow the chat template's convention: ``<tool_call>{"name", "arguments"}</tool_call>``."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import threading
from typing import Any

from verihub.generation.base import Generation, GenerationError, Message, Sampling, ToolCall

__all__ = ["HFBackend", "VLLMBackend", "split_tool_calls"]

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_call_ids = itertools.count()


def split_tool_calls(text: str) -> tuple[str, list[ToolCall]]:
    """The text before the first ``<tool_call>``, and the calls; a call that is not JSON keeps its raw text."""
    calls = []
    for match in _TOOL_CALL.finditer(text):
        raw = match.group(1)
        try:
            payload = json.loads(raw)
        except json.JSONDecodeError:
            payload = None
        name = payload.get("name", "") if isinstance(payload, dict) else ""
        arguments = payload.get("arguments") if isinstance(payload, dict) else None
        calls.append(ToolCall(id=f"call_{next(_call_ids)}", name=str(name),
                              arguments=arguments if isinstance(arguments, dict) else None,
                              raw_arguments=json.dumps(arguments) if arguments is not None else raw))
    content = text.split("<tool_call>", 1)[0].strip() if calls else text
    return content, calls


class _InProcessBackend:
    """A model in this process: requests run one at a time in a worker thread, off the event loop."""

    model: str
    _lock: threading.Lock

    async def aclose(self) -> None:
        return None

    async def generate(self, messages: list[Message], sampling: Sampling,
                       tools: list[dict[str, Any]] | None = None) -> list[Generation]:
        return await asyncio.to_thread(self._generate, messages, sampling, tools)

    def _generate(self, messages: list[Message], sampling: Sampling, tools: list[dict[str, Any]] | None) -> list[Generation]:
        raise NotImplementedError


class HFBackend(_InProcessBackend):
    """A transformers model (CPU or GPU), optionally with a LoRA adapter (peft) on top."""

    def __init__(self, path: str, adapter: str | None = None) -> None:
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError:
            raise GenerationError('hf: models need transformers and torch: pip install "verihub[train]"') from None
        network = AutoModelForCausalLM.from_pretrained(path)
        if adapter is not None:
            from peft import PeftModel

            network = PeftModel.from_pretrained(network, adapter)
        self._bind(f"hf:{path}" + (f"+{adapter}" if adapter else ""), network, AutoTokenizer.from_pretrained(path))

    @classmethod
    def wrap(cls, network: Any, tokenizer: Any, name: str = "hf:live") -> HFBackend:
        """A backend over a model already in memory (a training policy, evaluated between steps)."""
        backend = cls.__new__(cls)
        backend._bind(name, network, tokenizer)
        return backend

    def _bind(self, name: str, network: Any, tokenizer: Any) -> None:
        self.model, self.network, self.tokenizer = name, network, tokenizer
        self._lock = threading.Lock()

    def _generate(self, messages: list[Message], sampling: Sampling, tools: list[dict[str, Any]] | None) -> list[Generation]:
        import torch

        tokenizer = self.tokenizer
        inputs = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True,
                                               return_tensors="pt", return_dict=True)
        prompt_length = inputs["input_ids"].shape[1]
        options: dict[str, Any] = {"max_new_tokens": sampling.max_tokens, "num_return_sequences": sampling.n,
                                   "pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id}
        if sampling.temperature > 0:
            options.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p)
        else:
            options.update(do_sample=False, temperature=None, top_p=None)
        with self._lock, torch.no_grad():
            if sampling.seed is not None:
                torch.manual_seed(sampling.seed)
            training = self.network.training  # a live policy goes back to training mode afterwards
            self.network.eval()
            try:
                sequences = self.network.generate(**inputs.to(self.network.device), **options)
            finally:
                self.network.train(training)
        generations = []
        for sequence in sequences:
            new_tokens = sequence[prompt_length:]
            finished = bool((new_tokens == tokenizer.eos_token_id).any())
            text = tokenizer.decode(new_tokens, skip_special_tokens=True)
            content, calls = split_tool_calls(text)
            generations.append(Generation(
                text=content, tool_calls=calls, finish_reason="tool_calls" if calls else "stop" if finished else "length",
                prompt_tokens=prompt_length, completion_tokens=int((new_tokens != tokenizer.pad_token_id).sum()),
            ))
        return generations


class VLLMBackend(_InProcessBackend):
    """vLLM's offline engine (a CUDA GPU); vLLM batches the n samples of a request."""

    def __init__(self, path: str, adapter: str | None = None) -> None:
        try:
            from vllm import LLM
        except ImportError:
            raise GenerationError(
                'vllm: models need vLLM, which is not installed: pip install "verihub[vllm]" (on a machine with a '
                "CUDA GPU), or serve the model with `vllm serve` elsewhere and use openai:MODEL@URL") from None
        self.model = f"vllm:{path}" + (f"+{adapter}" if adapter else "")
        self.engine = LLM(model=path, enable_lora=adapter is not None)
        self._adapter = adapter
        self._lock = threading.Lock()

    def _generate(self, messages: list[Message], sampling: Sampling, tools: list[dict[str, Any]] | None) -> list[Generation]:
        from vllm import SamplingParams
        from vllm.lora.request import LoRARequest

        lora = LoRARequest("adapter", 1, self._adapter) if self._adapter else None
        params = SamplingParams(n=sampling.n, temperature=sampling.temperature, top_p=sampling.top_p,
                                max_tokens=sampling.max_tokens, seed=sampling.seed)
        with self._lock:
            result = self.engine.chat(messages, params, tools=tools, use_tqdm=False, lora_request=lora)[0]
        prompt_tokens = len(result.prompt_token_ids or [])
        generations = []
        for output in result.outputs:
            content, calls = split_tool_calls(output.text)
            generations.append(Generation(text=content, tool_calls=calls, finish_reason=output.finish_reason or "",
                                          prompt_tokens=prompt_tokens, completion_tokens=len(output.token_ids)))
        return generations
