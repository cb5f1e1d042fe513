"""Proxies never pay past their authority: `verihub validate` grades each environment's references with a later
layer failing everything (a judge scoring 0, a check that fails) and fails a layer before it that still pays
more than the floor; report's key-fact proxy is the case the red team found."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import verihub
from conftest import REPO, VERIHUB, MakeEnv
from verihub.grading.judge import JudgeVerdict
from verihub.validation.authority import FAMILY
from verihub.validation.validate import ValidationReport, validate_env

REPORT = REPO / "envs" / "report"
DENIAL = " Not one of these statements is true."


class RubricJudge:
    """A judge stub that follows report's rubric on the one point at stake: an answer that denies every fact
    it names states none of them (0); any other answer gets full marks."""

    def __init__(self) -> None:
        self.asked = 0

    async def judge(self, *, rubric: str, messages: list[dict[str, str]], completion: str, model: str | None) -> Any:
        self.asked += 1
        if completion.endswith(DENIAL):
            return JudgeVerdict(0.0, "it denies every key fact it names: it states none of them")
        return JudgeVerdict(1.0, "states every key fact")


def denials(env: verihub.Environment) -> list[tuple[dict[str, Any], str]]:
    """(task, its reference followed by a denial of all of it) where that still keeps the task's constraints."""
    from report_env.checks import constraint_problem  # on sys.path once report is loaded

    tasks = [dict(task) for name in env.split_names for task in env.tasks(name)]
    attacks = [(task, task["reference"] + DENIAL) for task in tasks]
    return [(task, answer) for task, answer in attacks if constraint_problem(answer, task) is None]


def report_as_released(tmp_path: Path) -> Path:
    """A copy of envs/report with report 1.1.0's verifier: key facts paid 0.25 of the reward beside the judge."""
    root = tmp_path / "report-1.1.0"
    shutil.copytree(REPORT, root, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    spec = (root / "environment.yaml").read_text()
    key_facts = '{name: key-facts, layer: check, use: "report_env.checks:key_facts", weight: 0, gate: true, '
    assert key_facts in spec and "weight: 1.0, pass_score: 0.7" in spec
    spec = spec.replace(key_facts, '{name: key-facts, layer: check, use: "report_env.checks:key_facts", weight: 0.25, ')
    (root / "environment.yaml").write_text(
        spec.replace("weight: 1.0, pass_score: 0.7", "weight: 0.75, pass_score: 0.7")
    )
    return root


def authority_outcomes(report: ValidationReport) -> list[Any]:
    return [outcome for outcome in report.exploits if outcome.family == FAMILY]


def test_naming_every_key_fact_while_denying_them_all_earns_nothing_on_report() -> None:
    judge = RubricJudge()
    env = verihub.load_env(REPORT, judge=judge)
    attacks = denials(env)
    assert len(attacks) >= 20  # most tasks leave room for the denial within their word limit and form
    for task, answer in attacks:
        grade = env.grade(task, answer)
        assert grade.layer("key-facts").status == "passed" and grade.layer("quality").score == 0.0, task["id"]
        assert (grade.status, grade.reward) == ("wrong", env.spec.grading.floor), (task["id"], grade)
        right = env.grade(task, task["reference"])
        assert (right.status, right.reward) == ("ok", 1.0), (task["id"], right)  # the legitimate answer is paid
    assert judge.asked == 2 * len(attacks)


def test_report_as_released_paid_the_proxy_and_validate_now_says_so(tmp_path: Path) -> None:
    released = verihub.load_env(report_as_released(tmp_path), judge=RubricJudge())
    task, answer = denials(released)[0]
    assert released.grade(task, answer).reward == pytest.approx(0.25)  # the hole: paid with the judge at 0

    # Without any judge model, validate tries the references with the judge failing everything.
    result = subprocess.run(
        [VERIHUB, "validate", str(tmp_path / "report-1.1.0"), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads(result.stdout)
    (outcome,) = [o for o in report["exploits"] if o["family"] == FAMILY]
    assert outcome["verdict"] == "passed" and outcome["target"] == "quality"
    assert {run["reward"] for run in outcome["runs"]} == {0.25} and {run["status"] for run in outcome["runs"]} == {
        "wrong"
    }
    failure = next(line for line in report["failures"] if line.startswith("partial credit past an authority"))
    assert "layer 'key-facts' (0.25) paid 0.25" in failure and "later layer 'quality' failed it" in failure
    assert "a judge scoring 0" in failure and "grading.floor" in failure

    fixed = validate_env(verihub.load_env(REPORT, on_missing_judge="skip"))
    assert fixed.ok, fixed.failures
    assert not authority_outcomes(fixed)  # no layer before the judge pays: nothing to probe
    assert fixed.references_passed == fixed.references  # the references still pass


# A throwaway environment whose format rule pays beside the check it approximates (a box, then the number).
PROXY = """\
id: proxy
version: 0.1.0
domain: math
description: A format rule that pays on its own.
dataset: {{source: data/tasks.jsonl, split: {{train: 0.5, eval: 0.5}}}}
prompt: {{user: "What is {{question}}?"}}
verifier:
  - {{name: format, layer: rule, use: boxed, weight: {format_weight}{gate}}}
  - {{name: correct, layer: check, use: numeric, weight: 0.8}}
gold:
  reference: '\\boxed{{{{{{answer}}}}}}'
  negatives: ['\\boxed{{{{{{wrong}}}}}}']
{grading}"""


def proxy_env(make_env: MakeEnv, name: str, *, weight: float = 0.2, gate: bool = False, grading: str = "") -> Path:
    spec = PROXY.format(format_weight=weight, gate=", gate: true" if gate else "", grading=grading)
    return make_env(spec, name=name)


def test_a_format_rule_paying_past_the_check_fails_validate(make_env: MakeEnv) -> None:
    report = validate_env(verihub.load_env(proxy_env(make_env, "proxy")))
    assert not report.ok
    (outcome,) = authority_outcomes(report)
    assert (outcome.verdict, outcome.target, outcome.failed) == ("passed", "correct", True)
    assert [run.reward for run in outcome.runs] == pytest.approx([0.2] * 8)
    (failure,) = [line for line in report.failures if line.startswith("partial credit past an authority")]
    assert "layer 'format' (0.2) paid 0.2" in failure and "'correct' failed it (a check that fails)" in failure


def test_a_proxy_before_a_judge_fails_validate_without_a_judge_model(make_env: MakeEnv) -> None:
    spec = PROXY.format(format_weight=0, gate="", grading="").replace(
        "  - {name: correct, layer: check, use: numeric, weight: 0.8}\n",
        "  - {name: correct, layer: check, use: numeric, weight: 0.4}\n"
        "  - {name: quality, layer: judge, rubric: rubric.md, weight: 0.6}\n",
    )
    root = make_env(spec, name="judged", files={"rubric.md": "Score 1 for the right number, else 0."})
    report = validate_env(verihub.load_env(root, on_missing_judge="skip"))
    assert report.judge_skipped and not report.ok
    (outcome,) = authority_outcomes(report)
    assert (outcome.verdict, outcome.target) == ("passed", "quality")
    assert "layer 'correct' (0.4) paid 0.4" in outcome.message() and "a judge scoring 0" in outcome.message()


@pytest.mark.parametrize(
    ("weight", "gate", "grading"),
    [
        (0.2, False, "grading: {floor: 0.2}\n"),  # the partial credit declared: a wrong answer may earn 0.2
        (0.0, True, ""),  # a proxy that only stops answers pays nothing
    ],
)
def test_declared_partial_credit_or_a_weightless_gate_passes(
    make_env: MakeEnv, weight: float, gate: bool, grading: str
) -> None:
    report = validate_env(verihub.load_env(proxy_env(make_env, "ok", weight=weight, gate=gate, grading=grading)))
    assert report.ok, report.failures
    assert [outcome.verdict for outcome in authority_outcomes(report)] == (["blocked"] if weight else [])


def test_a_floor_below_the_proxy_still_fails(make_env: MakeEnv) -> None:
    report = validate_env(verihub.load_env(proxy_env(make_env, "low", weight=0.3, grading="grading: {floor: 0.2}\n")))
    (outcome,) = authority_outcomes(report)
    assert outcome.verdict == "passed" and not report.ok
    assert "paid 0.3" in outcome.message() and "(0.2, grading.floor)" in outcome.message()
