"""The README's main job, shortened: hub -> pip install -> tiny model -> SFT -> GRPO with LoRA -> before/after."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def test_training_demo_runs_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = subprocess.run(
        [
            sys.executable,
            "scripts/train_demo.py",
            "--out",
            str(out),
            "--sft-steps",
            "2",
            "--grpo-steps",
            "2",
            "--heldout-tasks",
            "4",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "pip: installed demo/reverse@1.0.0" in result.stdout and "pip: installed demo/sort@1.0.0" in result.stdout
    # a person can follow it: a few lines per stage, no raw TRL dicts, no dependency warnings, the table at the end
    assert "{'" not in result.stdout + result.stderr and "Warning" not in result.stderr, result.stderr[-3000:]
    assert len(result.stdout.splitlines()) < 60, result.stdout
    assert "SFT: 2 steps in " in result.stdout and "GRPO: 2 steps in " in result.stdout
    ending = result.stdout[result.stdout.index("4. held-out pass@1") :]
    assert "SFT + GRPO" in ending and f"curves in {out / 'grpo' / 'plots'}: " in ending
    assert "{'step': 2, 'train_runtime': " in (out / "grpo" / "trl.log").read_text()  # TRL's log lines: in the run dir
    summary = json.loads((out / "summary.json").read_text())
    for stage in ("before", "after"):
        assert {env for rates in summary[stage].values() for env in rates} == {"reverse", "sort"}
        assert all(0.0 <= rate <= 1.0 for rates in summary[stage].values() for rate in rates.values())
    # each change beside its noise (4 held-out tasks: wide), and the whole demo's time, set-up included
    assert all(0.0 <= noise <= 1.0 for rates in summary["noise"].values() for noise in rates.values())
    assert summary["noise"]["greedy"].keys() == {"reverse", "sort"}
    assert summary["demo_wall_s"] > summary["total_s"] > 0 and summary["demo_cpu_s"] > 0
    assert "whole demo, set-up stage included: " in result.stdout
    assert (out / "grpo" / "adapter_model.safetensors").is_file()
    assert (out / "grpo" / "plots" / "heldout_pass_rate.png").is_file()
