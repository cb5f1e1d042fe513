"""Races, run for real on loopback: concurrent creates and deletes of one repository through the HTTP API
(exactly one creator wins, the others get a 409, and the search listing ends as the repositories are), and
concurrent validated pushes from one process, whose tasks load through `datasets` (each succeeds)."""

from __future__ import annotations

import csv
import json
import os
import random
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import httpx
import pytest

from conftest import HubServer
from verihub.spec.scaffold import init_env

pytestmark = pytest.mark.slow


def race(count: int, work: object) -> list[object]:
    """Run ``work(index)`` in ``count`` threads released together; their results or exceptions, in order."""
    barrier, results = threading.Barrier(count), [None] * count

    def run(index: int) -> None:
        barrier.wait(timeout=60)
        try:
            results[index] = work(index)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            results[index] = error

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def listed(server: HubServer, name: str, token: str | None) -> list[dict[str, object]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    found = []
    for kind in ("models", "datasets"):
        rows = httpx.get(f"{server.url}/api/{kind}", params={"search": name}, headers=headers, timeout=60).json()
        found += [row for row in rows if row["id"] == f"alice/{name}"]
    return found


def test_concurrent_creates_have_one_winner(hub_server: HubServer) -> None:
    headers = {"Authorization": f"Bearer {hub_server.tokens['alice']}"}
    kinds = [None, "dataset"]

    def create(index: int) -> httpx.Response:
        body = {"name": "contested", "private": index % 2 == 0, "type": kinds[index % 3 == 0]}
        return httpx.post(f"{hub_server.url}/api/repos/create", json=body, headers=headers, timeout=60)

    responses = race(12, create)
    statuses = sorted(response.status_code for response in responses)
    assert statuses == [200] + [409] * 11, [(r.status_code, r.text[:200]) for r in responses]
    assert all(r.headers["X-Error-Code"] == "RepoExists" for r in responses if r.status_code == 409)
    rows = listed(hub_server, "contested", hub_server.tokens["alice"])
    assert len(rows) == 1, rows


def test_concurrent_creates_and_deletes_leave_the_listing_as_the_repositories_are(hub_server: HubServer) -> None:
    """Owners creating and deleting one name at once: whatever survives, search shows exactly it, with its
    visibility (a public listing row for a private repository would show it to everyone)."""
    headers = {"Authorization": f"Bearer {hub_server.tokens['alice']}"}
    url = hub_server.url

    def churn(index: int) -> list[int]:
        rng, statuses = random.Random(index), []
        for _ in range(25):
            if rng.random() < 0.5:
                body = {"name": "churned", "private": rng.random() < 0.5}
                statuses.append(
                    httpx.post(f"{url}/api/repos/create", json=body, headers=headers, timeout=60).status_code
                )
            else:
                statuses.append(
                    httpx.request(
                        "DELETE", f"{url}/api/repos/delete", json={"name": "churned"}, headers=headers, timeout=60
                    ).status_code
                )
        return statuses

    for statuses in race(6, churn):
        assert not isinstance(statuses, BaseException), statuses
        assert set(statuses) <= {200, 404, 409}, statuses
    info = httpx.get(f"{url}/api/models/alice/churned", headers=headers, timeout=60)
    rows, public = listed(hub_server, "churned", hub_server.tokens["alice"]), listed(hub_server, "churned", None)
    if info.status_code == 404:
        assert rows == [] and public == [], rows
    else:
        private = info.json()["private"]
        assert [row["private"] for row in rows] == [private], (private, rows)
        assert len(public) == (0 if private else 1), public


PUSHES = """
    import sys, threading
    from pathlib import Path
    from verihub.hub.remote import RemoteHub

    url, token, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
    barrier, outcomes = threading.Barrier(len(paths)), {}

    def push(path):
        barrier.wait(timeout=60)
        try:
            outcomes[path] = RemoteHub(url, token).push(path, owner="alice").version
        except BaseException as error:
            outcomes[path] = f"{type(error).__name__}: {error}"

    threads = [threading.Thread(target=push, args=(path,)) for path in paths]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for path in paths:
        print(Path(path).name, outcomes[path])
"""


def test_concurrent_validated_pushes_from_one_process(hub_server: HubServer, tmp_path: Path) -> None:
    """Eight threads of one fresh process validate and push eight environments whose tasks are CSV (read
    through `datasets`): every push is published. Six rounds, as a race shows only now and then."""
    for round_ in range(6):
        env = {
            **os.environ,
            "HF_DATASETS_CACHE": str(tmp_path / f"datasets-{round_}"),
            "HF_DATASETS_OFFLINE": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
        }
        sources = [csv_env(f"crowd{round_}x{index}", tmp_path) for index in range(8)]
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                textwrap.dedent(PUSHES),
                hub_server.url,
                hub_server.tokens["alice"],
                *map(str, sources),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        outcomes = dict(line.split(" ", 1) for line in result.stdout.splitlines())
        assert outcomes == {source.name: "0.1.0" for source in sources}, outcomes


def csv_env(name: str, where: Path) -> Path:
    """The single-turn template with its tasks as CSV, which only `datasets` reads."""
    source = init_env(name, "single-turn", where)
    rows = [json.loads(line) for line in (source / "data" / "tasks.jsonl").read_text().splitlines()]
    with (source / "data" / "tasks.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (source / "data" / "tasks.jsonl").unlink()
    spec = source / "environment.yaml"
    spec.write_text(spec.read_text().replace("data/tasks.jsonl", "data/tasks.csv"))
    return source
