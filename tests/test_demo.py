"""The README's main job, shortened: hub -> pip install -> tiny model -> SFT -> GRPO with LoRA -> before/after."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def test_training_demo_runs_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = subprocess.run([sys.executable, "scripts/train_demo.py", "--out", str(out), "--sft-steps", "2",
                             "--grpo-steps", "2", "--heldout-tasks", "4"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "pip: installed demo/compare@1.0.0" in result.stdout and "pip: installed demo/sums@1.1.0" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    for stage in ("before", "after"):
        assert {env for rates in summary[stage].values() for env in rates} == {"compare", "sums"}
        assert all(0.0 <= rate <= 1.0 for rates in summary[stage].values() for rate in rates.values())
    assert (out / "grpo" / "adapter_model.safetensors").is_file()
    assert (out / "grpo" / "plots" / "heldout_pass_rate.png").is_file()
