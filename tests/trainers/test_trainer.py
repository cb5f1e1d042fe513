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

from conftest import REPO, TOOL_SPEC
from verihub.errors import MissingDependencyError
from verihub.hub.local import LocalHub
from verihub.sandbox.nsjail import NsjailSandbox
from verihub.sandbox.tools import SandboxTools
from verihub.spec.scaffold import init_env
from verihub.trainers.rewards import EnvReward, GradeLedger

pytestmark = pytest.mark.slow

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
    trained = run(
        "train",
        "--model",
        str(tiny_model),
        "--env",
        "envs/arithmetic:3",
        "--env",
        "envs/json-extract",
        "--lora",
        "--max-steps",
        "3",
        "--heldout-every",
        "2",
        "--output-dir",
        str(out),
        *FAST,
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert (out / "adapter_config.json").is_file() and (out / "adapter_model.safetensors").is_file()
    assert not (out / "model.safetensors").exists()  # LoRA saves the adapter only
    records = metrics(out)
    assert [record["step"] for record in records[:3]] == [1, 2, 3]
    seen = set().union(*records)
    for env in ("arithmetic", "json-extract"):
        assert {
            f"verihub/{env}/pass_rate",
            f"verihub/{env}/fault_rate",
            f"verihub/{env}/heldout_pass_rate",
            f"rewards/{env}/mean",
        } <= seen
    weights = {key: value for key, value in records[0].items() if key.startswith("verihub/curriculum/")}
    assert len(weights) == 6 and sum(weights.values()) == pytest.approx(1.0)  # 2 envs x 3 difficulties
    assert sum(v for k, v in weights.items() if "/arithmetic/" in k) == pytest.approx(0.75)  # weight 3:1, unmeasured

    evaluated = run(
        "eval",
        "envs/arithmetic",
        "--model",
        f"hf:{tiny_model}",
        "--adapter",
        str(out),
        "-n",
        "2",
        "-k",
        "1",
        "--max-tokens",
        "8",
    )
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
    trained = run(
        "sft",
        "--model",
        str(tiny_model),
        "--env",
        "envs/arithmetic",
        "--env",
        "envs/math-word:0.5",
        "--trajectories",
        str(trajectories),
        "--max-steps",
        "2",
        "--output-dir",
        str(out),
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()

    from verihub.trainers.mixture import resolve_envs
    from verihub.trainers.sft import reference_pairs, trajectory_pairs

    pairs = reference_pairs(resolve_envs(["envs/arithmetic"])[0])
    assert pairs[0]["completion"][0]["content"].startswith("The value is \\boxed{")
    (game,) = resolve_envs(["textarena:GuessTheNumber-v0?size=6"])
    with pytest.raises(ValueError, match="reference is a placeholder, not a right answer"):
        reference_pairs(game)  # its reference stands in for the prompt: never learned as an answer
    assert trajectory_pairs(trajectories) == [{"prompt": conversation[:1], "completion": conversation[1:]}]
    from verihub.trainers import SFTTrainer

    mixed = SFTTrainer(
        str(tiny_model),
        ["envs/arithmetic"],
        trajectories=trajectories,
        demos=3,
        max_steps=1,
        output_dir=tmp_path / "sft-in-process",
    ).dataset
    assert conversation[:1] in mixed["prompt"] and len(set(map(str, mixed["prompt"]))) == 4  # 3 demos + the trajectory
    trajectories.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    with pytest.raises(ValueError, match="shipped.jsonl:1: expected"):
        trajectory_pairs(trajectories)


def test_multi_turn_tool_env_trains_through_environment_factory(
    tiny_model: Path, tmp_path: Path, make_env: Any, nsjail_path: str
) -> None:
    from verihub.trainers import GRPOTrainer

    tool_env = make_env(TOOL_SPEC, name="calc")
    trainer = GRPOTrainer(
        str(tiny_model),
        {str(tool_env): 1, "envs/arithmetic": 1},
        lora=True,
        max_steps=1,
        num_generations=4,
        per_device_train_batch_size=8,
        max_completion_length=12,
        output_dir=tmp_path / "run",
    )
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
    scores = asyncio.run(
        reward(
            prompts=[[]],
            completions=[[{"role": "assistant", "content": "\\boxed{2}"}]],
            environment=["calc-tool"],
            task=[json.dumps(rows[0])],
            difficulty=["all"],
            environments=[instance],
        )
    )
    assert scores == [None]


@pytest.mark.parametrize("tool_env", ["code-repair", "shell-task"])
def test_bundled_tool_envs_train_a_step(tool_env: str, tiny_model: Path, tmp_path: Path, nsjail_path: str) -> None:
    from verihub.trainers import GRPOTrainer

    trainer = GRPOTrainer(
        str(tiny_model),
        [f"envs/{tool_env}"],
        lora=True,
        max_steps=1,
        num_generations=4,
        per_device_train_batch_size=8,
        max_completion_length=16,
        output_dir=tmp_path / "run",
    )
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
    code = (
        "from verihub.trainers.mixture import resolve_envs; "
        f"mix = resolve_envs({{'alice/quiz@^0.1': 2, {str(package)!r}: 1}}, hub={str(tmp_path / 'hub')!r}); "
        "print([(m.name, m.env.version, m.weight) for m in mix])"
    )
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

    trainer = GRPOTrainer(
        str(tiny_model),
        ["envs/arithmetic", "envs/json-extract"],
        lora=True,
        use_vllm=True,
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=0.2,
        max_steps=2,
        num_generations=4,
        per_device_train_batch_size=8,
        max_completion_length=16,
        output_dir=tmp_path / "run",
    )
    trainer.train()
    assert (tmp_path / "run" / "adapter_config.json").is_file()
    assert metrics(tmp_path / "run")[-1]["step"] == 2


CRASHING_SPEC = """\
id: crashing
version: 0.1.0
domain: math
description: Sums, graded by a check that always crashes.
dataset: {source: data/tasks.jsonl, split: {train: 0.5, eval: 0.5}}
prompt:
  user: "What is {question}?"
verifier:
  - {name: correct, layer: check, use: "crashing_check:score"}
gold:
  reference: '{answer}'
"""


def strict_json(line: str) -> dict[str, Any]:
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    record = json.loads(line, parse_constant=refuse)
    assert isinstance(record, dict)
    return record


def test_train_log_format_json_is_all_stdout_holds_and_trl_lines_go_to_the_run_dir(
    tiny_model: Path, tmp_path: Path, make_env: Any
) -> None:
    crashing = make_env(
        CRASHING_SPEC,
        files={"crashing_check.py": "def score(completion, task):\n    raise RuntimeError('the checker crashed')\n"},
        name="crashing",
    )
    out = tmp_path / "grpo"
    trained = run(
        "train",
        "--model",
        str(tiny_model),
        "--env",
        "envs/arithmetic",
        "--env",
        str(crashing),
        "--max-steps",
        "3",
        "--output-dir",
        str(out),
        "--log-format",
        "json",
        *FAST,
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    records = [strict_json(line) for line in trained.stdout.splitlines()]  # every line, nothing else
    steps = [record for record in records if "loss" in record]
    assert [(r["stage"], r["step"], r["max_steps"]) for r in steps] == [("grpo", 1, 3), ("grpo", 2, 3), ("grpo", 3, 3)]
    assert {
        "verihub/arithmetic/pass_rate",
        "verihub/arithmetic/reward",
        "verihub/crashing/fault_rate",
        "verihub/curriculum/arithmetic/1",
    } <= set(steps[0])
    assert "train_runtime" in records[-1]  # TRL's closing log is a record like the others
    trl_log = (out / "trl.log").read_text()
    assert trl_log.count("{'step': ") == len(records) and "{'step': 1, 'loss': " in trl_log
    assert "{'" not in trained.stdout + trained.stderr  # TRL's printer is gone from the terminal
    # TRL's notice about rows that no reward function scored: in the run log, not on the terminal
    assert "All reward functions returned None" in trl_log and "All reward functions" not in trained.stderr
    assert "Warning" not in trained.stderr and "deprecated" not in trained.stderr  # the dependencies' warnings
    assert "environment fault in crashing (no reward, not scored as wrong)" in trained.stderr  # ours still shows
    assert f"saved the model and metrics.jsonl to {out}" in trained.stderr


def test_sft_quiet_prints_the_summary_only_and_without_a_terminal_a_few_lines(tiny_model: Path, tmp_path: Path) -> None:
    quiet = run(
        "sft",
        "--model",
        str(tiny_model),
        "--env",
        "envs/arithmetic",
        "--max-steps",
        "12",
        "--quiet",
        "--output-dir",
        str(tmp_path / "quiet"),
        "--set",
        "logging_steps=1",
    )
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    lines = quiet.stdout.splitlines()
    assert len(lines) == 3 and lines[0].startswith("SFT: 12 steps in ") and " · loss " in lines[0]
    assert lines[1:] == [
        f"TRL's log lines: {tmp_path / 'quiet' / 'trl.log'}",
        f"saved the model to {tmp_path / 'quiet'}",
    ]
    assert (tmp_path / "quiet" / "trl.log").read_text().count("{'step': ") == 13  # 12 steps and TRL's closing line
    assert "Warning" not in quiet.stderr and "deprecated" not in quiet.stderr

    piped = run(
        "sft",
        "--model",
        str(tiny_model),
        "--env",
        "envs/arithmetic",
        "--max-steps",
        "12",
        "--output-dir",
        str(tmp_path / "piped"),
        "--set",
        "logging_steps=1",
    )  # stdout is a pipe
    assert piped.returncode == 0, piped.stderr[-3000:]
    lines = piped.stdout.splitlines()
    assert len(lines) == 7, piped.stdout  # the start, three quarters, the summary, the log file, saved
    assert [line.split(",")[0] for line in lines[1:4]] == ["SFT 3/12 (25%)", "SFT 6/12 (50%)", "SFT 9/12 (75%)"]
    assert "\x1b" not in piped.stdout and "{'" not in piped.stdout + piped.stderr

    both = run("sft", "--model", str(tiny_model), "--env", "envs/arithmetic", "--quiet", "--log-format", "json")
    assert both.returncode == 2 and "use one" in flat(both.stderr)


def test_a_multi_process_run_displays_on_the_main_process_only(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "sft"
    launched = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "verihub.cli",
            "sft",
            "--model",
            str(tiny_model),
            "--env",
            "envs/arithmetic",
            "--max-steps",
            "3",
            "--log-format",
            "json",
            "--output-dir",
            str(out),
            "--set",
            "logging_steps=1",
            "--set",
            "ddp_backend=gloo",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
    )
    assert launched.returncode == 0, launched.stderr[-3000:]
    records = [strict_json(line) for line in launched.stdout.splitlines()]
    assert [record["step"] for record in records] == [1, 2, 3, 3]  # once each (and TRL's closing line), not twice
    assert launched.stderr.count("saved the model to") == 1
    assert (out / "trl.log").read_text().count("{'step': ") == 4 and (out / "trl.rank1.log").is_file()
