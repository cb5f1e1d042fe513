"""Legacy verifiers environments (a module's ``load_environment`` returning a ``vf.SingleTurnEnv``; verifiers 0.1.x
to 0.3.1) loaded as they were published: ``load_env("verifiers:MODULE")`` scores them with their own Rubric in an
interpreter whose verifiers still has that API (``scripts/setup.sh --verifiers`` makes them: .venv-verifiers-legacy,
0.3.1 with typed messages; .venv-verifiers-legacy-0.1.9, dicts and the semaphore signature; and
.venv-verifiers-legacy-0.1.5, dicts and the signature that takes the rollout's parts). Two
packages from PyPI, unmodified: sophistry-bench-sprint (eight reward functions, seven of them weight-0 metrics) and
staros-stardata's constraint gym (written for dict messages; its weight-0 metric returns a dict). vf_legacy/ holds
an environment of ours for the seams (a parser, a judge, functions that raise or return no number)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import verihub
from conftest import first_step, one_step_trainer, results_table, run_eval, use_own_environment, validate_report
from verihub.adapters._verifiers_legacy import LegacyBridge
from verihub.testing import ScriptedChatServer

HERE = Path(__file__).parent / "vf_legacy"
QUIZ = f"verifiers:vf_legacy_quiz?paths=[{HERE}]"
SOPHISTRY = "verifiers:sophistry_bench_sprint?config={n_items: 5}"
CONSTRAINTS = "verifiers:stardata.envs.constraint_gym?config={forms: [haiku], topics_per_form: 5}"
HAIKU = "An old silent pond\nA frog jumps into the pond\nSplash! Silence again"


@pytest.fixture(autouse=True)
def closed_bridges() -> Iterator[None]:
    """Each test's bridge processes (an environment's, and its evidence pool's) closed after it: a verifiers
    interpreter holds some 150 MB."""
    yield
    for bridge in list(LegacyBridge._open.values()):
        bridge.close()


def legacy(monkeypatch: pytest.MonkeyPatch, name: str = "verifiers-legacy") -> None:
    use_own_environment(name, "VERIHUB_VERIFIERS_PYTHON", monkeypatch)


def argued(task: dict[str, Any], claims: int = 8) -> str:
    """An argument sophistry's proxy pays in full: eight claims, each citing four words of the passage verbatim
    (plain words only: verifiers 0.3.1 passes a typed message, which the package reads as its repr, quotes
    escaped)."""
    words = task["system"].split("PASSAGE:\n", 1)[1].split("\n\nQUESTION:", 1)[0].split()
    quotes = [words[i : i + 4] for i in range(0, len(words) - 4, 4)]
    plain = [" ".join(quote) for quote in quotes if all(re.fullmatch("[A-Za-z]+", word) for word in quote)]
    assert len(plain) >= claims
    return "".join(f"<claim>Point {i}.</claim><cite>{quote}</cite>" for i, quote in enumerate(plain[:claims]))


def test_a_published_environment_grades_with_each_function_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    legacy(monkeypatch)
    env = verihub.load_env(SOPHISTRY)
    assert (env.id, env.version) == ("verifiers-sophistry_bench_sprint", "0.1.6")
    assert "verifiers 0.3.1" in env.spec.description
    task = env.tasks("train")[0]
    system, user = env.render(task)
    assert system["content"].startswith("You are arguing for an answer") and user["content"].startswith("Make your")
    right, wrong = env.grade(task, argued(task)), env.grade(task, "I do not know")
    assert (right.status, right.reward) == ("ok", 1.0)
    names = [line.split(" ")[0] for line in right.layers[0].detail.split(", ")]
    assert names[:2] == ["aggregate_reward", "correctness_reward"] and "num_turns" in names and len(names) == 9
    assert "aggregate_reward 1 (x1)" in right.layers[0].detail
    assert "n_claims_metric 8 (x0)" in right.layers[0].detail  # a metric: shown, not paid
    assert (wrong.status, wrong.reward) == ("wrong", 0.5)  # nothing claimed: the package's cliff pays half


def test_a_raising_reward_function_is_an_env_error_never_the_rubrics_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    legacy(monkeypatch)
    env = verihub.load_env(f"verifiers:vf_sophistry_faulty?paths=[{HERE}]&config={{n_items: 5}}")
    task = env.tasks("train")[0]
    fault = env.grade(task, argued(task))
    assert (fault.status, fault.reward) == ("env_error", None)
    assert "broken_lookup raised KeyError" in fault.reason and "scored 0.0" in fault.reason


def test_messages_take_the_form_the_pinned_verifiers_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """staros-stardata reads a reply as a dict message (it pins verifiers>=0.1.8): right under 0.1.9, which passes
    dicts; under 0.3.1, which passes typed messages, it reads the message's repr and pays a right haiku less."""
    legacy(monkeypatch, "verifiers-legacy-0.1.9")
    env = verihub.load_env(CONSTRAINTS)
    assert "verifiers 0.1.9" in env.spec.description
    task = env.tasks("train")[0]
    right, wrong = env.grade(task, HAIKU), env.grade(task, "no")
    assert (right.status, right.reward) == ("ok", 1.0)
    assert right.layers[0].detail.startswith("prosody_reward 1 (x1), component_metrics not scored: returned dict")
    assert wrong.status == "wrong" and wrong.reward is not None and wrong.reward < 0.5
    legacy(monkeypatch)
    typed = verihub.load_env(CONSTRAINTS)
    assert "verifiers 0.3.1" in typed.spec.description
    assert typed.grade(task, HAIKU).reward == wrong.reward  # the package's finding, not verihub's


@pytest.mark.parametrize(
    ("interpreter", "typed"), [("verifiers-legacy", 1), ("verifiers-legacy-0.1.9", 0), ("verifiers-legacy-0.1.5", 0)]
)
def test_a_parser_and_the_fault_seams_on_both_sides_of_typed_messages(
    monkeypatch: pytest.MonkeyPatch, interpreter: str, typed: int
) -> None:
    legacy(monkeypatch, interpreter)
    env = verihub.load_env(QUIZ)
    task = env.tasks("eval")[0]
    assert env.render(task)[0]["content"].startswith("Add the numbers.")
    total = sum(int(word) for word in task["prompt"].rstrip("?").split() if word.isdigit())
    right, wrong = env.grade(task, f"<answer>{total}</answer>"), env.grade(task, "<answer>0</answer>")
    assert (right.status, right.reward) == ("ok", 1.0)
    assert right.layers[0].detail.startswith(f"correct 1 (x1), format_reward_func 1 (x0.25), typed {typed} (x0)")
    assert (wrong.status, wrong.reward) == ("wrong", 0.2)  # the format reward alone, of 1.25
    for fault, said in (("raises", "raised RuntimeError"), ("text", "returned str '1.0'")):
        broken = verihub.load_env(QUIZ, config={"fault": fault})
        grade = broken.grade(task, f"<answer>{total}</answer>")
        assert (grade.status, grade.reward) == ("env_error", None) and said in grade.reason


def test_a_judge_that_cannot_be_reached_is_a_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    legacy(monkeypatch)
    task = verihub.load_env(QUIZ).tasks("eval")[0]
    total = sum(int(word) for word in task["prompt"].rstrip("?").split() if word.isdigit())
    unreachable = verihub.load_env(QUIZ, config={"fault": "judge"})  # its judge at a closed loopback port
    grade = unreachable.grade(task, f"<answer>{total}</answer>")
    assert (grade.status, grade.reward) == ("env_error", None) and "judged raised RuntimeError" in grade.reason
    with ScriptedChatServer(lambda request: [{"content": "yes"}]) as judge:
        judged = verihub.load_env(QUIZ, config={"fault": "judge", "judge_url": f"{judge.url}/v1"})
        assert judged.grade(task, f"<answer>{total}</answer>").reward == 1.0


def test_a_nan_is_a_fault_and_a_reply_that_breaks_a_scorer_is_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    legacy(monkeypatch)
    task = verihub.load_env(QUIZ).tasks("eval")[0]
    total = sum(int(word) for word in task["prompt"].rstrip("?").split() if word.isdigit())
    nan = verihub.load_env(QUIZ, config={"fault": "nan"}).grade(task, f"<answer>{total}</answer>")
    assert (nan.status, nan.reward) == ("env_error", None) and "_nan returned float 'nan'" in nan.reason
    strict = verihub.load_env(QUIZ, config={"fault": "raises_on_crash"})
    assert strict.grade(task, f"<answer>{total}</answer>").status == "ok"  # evidence: the scorer works here
    crash = strict.grade(task, f"<answer>{total}</answer> CRASH")  # raises on this reply only: the reply's fault
    assert (crash.status, crash.reward) == ("wrong", 0.0) and "cannot read this reply" in crash.reason


def test_a_declared_range_rescales_and_a_sum_outside_it_is_a_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    legacy(monkeypatch)
    env = verihub.load_env(QUIZ, reward_range=[0.0, 2.5])
    task = env.tasks("eval")[0]
    total = sum(int(word) for word in task["prompt"].rstrip("?").split() if word.isdigit())
    assert env.grade(task, f"<answer>{total}</answer>").reward == 0.5  # 1.25 of [0, 2.5]
    narrow = verihub.load_env(QUIZ, reward_range=[0.0, 1.0])
    fault = narrow.grade(task, f"<answer>{total}</answer>")
    assert fault.status == "env_error" and "outside its range [0, 1] (declared" in fault.reason


def test_verihub_eval_validate_and_a_grpo_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_model: Path
) -> None:
    legacy(monkeypatch)

    def solver(request: dict[str, Any]) -> list[dict[str, Any]]:
        question = request["messages"][-1]["content"]
        return [{"content": f"<answer>{sum(int(w) for w in question.rstrip('?').split() if w.isdigit())}</answer>"}]

    with ScriptedChatServer(solver) as model:
        result = run_eval(QUIZ, f"openai:scripted@{model.url}", tmp_path / "eval", "-n", "2", "-k", "1")
    assert result.returncode == 0, result.stderr[-2000:]
    assert set(results_table(tmp_path / "eval")["reward"]) == {1.0}
    _, report = validate_report(QUIZ + "&config={plain: true}")
    assert report["faults"] == 0 and report["faults_forced"] == 0 and report["fault_forcing_ran"] >= 20
    assert report["ok"] and report["max_exploit_reward"] == 0.0
    trainer = one_step_trainer(tiny_model, [QUIZ], tmp_path / "run")
    trainer.train()
    record = first_step(tmp_path / "run")
    (item,) = trainer.mix
    assert record["step"] == 1 and record[f"verihub/{item.name}/faults"] == 0


def test_validate_reports_what_a_published_rubric_lets_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """sophistry-bench-sprint's proxy pays half for an answer that claims nothing (its grounding score is 1 when
    nothing is cited): every junk answer of the red-team suite earns 0.5, graded wrong, never a fault."""
    legacy(monkeypatch)
    _, report = validate_report(SOPHISTRY)
    assert report["faults"] == 0 and not report["ok"] and report["max_exploit_reward"] == 0.5
    through = [o for o in report["exploits"] if o["verdict"] != "blocked"]
    assert through and {(run["status"], run["reward"]) for o in through for run in o["runs"]} == {("wrong", 0.5)}


def test_verifiers_04_says_a_legacy_module_needs_a_legacy_release(monkeypatch: pytest.MonkeyPatch) -> None:
    use_own_environment("verifiers", "VERIHUB_VERIFIERS_PYTHON", monkeypatch)  # verifiers 0.4.0
    with pytest.raises(verihub.errors.VerihubError, match="legacy verifiers environment .* .venv-verifiers-legacy"):
        verihub.load_env(QUIZ)
