"""The run display (verihub.trainers.display) driven through TrainerCallback events, on a real rich Console:
a live panel on a terminal, a few plain lines elsewhere, the summary alone when quiet, strict JSON lines."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from verihub.trainers.display import RunDisplay, env_metrics

LOGS: dict[str, Any] = {
    "loss": 0.0123,
    "kl": 0.0031,
    "learning_rate": 1e-3,
    "reward_std": float("nan"),
    "verihub/compare/reward": 0.62,
    "verihub/compare/pass_rate": 0.612,
    "verihub/compare/faults": 0.0,
    "verihub/compare/pass_rate/1": 0.5,
    "verihub/compare/heldout_pass_rate": 0.58,
    "verihub/sums/reward": 0.4,
    "verihub/sums/pass_rate": 0.375,
    "verihub/sums/faults": 2.0,
    "verihub/curriculum/compare/1": 0.4,
    "verihub/curriculum/compare/2": 0.31,
    "verihub/curriculum/sums/1": 0.29,
    "alerts/heldout/sums": 1.0,
}


def drive(
    display: RunDisplay, steps: int, *, main: bool = True, logs: dict[str, Any] = LOGS, log_every: int = 1
) -> None:
    """What TRL's trainer calls: begin, then per step its end (and every log_every steps a log), then the end."""
    state = SimpleNamespace(is_world_process_zero=main, max_steps=steps, global_step=0)
    display.on_train_begin(None, state, None)
    for step in range(1, steps + 1):
        state.global_step = step
        display.on_step_end(None, state, None)
        if step % log_every == 0:
            display.on_log(None, state, None, logs=dict(logs))
    display.on_train_end(None, state, None)


def console(terminal: bool) -> Console:
    return Console(
        file=io.StringIO(), force_terminal=terminal, width=100, color_system=None if not terminal else "standard"
    )


def test_per_environment_metrics_and_curriculum_weights_from_the_logged_keys() -> None:
    envs = env_metrics(LOGS)
    assert envs["compare"] == {
        "reward": 0.62,
        "pass_rate": 0.612,
        "faults": 0.0,
        "heldout_pass_rate": 0.58,
        "curriculum": pytest.approx(0.71),
    }
    assert envs["sums"]["curriculum"] == pytest.approx(0.29) and "heldout_pass_rate" not in envs["sums"]


def test_on_a_terminal_a_live_panel_with_each_environment_then_one_summary_line() -> None:
    screen = console(terminal=True)
    drive(RunDisplay("GRPO", console=screen, log_path="runs/x/trl.log"), 40)
    text = screen.file.getvalue()
    assert "\x1b[?25l" in text  # rich's live display took the terminal (and gave it back)
    live, after = text.rsplit("\x1b[?25h", 1)
    last_frame = live.rsplit("GRPO", 1)[-1]
    for shown in (
        "40/40",
        "compare",
        "61.2%",
        "58.0%",
        "71%",
        "sums",
        "29%",
        "0.62",
        "alerts: heldout in sums",
        "loss 0.0123",
        "kl 0.0031",
    ):
        assert shown in last_frame, shown
    assert after.splitlines() == ["GRPO: 40 steps in 0:00", "TRL's log lines: runs/x/trl.log"]


def test_without_a_terminal_a_few_plain_lines_however_many_steps() -> None:
    out = console(terminal=False)
    drive(RunDisplay("GRPO", console=out, log_path="runs/x/trl.log"), 400)
    lines = out.file.getvalue().splitlines()
    assert len(lines) == 6  # the start, three quarters, the summary, where TRL's lines went
    assert lines[0] == "GRPO: 400 steps; TRL's log lines go to runs/x/trl.log"
    assert [line.split(",")[0] for line in lines[1:4]] == [
        "GRPO 100/400 (25%)",
        "GRPO 200/400 (50%)",
        "GRPO 300/400 (75%)",
    ]
    assert "compare: reward 0.62, pass rate 61.2%, held-out 58.0%, faults 0, curriculum 71%" in lines[4]
    assert "\x1b" not in out.file.getvalue()

    out = console(terminal=False)
    drive(RunDisplay("SFT", console=out), 8, log_every=8)  # one log, at the end: no quarter line, the summary
    assert [line.split(" · ")[0] for line in out.file.getvalue().splitlines()] == [
        "SFT: 8 steps",
        "SFT: 8 steps in 0:00",
    ]


def test_quiet_prints_the_summary_only() -> None:
    out = console(terminal=True)
    drive(
        RunDisplay("SFT", "quiet", console=out, log_path="runs/s/trl.log"),
        50,
        logs={"loss": 1.5, "mean_token_accuracy": 0.61, "learning_rate": 2e-5},
    )
    assert out.file.getvalue().splitlines() == [
        "SFT: 50 steps in 0:00 · loss 1.5 · token accuracy 61.0% · lr 2.0e-05",
        "TRL's log lines: runs/s/trl.log",
    ]


def test_json_is_one_strict_json_object_per_logging_step(capsys: pytest.CaptureFixture[str]) -> None:
    drive(RunDisplay("GRPO", "json", console=console(terminal=True)), 3)
    lines = capsys.readouterr().out.splitlines()

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    records = [json.loads(line, parse_constant=refuse) for line in lines]
    assert [(r["stage"], r["step"], r["max_steps"]) for r in records] == [
        ("grpo", 1, 3),
        ("grpo", 2, 3),
        ("grpo", 3, 3),
    ]
    assert records[0]["verihub/compare/pass_rate"] == 0.612 and records[0]["reward_std"] is None  # NaN: null


def test_only_the_main_process_displays(capsys: pytest.CaptureFixture[str]) -> None:
    for mode in ("rich", "quiet", "json"):
        out = console(terminal=False)
        drive(RunDisplay("GRPO", mode, console=out), 8, main=False)
        assert out.file.getvalue() == "" and capsys.readouterr().out == ""


def test_an_unknown_display_is_refused_before_anything_loads() -> None:
    from verihub.trainers import GRPOTrainer, SFTTrainer

    for trainer in (GRPOTrainer, SFTTrainer):
        with pytest.raises(ValueError, match="display='fancy': use one of 'rich', 'quiet', 'json'"):
            trainer("no/such-model", ["envs/arithmetic"], display="fancy")
