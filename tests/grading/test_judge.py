"""The judge layer with a model behind an OpenAI-compatible loopback server, and its calibration."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import verihub
from conftest import REPO
from verihub.eval.evaluate import evaluate
from verihub.grading.judge import parse_verdict
from verihub.spec.scaffold import init_env
from verihub.testing import ScriptedChatServer
from verihub.validation.calibration import acalibrate

VERIHUB = str(Path(sys.executable).with_name("verihub"))
MECHANISMS = ("scatter", "immune", "antibod", "tilt", "carbon dioxide", "refrigerant")


def fair_judge(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Scores by whether the response names a mechanism; answers in the strict verdict format."""
    response = request["messages"][-1]["content"].split("RESPONSE:\n", 1)[1].lower()
    named = any(word in response for word in MECHANISMS)
    vague = "some way" in response
    score = 0.5 if vague else 1.0 if named else 0.0
    return [{"content": json.dumps({"score": score, "reason": "names the mechanism" if named else "misses it"})}]


def constant_judge(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"content": '{"score": 0.5, "reason": "meh"}'}]


def chatty_judge(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"content": "I'd give it a 7 out of 10, nice work!"}]


@pytest.fixture
def judge_env(tmp_path: Path) -> Path:
    return init_env("explainer", "judge", tmp_path)


def test_parse_verdict_is_strict() -> None:
    assert parse_verdict('{"score": 0.75, "reason": "ok"}').score == 0.75
    assert parse_verdict('```json\n{"score": 1, "reason": "good"}\n```').reason == "good"
    for bad in (
        "7/10",
        '{"score": 1.5}',
        '{"score": "high"}',
        '{"score": true}',
        '{"rating": 1}',
        '{"score": 1, "reason": "x", "extra": 1}',
        "None",
        "[1]",
    ):
        with pytest.raises(ValueError):
            parse_verdict(bad)


def test_judge_layer_scores_through_the_server_and_caches(judge_env: Path) -> None:
    with ScriptedChatServer(fair_judge) as server:
        env = verihub.load_env(judge_env, judge_model=f"openai:judge@{server.url}")
        task = env.dataset("train")[0]
        good = env.grade(task, env.reference(task))
        assert good.status == "ok" and good.layer("quality").score == 1.0
        assert good.layer("quality").detail == "names the mechanism"
        before = len(server.requests)
        env.verifier.clear_cache()
        env.grade(task, env.reference(task))  # the verdict cache answers
        assert len(server.requests) == before
        prompt = server.requests[0]["messages"]
        assert "RUBRIC:" in prompt[-1]["content"] and "Score the explanation" in prompt[-1]["content"]
        assert server.requests[0]["temperature"] == 0


@pytest.mark.parametrize(("script", "why"), [(chatty_judge, "unusable verdict"), (None, "judge unreachable")])
def test_unparseable_verdicts_and_outages_are_env_error(judge_env: Path, script: Any, why: str) -> None:
    with ScriptedChatServer(script or fair_judge, fail_first=10_000 if script is None else 0) as server:
        env = verihub.load_env(judge_env, judge_model=f"openai:judge@{server.url}")
        task = env.dataset("train")[0]
        grade = env.grade(task, env.reference(task))
    assert grade.status == "env_error" and grade.reward is None and why in grade.reason
    assert grade.layer("quality").score is None
    if script is chatty_judge:
        assert len(server.requests) == 6  # the judge retried thrice, then gave up; the verifier retries a fault once


def test_calibration_agreement_in_validate(judge_env: Path) -> None:
    with ScriptedChatServer(fair_judge) as server:
        env = verihub.load_env(judge_env, judge_model=f"openai:judge@{server.url}")
        import asyncio

        report = asyncio.run(acalibrate(env))
        assert (report.items, report.agreed, report.ok) == (6, 6, True)
        result = subprocess.run(
            [VERIHUB, "validate", str(judge_env), "--judge-model", f"openai:judge@{server.url}"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "COLUMNS": "200"},
        )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "judge calibration: 6/6 agree (100%, need 80%) ok" in result.stdout
    with ScriptedChatServer(constant_judge) as lazy:
        failed = subprocess.run(
            [VERIHUB, "validate", str(judge_env), "--judge-model", f"openai:lazy@{lazy.url}", "--json"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    report_json = json.loads(failed.stdout)
    assert failed.returncode == 1 and report_json["calibration"]["agreed"] == 1  # only the 0.5 item agrees


def test_drift_monitor_warns_during_eval(judge_env: Path, caplog: pytest.LogCaptureFixture) -> None:
    spec = (
        (judge_env / "environment.yaml")
        .read_text()
        .replace("min_agreement: 0.8", "min_agreement: 0.8\n  drift_every: 2\n  drift_items: 2")
    )
    (judge_env / "environment.yaml").write_text(spec)

    def model_and_lazy_judge(request: dict[str, Any]) -> list[dict[str, Any]]:
        if "RUBRIC:" in request["messages"][-1]["content"]:
            return constant_judge(request)
        return [
            {
                "content": "Light scatters in the air, and blue scatters the most, so the whole sky glows blue "
                "from every direction we look."
            }
        ] * request["n"]

    with ScriptedChatServer(model_and_lazy_judge) as server:
        env = verihub.load_env(judge_env, judge_model=f"openai:judge@{server.url}")
        with caplog.at_level("WARNING", logger="verihub.grading.judge"):
            report = evaluate(env, f"openai:model@{server.url}", n=2, k=2, split="eval")
    assert report.metrics["judge_drift_agreement"] == [0.0, 0.5]
    assert any("judge drift" in record.message for record in caplog.records)


def test_validate_without_a_judge_model_skips_calibration(judge_env: Path) -> None:
    result = subprocess.run(
        [VERIHUB, "validate", str(judge_env)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode == 0 and "judge layers were skipped" in result.stdout
    assert "judge calibration" not in result.stdout
