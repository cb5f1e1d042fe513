"""The GPU path end to end, with PyPI's CUDA vLLM (the `vllm` extra) and a model built here: `vllm:` eval,
synchronous GRPO with vLLM colocated and with TRL's vLLM server, and a short asynchronous run. One line of
summary; exit 1 on any failure. Run through scripts/gpu_check.sh, which checks for a GPU first."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
REPO = Path(__file__).resolve().parents[1]
SUMS = str(REPO / "envs" / "sums")
SMALL = {
    "max_steps": 2,
    "num_generations": 4,
    "per_device_train_batch_size": 8,
    "max_completion_length": 16,
    "display": "quiet",
}


def eval_through_vllm(model: Path, work: Path) -> str:
    import verihub
    from verihub.eval.rollout import RolloutEngine
    from verihub.generation import Sampling
    from verihub.generation.vllm_server import VLLMBackend

    env = verihub.load_env(SUMS)

    async def run() -> list:
        backend = VLLMBackend(str(model))
        try:
            return await RolloutEngine(env, backend, Sampling(max_tokens=16)).run(list(env.dataset("eval"))[:8], k=4)
        finally:
            await backend.aclose()

    rollouts = asyncio.run(run())
    faults = [r.reason for r in rollouts if r.status not in ("ok", "wrong")]
    assert not faults, faults[:3]
    return f"{len(rollouts)} rollouts"


def colocate(model: Path, work: Path) -> str:
    from verihub.trainers import GRPOTrainer

    GRPOTrainer(
        str(model),
        [SUMS],
        lora=True,
        use_vllm=True,
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=0.2,
        output_dir=work / "colocate",
        **SMALL,
    ).train()
    return "2 steps"


def server_mode(model: Path, work: Path) -> str:
    from verihub.trainers import GRPOTrainer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    trl = Path(sys.executable).with_name("trl")
    server = subprocess.Popen(
        [
            str(trl),
            "vllm-serve",
            "--model",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--gpu-memory-utilization",
            "0.2",
        ],
        start_new_session=True,
    )
    try:
        GRPOTrainer(
            str(model),
            [SUMS],
            lora=True,
            use_vllm=True,
            vllm_mode="server",
            vllm_server_host="127.0.0.1",
            vllm_server_port=port,
            vllm_server_timeout=600,
            output_dir=work / "server",
            **SMALL,
        ).train()
    finally:
        server.terminate()
        server.wait(60)
    return "2 steps"


def asynchronous(model: Path, work: Path) -> str:
    from verihub.trainers import AsyncGRPOTrainer

    AsyncGRPOTrainer(
        str(model), [SUMS], lora=True, max_staleness=1, sync_check_every=1, output_dir=work / "async", **SMALL
    ).train()
    return "2 steps, syncs checked"


def main() -> int:
    from verihub.trainers.tiny import make_tiny_model

    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    model = make_tiny_model(work / "model", hidden_size=128)
    checks: list[tuple[str, Callable[[Path, Path], str]]] = [
        ("vllm: eval", eval_through_vllm),
        ("GRPO colocate", colocate),
        ("GRPO server", server_mode),
        ("async GRPO", asynchronous),
    ]
    said, failed = [], 0
    for name, check in checks:
        began = time.perf_counter()
        try:
            said.append(f"{name} ok ({check(model, work)}, {time.perf_counter() - began:.0f} s)")
        except Exception:  # noqa: BLE001 - every check runs; the summary counts the failures
            failed += 1
            traceback.print_exc()
            said.append(f"{name} FAILED")
    print(f"gpu_check: {'; '.join(said)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
