"""Models in this process: ``hf:PATH_OR_ID`` (transformers, CPU or GPU); ``vllm:`` models run in a server
process (:mod:`verihub.generation.vllm_server`). Tool calls follow the chat template's convention:
``<tool_call>{"name", "arguments"}</tool_call>``."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import threading
from dataclasses import dataclass
from typing import Any

from verihub.generation.base import Generation, GenerationError, Message, Sampling, ToolCall, model_json

__all__ = ["HFBackend", "split_tool_calls"]

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_call_ids = itertools.count()


def split_tool_calls(text: str) -> tuple[str, list[ToolCall]]:
    """The text before the first ``<tool_call>``, and the calls; a call that is not JSON keeps its raw text."""
    calls = []
    for match in _TOOL_CALL.finditer(text):
        raw = match.group(1)
        payload = model_json(raw)
        name = payload.get("name", "") if isinstance(payload, dict) else ""
        arguments = payload.get("arguments") if isinstance(payload, dict) else None
        calls.append(
            ToolCall(
                id=f"call_{next(_call_ids)}",
                name=str(name),
                arguments=arguments if isinstance(arguments, dict) else None,
                raw_arguments=json.dumps(arguments) if arguments is not None else raw,
            )
        )
    content = text.split("<tool_call>", 1)[0].strip() if calls else text
    return content, calls


@dataclass(eq=False)  # a request is itself: two asking the same are still two
class _Request:
    messages: list[Message]
    sampling: Sampling
    tools: list[dict[str, Any]] | None
    future: asyncio.Future[list[Generation]]

    def batch_key(self) -> tuple[Sampling, str]:
        """Requests with the same sampling and tools can share one call of ``generate``."""
        return self.sampling, json.dumps(self.tools, sort_keys=True, default=str)


class HFBackend:
    """A transformers model (CPU or GPU), optionally with a LoRA adapter (peft) on top.

    Requests that arrive together (the eval loop sends up to its concurrency at once) are generated as
    one left-padded batch, at most ``max_batch`` prompts: one forward pass per token for all of them,
    rather than one generation per prompt after another.
    """

    max_batch = 64

    def __init__(self, path: str, adapter: str | None = None) -> None:
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError:
            raise GenerationError('hf: models need transformers and torch: pip install "verihub[train]"') from None
        network = AutoModelForCausalLM.from_pretrained(path)
        if adapter is not None:
            from peft import PeftModel

            network = PeftModel.from_pretrained(network, adapter)  # type: ignore[assignment]  # same generate()
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
        self._queue: list[_Request] = []
        self._drainer: asyncio.Task[None] | None = None

    async def aclose(self) -> None:
        return None

    async def generate(
        self, messages: list[Message], sampling: Sampling, tools: list[dict[str, Any]] | None = None
    ) -> list[Generation]:
        loop = asyncio.get_running_loop()
        request = _Request(messages, sampling, tools, loop.create_future())
        self._queue.append(request)
        if self._drainer is None or self._drainer.done():
            self._drainer = loop.create_task(self._drain())
        return await request.future

    async def _drain(self) -> None:
        """Generate the queued requests, a batch of alike ones at a time, until none is left."""
        while True:
            waiting = -1
            while waiting != len(self._queue):  # the requests sent together have all joined the queue
                waiting = len(self._queue)
                await asyncio.sleep(0)
            self._queue = [request for request in self._queue if not request.future.done()]  # callers gone
            if not self._queue:
                return
            key = self._queue[0].batch_key()
            batch = [request for request in self._queue if request.batch_key() == key][: self.max_batch]
            self._queue = [request for request in self._queue if request not in batch]
            try:
                results = await asyncio.to_thread(
                    self._generate_batch, [r.messages for r in batch], batch[0].sampling, batch[0].tools
                )
            except Exception as error:  # noqa: BLE001 - each caller gets the failure of its own request
                for request in batch:
                    if not request.future.done():
                        request.future.set_exception(error)
                continue
            for request, generations in zip(batch, results, strict=True):
                if not request.future.done():  # its caller may have been cancelled meanwhile
                    request.future.set_result(generations)

    def _generate_batch(
        self, conversations: list[list[Message]], sampling: Sampling, tools: list[dict[str, Any]] | None
    ) -> list[list[Generation]]:
        """``sampling.n`` generations for each conversation, from one call of the model's ``generate``."""
        import torch

        tokenizer = self.tokenizer
        texts = [
            tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
            for messages in conversations
        ]
        inputs = tokenizer(texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
        prompt_length = inputs["input_ids"].shape[1]
        prompt_tokens = inputs["attention_mask"].sum(dim=1).tolist()
        options: dict[str, Any] = {
            "max_new_tokens": sampling.max_tokens,
            "num_return_sequences": sampling.n,
            "pad_token_id": tokenizer.pad_token_id,
            "eos_token_id": tokenizer.eos_token_id,
        }
        if sampling.temperature > 0:
            options.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p)
        else:
            options.update(do_sample=False, temperature=None, top_p=None)
        if sampling.logprobs:  # the model's own distribution, before temperature and top-p (as vLLM reports)
            options.update(output_logits=True, return_dict_in_generate=True)
        with self._lock, torch.no_grad():
            if sampling.seed is not None:
                torch.manual_seed(sampling.seed)
            training = self.network.training  # a live policy goes back to training mode afterwards
            self.network.eval()
            try:
                output = self.network.generate(**inputs.to(self.network.device), **options)
            finally:
                self.network.train(training)
        sequences = output.sequences if sampling.logprobs else output
        scored: list[Any] | None = None
        if sampling.logprobs:  # steps x rows: each generated token's log-probability
            chosen = sequences[:, prompt_length:].T.unsqueeze(-1)
            steps = torch.stack([torch.log_softmax(step.float(), dim=-1) for step in output.logits])
            scored = steps.gather(-1, chosen).squeeze(-1).T.tolist()
        results: list[list[Generation]] = [[] for _ in conversations]
        for row, sequence in enumerate(sequences):  # num_return_sequences rows per conversation, in order
            new_tokens = sequence[prompt_length:].tolist()
            finished = tokenizer.eos_token_id in new_tokens
            # what the model wrote: up to its end-of-turn token; after it, generate only pads
            length = new_tokens.index(tokenizer.eos_token_id) + 1 if finished else len(new_tokens)
            text = tokenizer.decode(new_tokens[:length], skip_special_tokens=True)
            content, calls = split_tool_calls(text)
            results[row // sampling.n].append(
                Generation(
                    text=content,
                    tool_calls=calls,
                    finish_reason="tool_calls" if calls else "stop" if finished else "length",
                    prompt_tokens=int(prompt_tokens[row // sampling.n]),
                    completion_tokens=length,
                    logprobs=tuple(scored[row][:length]) if scored is not None else None,
                )
            )
        return results
