"""Every bundled environment, and every template `verihub init` copies, blocks its whole red-team suite."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO, VERIHUB
from verihub.spec.scaffold import TEMPLATES, init_env

BUNDLED = sorted(path.name for path in (REPO / "envs").iterdir() if (path / "environment.yaml").is_file())


@functools.cache  # the families test reads the reports the per-environment tests made
def validate(path: Path) -> tuple[subprocess.CompletedProcess[str], dict, float]:
    start = time.perf_counter()
    result = subprocess.run(
        [VERIHUB, "validate", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "200"},
    )
    return result, json.loads(result.stdout), time.perf_counter() - start


def assert_blocks_its_suite(name: str, path: Path) -> None:
    result, report, seconds = validate(path)
    assert report["references_passed"] == report["references"] and report["negatives_rejected"] == report["negatives"]
    failed = {entry["name"]: entry for entry in report["exploits"] if entry["verdict"] in ("passed", "fault", "error")}
    assert not failed, "\n".join(report["failures"])
    assert report["exploits_ran"] >= 4 and report["exploits_blocked"] == report["exploits_ran"]
    assert {entry["family"] for entry in report["exploits"]} >= {"length"}
    assert result.returncode == 0, result.stdout[-2000:]
    assert seconds < 120, f"validate {name} took {seconds:.0f}s"


@pytest.mark.parametrize("env", BUNDLED)
def test_every_bundled_environment_blocks_its_red_team_suite(env: str) -> None:
    assert_blocks_its_suite(env, REPO / "envs" / env)


@pytest.mark.parametrize("template", TEMPLATES)
def test_every_template_blocks_its_red_team_suite(template: str, tmp_path: Path) -> None:
    assert_blocks_its_suite(template, init_env(f"my-{template}", template, tmp_path))


def test_the_suite_covers_the_families_of_the_threat_model() -> None:
    families: set[str] = set()
    for env in ("sql", "shell-task", "code-repair", "json-extract", "math-word"):
        _, report, _ = validate(REPO / "envs" / env)
        families |= {entry["family"] for entry in report["exploits"] if entry["verdict"] != "not_applicable"}
    assert families >= {
        "hedging",
        "format-gaming",
        "length",
        "sql",
        "terminal-state",
        "json",
        "reading-the-answer",
        "harness-tampering",
        "forged-output",
    }
