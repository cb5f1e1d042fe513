"""NVIDIA NeMo-Gym's own resources servers (nemo-gym 0.7.0, unmodified, in .venv-nemo-gym on the CPython 3.13.15
that scripts/build_cpython.sh builds) as verihub environments: equivalence_rule and mcqa, on rows the tests write
in NeMo-Gym's format and on the example rows nemo-gym ships, through load_env, eval, validate and a GRPO step;
rows with tools (example_single_tool_call, example_session_state_mgmt's stateful counter) played turn by turn, each
call on the server in the episode's own session; the servers' failures as faults, and rows verihub cannot pose
refused when they load, saying which."""

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
        "tools": ({"tools": [{"type": "web_search"}]}, "function tools only"),
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
    rows = capital_rows()
    rows[3]["responses_create_params"]["tools"] = [{"type": "function", "name": "get_weather", "parameters": {}}]
    with pytest.raises(SpecError, match="tools.*differ between rows"):
        verihub.load_env("nemo-gym:equivalence_rule", data=write_rows(tmp_path / "t.jsonl", rows))
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


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": f"call_{name}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def test_rows_with_tools_play_each_call_on_the_server() -> None:
    env = verihub.load_env(
        "nemo-gym:example_single_tool_call", data=SHIPPED / "example_single_tool_call/data/example.jsonl"
    )
    assert env.spec.interaction.kind == "multi_turn" and env.spec.interaction.max_turns == 8
    assert [tool["function"]["name"] for tool in env.tool_schemas] == ["get_weather"]
    task = env.tasks("train")[0]
    session = env.session(task)
    first = session.reset()
    assert [message["role"] for message in first["messages"]] == ["system", "user"]  # its developer message first
    result = session.step({"content": "", "tool_calls": [call("get_weather", city="San Francisco")]})
    assert json.loads(result.observation["messages"][0]["content"])["weather_description"].endswith("is cold.")
    refused = session.step(
        {"content": "", "tool_calls": [call("verify"), call("seed_session"), call("get_weather", town=3)]}
    )
    said = [message["content"] for message in refused.observation["messages"]]
    assert said[0] == said[1].replace("seed_session", "verify") == "error: no tool named 'verify'; tools: get_weather"
    assert said[2].startswith("error: get_weather refused the arguments (HTTP 422)")  # the model's to hear
    done = session.step({"content": "It is cold in San Francisco."})
    assert (done.done, done.reward, done.info["status"]) == (
        True,
        1.0,
        "ok",
    )  # it called get_weather: the server's rule
    silent = env.session(task)
    silent.reset()
    assert silent.step({"content": "No idea."}).reward == 0.0
    assert env.grade(task, "No idea.").reward == 0.0  # a text grade: one reply, no call


def test_each_episode_keeps_its_own_server_session() -> None:
    counter = verihub.load_env(
        "nemo-gym:example_session_state_mgmt", data=SHIPPED / "example_session_state_mgmt/data/example.jsonl"
    )
    task = next(
        task
        for split in counter.split_names
        for task in counter.tasks(split)
        if json.loads(task["row"])["expected_count"] == json.loads(task["row"])["initial_count"] + 3
    )  # "add 1 then add 2": from its initial count to the expected one
    right, other = counter.session(task), counter.session(task)
    right.reset()
    other.reset()
    right.step({"content": "", "tool_calls": [call("increment_counter", count=1)]})
    other.step({"content": "", "tool_calls": [call("increment_counter", count=100)]})  # interleaved, apart
    right.step({"content": "", "tool_calls": [call("increment_counter", count=2)]})
    seen = other.step({"content": "", "tool_calls": [call("get_counter_value")]})
    initial = json.loads(task["row"])["initial_count"]
    assert json.loads(seen.observation["messages"][0]["content"]) == {"count": initial + 100}
    assert right.step({"content": "Done."}).reward == 1.0
    assert other.step({"content": "Done."}).reward == 0.0


def test_a_policy_cannot_fan_an_episode_out_into_unbounded_calls() -> None:
    from verihub.environment.session import MAX_TOOL_CALLS

    env = verihub.load_env(
        "nemo-gym:example_single_tool_call", data=SHIPPED / "example_single_tool_call/data/example.jsonl", max_turns=1
    )
    session = env.session(env.tasks("train")[0])
    session.reset()
    said = [session.call_tool("get_weather", {"city": "SF"}) for _ in range(MAX_TOOL_CALLS + 2)]  # as a trainer calls
    assert all("is cold" in output for output in said[:MAX_TOOL_CALLS])
    assert said[MAX_TOOL_CALLS:] == [f"error: at most {MAX_TOOL_CALLS} tool calls an episode; this one did not run"] * 2


def test_a_dead_bridge_ends_the_episode_as_a_fault() -> None:
    from verihub.adapters import nemo_gym

    env = verihub.load_env(
        "nemo-gym:example_single_tool_call", data=SHIPPED / "example_single_tool_call/data/example.jsonl"
    )
    session = env.session(env.tasks("train")[0])
    session.reset()
    session.step({"content": "", "tool_calls": [call("get_weather", city="Paris")]})
    shared, _ = nemo_gym._bridges(nemo_gym.NemoGymServer(**env.spec.verifier[0].args))
    assert shared._process is not None
    shared._process.kill()
    shared._process.wait()
    ended = session.step({"content": "It is cold."})  # its server session died with the bridge
    assert ended.done and ended.reward is None and "no episode" in ended.info["reason"]


def test_eval_plays_a_tool_row_with_a_model_that_calls_the_tool(tmp_path: Path) -> None:
    def model(request: dict[str, Any]) -> list[dict[str, Any]]:  # calls get_weather once, then answers
        if any(message["role"] == "tool" for message in request["messages"]):
            return [{"content": "It is cold."}]
        return [{"tool_calls": [{"name": "get_weather", "arguments": {"city": "San Francisco"}}]}]

    ref = f"nemo-gym:example_single_tool_call?data={SHIPPED / 'example_single_tool_call/data/example.jsonl'}"
    with ScriptedChatServer(model) as server:
        result = run_eval(ref, f"openai:scripted@{server.url}", tmp_path / "out", "--split", "train", "-n", "2")
    assert result.returncode == 0, result.stderr[-2000:]
    table = results_table(tmp_path / "out")
    assert list(table["status"]) == ["ok", "ok"] and list(table["turns"]) == [2, 2]


@pytest.mark.slow
def test_one_grpo_step_on_a_nemo_gym_tool_row(tiny_model: Path, tmp_path: Path) -> None:
    env = verihub.load_env(
        "nemo-gym:example_single_tool_call", data=SHIPPED / "example_single_tool_call/data/example.jsonl"
    )
    trainer = one_step_trainer(tiny_model, [env], tmp_path / "run")
    (item,) = trainer.mix
    assert item.multi_turn  # trained as a tool environment: the row's get_weather offered to the policy
    trainer.train()
    record = first_step(tmp_path / "run")
    assert record["step"] == 1 and record[f"verihub/{item.name}/fault_rate"] == 0.0
