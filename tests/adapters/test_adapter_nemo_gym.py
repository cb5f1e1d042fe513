"""NVIDIA NeMo-Gym's own resources servers (nemo-gym 0.7.0, unmodified, in .venv-nemo-gym on the CPython 3.13.15
that scripts/build_cpython.sh builds) as verihub environments: equivalence_rule and mcqa, on rows the tests write
in NeMo-Gym's format and on the example rows nemo-gym ships, through load_env, eval, validate and a GRPO step;
the servers' failures as faults, and rows verihub cannot pose refused when they load, saying which."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import verihub
from conftest import REPO, first_step, one_step_trainer, results_table, run_eval, use_own_environment, validate_report
from verihub.errors import RemoteEnvError, SpecError
from verihub.testing import ScriptedChatServer

VENV = REPO / ".venv-nemo-gym"
SHIPPED = VENV / "lib" / "python3.13" / "site-packages" / "resources_servers"  # nemo-gym's own example rows
CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Kenya": "Nairobi", "Peru": "Lima", "Norway": "Oslo"}
CAPITALS |= {"Egypt": "Cairo", "Chile": "Santiago", "Canada": "Ottawa", "India": "New Delhi", "Spain": "Madrid"}
LETTERS = "ABCD"


@pytest.fixture(autouse=True)
def nemo_gym_python(monkeypatch: pytest.MonkeyPatch) -> None:
    use_own_environment("nemo-gym", "VERIHUB_NEMO_GYM_PYTHON", monkeypatch)


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def capital_rows() -> list[dict[str, Any]]:
    return [
        {
            "responses_create_params": {
                "instructions": "Answer with the city's name only.",
                "input": [{"role": "user", "content": f"What is the capital of {country}?"}],
            },
            "expected_answer": city,
            "uuid": f"capital-{country.lower()}",
        }
        for country, city in CAPITALS.items()
    ]


def choice_rows() -> list[dict[str, Any]]:
    rows = []
    for number in range(8):
        options = [{letter: str(number * 10 + offset)} for offset, letter in enumerate(LETTERS)]
        question = f"Which is {number * 10 + number % 4}? " + " ".join(
            f"{k}: {v}" for o in options for k, v in o.items()
        )
        rows.append(
            {
                "responses_create_params": {
                    "input": [{"role": "user", "content": [{"type": "input_text", "text": question}]}]
                },
                "options": options,
                "expected_answer": LETTERS[number % 4],
                "grading_mode": "strict_single_letter_boxed",
            }
        )
    return rows


@pytest.fixture
def capitals(tmp_path: Path) -> Path:
    return write_rows(tmp_path / "capitals.jsonl", capital_rows())


@pytest.fixture
def choices(tmp_path: Path) -> Path:
    return write_rows(tmp_path / "choices.jsonl", choice_rows())


def test_both_servers_grade_right_answers_ok_and_wrong_ones_wrong(capitals: Path, choices: Path) -> None:
    env = verihub.load_env("nemo-gym:equivalence_rule", data=capitals, reference="{expected_answer}")
    assert (env.spec.id, env.spec.version) == ("nemo-gym-equivalence-rule", "0.7.0")
    assert sorted(len(env.tasks(split)) for split in env.split_names) == [2, 8]
    task = next(task for split in env.split_names for task in env.tasks(split) if task["id"] == "capital-france")
    assert env.render(task) == [
        {"role": "system", "content": "Answer with the city's name only."},
        {"role": "user", "content": "What is the capital of France?"},
    ]
    right, wrong = env.grade(task, "Paris"), env.grade(task, "Lyon")
    assert (right.status, right.reward, right.layers[0].detail) == ("ok", 1.0, "reward 1; equivalence_score 1")
    assert (wrong.status, wrong.reward) == ("wrong", 0.0)

    mcqa = verihub.load_env("nemo-gym:mcqa", data=choices, reference="\\boxed{{{expected_answer}}}")
    task = mcqa.tasks("train")[0]
    expected = json.loads(task["row"])["expected_answer"]
    assert mcqa.grade(task, f"I think \\boxed{{{expected}}}").reward == 1.0
    other = next(letter for letter in LETTERS if letter != expected)
    assert mcqa.grade(task, f"\\boxed{{{other}}}").status == "wrong"
    assert mcqa.grade(task, expected).reward == 0.0  # unboxed: the server's strict mode wants \boxed{}


def test_the_servers_own_config_and_shipped_rows(capitals: Path) -> None:
    fuzzy = verihub.load_env("nemo-gym:equivalence_rule", data=capitals, config={"grading_rule": "seq_match"})
    task = next(task for split in fuzzy.split_names for task in fuzzy.tasks(split) if task["id"] == "capital-france")
    near = fuzzy.grade(task, "Pariss")
    assert near.status == "wrong" and 0.8 < near.reward < 1.0  # SequenceMatcher's ratio, as the server rules
    assert fuzzy.spec.gold.reference_is == "placeholder"  # no reference given: the prompt stands in, never evidence
    for server, reference in (("equivalence_rule", "{expected_answer}"), ("mcqa", "\\boxed{{{expected_answer}}}")):
        shipped = verihub.load_env(
            f"nemo-gym:{server}", data=SHIPPED / server / "data" / "example.jsonl", reference=reference
        )
        for split in shipped.split_names:
            for task in shipped.tasks(split):
                assert shipped.grade(task, shipped.reference(task)).reward == 1.0, (server, task["id"])


def test_a_server_failure_is_a_fault_never_a_zero(capitals: Path, tmp_path: Path) -> None:
    from verihub.adapters import nemo_gym

    rows = choice_rows()
    rows[0]["options"] = "A: 1, B: 2"  # not the list of {letter: text} mcqa's /verify takes: 422
    broken = verihub.load_env("nemo-gym:mcqa", data=write_rows(tmp_path / "broken.jsonl", rows))
    task = next(task for split in broken.split_names for task in broken.tasks(split) if task["id"] == "broken-00000")
    grade = broken.grade(task, "\\boxed{A}")
    assert grade.reward is None and grade.status == "env_error" and "/verify answered HTTP 422" in grade.reason

    narrow = verihub.load_env("nemo-gym:equivalence_rule", data=capitals, reward_range=[0.0, 0.5])
    task = narrow.tasks("train")[0]
    grade = narrow.grade(task, json.loads(task["row"])["expected_answer"])
    assert grade.reward is None and "rewarded 1, outside reward_range [0, 0.5]" in grade.reason

    env = verihub.load_env("nemo-gym:equivalence_rule", data=capitals, reference="{expected_answer}")
    task = env.tasks("train")[0]
    shared, _ = nemo_gym._bridges(nemo_gym.NemoGymServer(**env.spec.verifier[0].args))
    assert shared._process is not None
    shared._process.kill()  # the bridge dies between two grades: a new one serves the next
    assert env.grade(task, env.reference(task)).reward == 1.0


def test_rows_verihub_cannot_pose_are_refused_when_they_load(tmp_path: Path) -> None:
    cases = {
        "tools": ({"tools": [{"type": "function", "name": "get_weather", "parameters": {}}]}, "offers tools"),
        "image": (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            "other than text",
        ),
        "assistant last": ({"input": [{"role": "assistant", "content": "Hi"}]}, "does not end with a user message"),
    }
    for name, (change, said) in cases.items():
        rows = capital_rows()
        rows[3]["responses_create_params"] |= change
        data = write_rows(tmp_path / "rows.jsonl", rows)
        with pytest.raises(SpecError, match=said) as raised:
            verihub.load_env("nemo-gym:equivalence_rule", data=data)
        assert raised.value.problems[0].line == 4, name  # the row's line in the file
    with pytest.raises(SpecError, match="cannot be filled from the row"):
        verihub.load_env(
            "nemo-gym:equivalence_rule", data=write_rows(tmp_path / "r.jsonl", capital_rows()), reference="{answer}"
        )
    with pytest.raises(SpecError, match="data.*is required"):
        verihub.load_env("nemo-gym:equivalence_rule")
    with pytest.raises(RemoteEnvError, match="No module named 'resources_servers.no_such_server'"):
        verihub.load_env("nemo-gym:no_such_server", data=write_rows(tmp_path / "r.jsonl", capital_rows()))


def test_eval_and_validate_from_the_command_line(capitals: Path, choices: Path, tmp_path: Path) -> None:
    def answer(request: dict[str, Any]) -> list[dict[str, Any]]:  # right on France only
        asked = request["messages"][-1]["content"]
        return [{"content": "Paris" if "France" in asked else "Rome"}]

    equivalence = f"nemo-gym:equivalence_rule?data={capitals}&reference='{{expected_answer}}'"
    with ScriptedChatServer(answer) as model:
        result = run_eval(equivalence, f"openai:scripted@{model.url}", tmp_path / "out", "--split", "train", "-n", "8")
    assert result.returncode == 0, result.stderr[-2000:]
    table = results_table(tmp_path / "out")
    assert set(table["status"]) == {"ok", "wrong"} and table["status"].count("ok") == 1
    for ref in (equivalence, f"nemo-gym:mcqa?data={choices}&reference='\\boxed{{{{{{expected_answer}}}}}}'"):
        result, report = validate_report(ref)
        assert result.returncode == 0 and report["ok"], report["failures"]
        assert report["references_passed"] == report["references"] > 0
        assert report["faults_forced"] == 0 and report["fault_forcing_ran"] >= 20
        assert report["max_exploit_reward"] == 0.0 and report["tasks_without_evidence"] == 0


@pytest.mark.slow
def test_one_grpo_step_on_a_nemo_gym_server(tiny_model: Path, capitals: Path, tmp_path: Path) -> None:
    env = verihub.load_env("nemo-gym:equivalence_rule", data=capitals, reference="{expected_answer}")
    trainer = one_step_trainer(tiny_model, [env], tmp_path / "run")
    (item,) = trainer.mix
    trainer.train()
    record = first_step(tmp_path / "run")
    assert record["step"] == 1 and record[f"verihub/{item.name}/fault_rate"] == 0.0
