"""The fault-forcing family of the red-team suite, through ``verihub validate``: answers at and past the
environment's own limits in its own answer form, and growth probing that finds a super-linear step in an
environment's code without knowing its pattern."""

from __future__ import annotations

import json
import os
import re
import subprocess

from conftest import VERIHUB, MakeEnv

SPEC = """\
id: probe
version: 0.1.0
domain: test
description: Sums with a check of its own.
dataset: {{source: data/tasks.jsonl, split: {{eval: 1.0}}}}
prompt: {{user: "What is {{question}}?"}}
grading: {{max_answer_chars: 80000}}
verifier:
  - {{name: format, layer: rule, use: boxed, gate: true}}
  - {{name: mine, layer: check, use: "{module}:{check}", timeout_s: 30}}
gold: {{reference: 'The value is \\boxed{{{{{{answer}}}}}}.'}}
"""
CHECKS = '''\
def quadratic(completion, task):
    """Right answers pass; but every opening bracket is looked for in the whole answer (n^2 on brackets)."""
    sum(completion.count(c) for c in completion if c in "[{(")
    return completion.endswith("{" + task["answer"] + "}.")


def long_is_good(completion, task):
    """Takes a long answer for effort: a reward a policy gets by padding."""
    return len(completion) > 5000 or completion.endswith("{" + task["answer"] + "}.")


def linear(completion, task):
    return completion.endswith("{" + task["answer"] + "}.")
'''
ROWS = [{"id": f"t{i}", "question": f"{i} + {i}", "answer": str(2 * i)} for i in range(1, 9)]


def validate(make_env: MakeEnv, check: str) -> tuple[int, dict, str]:
    module = f"probe_{check}"
    root = make_env(SPEC.format(module=module, check=check), rows=ROWS, files={f"{module}.py": CHECKS}, name=module)
    env = {**os.environ, "COLUMNS": "200"}
    found = subprocess.run(
        [VERIHUB, "validate", str(root), "--json"], capture_output=True, text=True, timeout=600, env=env
    )
    table = subprocess.run([VERIHUB, "validate", str(root)], capture_output=True, text=True, timeout=600, env=env)
    return found.returncode, json.loads(found.stdout), table.stdout


def test_a_linear_environment_passes_with_every_fault_forcing_exploit_run(make_env: MakeEnv) -> None:
    code, report, table = validate(make_env, "linear")
    assert code == 0 and report["ok"], report["failures"]
    forcing = [o for o in report["exploits"] if o["family"] == "fault-forcing"]
    names = {o["name"] for o in forcing}
    assert {"past-the-answer-limit", "nested-to-the-limit", "astral-to-the-limit", "growth-repeated-tags"} <= names
    assert report["faults_forced"] == 0 and report["fault_forcing_ran"] == len(forcing) >= 17
    past = next(o for o in forcing if o["name"] == "past-the-answer-limit")
    assert past["runs"][0]["status"] == "wrong" and past["runs"][0]["answer_fault"]
    assert report["answer_faults"] >= 1
    assert "faults forced" in table and "faults forced 0/" in table


def test_growth_probing_finds_a_super_linear_check(make_env: MakeEnv) -> None:
    code, report, table = validate(make_env, "quadratic")
    assert code == 1 and not report["ok"]
    found = [o for o in report["exploits"] if o["name"].startswith("growth-") and o["verdict"] == "fault"]
    assert found, [(o["name"], o["verdict"]) for o in report["exploits"]]
    assert "layer 'mine'" in found[0]["error"] and "super-linear" in found[0]["error"]
    assert any("super-linear" in failure for failure in report["failures"])
    assert report["faults_forced"] >= 1 and re.search(r"faults forced [1-9]\d*/", table), table


def test_an_answer_padded_to_the_limit_that_earns_reward_fails(make_env: MakeEnv) -> None:
    code, report, _ = validate(make_env, "long_is_good")
    assert code == 1
    passed = {o["name"] for o in report["exploits"] if o["family"] == "fault-forcing" and o["verdict"] == "passed"}
    assert "digits-to-the-limit" in passed
