"""Generation engines and asynchronous GRPO, side by side in one run.

    python bench/engine_bench.py [--model DIR] [--tasks 32] [--k 8] [--steps 12] [--max-tokens 32]

Needs the vLLM engine (``scripts/setup.sh --vllm``; ``VERIHUB_VLLM_PYTHON`` defaults to .venv-vllm's). The
same model (``--model``, a local folder vLLM and transformers both load; default a tiny one made here,
hidden size 128), the same sums tasks and sampling throughout:

- (a) rollouts/s of ``verihub eval``'s rollout engine, K samples a prompt, through transformers' ``generate``
  in this process (``hf:``) and through the vLLM server (``vllm:``; its start-up is timed apart);
- (b) wall time of ``--steps`` GRPO steps, synchronous (``GRPOTrainer``, generation in the training process)
  against asynchronous (``AsyncGRPOTrainer``, generation in the server meanwhile), LoRA both, with the time
  the trainer waits for rollouts (synchronous: its generate-and-grade phase; asynchronous: TRL's
  ``perf/rollout_wait_s``);
- (c) what one weight sync (the LoRA adapter to the server) costs: TRL's ``perf/weight_sync_s``;
- (d) rollouts/s of the vLLM server serving a LoRA adapter (what asynchronous GRPO generates with), through
  verihub's CPU LoRA plugin (engines/vllm-cpu/verihub_vllm_cpu) and through vLLM's own per-token ops
  (``VLLM_PLUGINS`` naming every plugin but ours).

The last line prints the ratios beside the goals: vLLM >= 2x HF on rollouts; async >= 1.3x sync steps/s with
the trainer's waiting cut at least in half. Two cores are shared by the server and the trainer here: a CPU
shows whether the pipeline overlaps, not how a GPU's would.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("VERIHUB_VLLM_PYTHON", str(REPO / ".venv-vllm" / "bin" / "python"))
os.environ.setdefault("VERIHUB_VLLM_ARGS", "--enforce-eager --dtype float32")


async def rollouts_per_second(backend: Any, env: Any, tasks: list[Any], k: int, max_tokens: int) -> float:
    from verihub.eval.rollout import RolloutEngine
    from verihub.generation import Sampling

    engine = RolloutEngine(env, backend, Sampling(temperature=1.0, max_tokens=max_tokens), concurrency=len(tasks))
    began = time.perf_counter()
    done = await engine.run(tasks, k=k)
    return len(done) / (time.perf_counter() - began)


async def warm_rollouts_per_second(backend: Any, env: Any, tasks: list[Any], k: int, max_tokens: int) -> float:
    """Rollouts/s after a warm-up on two tasks (a server not started yet starts there), then the backend closed."""
    try:
        await rollouts_per_second(backend, env, tasks[:2], k, max_tokens)
        return await rollouts_per_second(backend, env, tasks, k, max_tokens)
    finally:
        await backend.aclose()


def part_a(model: Path, env: Any, tasks: list[Any], k: int, max_tokens: int) -> dict[str, float]:
    from verihub.generation.local import HFBackend
    from verihub.generation.vllm_server import VLLMBackend

    hf = asyncio.run(warm_rollouts_per_second(HFBackend(str(model)), env, tasks, k, max_tokens))
    vllm = VLLMBackend(str(model))
    began = time.perf_counter()
    vllm.server.start()
    startup = time.perf_counter() - began
    served = asyncio.run(warm_rollouts_per_second(vllm, env, tasks, k, max_tokens))
    return {"hf_rollouts_s": hf, "vllm_rollouts_s": served, "vllm_startup_s": startup}


PLUGIN = "verihub_cpu_lora"  # engines/vllm-cpu/pyproject.toml's entry point
_PLUGINS = (
    "from importlib.metadata import entry_points; "
    "print(*(point.name for point in entry_points(group='vllm.general_plugins')))"
)


def part_d(model: Path, env: Any, tasks: list[Any], k: int, max_tokens: int, work: Path) -> dict[str, float]:
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from verihub.generation.vllm_server import VLLMBackend
    from verihub.trainers.models import lora_config

    adapted = get_peft_model(AutoModelForCausalLM.from_pretrained(model), lora_config(True))
    for name, weight in adapted.named_parameters():
        if "lora_B" in name:  # peft starts B at zero: an adapter that changes nothing could be skipped
            weight.data.normal_(0.0, 1e-3)
    adapted.save_pretrained(work / "adapter")
    vllms_own = subprocess.run(  # the plugins the engine has, as its interpreter sees them
        [os.environ["VERIHUB_VLLM_PYTHON"], "-c", _PLUGINS], capture_output=True, text=True, check=True
    ).stdout.split()
    without_ours = ",".join(name for name in vllms_own if name != PLUGIN) or "none"
    found = {}
    for label, plugins in (("plugin", None), ("vllm_ops", without_ours)):
        os.environ.pop("VLLM_PLUGINS", None)  # unset: vLLM loads every plugin installed
        if plugins:
            os.environ["VLLM_PLUGINS"] = plugins
        backend = VLLMBackend(str(model), str(work / "adapter"))
        found[label] = asyncio.run(warm_rollouts_per_second(backend, env, tasks, k, max_tokens))
    os.environ.pop("VLLM_PLUGINS", None)
    return found


def grpo_settings(steps: int, k: int, max_tokens: int) -> dict[str, Any]:
    return {
        "max_steps": steps,
        "num_generations": k,
        "per_device_train_batch_size": 2 * k,
        "max_completion_length": max_tokens,
        "learning_rate": 1e-4,
        "display": "quiet",
        "seed": 0,
    }


def part_b_sync(model: Path, steps: int, k: int, max_tokens: int, out: Path) -> dict[str, float]:
    from verihub.trainers import GRPOTrainer

    trainer = GRPOTrainer(
        str(model), [str(REPO / "envs" / "sums")], lora=True, output_dir=out, **grpo_settings(steps, k, max_tokens)
    )
    waited = []
    generate = trainer.trl._generate_and_score_completions

    def timed(*args: Any, **kwargs: Any) -> Any:  # the synchronous trainer waits for exactly this
        began = time.perf_counter()
        try:
            return generate(*args, **kwargs)
        finally:
            waited.append(time.perf_counter() - began)

    trainer.trl._generate_and_score_completions = timed
    began = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - began
    return {"wall_s": wall, "steps_s": steps / wall, "wait_s": sum(waited)}


def part_b_async(model: Path, steps: int, k: int, max_tokens: int, out: Path) -> dict[str, float]:
    from verihub.trainers import AsyncGRPOTrainer

    began = time.perf_counter()
    trainer = AsyncGRPOTrainer(
        str(model),
        [str(REPO / "envs" / "sums")],
        lora=True,
        max_staleness=1,
        output_dir=out,
        **grpo_settings(steps, k, max_tokens),
    )
    startup = time.perf_counter() - began
    began = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - began
    logs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    syncs = [log["perf/weight_sync_s"] for log in logs if "perf/weight_sync_s" in log]
    return {
        "wall_s": wall,
        "steps_s": steps / wall,
        "startup_s": startup,
        "wait_s": sum(log.get("perf/rollout_wait_s", 0.0) for log in logs),
        "sync_s": statistics.median(syncs) if syncs else float("nan"),
        "staleness_max": max((log.get("sample/staleness_max", 0.0) for log in logs), default=0.0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="a local model folder (default: a tiny one made here)")
    parser.add_argument("--tasks", type=int, default=32)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--max-tokens", type=int, default=32)
    options = parser.parse_args()

    import verihub
    from verihub.trainers.tiny import make_tiny_model

    work = Path(tempfile.mkdtemp(prefix="engine-bench-"))
    model = options.model or make_tiny_model(work / "model", hidden_size=128)
    env = verihub.load_env(REPO / "envs" / "sums")
    tasks = list(env.dataset("eval"))[: options.tasks]
    a = part_a(model, env, tasks, options.k, options.max_tokens)
    sync = part_b_sync(model, options.steps, options.k, options.max_tokens, work / "sync")
    asynchronous = part_b_async(model, options.steps, options.k, options.max_tokens, work / "async")
    lora = part_d(model, env, tasks, options.k, options.max_tokens, work)

    print(
        f"(a) rollouts/s, {len(tasks)} tasks x K={options.k}, {options.max_tokens} tokens: "
        f"HF generate {a['hf_rollouts_s']:.1f}, vLLM server {a['vllm_rollouts_s']:.1f} "
        f"(server start-up {a['vllm_startup_s']:.0f} s, not counted)"
    )
    print(
        f"(b) {options.steps} GRPO steps: synchronous {sync['wall_s']:.1f} s (waiting for rollouts "
        f"{sync['wait_s']:.1f} s), asynchronous {asynchronous['wall_s']:.1f} s (waiting {asynchronous['wait_s']:.1f} s;"
        f" staleness at most {asynchronous['staleness_max']:.0f}; server start-up {asynchronous['startup_s']:.0f} s,"
        " not counted)"
    )
    print(f"(c) one weight sync (LoRA adapter to the server): {1000 * asynchronous['sync_s']:.0f} ms (median)")
    print(
        f"(d) rollouts/s of the vLLM server with a LoRA adapter: verihub's CPU LoRA plugin {lora['plugin']:.1f}, "
        f"vLLM's own ops {lora['vllm_ops']:.1f} ({lora['plugin'] / lora['vllm_ops']:.2f}x)"
    )
    vllm_ratio = a["vllm_rollouts_s"] / a["hf_rollouts_s"]
    speedup = asynchronous["steps_s"] / sync["steps_s"]
    wait_cut = asynchronous["wait_s"] / sync["wait_s"] if sync["wait_s"] else float("nan")
    print(
        f"vLLM/HF rollouts {vllm_ratio:.2f}x (goal >= 2x: {'met' if vllm_ratio >= 2 else 'not met'}); "
        f"async/sync steps/s {speedup:.2f}x (goal >= 1.3x: {'met' if speedup >= 1.3 else 'not met'}); "
        f"trainer waiting async/sync {wait_cut:.2f}x (goal <= 0.5x: {'met' if wait_cut <= 0.5 else 'not met'}); "
        f"weight sync {1000 * asynchronous['sync_s']:.0f} ms"
    )


if __name__ == "__main__":
    main()
