"""Eval results on the hub: `verihub eval --push` to a running `verihub hub serve`, read back by the unmodified
huggingface_hub client and `datasets`, shown on the environment's page (a leaderboard sortable in headless
Chromium, the verifier's layers, a preview of tasks, the version history), with the visibility rule, the
ownership rule and escaping tried as a hostile user would."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser import Browser, chromium_or_skip

from conftest import REPO, VERIHUB, HubServer, hf
from verihub.spec.scaffold import init_env
from verihub.testing import ScriptedChatServer

pytestmark = pytest.mark.slow
ANSWERS = {
    json.loads(line)["question"]: json.loads(line)["answer"]
    for line in (REPO / "sdk" / "verihub" / "templates" / "single-turn" / "data" / "tasks.jsonl")
    .read_text()
    .splitlines()
}


def quiz(tmp_path: Path, name: str) -> Path:
    """The single-turn template with all ten of its tasks in the eval split."""
    package = init_env(name, "single-turn", tmp_path)
    spec = package / "environment.yaml"
    spec.write_text(spec.read_text().replace("split: {train: 0.8, eval: 0.2}", "split: {eval: 1.0}"))
    return package


def alpha(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Right on sample 0, wrong on sample 1; the spider question crashes the server (its rollouts fault)."""
    question = request["messages"][-1]["content"]
    if "spider" in question:
        raise RuntimeError("the model server fell over")
    return [
        {"content": f"<answer>{ANSWERS[question] if index == 0 else 'no idea'}</answer>"}
        for index in range(request.get("n", 1))
    ]


def beta(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Always right."""
    return [{"content": f"<answer>{ANSWERS[request['messages'][-1]['content']]}</answer>"}] * request.get("n", 1)


def verihub(*args: str, token: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "VERIHUB_TOKEN", "VERIHUB_HUB")}
    result = subprocess.run(
        [VERIHUB, *args, "--token", token],
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "COLUMNS": "200"},
        cwd=cwd,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result


def rows(browser: Browser) -> list[list[str]]:
    return browser.evaluate(
        "[...document.querySelectorAll('table.runs tbody tr')]"
        ".map(row => [...row.cells].map(cell => cell.textContent.trim()))"
    )


def test_eval_push_shows_on_the_leaderboard_in_chromium(hub_server: HubServer, tmp_path: Path) -> None:
    """The "Done when": an eval pushed to a running hub shows on the environment's leaderboard in a browser;
    the real huggingface_hub client and `datasets` read the pushed dataset."""
    url, tokens = hub_server.url, hub_server.tokens
    package = quiz(tmp_path, "leader")
    verihub("push", str(package), "--hub", url, token=tokens["alice"])
    with ScriptedChatServer(alpha) as model:
        pushed = verihub(
            "eval",
            str(package),
            "--model",
            f"openai:alpha@{model.url}",
            "-n",
            "10",
            "-k",
            "2",
            "--out",
            str(tmp_path / "alpha"),
            "--push",
            "--hub",
            url,
            token=tokens["alice"],
        )
    assert "to the dataset alice/leader-results" in pushed.stdout, pushed.stdout
    metadata = json.loads((tmp_path / "alpha" / "metadata.json").read_text())["metrics"]
    assert metadata["rollouts_faulted"] == 2 and metadata["tasks_lost"] == 1
    with ScriptedChatServer(beta) as model:  # bob evaluates alice's environment: his results stay his
        theirs = verihub(
            "eval",
            str(package),
            "--model",
            f"openai:beta@{model.url}",
            "-n",
            "10",
            "-k",
            "2",
            "--push",
            "--results-for",
            "alice/leader",
            "--hub",
            url,
            token=tokens["bob"],
        )
    assert "to the dataset bob/alice-leader-results" in theirs.stdout, theirs.stdout
    from verihub.hub.remote import RemoteHub
    from verihub.ids import RepoId

    again = RemoteHub(url, tokens["alice"]).push_results(tmp_path / "alpha", RepoId("alice", "leader"))
    assert not again.created and again.dataset == RepoId("alice", "leader-results")  # the same run twice is one run

    read = hf(
        hub_server,
        f"""
        import json, pathlib, datasets
        from huggingface_hub import HfApi, hf_hub_download
        api = HfApi(endpoint={url!r}, token={tokens["alice"]!r})
        files = sorted(api.list_repo_files("alice/leader-results", repo_type="dataset"))
        parquet = next(f for f in files if f.endswith("results.parquet"))
        path = hf_hub_download("alice/leader-results", parquet, repo_type="dataset", endpoint={url!r})
        card = pathlib.Path(hf_hub_download("alice/leader-results", "README.md", repo_type="dataset",
                                            endpoint={url!r})).read_text()
        table = datasets.load_dataset("parquet", data_files=path, split="train")
        info = api.dataset_info("alice/leader-results")
        print(json.dumps({{"files": files, "rows": len(table), "statuses": sorted(set(table["status"])), "card": card,
                          "private": info.private, "listed": [d.id for d in api.list_datasets(search="leader")],
                          "models": [m.id for m in api.list_models(search="leader")]}}))
    """,
        tmp_path,
    )
    assert read["rows"] == 20 and read["statuses"] == ["env_error", "ok", "wrong"]
    assert len(read["files"]) == 3 and read["files"][0] == "README.md" and read["private"] is False
    assert "environment: alice/leader" in read["card"] and "| 0.1.0 | alpha |" in read["card"]
    assert sorted(read["listed"]) == ["alice/leader", "alice/leader-results", "bob/alice-leader-results"]
    assert read["models"] == ["alice/leader"]  # where packages were listed before they were datasets: still there

    chromium = chromium_or_skip()
    with Browser(chromium, tmp_path / "profile") as browser:
        browser.open(f"{url}/alice/leader")
        shown = rows(browser)
        assert [row[0] for row in shown] == ["beta", "alpha"]  # best pass@1 first
        assert shown[0][2:4] == ["1.000", "1.000 k=2"] and "bob" in shown[0][6] and "community" in shown[0][6]
        assert shown[1][2] == "0.450" and shown[1][4] == "2/20 rollouts, 1/10 tasks lost"
        assert (
            "alice" in shown[1][6]
            and "owner" in shown[1][6]
            and re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", shown[1][5])
        )
        browser.click("table.runs thead th:nth-child(1)")  # sort by model
        assert [row[0] for row in rows(browser)] == ["alpha", "beta"]
        browser.click("table.runs thead th:nth-child(1)")
        assert [row[0] for row in rows(browser)] == ["beta", "alpha"]
        browser.click("table.runs thead th:nth-child(5)")  # faults, fewest first
        assert [row[0] for row in rows(browser)] == ["beta", "alpha"]
        layers = browser.evaluate(
            "[...document.querySelectorAll('table.layers tbody tr')]"
            ".map(row => [...row.cells].map(cell => cell.textContent))"
        )
        assert layers == [["format", "rule", "xml_tags", "gate", "0.0"], ["correct", "check", "exact", "", "1.0"]]
        tasks = browser.evaluate("[...document.querySelectorAll('details.task pre')].map(pre => pre.textContent)")
        assert (
            tasks[:2]
            == ["Answer briefly. Put the final answer inside <answer></answer> tags.", "What is the capital of France?"]
            and len(tasks) == 6
        )
        history = browser.evaluate("[...document.querySelectorAll('table.history td')].map(td => td.textContent)")
        assert history[0] == "0.1.0" and history[1].endswith("UTC")
        screenshot = browser.screenshot(tmp_path / "leaderboard.png")
        browser.open(f"{url}/datasets/bob/alice-leader-results")
        assert browser.evaluate("document.querySelector('h2').textContent").startswith("bob/alice-leader-results")
        assert [row[0] for row in rows(browser)] == ["beta"]
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 20_000
    print(f"screenshot: {screenshot}")


def test_results_of_a_private_environment_are_private(hub_server: HubServer, tmp_path: Path) -> None:
    url, tokens = hub_server.url, hub_server.tokens
    package = quiz(tmp_path, "sealed")
    verihub("push", str(package), "--private", "--hub", url, token=tokens["alice"])
    with ScriptedChatServer(beta) as model:
        pushed = verihub(
            "eval",
            str(package),
            "--model",
            f"openai:gamma@{model.url}",
            "-n",
            "4",
            "-k",
            "1",
            "--push",
            "--hub",
            url,
            token=tokens["alice"],
        )
    assert "alice/sealed-results" in pushed.stdout and "private" in pushed.stdout
    alice, bob = {"Authorization": f"Bearer {tokens['alice']}"}, {"Authorization": f"Bearer {tokens['bob']}"}
    assert "gamma" in httpx.get(f"{url}/datasets/alice/sealed", headers=alice).text
    for headers in ({}, bob):
        for path in (
            "/api/datasets/alice/sealed-results",
            "/api/datasets/alice/sealed-results/tree/main",
            "/datasets/alice/sealed-results",
            "/datasets/alice/sealed-results/resolve/main/README.md",
            "/alice/sealed",
        ):
            refused = httpx.get(f"{url}{path}", headers=headers)
            assert refused.status_code == 404 and refused.headers["X-Error-Code"] == "RepoNotFound", (path, headers)
        listed = httpx.get(f"{url}/api/datasets", params={"search": "sealed"}, headers=headers).json()
        assert listed == []
    # bob cannot see the environment, so he has nothing to push results for
    out = tmp_path / "bob-run"
    with ScriptedChatServer(beta) as model:
        subprocess.run(
            [
                VERIHUB,
                "eval",
                str(package),
                "--model",
                f"openai:beta@{model.url}",
                "-n",
                "2",
                "-k",
                "1",
                "--out",
                str(out),
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
    from verihub.hub.errors import RepoNotFoundError
    from verihub.hub.remote import RemoteHub
    from verihub.ids import RepoId

    with pytest.raises(RepoNotFoundError):
        RemoteHub(url, tokens["bob"]).push_results(out, RepoId("alice", "sealed"))
    assert httpx.get(f"{url}/api/datasets/bob/alice-sealed-results", headers=bob).status_code == 404


HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def test_hostile_packages_and_results_cannot_inject_html(hub_server: HubServer, tmp_path: Path) -> None:
    """A package published with the raw client (no validation), whose card, spec, data and prompt are
    attacks, and a results file that is one: the page shows them as text, runs only its own script, and a
    prompt template's format specs cost nothing."""
    url, tokens = hub_server.url, hub_server.tokens
    package = tmp_path / "evil"
    (package / "data").mkdir(parents=True)
    (package / "README.md").write_text(
        f"---\nid: evil\n---\n# Evil {HOSTILE}\n\n[click](javascript:window.__pwned=3)\n"
    )
    (package / "environment.yaml").write_text(
        "id: evil\nversion: 0.1.0\ndescription: '" + HOSTILE.replace("'", "''") + "'\n"
        "dataset: {source: data/tasks.jsonl}\n"
        "prompt: {system: '{question:>999999999}', user: '{question} {question.__class__} {missing}'}\n"
        "verifier:\n  - {name: '" + HOSTILE.replace("'", "''") + "', layer: check, use: exact, gate: true}\n"
        "  - {name: bomb, layer: rule, use: &a [x, x, x, x, x, x, x, x, x], weight: [*a, *a, *a, *a, *a, *a]}\n"
    )
    (package / "data" / "tasks.jsonl").write_text(json.dumps({"id": HOSTILE, "question": HOSTILE}) + "\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "metadata.json").write_text(
        json.dumps(
            {
                "complete": True,
                "environment": "evil",
                "environment_version": "0.1.0",
                "model": HOSTILE,
                "k": 1,
                "sampling": {HOSTILE: HOSTILE},
                "metrics": {"pass@1": 0.5, "rollouts": 2, "rollouts_faulted": 0, "tasks": 2, "tasks_lost": 0},
            }
        )
    )
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "metadata.json").write_text(
        json.dumps(
            {
                "complete": True,
                "environment": "evil",
                "environment_version": "0.1.0",
                "model": "liar",
                "k": 1,
                "metrics": {"pass@1": 7.0, "rollouts": 2, "rollouts_faulted": 0, "tasks": 2, "tasks_lost": 0},
            }
        )
    )
    (tmp_path / "card.md").write_text(f"---\nverihub: {{environment: bob/evil}}\n---\n{HOSTILE}\n")
    hf(
        hub_server,
        f"""
        from huggingface_hub import HfApi
        api = HfApi(token={tokens["bob"]!r})
        api.create_repo("bob/evil")
        api.upload_folder(folder_path={str(package)!r}, repo_id="bob/evil")
        api.create_tag("bob/evil", tag="v0.1.0")
        api.create_repo("bob/evil-results", repo_type="dataset")
        api.upload_file(path_or_fileobj={str(tmp_path / "card.md")!r}, path_in_repo="README.md",
                        repo_id="bob/evil-results", repo_type="dataset")
        api.upload_folder(folder_path={str(run)!r}, path_in_repo="runs/x", repo_id="bob/evil-results",
                          repo_type="dataset")
        api.upload_folder(folder_path={str(broken)!r}, path_in_repo="runs/y", repo_id="bob/evil-results",
                          repo_type="dataset")
        print("{{}}")
    """,
        tmp_path,
    )
    start = time.perf_counter()
    page = httpx.get(f"{url}/datasets/bob/evil", timeout=60)
    assert page.status_code == 200 and time.perf_counter() - start < 10
    assert "<script>window" not in page.text and 'onerror="' not in page.text and 'href="javascript:' not in page.text
    assert page.text.count("&lt;script&gt;window.__pwned = 1&lt;/script&gt;") >= 4  # card, layer, task, model
    assert "{question:&gt;999999999}" in page.text and "{question.__class__}" in page.text
    assert "(not a plain value)" in page.text and "liar" not in page.text  # pass@1 = 7 is not a rate
    assert "script-src 'sha256-" in page.headers["Content-Security-Policy"]
    dataset = httpx.get(f"{url}/datasets/bob/evil-results").text
    assert "1 run(s) not shown" in dataset and "<script>window" not in dataset
    chromium = chromium_or_skip()
    with Browser(chromium, tmp_path / "profile") as browser:
        for path in ("/datasets/bob/evil", "/datasets/bob/evil-results"):
            browser.open(f"{url}{path}")
            assert browser.evaluate("[window.__pwned === undefined, document.scripts.length]") == [True, 1], path
            assert browser.evaluate("document.querySelectorAll('img').length") == 0
        browser.screenshot(tmp_path / "hostile.png")


def test_every_repository_is_a_dataset_and_the_model_routes_serve_packages_for_one_release(
    hub_server: HubServer, tmp_path: Path
) -> None:
    """Packages, eval results and other data are datasets; the model routes (where packages were before) show
    packages and plain datasets, never eval results; the release tag of eval results publishes nothing to the pip
    index, whatever their dist/ holds."""
    url, tokens = hub_server.url, hub_server.tokens
    alice = {"Authorization": f"Bearer {tokens['alice']}"}
    out = hf(
        hub_server,
        f"""
        import json, io, zipfile
        from huggingface_hub import HfApi
        api = HfApi(token={tokens["alice"]!r})
        api.create_repo("alice/crossing", repo_type="dataset")
        api.upload_file(path_or_fileobj=b"a,b", path_in_repo="data.csv", repo_id="alice/crossing", repo_type="dataset")
        api.create_tag("alice/crossing", tag="v1.0.0", repo_type="dataset")
        api.create_repo("alice/crossing-runs", repo_type="dataset")
        wheel = io.BytesIO()
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr("crossing/__init__.py", "")
        api.upload_file(path_or_fileobj=wheel.getvalue(), repo_id="alice/crossing-runs", repo_type="dataset",
                        path_in_repo="dist/alice_crossing_runs-1.0.0-py3-none-any.whl")
        api.upload_file(path_or_fileobj=b"{{}}", path_in_repo="runs/r/metadata.json", repo_id="alice/crossing-runs",
                        repo_type="dataset")
        api.create_tag("alice/crossing-runs", tag="v1.0.0", repo_type="dataset")
        out = {{}}
        for name, call in {{
            "as_model": lambda: api.model_info("alice/crossing").id,
            "results_as_model": lambda: api.model_info("alice/crossing-runs").id,
            "again_as_model": lambda: api.create_repo("alice/crossing"),
        }}.items():
            try:
                out[name] = call()
            except Exception as error:
                out[name] = getattr(getattr(error, "response", None), "status_code", type(error).__name__)
        out["tags"] = [t.name for t in api.list_repo_refs("alice/crossing", repo_type="dataset").tags]
        print(json.dumps(out))
    """,
        tmp_path,
    )
    assert out == {"as_model": "alice/crossing", "results_as_model": 404, "again_as_model": 409, "tags": ["v1.0.0"]}
    space = httpx.post(f"{url}/api/repos/create", json={"name": "spacey", "type": "space"}, headers=alice)
    assert space.status_code == 400 and space.headers["X-Error-Code"] == "InvalidRequest"
    assert httpx.get(f"{url}/simple/alice-crossing/").status_code == 404  # no dist/: nothing to publish
    assert httpx.get(f"{url}/simple/alice-crossing-runs/").status_code == 404  # eval results publish nothing
    assert httpx.get(f"{url}/alice/crossing").status_code == 301  # the page moved to /datasets/
    assert httpx.get(f"{url}/datasets/alice/crossing", headers=alice).status_code == 200
    package = quiz(tmp_path, "lonely")
    verihub("push", str(package), "--hub", url, token=tokens["alice"])
    assert httpx.get(f"{url}/api/datasets/alice/lonely").json()["kind"] == "env"
    assert httpx.get(f"{url}/datasets/alice/lonely/resolve/v0.1.0/README.md").status_code == 200
    assert httpx.get(f"{url}/alice/lonely/resolve/v0.1.0/README.md").status_code == 200  # where an older client reads
    assert httpx.get(f"{url}/simple/alice-lonely/").status_code == 200
    deleted = httpx.request(
        "DELETE", f"{url}/api/repos/delete", json={"name": "crossing", "type": "dataset"}, headers=alice
    )
    assert (
        deleted.status_code == 200 and httpx.get(f"{url}/api/datasets/alice/crossing", headers=alice).status_code == 404
    )


def test_the_leaderboard_is_derived_at_start(tmp_path: Path) -> None:
    """Results pushed into a hub directory (no server running) show once a server starts on it; rows that
    a database lost come back from the repositories."""
    from fastapi.testclient import TestClient

    import verihub as sdk
    from verihub.eval.evaluate import evaluate
    from verihub.hub.local import LocalHub
    from verihub.hub.server import create_app
    from verihub.ids import RepoId

    hub = LocalHub(tmp_path / "hub")
    package = quiz(tmp_path, "offline")
    repo = hub.push(package, owner="carol").repo
    with ScriptedChatServer(beta) as model:
        evaluate(sdk.load_env(package), f"openai:delta@{model.url}", n=3, k=1, out=tmp_path / "run")
    os.environ["VERIHUB_OWNER"] = "carol"
    try:
        pushed = hub.push_results(tmp_path / "run", repo)
    finally:
        del os.environ["VERIHUB_OWNER"]
    assert pushed.dataset == RepoId("carol", "offline-results") and pushed.created
    with TestClient(create_app(tmp_path / "hub")) as client:
        assert "delta" in client.get("/carol/offline").text
    with ScriptedChatServer(alpha) as model:  # a second run: the first keeps its row, the second gets one
        evaluate(sdk.load_env(package), f"openai:epsilon@{model.url}", n=1, k=1, out=tmp_path / "second")
    os.environ["VERIHUB_OWNER"] = "carol"
    try:
        assert hub.push_results(tmp_path / "second", repo).created
    finally:
        del os.environ["VERIHUB_OWNER"]
    with TestClient(create_app(tmp_path / "hub")) as client:
        page = client.get("/carol/offline").text
        assert "delta" in page and "epsilon" in page
    import sqlite3

    with sqlite3.connect(tmp_path / "hub" / "hub.db") as db:  # the derived rows lost
        db.execute("DELETE FROM results")
        db.execute("DELETE FROM results_heads")
    with TestClient(create_app(tmp_path / "hub")) as client:
        assert "delta" in client.get("/carol/offline").text
