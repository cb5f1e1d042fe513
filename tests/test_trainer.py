"""Real TRL training steps on a tiny model made here: GRPO with LoRA on a mix, SFT, tools, hub ids, vLLM guard."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from verihub.errors import MissingDependencyError
from verihub.hub.local import LocalHub
from verihub.sandbox.nsjail import NsjailSandbox
from verihub.scaffold import init_env
from verihub.tools import SandboxTools
from verihub.trainers.rewards import EnvReward, GradeLedger

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
VERIHUB = str(Path(sys.executable).with_name("verihub"))
FAST = ["--set", "num_generations=4", "--set", "per_device_train_batch_size=8", "--set", "max_completion_length=12"]


def run(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([VERIHUB, *args], capture_output=True, text=True, timeout=900, cwd=REPO, **kwargs)


def flat(text: str) -> str:
    """CLI output without rich's box drawing and line wrapping."""
    return " ".join(text.replace("│", " ").split())


def metrics(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_train_grpo_with_lora_on_two_bundled_envs_then_eval_and_plot(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "grpo"
    trained = run("train", "--model", str(tiny_model), "--env", "envs/arithmetic:3", "--env", "envs/json-extract",
                  "--lora", "--max-steps", "3", "--heldout-every", "2", "--output-dir", str(out), *FAST)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert (out / "adapter_config.json").is_file() and (out / "adapter_model.safetensors").is_file()
    assert not (out / "model.safetensors").exists()  # LoRA saves the adapter only
    records = metrics(out)
    assert [record["step"] for record in records[:3]] == [1, 2, 3]
    seen = set().union(*records)
    for env in ("arithmetic", "json-extract"):
        assert {f"verihub/{env}/pass_rate", f"verihub/{env}/fault_rate", f"verihub/{env}/heldout_pass_rate",
                f"rewards/{env}/mean"} <= seen
    weights = {key: value for key, value in records[0].items() if key.startswith("verihub/curriculum/")}
    assert len(weights) == 6 and sum(weights.values()) == pytest.approx(1.0)  # 2 envs x 3 difficulties
    assert sum(v for k, v in weights.items() if "/arithmetic/" in k) == pytest.approx(0.75)  # weight 3:1, unmeasured

    evaluated = run("eval", "envs/arithmetic", "--model", f"hf:{tiny_model}", "--adapter", str(out), "-n", "2",
                    "-k", "1", "--max-tokens", "8")
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    assert "pass@1" in evaluated.stdout

    plotted = run("plot", str(out))
    assert plotted.returncode == 0, plotted.stderr
    for name in ("pass_rate", "heldout_pass_rate", "curriculum", "training"):
        png = out / "plots" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_adapter_must_be_a_peft_directory(tiny_model: Path, tmp_path: Path) -> None:
    refused = run("eval", "envs/arithmetic", "--model", f"hf:{tiny_model}", "--adapter", str(tmp_path), "-n", "1")
    assert refused.returncode == 2 and "holds no adapter_config.json" in flat(refused.stderr)


def test_sft_on_references_and_trajectories(tiny_model: Path, tmp_path: Path) -> None:
    trajectories = tmp_path / "shipped.jsonl"
    conversation = [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "\\boxed{4}"}]
    trajectories.write_text(json.dumps({"messages": conversation}) + "\n")
    out = tmp_path / "sft"
    trained = run("sft", "--model", str(tiny_model), "--env", "envs/arithmetic", "--env", "envs/math-word:0.5",
                  "--trajectories", str(trajectories), "--max-steps", "2", "--output-dir", str(out))
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()

    from verihub.trainers.mixture import resolve_envs
    from verihub.trainers.sft import reference_pairs, trajectory_pairs

    pairs = reference_pairs(resolve_envs(["envs/arithmetic"])[0])
    assert pairs[0]["completion"][0]["content"].startswith("The value is \\boxed{")
    assert trajectory_pairs(trajectories) == [{"prompt": conversation[:1], "completion": conversation[1:]}]
    from verihub.trainers import SFTTrainer

    mixed = SFTTrainer(str(tiny_model), ["envs/arithmetic"], trajectories=trajectories, demos=3, max_steps=1,
                       output_dir=tmp_path / "sft-in-process").dataset
    assert conversation[:1] in mixed["prompt"] and len(set(map(str, mixed["prompt"]))) == 4  # 3 demos + the trajectory
    trajectories.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    with pytest.raises(ValueError, match="shipped.jsonl:1: expected"):
        trajectory_pairs(trajectories)


TOOL_SPEC = """\
id: calc-tool
version: 0.1.0
domain: code
description: Compute with the python tool, then answer.
dataset: {source: data/tasks.jsonl, split: {train: 0.5, eval: 0.5}}
prompt:
  system: "Use the python tool, then answer in \\\\boxed{{}}."
  user: "What is {question}?"
interaction: {kind: multi_turn, max_turns: 3, tools: [python]}
sandbox: {wall_s: 5, memory_mb: 256}
verifier:
  - {name: format, layer: rule, use: boxed, gate: true}
  - {name: correct, layer: check, use: numeric}
gold:
  reference: '\\boxed{{{answer}}}'
  negatives: ['\\boxed{{{wrong}}}']
"""


def test_multi_turn_tool_env_trains_through_environment_factory(tiny_model: Path, tmp_path: Path, make_env: Any,
                                                                 nsjail_path: str) -> None:
    from verihub.trainers import GRPOTrainer

    tool_env = make_env(TOOL_SPEC, name="calc")
    trainer = GRPOTrainer(str(tiny_model), {str(tool_env): 1, "envs/arithmetic": 1}, lora=True, max_steps=1,
                          num_generations=4, per_device_train_batch_size=8, max_completion_length=12,
                          output_dir=tmp_path / "run")
    trl_trainer = trainer.trl
    assert set(trl_trainer.environment_factories) == {"calc-tool", "arithmetic"}
    assert [tool.__name__ for tool in trl_trainer._env_tools["calc-tool"]] == ["python"]
    assert trl_trainer._env_tools["arithmetic"] == []  # single-turn rows see no tools
    trainer.train()
    assert metrics(tmp_path / "run")[0]["step"] == 1
    used = [instance for instance in trl_trainer._environment_pool["calc-tool"] if instance.task]
    rows = [json.loads(line) for line in (tool_env / "data" / "tasks.jsonl").read_text().splitlines()]
    assert used and all(instance.task in rows for instance in used)  # reset() got each rollout's task

    # the tool itself runs in the jail, and a sandbox fault makes the rollout unscored, not wrong
    instance = type(used[0])()
    instance.reset(task=json.dumps(rows[0]))
    assert instance.python("import os; print(6 * 7, os.getuid())").split() == ["42", "65534"]  # nobody, in the jail
    instance._sandbox = SandboxTools(sandbox=NsjailSandbox("/bin/false"))
    assert "this rollout will not be scored" in instance.python("print(1)")
    reward = EnvReward(trainer.mix[0], GradeLedger())
    scores = asyncio.run(reward(prompts=[[]], completions=[[{"role": "assistant", "content": "\\boxed{2}"}]],
                                environment=["calc-tool"], task=[json.dumps(rows[0])], difficulty=["all"],
                                environments=[instance]))
    assert scores == [None]


@pytest.mark.parametrize("tool_env", ["code-repair", "shell-task"])
def test_bundled_tool_envs_train_a_step(tool_env: str, tiny_model: Path, tmp_path: Path, nsjail_path: str) -> None:
    from verihub.trainers import GRPOTrainer

    trainer = GRPOTrainer(str(tiny_model), [f"envs/{tool_env}"], lora=True, max_steps=1,
                          num_generations=4, per_device_train_batch_size=8, max_completion_length=16,
                          output_dir=tmp_path / "run")
    trainer.train()
    record = metrics(tmp_path / "run")[0]
    assert record["step"] == 1 and record[f"rewards/{tool_env}/mean"] is not None
    assert record[f"verihub/{tool_env}/fault_rate"] == 0.0


def test_hub_ids_with_version_specs_are_installed_then_loaded(tmp_path: Path, make_env: Any, fresh_python: str) -> None:
    package = make_env(name="tiny-pkg")
    quiz = init_env("quiz", "single-turn", tmp_path)
    hub = LocalHub(tmp_path / "hub")
    hub.push(quiz, owner="alice")
    hub.push(quiz, owner="alice", bump="minor")
    code = ("from verihub.trainers.mixture import resolve_envs; "
            f"mix = resolve_envs({{'alice/quiz@^0.1': 2, {str(package)!r}: 1}}, hub={str(tmp_path / 'hub')!r}); "
            "print([(m.name, m.env.version, m.weight) for m in mix])")
    resolved = subprocess.run([fresh_python, "-c", code], capture_output=True, text=True, timeout=300)
    assert resolved.returncode == 0, resolved.stderr[-2000:]
    assert resolved.stdout.strip() == str([("quiz", "0.1.0", 2 / 3), ("tiny", "0.1.0", 1 / 3)])


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_use_vllm_without_vllm_says_how_to_install(tiny_model: Path) -> None:
    from verihub.trainers import GRPOTrainer

    with pytest.raises(MissingDependencyError, match='pip install "verihub\\[vllm\\]"'):
        GRPOTrainer(str(tiny_model), ["envs/arithmetic"], use_vllm=True)
    refused = run("train", "--model", str(tiny_model), "--env", "envs/arithmetic", "--use-vllm")
    assert refused.returncode != 0 and "verihub[vllm]" in flat(refused.stderr)


def _cuda_and_vllm() -> bool:
    import torch

    return torch.cuda.is_available() and importlib.util.find_spec("vllm") is not None


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_and_vllm(), reason="needs a CUDA GPU and vLLM")
def test_grpo_with_vllm_colocate_on_gpu(tiny_model: Path, tmp_path: Path) -> None:
    from verihub.trainers import GRPOTrainer

    trainer = GRPOTrainer(str(tiny_model), ["envs/arithmetic", "envs/json-extract"], lora=True, use_vllm=True,
                          vllm_mode="colocate", vllm_gpu_memory_utilization=0.2, max_steps=2, num_generations=4,
                          per_device_train_batch_size=8, max_completion_length=16, output_dir=tmp_path / "run")
    trainer.train()
    assert (tmp_path / "run" / "adapter_config.json").is_file()
    assert metrics(tmp_path / "run")[-1]["step"] == 2
