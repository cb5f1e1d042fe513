"""``load_env("hf://datasets/ORG/NAME[@REV]")``: RL environment datasets laid out as the Hugging Face Hub's
(Harbor task folders nested under tasks/, a verifiers row table, a verihub package), uploaded with the
unmodified huggingface_hub client to `verihub hub serve --no-pip-index` and loaded, graded, validated, evaluated
and trained on at a pinned revision."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import verihub
from conftest import REPO, VERIHUB, HubServer, first_step, one_step_trainer, results_table, run_eval
from verihub.errors import UsageError
from verihub.hub.errors import RepoNotFoundError
from verihub.testing import ScriptedChatServer
from verihub.validation.validate import validate_env

pytestmark = pytest.mark.slow

HARBOR = REPO / "tests" / "adapters" / "harbor_tasks"  # made by harbor 0.25's `harbor init`
HARBOR_CARD = "---\npretty_name: Shell basics\ntags: [rl-environment, harbor]\n---\n\n# Shell basics\n\nHarbor tasks.\n"
ROWS_CARD = """---
tags: [rl-environment, verifiers]
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train-*.parquet
  - split: test
    path: data/test-*.parquet
---

# Sums, as a verifiers row table
"""


def api(server: HubServer, user: str = "alice") -> Any:
    from huggingface_hub import HfApi

    return HfApi(endpoint=server.url, token=server.tokens[user])


def upload(server: HubServer, repo: str, folder: Path, message: str = "upload") -> str:
    client = api(server)
    client.create_repo(repo, repo_type="dataset", exist_ok=True)
    return str(
        client.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="dataset", commit_message=message).oid
    )


def rows(questions: list[tuple[str, str]]) -> bytes:
    """A parquet table as Prime's verifiers row datasets are: chat-message prompts, answer, info, task."""
    from datasets import Dataset

    buffer = io.BytesIO()
    Dataset.from_list(
        [
            {
                "prompt": [
                    {"role": "system", "content": "Put the final answer in \\boxed{}."},
                    {"role": "user", "content": question},
                ],
                "answer": answer,
                "info": json.dumps({"source": "sums", "n": index}),
                "task": "sums",
                "example_id": index,
            }
            for index, (question, answer) in enumerate(questions)
        ]
    ).to_parquet(buffer)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def datasets_on_hub(indexless_hub: HubServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """alice/shell-basics (Harbor, tasks nested as on the Hub: two the jail runs, one it refuses, one too deep to
    be looked for) and alice/sums-rows (a verifiers row table): name -> the commit uploaded."""
    root = tmp_path_factory.mktemp("datasets")
    harbor = root / "shell-basics"
    for name, where in (("hello-file", "basics"), ("word-count", "basics"), ("needs-pytest", "images")):
        shutil.copytree(HARBOR / name, harbor / "tasks" / where / name)
    shutil.copytree(HARBOR / "hello-file", harbor / "tasks" / "a" / "b" / "c" / "d" / "e" / "too-deep")
    (harbor / "README.md").write_text(HARBOR_CARD)
    (harbor / "registry.json").write_text(json.dumps({"name": "shell-basics", "version": "1.0", "tasks": []}))
    table = root / "sums-rows"
    (table / "data").mkdir(parents=True)
    (table / "README.md").write_text(ROWS_CARD)
    (table / "data" / "train-00000-of-00001.parquet").write_bytes(
        rows([(f"What is {a} + {b}?", str(a + b)) for a, b in [(2, 2), (3, 4), (10, 5), (7, 8)]])
    )
    (table / "data" / "test-00000-of-00001.parquet").write_bytes(
        rows([("What is 6 + 7?", "13"), ("What is 1 + 1?", "2")])
    )
    uploaded = {
        "shell-basics": upload(indexless_hub, "alice/shell-basics", harbor),
        "sums-rows": upload(indexless_hub, "alice/sums-rows", table),
    }
    for name, card in (  # what verihub cannot run: another framework's, and no RL environment at all
        ("served-env", "---\ntags: [rl-environment, openenv]\n---\n"),
        ("gym-env", "---\ntags: [rl-environment, nemo-gym]\n---\n"),
        ("just-data", "---\ntags: [text]\n---\n"),
    ):
        folder = root / name
        folder.mkdir()
        (folder / "README.md").write_text(card)
        (folder / "rows.jsonl").write_text('{"a": 1}\n')
        uploaded[name] = upload(indexless_hub, f"alice/{name}", folder)
    return uploaded


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VERIHUB_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_a_harbor_dataset_loads_its_task_folders_at_a_pinned_revision(
    indexless_hub: HubServer, datasets_on_hub: dict[str, str], home: Path
) -> None:
    env = verihub.load_env("hf://datasets/alice/shell-basics", hub=indexless_hub.url)
    commit = datasets_on_hub["shell-basics"]
    assert sorted(task["id"].split("/")[-1] for task in env.tasks("train")) == ["hello-file", "word-count"]
    report = env.load_report
    assert report is not None and report.source == f"hf://datasets/alice/shell-basics@{commit}"
    assert report.framework == "harbor" and report.loaded == 2
    assert [item for item, _ in report.left_out] == ["tasks/images/needs-pytest"]  # counted and named, with why
    assert "tests/Dockerfile line 3" in report.left_out[0][1]
    assert env.id == "shell-basics" and commit in env.spec.description
    folder = next(home.glob(f"datasets/*/alice/shell-basics/{commit}"))
    files = [path for path in folder.rglob("*")]
    assert not any(path.is_symlink() for path in files) and not (folder / ".cache").exists()
    assert not (folder / "README.md").exists()  # only the task folders are downloaded
    assert (folder / "tasks" / "basics" / "word-count" / "environment" / "data" / "story.txt").is_file()


def test_a_harbor_dataset_grades_and_validates_in_the_jail(
    indexless_hub: HubServer, datasets_on_hub: dict[str, str], home: Path, nsjail_path: str
) -> None:
    # one turn: answers of at most 16,384 characters, so growth probing stays short (the full size: `verihub validate`)
    env = verihub.load_env("hf://datasets/alice/shell-basics", hub=indexless_hub.url, max_turns=1)
    task = next(task for task in env.tasks("train") if task["id"].endswith("hello-file"))
    assert env.grade(task, env.reference(task)).status == "ok"
    assert env.grade(task, "I have finished the task.").status == "wrong"
    report = validate_env(env)
    assert report.ok, report.failures
    blocked, ran = report.exploit_tally()
    assert ran >= 20 and blocked == ran and report.fault_tally()[0] == 0


def test_a_revision_is_loaded_as_it_was(
    indexless_hub: HubServer, datasets_on_hub: dict[str, str], home: Path, tmp_path: Path
) -> None:
    """A later commit changes a task: the dataset at the first commit still loads the first version, and each
    load reports the commit it read."""
    first = datasets_on_hub["shell-basics"]
    client = api(indexless_hub)
    changed = client.upload_file(
        path_or_fileobj=b"Write 'Bonjour' to /app/hello.txt.\n",
        path_in_repo="tasks/basics/hello-file/instruction.md",
        repo_id="alice/shell-basics",
        repo_type="dataset",
    ).oid
    client.create_tag("alice/shell-basics", tag="v1", revision=first, repo_type="dataset")
    for revision, wanted in ((f"@{first}", first), ("@v1", first), ("", changed)):
        env = verihub.load_env(f"hf://datasets/alice/shell-basics{revision}", hub=indexless_hub.url)
        hello = next(task for task in env.tasks("train") if task["id"].endswith("hello-file"))
        assert env.load_report is not None and env.load_report.source.endswith(f"@{wanted}")
        assert ("Bonjour" in hello["instruction"]) == (wanted == changed), revision


def test_a_verifiers_row_table_grades_validates_and_evaluates(
    indexless_hub: HubServer, datasets_on_hub: dict[str, str], home: Path, tmp_path: Path
) -> None:
    ref = "hf://datasets/alice/sums-rows"
    env = verihub.load_env(ref, hub=indexless_hub.url)
    assert env.split_names == ["train", "eval"] and len(env.tasks("train")) == 4 and len(env.tasks("eval")) == 2
    task = env.tasks("eval")[0]
    assert env.render(task) == [
        {"role": "system", "content": "Put the final answer in \\boxed{}."},
        {"role": "user", "content": "What is 6 + 7?"},
    ]
    assert env.grade(task, "6 + 7 = \\boxed{13}").status == "ok"
    assert env.grade(task, "\\boxed{12}").status == "wrong"
    assert env.grade(task, "\\boxed{13} or \\boxed{12}").status == "wrong"
    assert env.load_report is not None and env.load_report.framework == "verifiers"
    assert any("default layers" in note for note in env.load_report.notes)
    report = validate_env(env)
    assert report.ok, report.failures
    assert report.fault_tally()[0] == 0 and report.exploit_tally()[0] == report.exploit_tally()[1]

    def solver(request: dict[str, Any]) -> list[dict[str, Any]]:
        question = request["messages"][-1]["content"]
        a, b = (int(word) for word in question.removeprefix("What is ").removesuffix("?").split(" + "))
        return [{"content": f"\\boxed{{{a + b}}}"}]

    with ScriptedChatServer(solver) as model:
        result = run_eval(ref, f"openai:solver@{model.url}", tmp_path / "out", "--hub", indexless_hub.url)
    assert result.returncode == 0, result.stderr[-2000:]
    assert set(results_table(tmp_path / "out")["status"]) == {"ok"}
    metadata = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert metadata["environment_source"] == f"{ref}@{datasets_on_hub['sums-rows']}"  # the revision is its identity
    assert f"{ref}@{datasets_on_hub['sums-rows']}: verifiers, 6 task(s)" in result.stderr  # the load report


def test_a_row_table_takes_the_verifier_layers_it_is_given(
    indexless_hub: HubServer, datasets_on_hub: dict[str, str], home: Path
) -> None:
    env = verihub.load_env(
        "hf://datasets/alice/sums-rows",
        hub=indexless_hub.url,
        verifier=[{"name": "answer", "layer": "check", "use": "numeric", "args": {"field": "answer"}}],
        reference="The sum is {answer}.",
    )
    task = env.tasks("eval")[0]
    assert [layer.name for layer in env.spec.verifier] == ["answer"]
    assert env.grade(task, "The sum is 13.").status == "ok" and env.grade(task, "It is 12.").status == "wrong"
    with pytest.raises(UsageError, match="needs reference= too"):
        verihub.load_env("hf://datasets/alice/sums-rows", hub=indexless_hub.url, verifier=[])
    with pytest.raises(TypeError, match="verifiers environment, which takes no max_turns"):
        verihub.load_env("hf://datasets/alice/sums-rows", hub=indexless_hub.url, max_turns=3)


def test_one_grpo_step_on_a_row_table_records_its_revision(
    indexless_hub: HubServer,
    datasets_on_hub: dict[str, str],
    home: Path,
    tiny_model: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VERIHUB_HUB", indexless_hub.url)  # the configured hub, as `verihub train` reads it
    trainer = one_step_trainer(tiny_model, ["hf://datasets/alice/sums-rows"], tmp_path / "run")
    trainer.train()
    record = first_step(tmp_path / "run")
    source = f"hf://datasets/alice/sums-rows@{datasets_on_hub['sums-rows']}"
    assert record["environments"]["sums-rows"] == {"id": "sums-rows", "version": "0.0.0", "source": source}
    assert record["step"] == 1 and record["verihub/sums-rows/faults"] == 0


def test_a_verihub_package_installs_at_its_release_and_loads(
    indexless_hub: HubServer, tmp_path: Path, fresh_python: str
) -> None:
    from verihub.hub.remote import RemoteHub
    from verihub.spec.scaffold import init_env

    pushed = RemoteHub(indexless_hub.url, indexless_hub.tokens["alice"]).push(
        init_env("capitals", "single-turn", tmp_path)
    )
    api(indexless_hub).upload_file(  # main moves on past the release
        path_or_fileobj=b"notes", path_in_repo="NOTES.md", repo_id="alice/capitals", repo_type="dataset"
    )
    script = (
        "import sys, verihub\n"
        "env = verihub.load_env(sys.argv[1], hub=sys.argv[2])\n"
        "task = env.tasks('train')[0]\n"
        "print(env.id, env.load_report.source, env.grade(task, env.reference(task)).status, env.root)\n"
    )
    environment = {**os.environ, "VERIHUB_HOME": str(tmp_path / "home")}
    for revision in ("", "@v0.1.0", f"@{pushed.commit}"):
        loaded = subprocess.run(
            [fresh_python, "-c", script, f"hf://datasets/alice/capitals{revision}", indexless_hub.url],
            capture_output=True,
            text=True,
            timeout=300,
            env=environment,
        )
        assert loaded.returncode == 0, loaded.stderr[-2000:]
        name, source, status, root = loaded.stdout.split()
        assert (name, source, status) == ("capitals", f"hf://datasets/alice/capitals@{pushed.commit}", "ok")
        assert "site-packages" in root and not root.startswith(str(tmp_path / "capitals"))  # installed, not source
    refused = subprocess.run(
        [fresh_python, "-c", script, "hf://datasets/alice/capitals@main", indexless_hub.url],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
    )
    assert refused.returncode != 0 and "a verihub package loads at a release tag (v0.1.0)" in refused.stderr


def test_what_verihub_cannot_run_is_refused_with_the_reason(
    indexless_hub: HubServer, datasets_on_hub: dict[str, str], home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verihub.hub import hf_datasets

    url = indexless_hub.url
    reasons = {
        "hf://datasets/alice/served-env": "load it with openenv:URL",
        "hf://datasets/alice/gym-env": "resources server",
        "hf://datasets/alice/just-data": "is no RL environment verihub can run (RL environments carry the tag",
        "hf://alice/capitals": "RL environments are datasets",
        "hf://datasets/alice/sums-rows@": "name a revision after '@'",
    }
    for ref, reason in reasons.items():
        with pytest.raises(UsageError, match=reason.replace("(", r"\(")):
            verihub.load_env(ref, hub=url)
    with pytest.raises(RepoNotFoundError):
        verihub.load_env("hf://datasets/alice/nothing-here", hub=url)
    monkeypatch.setattr(hf_datasets, "MAX_FILES", 3)  # a dataset larger than a load may download
    with pytest.raises(UsageError, match="verihub loads at most 3 files"):
        verihub.load_env("hf://datasets/alice/shell-basics", hub=url)
    assert not list(home.glob("datasets/*/alice/shell-basics/*"))  # nothing half-downloaded was kept


def test_search_lists_the_hubs_rl_environments(indexless_hub: HubServer, datasets_on_hub: dict[str, str]) -> None:
    def search(*options: str) -> str:
        found = subprocess.run(
            [VERIHUB, "search", "--rl-environments", *options, "--hub", indexless_hub.url],
            capture_output=True,
            text=True,
            env={**os.environ, "COLUMNS": "200"},
        )
        assert found.returncode == 0, found.stderr
        return found.stdout

    everything = search()
    assert (
        "alice/shell-basics" in everything and "alice/sums-rows" in everything and "alice/just-data" not in everything
    )
    assert "hf://datasets/alice/sums-rows" in everything and "(not by verihub)" in everything  # openenv's
    harbor = search("--framework", "harbor")
    assert "alice/shell-basics" in harbor and "alice/sums-rows" not in harbor
