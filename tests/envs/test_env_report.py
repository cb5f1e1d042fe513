"""The bundled report environment: its documents, tasks and calibration set, its rule gates, and its judge
layer with a scripted judge model behind a real loopback OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import verihub
from conftest import REPO, start_serve, stop_serve
from verihub.testing import ScriptedChatServer
from verihub.validation.calibration import acalibrate, calibration_items

ROOT = REPO / "envs" / "report"
VERIHUB = str(Path(sys.executable).with_name("verihub"))
ROWS = {row["id"]: row for row in map(json.loads, (ROOT / "data" / "tasks.jsonl").read_text().splitlines())}
CALIBRATION = [json.loads(line) for line in (ROOT / "calibration.jsonl").read_text().splitlines() if line.strip()]
DOCUMENTS = sorted((ROOT / "data" / "documents").glob("*.md"))
FORMS = {"paragraph", "sentence", "bullets", "numbered"}


@pytest.fixture(scope="module")
def env() -> verihub.Environment:
    return verihub.load_env(ROOT, on_missing_judge="skip")  # also puts report_env on sys.path


def validate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [VERIHUB, "validate", str(ROOT), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "200"},
    )


# -- a scripted judge that grades the way rubric.md asks a careful human to ---------------------------------------

_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_DATE = re.compile(rf"\b(\d{{1,2}}) ({_MONTHS})\b|\b({_MONTHS}) (\d{{1,2}})\b")
_MARKER = re.compile(r"^\s*(?:[-*]|\d{1,2}[.)])\s+", re.MULTILINE)


def _dates(text: str) -> set[tuple[str, str]]:
    return {(m[0] or m[3], m[1] or m[2]) for m in _DATE.findall(text)}


def _breaks_constraints(answer: str, task: dict[str, Any]) -> bool:
    body = _MARKER.sub("", answer)
    words = sum(1 for token in body.split() if re.search(r"\w", token))
    lines = [line for line in answer.strip().splitlines() if line.strip()]
    bullets = sum(bool(re.match(r"\s*[-*]\s", line)) for line in lines)
    numbered = sum(bool(re.match(r"\s*\d{1,2}[.)]\s", line)) for line in lines)
    if words > task["max_words"]:
        return True
    if task["form"] in ("paragraph", "sentence"):
        return bool(bullets or numbered)
    items = bullets if task["form"] == "bullets" else numbered
    return items != len(lines) or not task["min_items"] <= items <= task["max_items"]


def careful_judge(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Finds the task from the prompt it is shown, then: no key fact stated -> 0; a number (above 12: smaller
    ones are counts) or a date the document does not give -> 0.1; a broken constraint -> at most 0.25; else the
    share of key facts stated, in quarters."""
    prompt = request["messages"][-1]["content"]
    conversation, fenced = prompt.split("\n\nRESPONSE:\n", 1)
    answer = fenced.split("\n", 1)[1].rsplit("\n", 1)[0]  # between the <response-ID> fence lines
    source = conversation.split("[user]\nDocument: ", 1)[1].split("\n\nTask: ", 1)[0]  # title and document
    (task,) = [
        row
        for row in ROWS.values()
        if f"Document: {row['title']}\n" in conversation and f"Task: {row['instruction']}\n" in conversation
    ]
    covered = sum(bool(re.search(pattern, answer, re.IGNORECASE)) for pattern in task["fact_patterns"])
    numbers = {n for n in _NUMBER.findall(_MARKER.sub("", answer)) if not n.isdigit() or int(n) > 12}
    invented = (
        numbers - set(_NUMBER.findall(source))  # small counts are checked by counting, not by lookup
        | {f"{day} {month}" for day, month in _dates(answer) - _dates(source)}
    )
    if not covered:
        verdict = {"score": 0.0, "reason": "states none of the key facts"}
    elif invented:
        verdict = {"score": 0.1, "reason": f"invents {sorted(invented)[:3]}"}
    else:
        score = round(4 * covered / len(task["fact_patterns"])) / 4
        if _breaks_constraints(answer, task):
            verdict = {"score": min(score, 0.25), "reason": "breaks the length or form constraint"}
        else:
            verdict = {"score": score, "reason": f"states {covered} of {len(task['fact_patterns'])} key facts"}
    return [{"content": json.dumps(verdict)}]


def yes_judge(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"content": '{"score": 1.0, "reason": "looks great"}'}]


# -- data ----------------------------------------------------------------------------------------------------------


def test_documents_and_tasks() -> None:
    assert len(DOCUMENTS) >= 8 and len(ROWS) >= 30
    for path in DOCUMENTS:
        title, _, body = path.read_text().partition("\n")
        assert title.startswith("# ") and 150 <= len(body.split()) <= 400, path.name
    per_document = Counter(row["document_id"] for row in ROWS.values())
    assert set(per_document) == {path.stem for path in DOCUMENTS} and min(per_document.values()) >= 3
    assert {row["form"] for row in ROWS.values()} == FORMS
    assert {row["difficulty"] for row in ROWS.values()} == {1, 2, 3}
    for row in ROWS.values():
        assert row["instruction"] and row["reference"] and row["constraints"], row["id"]
        assert 2 <= len(row["key_facts"]) == len(row["fact_patterns"]) <= 6, row["id"]
        source = (ROOT / "data" / "documents" / f"{row['document_id']}.md").read_text()
        assert row["document"] == source.partition("\n")[2].strip() and row["title"] in source.partition("\n")[0]
        assert (row["min_items"], row["max_items"]) == (0, 0) or row["form"] in ("bullets", "numbered"), row["id"]


def test_the_data_files_are_what_the_script_writes() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_data.py"), "--check"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_splits_are_disjoint_and_cover_the_tasks(env: verihub.Environment) -> None:
    train, held_out = ({task["id"] for task in env.dataset(name)} for name in ("train", "eval"))
    assert train and held_out and not train & held_out and train | held_out == set(ROWS)


def test_prompt_poses_the_task_without_the_answer(env: verihub.Environment) -> None:
    task = env.dataset("eval")[0]
    system, user = env.render(task)
    assert "only facts stated in the document" in system["content"]
    assert user["content"].startswith(f"Document: {task['title']}\n\n{task['document'][:40]}")
    assert f"Task: {task['instruction']}\nConstraints: {task['constraints']}" in user["content"]
    # The answer never rides along: no task's reference or key-fact list is in its prompt (a key fact's words
    # may of course be in the document).
    for task in [*env.dataset("train"), *env.dataset("eval")]:
        shown = "\n".join(message["content"] for message in env.render(task))
        assert task["reference"] not in shown and str(task["key_facts"]) not in shown, task["id"]


def test_references_state_every_key_fact_within_the_constraints(env: verihub.Environment) -> None:
    for task in [*env.dataset("train"), *env.dataset("eval")]:
        grade = env.grade(task, task["reference"])
        assert grade.status == "ok", (task["id"], grade.reason, [(r.name, r.detail) for r in grade.layers])
        assert grade.layer("key-facts").score == 1.0 and grade.layer("quality").status == "skipped"
        assert not _breaks_constraints(task["reference"], task), task["id"]


def test_calibration_set(env: verihub.Environment) -> None:
    items = calibration_items(env)
    assert len(items) == len(CALIBRATION) >= 24
    kinds = Counter(item["kind"] for item in items)
    assert {"good", "partial", "hallucinated", "off-length", "wrong-form", "off-topic"} <= set(kinds), kinds
    assert min(kinds.values()) >= 2 and kinds["good"] >= 6 and kinds["hallucinated"] >= 5
    for item in items:
        task = ROWS[item["task_id"]]
        assert 0 <= item["expected"] <= 1 and item["completion"].strip()
        assert env.render(item) == env.render(task)  # the judge sees exactly the task's prompt
    spec = env.spec.calibration
    assert spec is not None
    assert (spec.tolerance, spec.min_agreement, spec.drift_every, spec.drift_items) == (0.25, 0.8, 100, 4)
    assert env.spec.eval.judge_model is None


# -- rule gates ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task_id", "answer", "layer", "why"),
    [
        ("sm-1", "", "length", "0 words"),
        ("sm-1", "Revenue was up.", "length", "3 words"),
        ("sm-1", "# Q2 summary\n\nEMEA revenue reached €4.2 million, up 12% on Q1.", "no-markup", "forbidden"),
        ("sm-1", "As an AI language model, I think revenue reached €4.2 million in Q2.", "no-markup", "forbidden"),
        ("sm-1", "- Revenue €4.2 million.\n- Up 12% on Q1.", "constraints", "a list where one paragraph"),
        ("sm-1", "EMEA revenue reached €4.2 million in Q2. " * 12, "constraints", "at most 80 allowed"),
        ("sm-2", "- Renewals at risk.\n- SMB churn rising.", "constraints", "exactly 3 asked for"),
        ("sm-2", "The three main risks are:\n- Renewals.\n- Churn.\n- France.", "constraints", "only of bullet points"),
        (
            "sm-4",
            "1. Hire in France.\n3. Sponsor renewals.\n2. Retention offer.",
            "constraints",
            "only of numbered items",
        ),
        ("st-1", "The Safari 17 login loop is top. It has five tickets.", "constraints", "more than one sentence"),
    ],
)
def test_rule_gates_reject_before_the_judge(
    env: verihub.Environment, task_id: str, answer: str, layer: str, why: str
) -> None:
    grade = env.grade(ROWS[task_id], answer)
    assert grade.status == "wrong" and grade.layer(layer).status == "failed", [(r.name, r.detail) for r in grade.layers]
    assert why in grade.layer(layer).detail
    assert grade.layer("quality").status == "skipped" and grade.layer("key-facts").status == "skipped"


def test_key_facts_score_coverage_gate_the_judge_and_pay_nothing(env: verihub.Environment) -> None:
    grade = env.grade(ROWS["sm-1"], "EMEA revenue was €4.2 million in Q2, up 12% on Q1, and Germany led again.")
    facts = grade.layer("key-facts")
    assert facts.score == 0.5 and facts.status == "failed" and "churn" in facts.detail
    assert grade.status == "wrong" and grade.reward == 0.0 and grade.layer("quality").status == "skipped"
    # A proxy of the judge pays nothing (1.1.0 paid 0.25 for key facts the judge could find denied).
    assert env.grade(ROWS["sm-1"], ROWS["sm-1"]["reference"]).layer("key-facts").weight == 0


# -- validate, with and without a judge model ----------------------------------------------------------------------


def test_validate_without_a_judge_skips_the_judge_and_passes() -> None:
    result = validate()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "judge layers were skipped" in result.stdout and "judge calibration" not in result.stdout
    assert f"valid: references passed {len(ROWS)}/{len(ROWS)}" in result.stdout


def test_validate_with_a_careful_judge_reports_agreement_and_passes() -> None:
    with ScriptedChatServer(careful_judge) as server:
        result = validate("--judge-model", f"openai:judge@{server.url}", "--no-attacks")
        as_json = validate("--judge-model", f"openai:judge@{server.url}", "--json", "--no-attacks")
    assert result.returncode == 0, result.stdout + result.stderr
    n = len(CALIBRATION)
    assert f"judge calibration: {n}/{n} agree (100%, need 80%) ok" in result.stdout
    assert "judge layers were skipped" not in result.stdout
    report = json.loads(as_json.stdout)
    assert report["ok"] and report["calibration"]["agreed"] == report["calibration"]["items"] == n
    quality = next(layer for layer in report["layers"] if layer["name"] == "quality")
    assert quality["references_passed"] == quality["references_ran"] == len(ROWS)  # the judge ran on every reference
    assert quality["negatives_ran"] == 0  # every negative stopped at a rule gate: no judge call spent on it
    # Each of the two runs asks once per reference and once per calibration item.
    assert len(server.requests) == 2 * (len(ROWS) + n)
    assert all(request["temperature"] == 0 for request in server.requests)
    # With the red-team suite (the default), the judge-injection exploits run against the judge too.
    with ScriptedChatServer(careful_judge) as server:
        attacked = validate("--judge-model", f"openai:judge@{server.url}", "--json")
    assert attacked.returncode == 0, attacked.stdout + attacked.stderr
    injections = [o for o in json.loads(attacked.stdout)["exploits"] if o["family"] == "judge-injection"]
    assert injections and all(o["verdict"] == "blocked" and o["target"] == "quality" for o in injections)


def test_a_served_report_grades_with_the_judge_model_it_was_given() -> None:
    """`verihub serve --judge-model`: the server's judge grades the references `validate --grader` sends; a
    server given none faults every judge layer (never a zero) and says how to give it one."""
    with ScriptedChatServer(careful_judge) as judge:
        process, url = start_serve(str(ROOT), "--judge-model", f"openai:judge@{judge.url}")
        try:
            result = validate("--grader", url, "--json", "--no-attacks")
        finally:
            stop_serve(process)
    report = json.loads(result.stdout)
    assert result.returncode == 0 and report["ok"], result.stdout + result.stderr
    quality = next(layer for layer in report["layers"] if layer["name"] == "quality")
    assert quality["references_passed"] == quality["references_ran"] == len(ROWS)
    assert len(judge.requests) == len(ROWS)  # the server's judge, once per reference
    process, url = start_serve(str(ROOT))
    try:
        faulted = json.loads(validate("--grader", url, "--json", "--no-attacks").stdout)
    finally:
        stop_serve(process)
    assert not faulted["ok"] and faulted["faults"] == len(ROWS)
    assert "--judge-model" in faulted["failures"][0]


def test_validate_fails_min_agreement_with_a_judge_that_always_says_yes() -> None:
    with ScriptedChatServer(yes_judge) as server:
        result = validate("--judge-model", f"openai:yes@{server.url}")
        as_json = validate("--judge-model", f"openai:yes@{server.url}", "--json")
    assert result.returncode == 1
    assert "need 80%) TOO LOW" in result.stdout and "INVALID" in result.stdout
    report = json.loads(as_json.stdout)
    near_one = sum(item["expected"] >= 0.75 for item in CALIBRATION)  # only these agree with a constant 1.0
    assert as_json.returncode == 1 and not report["ok"]
    assert report["calibration"]["agreed"] == near_one < 0.5 * len(CALIBRATION)
    assert report["references_passed"] == len(ROWS)  # the references themselves were fine; the judge was not


def test_careful_judge_agrees_with_every_label_in_process(env: verihub.Environment) -> None:
    with ScriptedChatServer(careful_judge) as server:
        judged = verihub.load_env(ROOT, judge_model=f"openai:judge@{server.url}")
        report = asyncio.run(acalibrate(judged))
    assert (report.items, report.agreed, report.faults, report.ok) == (len(CALIBRATION), len(CALIBRATION), 0, True)


# -- grading through the judge layer -------------------------------------------------------------------------------


def test_the_judge_layer_scores_a_good_and_a_hallucinated_answer_apart() -> None:
    task = ROWS["sm-1"]
    good = task["reference"]
    hallucinated = good.replace("Germany led", "Germany led with €2.9 million")  # a figure the memo never gives
    assert hallucinated != good
    with ScriptedChatServer(careful_judge) as server:
        env = verihub.load_env(ROOT, judge_model=f"openai:judge@{server.url}")
        good_grade, bad_grade = env.grade(task, good), env.grade(task, hallucinated)
        judged = len(server.requests)
        too_long = env.grade(task, good + " " + good)  # stopped by the constraints gate: the judge is not asked
        assert len(server.requests) == judged == 2
        prompt = server.requests[0]["messages"][-1]["content"]
    # The literal key-fact check cannot tell them apart; the judge can.
    assert good_grade.layer("key-facts").score == bad_grade.layer("key-facts").score == 1.0
    assert good_grade.layer("quality").score == 1.0 and good_grade.status == "ok" and good_grade.reward == 1.0
    assert bad_grade.layer("quality").score <= 0.1 and bad_grade.layer("quality").status == "failed"
    assert "2.9" in bad_grade.layer("quality").detail
    assert bad_grade.status == "wrong" and bad_grade.reward < 0.5
    assert too_long.status == "wrong" and too_long.layer("quality").status == "skipped"
    assert prompt.startswith("RUBRIC:\n# Rubric: document summaries and analyses")
    assert f"Document: {task['title']}" in prompt and f"Constraints: {task['constraints']}" in prompt


def test_without_a_judge_model_grading_a_judge_layer_is_an_environment_fault() -> None:
    env = verihub.load_env(ROOT)  # the default: a judge layer with no judge is a fault, never a silent pass
    grade = env.grade(ROWS["sm-1"], ROWS["sm-1"]["reference"])
    assert grade.status == "env_error" and grade.reward is None and "no judge configured" in grade.reason


# -- packaging -----------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_wheel_carries_everything_and_installs(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("verihub_env_report-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"report_env/data/documents/{path.name}" for path in DOCUMENTS}
    expected |= {
        f"report_env/{name}"
        for name in (
            "environment.yaml",
            "README.md",
            "rubric.md",
            "calibration.jsonl",
            "data/tasks.jsonl",
            "checks.py",
            "__init__.py",
        )
    }
    assert expected <= names, expected - names
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        timeout=300,
    )
    code = (
        "import verihub; env = verihub.load_env('report', on_missing_judge='skip'); "
        "task = env.dataset('eval')[0]; print(env.root); print(env.grade(task, task['reference']).status)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(target)},
    )
    assert result.returncode == 0, result.stderr
    root, status = result.stdout.split()
    assert Path(root) == target / "report_env" and status == "ok"
