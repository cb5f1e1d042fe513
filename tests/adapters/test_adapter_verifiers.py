"""Prime Intellect's verifiers tasksets loaded as verihub environments: ``load_env("verifiers:MODULE")``, scored
by verifiers 0.4's own ``Task.score`` (unmodified, in .venv-verifiers: its pins conflict with the lock) through
the bridge process. The two tasksets under vf_tasksets/ are written against verifiers' v1 API (PyPI has no
offline-scorable v1 taskset to borrow): weighted rewards, a system prompt, a config, a reward that needs
verifiers' runtime, and a scorer that raises."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import verihub
from conftest import (
    first_step,
    one_step_trainer,
    results_table,
    run_eval,
    use_own_environment,
    validate_report,
)
from verihub.errors import SpecError
from verihub.testing import ScriptedChatServer

TASKSETS = Path(__file__).parent / "vf_tasksets"
SUMS = f"verifiers:vf_sums?paths=[{TASKSETS}]"
CAPITALS = f"verifiers:vf_capitals?paths=[{TASKSETS}]"


@pytest.fixture(autouse=True)
def verifiers_python(monkeypatch: pytest.MonkeyPatch) -> None:
    use_own_environment("verifiers", "VERIHUB_VERIFIERS_PYTHON", monkeypatch)


def answer(task: dict[str, Any]) -> str:
    words = task["prompt"].rstrip("?").split()
    return str(int(words[2]) + int(words[4]))


def test_a_tasksets_own_rewards_grade_and_show_in_the_detail() -> None:
    env = verihub.load_env(SUMS)
    assert (env.id, env.domain) == ("verifiers-vf_sums", "verifiers")
    assert [len(env.tasks(split)) for split in env.split_names] == [8, 2]
    task = env.tasks("eval")[0]
    assert env.render(task) == [{"role": "user", "content": task["prompt"]}]
    right, verbose, wrong = (
        env.grade(task, text)
        for text in (
            f"It is {answer(task)}.",
            "Let me think about this at some length first. " + answer(task),
            "I do not know",
        )
    )
    assert (right.status, right.reward) == ("ok", 1.0)
    assert right.layers[0].detail == "brief 1 (x0.25), correct 1 (x0.75)"
    assert (verbose.status, verbose.reward) == ("wrong", 0.75)  # the weighted mean of the taskset's rewards
    assert (wrong.status, wrong.reward) == ("wrong", 0.25)


def test_config_system_prompt_runtime_rewards_and_a_raising_scorer() -> None:
    env = verihub.load_env(CAPITALS, config={"countries": 6})
    assert len(env.tasks("train")) + len(env.tasks("eval")) == 6
    task = env.tasks("train")[0]
    assert env.render(task)[0] == {"role": "system", "content": "Answer with one city."}
    capital = {
        "peru": "Lima",
        "france": "Paris",
        "japan": "Tokyo",
        "kenya": "Nairobi",
        "chile": "Santiago",
        "egypt": "Cairo",
    }[task["id"]]
    grade = env.grade(task, capital)
    assert (grade.status, grade.reward) == ("ok", 1.0)
    assert grade.layers[0].detail == "named 1 (x1); not run (they need a runtime): in_sandbox"
    crash = env.grade(task, "CRASH")  # raises on this reply only: the reply's fault, by verihub's one rule
    assert (crash.status, crash.reward) == ("wrong", 0.0) and "the scorer cannot read this reply" in crash.reason
    broken = verihub.load_env(CAPITALS, config={"task": {"broken": True}})
    fault = broken.grade(broken.tasks("train")[0], capital)  # raises on every reply: the environment's fault
    assert (fault.status, fault.reward) == ("env_error", None) and "RuntimeError" in fault.reason


def test_bad_refs_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(verihub.errors.VerihubError, match="vf_nothing"):
        verihub.load_env(f"verifiers:vf_nothing?paths=[{TASKSETS}]")
    with pytest.raises(SpecError, match="at least 5"):
        verihub.load_env(SUMS, size=2)
    with pytest.raises(TypeError, match="no players"):
        verihub.load_env(SUMS, players=2)


def test_a_bridge_that_dies_is_a_fault_and_comes_back() -> None:
    from verihub.adapters.verifiers import Bridge

    env = verihub.load_env(SUMS)
    task = env.tasks("train")[0]
    (bridge,) = [b for b in Bridge._open.values() if b.ref.taskset == "vf_sums"]
    process = bridge.process._process
    assert process is not None
    process.kill()
    process.wait()  # dead, not yet noticed: the next request starts another
    assert env.grade(task, answer(task)).reward == 1.0


def solver(request: dict[str, Any]) -> list[dict[str, Any]]:
    prompt = request["messages"][-1]["content"]
    return [{"content": answer({"prompt": prompt}) if "+" in prompt else "Somewhere"}]


def test_verihub_eval_validate_and_a_grpo_step(tmp_path: Path, tiny_model: Path) -> None:
    with ScriptedChatServer(solver) as model:
        result = run_eval(SUMS, f"openai:scripted@{model.url}", tmp_path / "eval", "-n", "2", "-k", "2")
    assert result.returncode == 0, result.stderr[-2000:]
    table = results_table(tmp_path / "eval")
    assert len(table) == 4 and set(table["reward"]) == {1.0}
    reports = {}
    for ref in (SUMS, CAPITALS):
        _, report = validate_report(ref)
        reports[ref] = report
        assert report["faults"] == 0 and report["faults_forced"] == 0 and report["fault_forcing_ran"] >= 20
    assert reports[CAPITALS]["ok"] and reports[CAPITALS]["max_exploit_reward"] == 0.0
    # the red-team suite finds vf_sums' flaw: its "brief" reward pays a short wrong answer a quarter
    found = reports[SUMS]
    assert not found["ok"] and found["max_exploit_reward"] == 0.25
    through = [o for o in found["exploits"] if o["verdict"] == "passed"]
    assert through and all(run["reward"] == 0.25 for o in through for run in o["runs"] if run["status"] == "wrong")

    trainer = one_step_trainer(tiny_model, [SUMS], tmp_path / "run")
    trainer.train()
    record = first_step(tmp_path / "run")
    (item,) = trainer.mix
    assert record["step"] == 1 and record[f"verihub/{item.name}/faults"] == 0
