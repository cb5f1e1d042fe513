"""The hub and `verihub regrade`: the leaderboard says which verifier version graded each run (a regraded run also
names the version its answers were made under), an index from before regrades keeps working, and ``--env
OWNER/NAME@VERSION`` installs that version from a hub before grading with it."""

from __future__ import annotations

import html
import json
import os
import re
import sqlite3
import subprocess
from pathlib import Path

import httpx
import pytest
from regrade_envs import hole_env, scripted

from conftest import VERIHUB, HubServer
from verihub.hub.leaderboard import Leaderboard
from verihub.hub.storage import HubStorage
from verihub.ids import RepoId
from verihub.testing import ScriptedChatServer

# The leaderboard's table as it was before it recorded which version graded a run.
OLD_SCHEMA = """
CREATE TABLE results (dataset TEXT NOT NULL, run TEXT NOT NULL, environment TEXT NOT NULL,
                      version TEXT NOT NULL, model TEXT NOT NULL, k INTEGER NOT NULL,
                      tasks INTEGER NOT NULL, rollouts INTEGER NOT NULL, pass1 REAL NOT NULL,
                      passk REAL, faulted INTEGER NOT NULL, tasks_lost INTEGER NOT NULL,
                      sampling TEXT NOT NULL, pushed REAL NOT NULL, blob TEXT NOT NULL,
                      PRIMARY KEY (dataset, run));
INSERT INTO results VALUES ('alice/quiz-results', 'run1', 'alice/quiz', '0.1.0', 'm', 1, 10, 10, 0.5, NULL, 0, 0,
                            '', 1.0, 'blob');
"""


def run(*args: str, token: str | None = None, python: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "VERIHUB_TOKEN", "VERIHUB_HUB")}
    command = [python, "-m", "verihub.cli"] if python else [VERIHUB]
    result = subprocess.run(
        [*command, *args, *(["--token", token] if token else [])],
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "COLUMNS": "200"},
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result


def test_an_index_from_before_regrades_is_read_as_evals_own_grades(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "leaderboard.db") as old:
        old.executescript(OLD_SCHEMA)
    board = Leaderboard(tmp_path / "leaderboard.db", HubStorage(tmp_path / "hub"))
    [row] = board.for_environment(RepoId("alice", "quiz"))
    assert (row.version, row.answered, row.pass1) == ("0.1.0", None, 0.5)


@pytest.mark.slow
def test_the_leaderboard_names_the_version_that_graded_each_run(hub_server: HubServer, tmp_path: Path) -> None:
    """An eval under 1.0.0 (with its hole) and the same answers regraded under 2.0.0, both pushed: the leaderboard
    and the results card name 2.0.0 as the regraded row's verifier and 1.0.0 as its answers' version."""
    url, token = hub_server.url, hub_server.tokens["alice"]
    v1 = hole_env(tmp_path / "v1", "1.0.0", fixed=False, env_id="regraded-board", package=True)
    v2 = hole_env(tmp_path / "v2", "2.0.0", fixed=True, env_id="regraded-board", package=True)
    for package in (v1, v2):
        run("push", str(package), "--hub", url, token=token)
    with ScriptedChatServer(scripted) as model:
        run("eval", str(v1), "--model", f"openai:m@{model.url}", "-n", "8", "-k", "3", "--out", str(tmp_path / "e"))
    from verihub.hub.remote import RemoteHub

    hub = RemoteHub(url, token)
    hub.push_results(tmp_path / "e", RepoId("alice", "regraded-board"))
    run("regrade", str(tmp_path / "e"), "--env", str(v2), "--out", str(tmp_path / "r"))
    pushed = hub.push_results(tmp_path / "r", RepoId("alice", "regraded-board"))
    assert pushed.created and pushed.dataset == RepoId("alice", "regraded-board-results")

    page = httpx.get(f"{url}/alice/regraded-board", timeout=30, follow_redirects=True).text
    assert "Verifier version</th>" in page
    cells = [
        [html.unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        for row in re.findall(r"<tr><td title=.*?</tr>", page.split("id='leaderboard'")[1].split("</table>")[0])
    ]
    assert sorted(row[1] for row in cells) == ["1.0.0", "2.0.0 regraded; answers made under 1.0.0"]
    card = httpx.get(f"{url}/datasets/alice/regraded-board-results/resolve/main/README.md", follow_redirects=True).text
    assert "| verifier version |" in card and "| 2.0.0 (regraded; answers made under 1.0.0) | m |" in card
    assert "| 1.0.0 | m |" in card


@pytest.mark.slow
def test_env_at_a_version_installs_that_version_from_the_hub(tmp_path: Path, fresh_python: str) -> None:
    """``--env alice/hole@2.0.0``: the fixed version is installed from the hub (into this interpreter) and grades;
    the results' own version installed before is replaced, as ``verihub install`` would."""
    hub_dir = str(tmp_path / "hub")
    v1 = hole_env(tmp_path / "v1", "1.0.0", fixed=False, package=True)
    v2 = hole_env(tmp_path / "v2", "2.0.0", fixed=True, package=True)
    for package in (v1, v2):  # each in its own process: the two versions' check modules have one name
        run("push", str(package), "--hub", hub_dir, "--owner", "alice")
    with ScriptedChatServer(scripted) as model:
        run("eval", str(v1), "--model", f"openai:m@{model.url}", "-n", "8", "-k", "3", "--out", str(tmp_path / "e"))
    result = run(
        "regrade", str(tmp_path / "e"), "--env", "alice/hole@2.0.0", "--hub", hub_dir, "--json", python=fresh_python
    )
    report = json.loads(result.stdout)
    assert report["graded_by_after"]["version"] == "2.0.0"
    assert report["flips"]["ok → wrong"] == {"rollouts": 7, "reward_before": 7.0, "reward_after": 0.0}
    installed = subprocess.run(
        [fresh_python, "-c", "from importlib.metadata import version; print(version('alice-hole'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert installed.stdout.strip() == "2.0.0"
    nowhere = "http://127.0.0.1:9"  # no hub listens there: what is installed must do
    for spec in ("2.0.0", "^2.0"):
        again = run(
            "regrade",
            str(tmp_path / "e"),
            "--env",
            f"alice/hole@{spec}",
            "--hub",
            nowhere,
            "--json",
            python=fresh_python,
        )
        assert json.loads(again.stdout)["graded_by_after"]["version"] == "2.0.0"
