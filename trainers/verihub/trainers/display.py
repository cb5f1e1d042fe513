"""What a person, or a script, sees while a trainer runs: one display per stage (a ``TrainerCallback``).

    GRPOTrainer(..., display="rich")   # or "quiet", "json"; the CLI: --quiet, --log-format json

- ``"rich"`` (default): on a terminal, a live panel that stays put: the stage, step / total with a
  bar, time elapsed and the ETA; per environment its reward, training pass rate, held-out pass rate,
  faults and curriculum weight (whatever the run logs: SFT has none of these); TRL's loss, KL,
  entropy or token accuracy, and the learning rate; the reward-hacking alerts that hold. When stdout
  is not a terminal (CI, a pipe) it prints plain lines instead: the start, each quarter of the run,
  the summary.
- ``"quiet"``: nothing while it runs; the summary at the end.
- ``"json"``: one JSON object per logging step on stdout, and nothing else there: ``stage``, ``step``,
  ``max_steps`` and the metrics TRL and verihub logged, flat as in ``metrics.jsonl``
  (``verihub/<env>/pass_rate``, ...); numbers that are not finite are ``null``.

The summary names the run's ``trl.log`` (:mod:`.runlog`), where TRL's raw log lines went. Only the
main process of a multi-process run (accelerate, torchrun) displays.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text
from transformers import TrainerCallback

from verihub.errors import UsageError

__all__ = ["DISPLAY_MODES", "DisplayMode", "RunDisplay", "check_display", "env_metrics", "finite"]

DisplayMode = Literal["rich", "quiet", "json"]
DISPLAY_MODES: tuple[str, ...] = get_args(DisplayMode)

# verihub/<env>/<field> -> column; verihub/curriculum/<env>/<difficulty> sum to the environment's weight
ENV_COLUMNS = {
    "reward": "reward",
    "pass_rate": "pass rate",
    "heldout_pass_rate": "held-out",
    "faults": "faults",
    "curriculum": "curriculum",
}
# TRL's scalars worth a glance, in this order (GRPO: loss, kl, entropy; SFT: loss, token accuracy)
SCALARS = {
    "loss": "loss",
    "kl": "kl",
    "entropy": "entropy",
    "mean_token_accuracy": "token accuracy",
    "learning_rate": "lr",
}
QUARTERS = 4  # plain lines per run, besides the start and the summary


def check_display(display: str) -> DisplayMode:
    if display not in DISPLAY_MODES:
        raise UsageError(f"display={display!r}: use one of {', '.join(map(repr, DISPLAY_MODES))}")
    return display  # type: ignore[return-value]  # one of DISPLAY_MODES: checked above


def finite(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record with NaN and infinities as None: strict JSON parsers refuse them."""
    return {
        key: None if isinstance(value, float) and not math.isfinite(value) else value for key, value in record.items()
    }


def env_metrics(metrics: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Per environment, the display's fields found among logged metrics (``verihub/<env>/<field>``)."""
    envs: dict[str, dict[str, float]] = {}
    for key, value in metrics.items():
        parts = key.split("/")
        if not isinstance(value, (int, float)) or parts[0] != "verihub":
            continue
        if len(parts) == 4 and parts[1] == "curriculum":
            fields = envs.setdefault(parts[2], {})
            fields["curriculum"] = fields.get("curriculum", 0.0) + value
        elif len(parts) == 3 and parts[2] in ENV_COLUMNS:
            envs.setdefault(parts[1], {})[parts[2]] = value
    return envs


@dataclass
class _State:
    """What the display knows; replaced, never mutated, so the live thread always reads a whole one."""

    step: int = 0
    max_steps: int = 0
    step_time: float = 0.0  # seconds from the start to the end of the latest step
    latest: dict[str, Any] = field(default_factory=dict)  # every metric's latest value
    alerts: tuple[str, ...] = ()  # alerts in the latest log


class RunDisplay(TrainerCallback):
    """The display of one stage (``stage``: its name, e.g. "GRPO"); see the module docstring."""

    def __init__(
        self,
        stage: str,
        mode: DisplayMode = "rich",
        *,
        log_path: str | Path | None = None,
        console: Console | None = None,
    ) -> None:
        self.stage, self.mode = stage, check_display(mode)
        self.log_path = Path(log_path) if log_path else None
        self.console = console
        self._state = _State()
        self._start = 0.0
        self._live: Live | None = None
        self._next_quarter = 1

    # TrainerCallback events (main process only)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        self.console = self.console or Console()
        self._start = time.monotonic()
        self._state = _State(max_steps=state.max_steps)
        self._next_quarter = 1
        if self.mode != "rich":
            return
        if self._is_live():
            self._live = Live(self, console=self.console, refresh_per_second=2, transient=False)
            self._live.start()
        else:
            where = f"; TRL's log lines go to {self.log_path}" if self.log_path else ""
            self._print(f"{self.stage}: {state.max_steps} steps{where}")

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero:
            self._state = _State(
                state.global_step,
                self._state.max_steps,
                time.monotonic() - self._start,
                self._state.latest,
                self._state.alerts,
            )

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero or not logs:
            return
        if self.mode == "json":
            record = {"stage": self.stage.lower(), "step": state.global_step, "max_steps": state.max_steps, **logs}
            sys.stdout.write(json.dumps(finite(record), allow_nan=False) + "\n")
            sys.stdout.flush()
            return
        alerts = tuple(
            f"{key.split('/')[1]} in {key.split('/', 2)[2]}"
            for key, value in logs.items()
            if key.startswith("alerts/") and key.count("/") == 2 and value
        )
        previous = self._state
        self._state = _State(
            previous.step, previous.max_steps, previous.step_time, {**previous.latest, **finite(logs)}, alerts
        )
        if self.mode == "rich" and self._live is None and self._quarter_reached(state.global_step):
            self._print(self._line())

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not state.is_world_process_zero or self.mode == "json":
            return
        live = self._live
        self.close()
        if live is not None:
            self._print(self._summary_head())
        else:
            self._print(self._line(summary=True))
        if self.log_path:
            self._print(f"TRL's log lines: {self.log_path}")

    def close(self) -> None:
        """Stop the live panel (also when training raised: the terminal is left as it was)."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    # rendering

    def __rich__(self) -> RenderableType:
        state = self._state
        header = Table.grid(padding=(0, 1))
        header.add_row(
            Text(self.stage, style="bold"),
            ProgressBar(total=max(state.max_steps, 1), completed=state.step, width=30),
            Text(f"{state.step}/{state.max_steps}"),
            Text(self._timing(state), style="dim"),
        )
        parts: list[RenderableType] = [header]
        envs = env_metrics(state.latest)
        if envs:
            table = Table(box=None, pad_edge=False, padding=(0, 2), show_edge=False)
            table.add_column("environment", style="bold")
            columns = [name for name in ENV_COLUMNS if any(name in fields for fields in envs.values())]
            for name in columns:
                table.add_column(ENV_COLUMNS[name], justify="right")
            for env, fields in envs.items():
                table.add_row(env, *(_format(name, fields.get(name)) for name in columns))
            parts.append(table)
        scalars = self._scalars(state)
        if scalars:
            parts.append(Text(scalars, style="dim"))
        if state.alerts:
            parts.append(Text("alerts: " + "; ".join(state.alerts), style="bold red"))
        return Group(*parts)

    def _line(self, *, summary: bool = False) -> str:
        """One plain line: the progress (or, at the end, the total), each environment, the scalars."""
        state = self._state
        head = (
            self._summary_head()
            if summary
            else (
                f"{self.stage} {state.step}/{state.max_steps} ({state.step / max(state.max_steps, 1):.0%}), "
                f"{self._timing(state)}"
            )
        )
        envs = [
            f"{env}: "
            + ", ".join(
                f"{label} {_format(name, fields[name])}" for name, label in ENV_COLUMNS.items() if name in fields
            )
            for env, fields in env_metrics(state.latest).items()
        ]
        tail = [self._scalars(state)] if self._scalars(state) else []
        alerts = ["alerts: " + "; ".join(state.alerts)] if state.alerts else []
        return " · ".join([head, *envs, *tail, *alerts])

    def _summary_head(self) -> str:
        state = self._state
        return f"{self.stage}: {state.step} steps in {_clock(time.monotonic() - self._start)}"

    def _timing(self, state: _State) -> str:
        elapsed = time.monotonic() - self._start
        if not state.step or state.step >= state.max_steps:
            return f"{_clock(elapsed)} elapsed"
        eta = max(0.0, state.step_time / state.step * state.max_steps - elapsed)
        return f"{_clock(elapsed)} elapsed · ETA {_clock(eta)}"

    @staticmethod
    def _scalars(state: _State) -> str:
        return " · ".join(
            f"{label} {_format(key, state.latest[key])}"
            for key, label in SCALARS.items()
            if isinstance(state.latest.get(key), (int, float))
        )

    def _quarter_reached(self, step: int) -> bool:
        """True once per quarter of the run (a plain line then); the end is the summary's."""
        reached = False
        while self._next_quarter < QUARTERS and step >= self._state.max_steps * self._next_quarter / QUARTERS:
            self._next_quarter += 1
            reached = True
        return reached and step < self._state.max_steps

    def _is_live(self) -> bool:
        console = self.console
        assert console is not None
        return (console.is_terminal and not console.is_dumb_terminal) or console.is_jupyter

    def _print(self, text: str) -> None:
        assert self.console is not None
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)


def _format(name: str, value: float | None) -> str:
    if value is None:
        return "–"
    if name in ("pass_rate", "heldout_pass_rate", "mean_token_accuracy"):
        return f"{value:.1%}"
    if name == "curriculum":
        return f"{value:.0%}"
    if name == "faults":
        return f"{value:.0f}"
    if name == "learning_rate":
        return f"{value:.1e}"
    if name == "reward":
        return f"{value:.2f}"
    return f"{value:.3g}"


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
