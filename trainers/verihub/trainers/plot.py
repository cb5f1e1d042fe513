"""PNG curves of a run from its ``metrics.jsonl``: ``verihub plot RUN_DIR`` (matplotlib, headless).

One figure per family, one line per environment: training pass rate, held-out pass rate, reward,
environment-fault rate, answer length, curriculum sampling weights, and TRL's loss/KL/entropy; alert
steps are marked on the pass-rate figure.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from verihub.errors import DataError, FileMissingError

__all__ = ["FIGURES", "plot_run", "read_metrics"]

# figure file stem -> (title, regex over metric names whose group(1) names the line)
FIGURES: dict[str, tuple[str, str]] = {
    "pass_rate": ("training pass rate per environment", r"verihub/([^/]+)/pass_rate"),
    "heldout_pass_rate": ("held-out pass rate per environment (greedy)", r"verihub/([^/]+)/heldout_pass_rate"),
    "reward": ("mean reward per environment", r"verihub/([^/]+)/reward"),
    "fault_rate": ("environment-fault rate per environment", r"verihub/([^/]+)/fault_rate"),
    "length": ("answer length (characters)", r"verihub/([^/]+)/length"),
    "curriculum": ("curriculum sampling weight per (environment, difficulty)", r"verihub/curriculum/(.+)"),
    "training": ("TRL: loss, KL, entropy", r"(loss|kl|entropy)"),
}


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        raise FileMissingError(f"{path} does not exist: point at the output_dir of a verihub train run")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise DataError(f"{path}:{number}: not JSON ({error.msg})") from None
    return records


def plot_run(run_dir: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Write one PNG per figure that has data; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = Path(run_dir)
    target = Path(out_dir) if out_dir else run / "plots"
    target.mkdir(parents=True, exist_ok=True)
    records = read_metrics(run)
    alert_steps = [record["step"] for record in records if record.get("alerts")]
    written = []
    for stem, (title, pattern) in FIGURES.items():
        lines: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for record in records:
            for key, value in record.items():
                match = re.fullmatch(pattern, key)
                if match and isinstance(value, (int, float)):
                    lines[match.group(1)].append((record["step"], float(value)))
        if not lines:
            continue
        figure, axes = plt.subplots(figsize=(8, 4.5))
        for name, points in sorted(lines.items()):
            steps, values = zip(*points, strict=True)
            axes.plot(steps, values, marker="o" if len(points) < 30 else None, markersize=3, label=name)
        if stem == "pass_rate":
            for step in alert_steps:
                axes.axvline(step, color="red", alpha=0.2)
        axes.set(title=title, xlabel="step")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
        path = target / f"{stem}.png"
        figure.tight_layout()
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)
    return written
