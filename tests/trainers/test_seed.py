"""A seed repeats: the same seeded GRPO run, once on a quiet machine and once beside busy processes, logs the same
numbers at every step (losses, rewards, held-out pass rates) and saves the same adapter, byte for byte."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import REPO, VERIHUB, MakeEnv

TIMINGS = ("step_time", "train_runtime", "train_samples_per_second", "train_steps_per_second")
BUSY = "while True: pass"


# A reward a random tiny model earns on some samples and not others, so GRPO has advantages to learn from.
SPEC = """\
id: marks
version: 0.1.0
domain: test
description: An answer with a digit or a capital letter passes.
dataset: {source: data/tasks.jsonl, split: {train: 0.5, eval: 0.5}}
prompt: {user: "{question}"}
gold: {reference: "a"}
verifier:
  - {name: mark, layer: check, use: regex, args: {pattern: "[0-9A-Z]"}}
"""


def seeded_run(model: Path, env: Path, out: Path, busy: int) -> tuple[list[dict[str, Any]], str]:
    """A short seeded GRPO run beside ``busy`` processes that spin on the CPU: its logged steps without the
    timings, and the saved adapter's digest."""
    hogs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(busy)]
    try:
        result = subprocess.run(
            [
                VERIHUB,
                "train",
                "--model",
                str(model),
                "--env",
                str(env),
                "--lora",
                "--max-steps",
                "4",
                "--heldout-every",
                "2",
                "--heldout-tasks",
                "8",
                "--output-dir",
                str(out),
                "--quiet",
                "--set",
                "seed=0",
                "--set",
                "num_generations=4",
                "--set",
                "per_device_train_batch_size=8",
                "--set",
                "max_completion_length=12",
                "--set",
                "learning_rate=0.001",
                "--set",
                "temperature=1.0",
            ],
            capture_output=True,
            text=True,
            timeout=900,
            cwd=REPO,
        )
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert result.returncode == 0, result.stderr[-3000:]
    steps = [
        {key: value for key, value in json.loads(line).items() if key not in TIMINGS}
        for line in (out / "metrics.jsonl").read_text().splitlines()
    ]
    return steps, hashlib.sha256((out / "adapter_model.safetensors").read_bytes()).hexdigest()


def test_a_seeded_run_repeats_on_a_busy_machine(tiny_model: Path, make_env: MakeEnv, tmp_path: Path) -> None:
    rows = [{"id": f"t{i}", "question": f"Say something about {i}."} for i in range(32)]
    env = make_env(SPEC, rows=rows)
    quiet, quiet_adapter = seeded_run(tiny_model, env, tmp_path / "quiet", busy=0)
    busy, busy_adapter = seeded_run(tiny_model, env, tmp_path / "busy", busy=3)
    rewards = [step["reward"] for step in quiet if "reward" in step]
    assert any(0 < reward < 1 for reward in rewards), rewards  # some samples pass, some fail: advantages
    assert any(step.get("loss") for step in quiet), quiet  # and the policy moved
    assert any("verihub/marks/heldout_pass_rate" in step for step in quiet)
    for one, other in zip(quiet, busy, strict=True):
        differ = {
            key: (one.get(key), other.get(key)) for key in one.keys() | other.keys() if one.get(key) != other.get(key)
        }
        assert not differ, f"step {one.get('step')}: {differ}"
    assert quiet_adapter == busy_adapter
