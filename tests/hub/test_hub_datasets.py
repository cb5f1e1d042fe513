"""Environments published as the Hugging Face Hub defines RL environments (dataset repositories tagged
``rl-environment`` and ``verihub``, tasks as parquet ``configs``), installed back from a hub without a pip index,
driven by the unmodified huggingface_hub and datasets clients against `verihub hub serve --no-pip-index`."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from conftest import REPO, HubServer, hf, serve_hub
from verihub.errors import VerihubError
from verihub.hub.errors import MovedTagError, VersionExistsError
from verihub.hub.local import LocalHub
from verihub.hub.remote import RemoteHub
from verihub.ids import RepoId
from verihub.spec.scaffold import init_env

pytestmark = pytest.mark.slow


def test_a_bundled_environment_is_an_rl_environment_dataset(
    indexless_hub: HubServer, tmp_path: Path, fresh_python: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Done when: listed by list_datasets(filter=[rl-environment, verihub]), its tasks previewed by
    datasets.load_dataset, installed back into a fresh venv with the server's pip index off, loaded by name."""
    url, token = indexless_hub.url, indexless_hub.tokens["alice"]
    assert httpx.get(f"{url}/simple/").status_code == 404  # no pip index, as on huggingface.co
    hub = RemoteHub(url, token)
    pushed = hub.push(REPO / "envs" / "arithmetic")
    assert pushed.created and pushed.repo == RepoId("alice", "arithmetic")
    seen = hf(
        indexless_hub,
        f"""
        import json, datasets
        from huggingface_hub import HfApi
        api = HfApi(token={token!r})
        info = api.dataset_info("alice/arithmetic")
        rows = datasets.load_dataset("alice/arithmetic", token={token!r})
        print(json.dumps({{
            "listed": [d.id for d in api.list_datasets(filter=["rl-environment", "verihub"])],
            "harbor": [d.id for d in api.list_datasets(filter=["rl-environment", "harbor"])],
            "card": info.card_data.to_dict(),
            "splits": {{name: len(split) for name, split in rows.items()}},
            "columns": rows["train"].column_names,
            "first": rows["eval"][0],
        }}))
    """,
        tmp_path,
    )
    assert "alice/arithmetic" in seen["listed"] and "alice/arithmetic" not in seen["harbor"]
    card = seen["card"]
    assert card["tags"][:2] == ["rl-environment", "verihub"] and {"math", "procedural"} <= set(card["tags"])
    assert card["pretty_name"] == "arithmetic" and card["license"] == "apache-2.0"
    assert card["configs"] == [
        {
            "config_name": "default",
            "data_files": [
                {"split": "train", "path": "data/train-00000-of-00001.parquet"},
                {"split": "eval", "path": "data/eval-00000-of-00001.parquet"},
            ],
        }
    ]
    import verihub

    env = verihub.load_env(REPO / "envs" / "arithmetic")
    assert seen["splits"] == {"train": len(env.tasks("train")), "eval": len(env.tasks("eval"))}
    assert {"id", "question", "answer", "difficulty"} <= set(seen["columns"])
    assert seen["first"]["id"] == env.tasks("eval")[0]["id"]  # the generator's declared tasks, as the package makes

    monkeypatch.setenv("VERIHUB_HOME", str(tmp_path / "home"))
    assert hub.install("alice/arithmetic@^1.0", python=fresh_python) == (RepoId("alice", "arithmetic"), "1.0.0")
    graded = subprocess.run(
        [
            fresh_python,
            "-c",
            "import verihub; env = verihub.load_env('alice/arithmetic'); t = env.tasks('eval')[0]; "
            "print(env.root, env.grade(t, env.reference(t)).status)",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert graded.returncode == 0, graded.stderr[-2000:]
    root, status = graded.stdout.split()
    assert status == "ok" and str(REPO) not in root  # the installed copy
    pins = json.loads((tmp_path / "home" / "releases.json").read_text())
    assert pins[url]["alice/arithmetic"]["1.0.0"]["commit"] == pushed.commit


def test_derived_files_follow_the_source_and_a_published_version_never_changes(
    tmp_path: Path,
) -> None:
    """The card and data/ are derived, like dist/: the same source again is a no-op, other source under the
    version is refused, and a source file where a derived one goes is refused before anything is written."""
    hub = LocalHub(tmp_path / "hub")
    package = init_env("quiz", "single-turn", tmp_path)
    (package / "README.md").write_text("---\ntags: [trivia]\nlicense: mit\n---\n\n# quiz\n\nCapitals.\n")
    first = hub.push(package, owner="alice")
    repo = RepoId("alice", "quiz")
    files = {entry.path for entry in hub.storage.files(repo, "v0.1.0")}
    assert {"data/train-00000-of-00001.parquet", ".verihub/release.json", "data/tasks.jsonl"} <= files
    card = hub.storage.read(repo, "README.md", "v0.1.0").decode()
    assert card.startswith("---\ntags:\n- rl-environment\n- verihub\n") and "- trivia" in card
    assert "license: mit" in card and "Capitals." in card and 'load_env("hf://datasets/alice/quiz")' in card
    record = json.loads(hub.storage.read(repo, ".verihub/release.json", "v0.1.0"))
    wheel = "alice_quiz-0.1.0-py3-none-any.whl"
    import hashlib

    assert record["dist"][wheel] == hashlib.sha256(hub.storage.read(repo, f"dist/{wheel}", "v0.1.0")).hexdigest()
    assert "README.md" in record["source"] and "data/train-00000-of-00001.parquet" not in record["source"]
    assert hub.push(package, owner="alice").created is False and first.created  # unchanged: a no-op
    (package / "README.md").write_text((package / "README.md").read_text() + "\nMore.\n")
    with pytest.raises(VersionExistsError, match="bump it"):
        hub.push(package, owner="alice")
    shutil.copy(package / "data" / "tasks.jsonl", package / "data" / "train-00000-of-00001.parquet")
    with pytest.raises(VerihubError, match="would be overwritten by what a push derives"):
        hub.push(package, owner="alice", bump="patch")


def test_a_moved_release_tag_is_refused_unless_allowed(tmp_path: Path, fresh_python: str) -> None:
    """A tag that points elsewhere than when the release was installed (huggingface.co lets tags move) stops the
    next install, naming both commits; --allow-moved-tag installs with a warning and pins the new commit."""
    hub = LocalHub(tmp_path / "hub")
    hub.push(init_env("pinned", "single-turn", tmp_path), owner="alice")
    pins = tmp_path / "home" / "releases.json"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VERIHUB_HOME", str(tmp_path / "home"))
        hub.install("alice/pinned", python=fresh_python)
        recorded = json.loads(pins.read_text())
        entry = recorded[hub.location]["alice/pinned"]["0.1.0"]
        real, entry["commit"] = entry["commit"], "0" * 40  # as if the tag had pointed elsewhere when installed
        pins.write_text(json.dumps(recorded))
        with pytest.raises(MovedTagError, match="tag v0.1.0 moved: it pointed at 000000000000"):
            hub.install("alice/pinned", python=fresh_python)
        installed = subprocess.run(
            [fresh_python, "-m", "verihub.cli", "install", "alice/pinned", "--hub", str(tmp_path / "hub")],
            capture_output=True,
            text=True,
        )
        assert installed.returncode != 0 and "--allow-moved-tag" in installed.stderr
        hub.install("alice/pinned", python=fresh_python, allow_moved_tag=True)
        assert json.loads(pins.read_text())[hub.location]["alice/pinned"]["0.1.0"]["commit"] == real


def test_a_repository_of_the_layout_before_datasets_keeps_working(tmp_path: Path, fresh_python: str) -> None:
    """A hub directory written when packages were models (repos/env, a release without .verihub/release.json
    whose card carries no rl-environment tag) serves after the start migrates it: listed among RL environments,
    installed through the Hub API (its sha256 from the index entry), still answering on the model routes."""

    data = tmp_path / "old"
    hub = LocalHub(data)
    package = init_env("vintage", "single-turn", tmp_path)
    repo = RepoId("alice", "vintage")
    source = {path.relative_to(package).as_posix(): path.read_bytes() for path in package.rglob("*") if path.is_file()}
    from verihub.hub.build import PackageSource

    built = PackageSource(package).build(repo)
    hub.storage.create_repo(repo)
    hub.storage.commit(repo, {**source, **{f"dist/{name}": data for name, data in built.files.items()}}, "old push")
    hub.releases.tag(repo, "v0.1.0", "main")  # published the way it was: source and dist/, nothing derived
    (data / "repos" / "env" / "alice").mkdir(parents=True)
    (data / "repos" / "dataset" / "alice" / "vintage.git").rename(data / "repos" / "env" / "alice" / "vintage.git")
    (data / "hub.db").unlink(missing_ok=True)
    with serve_hub(data) as server:
        url = server.url
        listed = httpx.get(f"{url}/api/datasets", params={"filter": ["rl-environment", "verihub"]}).json()
        assert [row["id"] for row in listed] == ["alice/vintage"] and listed[0]["kind"] == "env"
        assert httpx.get(f"{url}/api/models/alice/vintage").json()["id"] == "alice/vintage"
        assert httpx.get(f"{url}/alice/vintage/resolve/v0.1.0/environment.yaml").status_code == 200
        assert "RL environment" in httpx.get(f"{url}/datasets/alice/vintage").text
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("VERIHUB_HOME", str(tmp_path / "home"))
            assert RemoteHub(url).install("alice/vintage", python=fresh_python)[1] == "0.1.0"
