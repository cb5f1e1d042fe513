"""``prompt.messages``: tasks whose column already holds chat messages (datasets made for other ecosystems),
posed as they are; the spec's rules, the column check, the rendering and each refusal a user reads."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_spec_errors import assert_problem, write_env

from conftest import REPO
from verihub import load_env
from verihub.environment.core import Environment
from verihub.errors import DataError, SpecError, VerihubError
from verihub.spec.loader import load_spec
from verihub.spec.models import EnvSpec, PromptSpec
from verihub.validation.validate import validate_env

# Lines: 1 id, 5 dataset, 6 source, 7 split, 8 prompt, 9 messages, 10 verifier, 12 gold.
SPEC = """\
id: chat-math
version: 0.1.0
domain: math
description: Tasks posed as chat messages.
dataset:
  source: data/tasks.jsonl
  split: {train: 1.0}
prompt:
  messages: prompt
verifier:
  - {name: correct, layer: check, use: numeric}
gold:
  reference: '\\boxed{{{answer}}}'
"""
QUESTION = {"role": "user", "content": "What is 1 + 1?"}
ROWS = [
    {"id": "t1", "prompt": [QUESTION], "answer": "2"},
    {
        "id": "t2",
        "prompt": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "What is 2 + 2?"},
            {"role": "assistant", "content": "Ask me a harder one."},
            {"role": "user", "content": "What is 3 * 3?"},
        ],
        "answer": "9",
    },
]
SYSTEM = '  system: "Answer about {topic}, in \\\\boxed{{}}."\n'
FEW_SHOT = "  few_shot: [{user: 'What is 5 + 5?', assistant: '\\boxed{10}'}]\n"
SHOTS = [{"role": "user", "content": "What is 5 + 5?"}, {"role": "assistant", "content": "\\boxed{10}"}]


@pytest.fixture(autouse=True)
def _restore_sys_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Loading a spec puts the environment's directory on sys.path; undo that after each test."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The environment directory, made the working directory so problems name 'environment.yaml'."""
    root = tmp_path / "env"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


def jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def with_prompt(lines: str, spec: str = SPEC) -> str:
    """``spec`` with ``lines`` added to its prompt section."""
    return spec.replace("  messages: prompt\n", "  messages: prompt\n" + lines)


def load(root: Path, spec: str = SPEC, rows: list[dict[str, Any]] = ROWS) -> Environment:
    return load_env(write_env(root, spec, {"data/tasks.jsonl": jsonl(rows)}))


def by_id(env: Environment) -> dict[str, Any]:
    return {task["id"]: task for name in env.split_names for task in env.tasks(name)}


# -- loading and rendering -------------------------------------------------------------------------------


def test_a_list_column_from_json_lines_is_posed_as_it_is(root: Path) -> None:
    env = load(root)
    tasks = by_id(env)
    assert env.render(tasks["t1"]) == [QUESTION]
    assert env.render(tasks["t2"]) == ROWS[1]["prompt"]
    assert env.grade(tasks["t2"], "\\boxed{9}").passed and not env.grade(tasks["t2"], "\\boxed{4}").passed


def test_a_list_column_from_parquet_written_by_datasets(root: Path) -> None:
    import datasets

    # Arrow gives every message every key of the column's struct (None where a row lacks one): dropped.
    rows = [{**ROWS[0], "prompt": [{**QUESTION, "name": "alice"}]}, ROWS[1]]
    (root / "data").mkdir()
    datasets.Dataset.from_list(rows).to_parquet(str(root / "data" / "tasks.parquet"))
    env = load_env(write_env(root, SPEC.replace("tasks.jsonl", "tasks.parquet"), {}))
    tasks = by_id(env)
    assert env.render(tasks["t1"]) == [QUESTION]
    assert env.render(tasks["t2"]) == ROWS[1]["prompt"]


def test_a_json_text_column(root: Path) -> None:
    env = load(root, rows=[{**row, "prompt": json.dumps(row["prompt"])} for row in ROWS])
    tasks = by_id(env)
    assert isinstance(tasks["t1"]["prompt"], str)
    assert env.render(tasks["t1"]) == [QUESTION]
    assert env.render(tasks["t2"]) == ROWS[1]["prompt"]


def test_contents_are_data_never_templates(root: Path) -> None:
    content = "Fill {answer} and {0} and {{x}} and {answer.__class__} and {:>999999999}."
    env = load(root, with_prompt(SYSTEM), [{"id": "t1", "prompt": [{"role": "user", "content": content}],
                                           "answer": "2", "topic": "sums {not filled}"}])  # fmt: skip
    assert env.render(by_id(env)["t1"]) == [
        {"role": "system", "content": "Answer about sums {not filled}, in \\boxed{}."},
        {"role": "user", "content": content},
    ]


def test_the_system_template_is_prepended_unless_the_task_brings_its_own(root: Path) -> None:
    rows = [{**row, "topic": "arithmetic"} for row in ROWS]
    env = load(root, with_prompt(SYSTEM), rows)
    tasks = by_id(env)
    assert env.render(tasks["t1"]) == [
        {"role": "system", "content": "Answer about arithmetic, in \\boxed{}."},
        QUESTION,
    ]
    assert env.render(tasks["t2"]) == ROWS[1]["prompt"]  # its own system message, not a second one


def test_few_shot_goes_after_the_system_message_and_before_the_task(root: Path) -> None:
    rows = [{**row, "topic": "arithmetic"} for row in ROWS]
    tasks = by_id(env := load(root, with_prompt(SYSTEM + FEW_SHOT), rows))
    system = {"role": "system", "content": "Answer about arithmetic, in \\boxed{}."}
    own = ROWS[1]["prompt"]
    assert env.render(tasks["t1"]) == [system, *SHOTS, QUESTION]
    assert env.render(tasks["t2"]) == [own[0], *SHOTS, *own[1:]]
    plain = load(root / "plain", with_prompt(FEW_SHOT), ROWS)
    assert plain.render(by_id(plain)["t1"]) == [*SHOTS, QUESTION]


def test_template_mode_renders_as_before(root: Path) -> None:
    spec = SPEC.replace("  messages: prompt\n", "  user: 'Q: {question} ({{0}})'\n" + FEW_SHOT)
    env = load(root, spec, [{"id": "t1", "question": "1 + 1", "answer": "2"}])
    assert env.render(by_id(env)["t1"]) == [*SHOTS, {"role": "user", "content": "Q: 1 + 1 ({0})"}]


def test_validate_runs_on_a_messages_environment(root: Path) -> None:
    report = validate_env(load(root), attacks=False)
    assert report.ok and report.references == 2 and report.references_passed == 2


# -- the spec's rules ------------------------------------------------------------------------------------


def test_user_and_messages_together_are_refused(root: Path) -> None:
    write_env(root, with_prompt("  user: '{question}'\n"), {"data/tasks.jsonl": jsonl(ROWS)})
    with pytest.raises(SpecError) as caught:
        load_spec(root)
    problem = assert_problem(caught.value, "prompt.messages", 9, "not both")
    assert problem.message == "give 'user' (a template) or 'messages' (a column of chat messages), not both"


def test_neither_user_nor_messages_is_refused(root: Path) -> None:
    write_env(root, SPEC.replace("  messages: prompt\n", SYSTEM), {"data/tasks.jsonl": jsonl(ROWS)})
    with pytest.raises(SpecError) as caught:
        load_spec(root)
    problem = assert_problem(caught.value, "prompt.user", 8, "required field is missing")
    assert "give 'user' (a template) or 'messages' (a column of chat messages)" in problem.message


def test_an_empty_column_name_is_refused(root: Path) -> None:
    write_env(root, SPEC.replace("messages: prompt", "messages: ''"), {"data/tasks.jsonl": jsonl(ROWS)})
    with pytest.raises(SpecError) as caught:
        load_spec(root)
    assert_problem(caught.value, "prompt.messages", 9, "at least 1 character")


def test_a_missing_messages_column_names_the_columns(root: Path) -> None:
    write_env(root, SPEC.replace("messages: prompt", "messages: chat"), {"data/tasks.jsonl": jsonl(ROWS)})
    load_spec(root)  # the spec is fine; the dataset lacks the column
    with pytest.raises(SpecError) as caught:
        load_env(root)
    problem = assert_problem(caught.value, "prompt.messages", 9, "'chat' is not a dataset column")
    assert problem.message.endswith("(columns: answer, id, prompt)")


def test_a_template_spec_dumps_as_it_always_did() -> None:
    """The dump is what an environment's spec digest hashes: a template-mode spec's must not change."""
    assert PromptSpec(user="{question}").model_dump() == {"system": None, "user": "{question}", "few_shot": []}
    chat = PromptSpec(messages="prompt")
    assert PromptSpec.model_validate(chat.model_dump()) == chat


def test_the_schema_describes_both_modes() -> None:
    import jsonschema

    schema = EnvSpec.model_json_schema()
    prompt = schema["$defs"]["PromptSpec"]
    assert "messages" in prompt["properties"] and "chat messages" in prompt["properties"]["messages"]["description"]
    validator = jsonschema.Draft202012Validator(schema)
    spec = yaml.safe_load(SPEC)
    for given, valid in (
        ({"messages": "prompt"}, True),
        ({"user": "{question}"}, True),
        ({"user": None, "messages": "prompt"}, True),
        ({"user": "{question}", "messages": "prompt"}, False),
        ({"system": "Be terse."}, False),
    ):
        assert validator.is_valid({**spec, "prompt": given}) is valid, given


def test_the_docs_example_is_a_valid_prompt() -> None:
    text = (REPO / "docs" / "environments.md").read_text()
    blocks = [block for block in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL) if "messages:" in block]
    assert len(blocks) == 1
    prompt = PromptSpec.model_validate(yaml.safe_load(blocks[0])["prompt"])
    assert prompt.messages == "prompt" and prompt.user is None and prompt.system is not None


# -- tasks whose messages are malformed --------------------------------------------------------------------

MALFORMED = [
    ("wrong-role", [{"role": "tool", "content": "x"}, QUESTION], "message 0: role must be one of system, user, "
     "assistant, got 'tool'"),
    ("no-role", [{"content": "x"}], "message 0: role must be one of system, user, assistant, got None"),
    ("content-not-text", [{"role": "user", "content": 5}], "message 0 (user): content must be text, got int"),
    ("last-not-user", [QUESTION, {"role": "assistant", "content": "2"}], "the last message is the assistant's; it "
     "must be the user's (the one the model answers)"),
    ("empty-list", [], "holds no messages"),
    ("a-mapping", QUESTION, "must hold chat messages (a list of {role, content}), got dict"),
    ("a-message-not-a-mapping", ["What is 1 + 1?"], "message 0 must be a mapping of role and content, got str"),
]  # fmt: skip


@pytest.mark.parametrize(("value", "message"), [case[1:] for case in MALFORMED], ids=[case[0] for case in MALFORMED])
@pytest.mark.parametrize("stored", ["list", "json-text"])
def test_malformed_messages_are_refused_naming_task_and_column(
    root: Path, value: Any, message: str, stored: str
) -> None:
    prompt = json.dumps(value) if stored == "json-text" else value
    env = load(root, rows=[{"id": "bad", "prompt": prompt, "answer": "2"}])
    with pytest.raises(DataError) as caught:
        env.render(by_id(env)["bad"])
    assert str(caught.value) == f"task 'bad': column 'prompt': {message}"
    assert isinstance(caught.value, VerihubError) and isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("What is 1 + 1?", "holds text that is not JSON chat messages (JSONDecodeError: Expecting value"),
        ('"What is 1 + 1?"', "must hold chat messages (a list of {role, content}), got str"),
        ("[" * 100_000 + "]" * 100_000, "holds text that is not JSON chat messages (RecursionError"),
    ],
    ids=["not-json", "json-text-not-a-list", "nested-past-the-recursion-limit"],
)
def test_text_that_is_not_json_messages_is_refused(root: Path, text: str, message: str) -> None:
    env = load(root, rows=[{"id": "bad", "prompt": text, "answer": "2"}])
    with pytest.raises(DataError, match=re.escape(f"task 'bad': column 'prompt': {message}")):
        env.render(by_id(env)["bad"])
