"""Tiny offline models: a small Qwen2-style causal LM and a tokenizer made here, nothing downloaded.

For tests, benchmarks and the demo. The tokenizer is byte-level BPE trained on the bundled
environments' text plus a fixed sample, with ChatML special tokens and TRL's copy of the Qwen2.5 chat template
(system/user/assistant turns,
tools in <tools>, calls in <tool_call> JSON, results in <tool_response>), so TRL's GRPO tool loop
parses its tool calls as it would a real Qwen model's.

    from verihub.trainers.tiny import make_tiny_model
    make_tiny_model("runs/tiny")                    # then AutoModelForCausalLM.from_pretrained("runs/tiny")
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["SPECIAL_TOKENS", "chat_template", "make_tiny_model", "make_tokenizer"]

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
EXTRA_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]


def chat_template() -> str:
    """TRL's copy of the Qwen2.5 chat template: TRL recognises it, so it knows how to parse tool calls
    (``add_response_schema``) and has a training variant for multi-turn GRPO."""
    return (resources.files("trl") / "chat_templates" / "qwen2_5.jinja").read_text()


_SAMPLE = [
    "The answer is \\boxed{42}. Let me think step by step: 12 + 30 = 42, so the result is 42.",
    '<answer>Paris</answer> ```python\ndef solve(x):\n    return x * 2\n``` {"name": "Ada", "age": 36}',
    "0 1 2 3 4 5 6 7 8 9 10 100 1000 + - * / = ( ) [ ] { } < > , . ; : ? ! ' \" \\frac{1}{2} 3.5 -7",
]


def _corpus() -> Iterator[str]:
    """Text the tokenizer learns from: a fixed sample plus the templates' and bundled tasks' text."""
    yield from _SAMPLE * 20
    templates = resources.files("verihub.templates")
    for template in ("single-turn", "tool", "judge"):
        data = templates / template / "data" / "tasks.jsonl"
        if data.is_file():
            for line in data.read_text().splitlines():
                yield " ".join(str(value) for value in json.loads(line).values())


def make_tokenizer(vocab_size: int = 1024) -> Any:
    """A ``PreTrainedTokenizerFast``: byte-level BPE, ChatML special tokens, the chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    # one token per digit, as Qwen's tokenizer does: a number reads the same in a prompt and in an answer
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS + EXTRA_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(_corpus(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        additional_special_tokens=EXTRA_TOKENS,
        chat_template=chat_template(),
        model_max_length=4096,
    )
    tokenizer.padding_side = "left"  # generation pads on the left
    return tokenizer


def make_tiny_model(
    out_dir: str | Path,
    *,
    seed: int = 0,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    vocab_size: int = 1024,
) -> Path:
    """Write a randomly initialised tiny Qwen2 model and its tokenizer to ``out_dir``; returns it."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    tokenizer = make_tokenizer(vocab_size)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=True,
        temperature=1.0,
        max_new_tokens=64,
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
