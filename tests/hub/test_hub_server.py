"""The hub server, driven by the unmodified huggingface_hub client and by real pip, on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from conftest import HubServer as Server
from verihub.hub.local import LocalHub
from verihub.spec.scaffold import init_env

pytestmark = pytest.mark.slow
VERIHUB = str(Path(sys.executable).with_name("verihub"))


@pytest.fixture
def server(hub_server: Server) -> Server:
    return hub_server


def client(server: Server, code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with the real huggingface_hub client pointed at the server (HF_ENDPOINT at import)."""
    env = {
        **os.environ,
        "HF_ENDPOINT": server.url,
        "HF_HUB_CACHE": str(tmp_path / "hf-cache"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_OFFLINE": "0",
    }
    env.pop("HF_TOKEN", None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=300
    )


def test_huggingface_hub_client_round_trip(server: Server, tmp_path: Path) -> None:
    package = init_env("quiz", "single-turn", tmp_path)
    script = f"""
        import json, filecmp, pathlib
        from huggingface_hub import HfApi, snapshot_download, hf_hub_download
        from huggingface_hub.errors import (RepositoryNotFoundError, RevisionNotFoundError,
                                              EntryNotFoundError, HfHubHTTPError)
        api = HfApi(token={server.tokens["alice"]!r})
        out = {{}}
        out["whoami"] = api.whoami()["name"]
        url = api.create_repo("alice/quiz")
        api.create_repo("alice/quiz", exist_ok=True)
        first = api.upload_folder(folder_path={str(package)!r}, repo_id="alice/quiz", commit_message="first")
        api.create_tag("alice/quiz", tag="v0.1.0")
        api.upload_file(path_or_fileobj=b"more", path_in_repo="notes/extra.txt", repo_id="alice/quiz")
        refs = api.list_repo_refs("alice/quiz")
        out["branches"] = [b.name for b in refs.branches]
        out["tags"] = {{t.name: t.target_commit for t in refs.tags}}
        out["first"] = first.oid
        info = api.model_info("alice/quiz")
        out["card"] = info.card_data.to_dict() if info.card_data else None
        out["siblings"] = sorted(s.rfilename for s in info.siblings)
        snapshot = pathlib.Path(snapshot_download("alice/quiz", revision="v0.1.0"))
        out["snapshot_files"] = sorted(str(p.relative_to(snapshot)) for p in snapshot.rglob("*") if p.is_file())
        out["same_spec"] = filecmp.cmp(snapshot / "environment.yaml",
                                       {str(package / "environment.yaml")!r}, shallow=False)
        out["download"] = pathlib.Path(hf_hub_download("alice/quiz", "notes/extra.txt")).read_text()
        out["tree"] = sorted(api.list_repo_files("alice/quiz", revision="v0.1.0"))
        out["commits"] = [c.title for c in api.list_repo_commits("alice/quiz")]
        out["search"] = [m.id for m in api.list_models(search="quiz")]
        for name, call in {{
            "missing_repo": lambda: api.model_info("alice/nothing"),
            "missing_revision": lambda: api.model_info("alice/quiz", revision="v9"),
            "missing_file": lambda: hf_hub_download("alice/quiz", "nope.txt"),
            "retag": lambda: api.create_tag("alice/quiz", tag="v0.1.0", revision="main"),
            "bob_writes": lambda: HfApi(token={server.tokens["bob"]!r}).upload_file(
                path_or_fileobj=b"x", path_in_repo="x.txt", repo_id="alice/quiz"),
            "read_token_writes": lambda: HfApi(token={server.tokens["alice-read"]!r}).upload_file(
                path_or_fileobj=b"x", path_in_repo="x.txt", repo_id="alice/quiz"),
            "anonymous_create": lambda: HfApi(token=False).create_repo("alice/other"),
        }}.items():
            try:
                call()
                out[name] = "no error"
            except Exception as error:
                status = getattr(getattr(error, "response", None), "status_code", "")
                out[name] = type(error).__name__ + ":" + str(status)
        print(json.dumps(out))
    """
    result = client(server, script, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["whoami"] == "alice"
    assert out["branches"] == ["main"] and out["tags"] == {"v0.1.0": out["first"]}
    assert out["card"]["id"] == "quiz" and "notes/extra.txt" in out["siblings"]
    assert "environment.yaml" in out["snapshot_files"] and "notes/extra.txt" not in out["snapshot_files"]
    assert out["same_spec"] is True and out["download"] == "more"
    assert "data/tasks.jsonl" in out["tree"] and out["search"] == ["alice/quiz"]
    assert out["commits"][-1] == "first"
    assert out["missing_repo"].startswith("RepositoryNotFoundError")
    assert out["missing_revision"].startswith("RevisionNotFoundError")
    assert out["missing_file"].startswith(("RemoteEntryNotFoundError", "EntryNotFoundError"))
    assert out["retag"] == "HfHubHTTPError:409"  # a published version never moves
    assert out["bob_writes"].endswith(":403") and out["read_token_writes"].endswith(":403")
    assert out["anonymous_create"].endswith(":401") or "LocalTokenNotFoundError" in out["anonymous_create"]


def test_pip_installs_from_the_served_index(server: Server, tmp_path: Path, fresh_python: str) -> None:
    package = init_env("served", "single-turn", tmp_path)
    LocalHub(server.data).push(package, owner="alice")
    index = f"{server.url}/simple/"
    page = httpx.get(f"{index}alice-served/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}).json()
    assert page["name"] == "alice-served" and page["versions"] == ["0.1.0"]
    assert all(len(f["hashes"]["sha256"]) == 64 for f in page["files"])
    assert any("core-metadata" in f for f in page["files"])
    python = fresh_python
    installed = subprocess.run(
        [python, "-m", "pip", "install", "--index-url", index, "alice-served==0.1.0"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    loaded = subprocess.run(
        [python, "-c", "import verihub; print(verihub.load_env('alice/served').version)"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert loaded.stdout.strip() == "0.1.0", loaded.stderr


def test_a_corrupted_file_is_never_served(server: Server, tmp_path: Path) -> None:
    package = init_env("fragile", "single-turn", tmp_path)
    result = LocalHub(server.data).push(package, owner="alice")
    wheel = next(name for name in result.files if name.endswith(".whl"))
    url = f"{server.url}/files/alice-fragile/{wheel}"
    assert httpx.get(url).status_code == 200
    stored = server.data / "files" / "alice-fragile" / wheel
    stored.write_bytes(stored.read_bytes()[:-10] + b"tampered!!")
    broken = httpx.get(url)
    assert broken.status_code == 500 and "no longer matches" in broken.json()["error"]


def test_verihub_push_and_install_through_the_server(server: Server, tmp_path: Path, fresh_python: str) -> None:
    package = init_env("remote-quiz", "single-turn", tmp_path)
    common = ["--hub", server.url, "--token", server.tokens["alice"]]
    pushed = subprocess.run([VERIHUB, "push", str(package), *common], capture_output=True, text=True, timeout=300)
    assert pushed.returncode == 0, pushed.stderr
    assert "published alice/remote-quiz@0.1.0" in pushed.stdout
    again = subprocess.run([VERIHUB, "push", str(package), *common], capture_output=True, text=True, timeout=300)
    assert "already published with this content" in again.stdout
    (package / "README.md").write_text((package / "README.md").read_text() + "\nMore words.\n")
    changed = subprocess.run([VERIHUB, "push", str(package), *common], capture_output=True, text=True, timeout=300)
    assert changed.returncode == 2 and "bump it" in changed.stderr
    bumped = subprocess.run(
        [VERIHUB, "push", str(package), "--bump", "minor", *common], capture_output=True, text=True, timeout=300
    )
    assert "alice/remote-quiz@0.2.0" in bumped.stdout, bumped.stderr
    anonymous = subprocess.run(
        [VERIHUB, "push", str(package), "--hub", server.url, "--owner", "alice"],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **{k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "VERIHUB_TOKEN")},
            "VERIHUB_HOME": str(tmp_path / "nobody"),
        },
    )
    assert anonymous.returncode != 0  # no token: the write is refused
    home = tmp_path / "home"  # `verihub login` stores the token; later commands find it
    logged_in = {
        **{k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "VERIHUB_TOKEN")},
        "VERIHUB_HOME": str(home),
    }
    subprocess.run(
        [VERIHUB, "login", "--token", server.tokens["alice"]], check=True, env=logged_in, capture_output=True
    )
    assert (home / "token").stat().st_mode & 0o777 == 0o600
    via_login = subprocess.run(
        [VERIHUB, "push", str(package), "--hub", server.url, "--bump", "patch"],
        capture_output=True,
        text=True,
        timeout=300,
        env=logged_in,
    )
    assert "alice/remote-quiz@0.2.1" in via_login.stdout, via_login.stderr
    from verihub.hub.remote import RemoteHub
    from verihub.ids import RepoId

    remote = RemoteHub(server.url, server.tokens["alice"])
    assert remote.versions(RepoId("alice", "remote-quiz")) == ["0.1.0", "0.2.0", "0.2.1"]
    assert [found["repo"] for found in remote.search("remote-quiz")] == ["alice/remote-quiz"]
    listing = httpx.get(f"{server.url}/simple/alice-remote-quiz/").text
    assert "alice_remote_quiz-0.2.1-py3-none-any.whl#sha256=" in listing
    # `verihub install` run by another interpreter installs there, and the package then loads by name.
    installed = subprocess.run(
        [fresh_python, "-m", "verihub.cli", "install", "alice/remote-quiz@~=0.2.0", *common],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    assert "installed alice/remote-quiz@0.2.1" in installed.stdout
    loaded = subprocess.run(
        [
            fresh_python,
            "-c",
            "import verihub; env = verihub.load_env('alice/remote-quiz'); print(env.version, env.root)",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    version, root = loaded.stdout.split()
    assert version == "0.2.1" and str(tmp_path) in root, loaded.stderr


def test_a_tag_cannot_publish_someone_elses_package_name(server: Server, tmp_path: Path) -> None:
    script = f"""
        from huggingface_hub import HfApi
        api = HfApi(token={server.tokens["bob"]!r})
        api.create_repo("bob/sneaky")
        api.upload_file(path_or_fileobj=b"not really a wheel", path_in_repo="dist/numpy-9.9.9-py3-none-any.whl",
                        repo_id="bob/sneaky")
        try:
            api.create_tag("bob/sneaky", tag="v9.9.9")
            print("published")
        except Exception as error:
            print(getattr(error.response, "status_code", ""), "refused")
    """
    result = client(server, script, tmp_path)
    assert result.stdout.strip().endswith("400 refused"), result.stdout + result.stderr
    assert httpx.get(f"{server.url}/simple/numpy/").status_code == 404
    assert httpx.get(f"{server.url}/api/models/bob/sneaky/refs").json()["tags"] == []  # not tagged either


def test_private_repositories_are_invisible_to_others(server: Server, tmp_path: Path) -> None:
    script = f"""
        import json
        from huggingface_hub import HfApi
        alice, bob, nobody = (HfApi(token={server.tokens["alice"]!r}), HfApi(token={server.tokens["bob"]!r}),
                              HfApi(token=False))
        alice.create_repo("alice/secret", private=True, repo_type="dataset")
        alice.upload_file(path_or_fileobj=b"# secret plans", path_in_repo="README.md", repo_id="alice/secret",
                          repo_type="dataset")
        out = {{"alice_sees": alice.dataset_info("alice/secret").private,
               "alice_lists": [m.id for m in alice.list_datasets(search="secret")],
               "bob_lists": [m.id for m in bob.list_datasets(search="secret")],
               "anyone_lists": [m.id for m in nobody.list_datasets(search="secret")]}}
        for name, api in (("bob", bob), ("nobody", nobody)):
            try:
                api.dataset_info("alice/secret")
                out[name] = "visible"
            except Exception as error:
                out[name] = type(error).__name__
        print(json.dumps(out))
    """
    result = client(server, script, tmp_path)
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert "alice/secret" in out.pop("alice_lists")  # other tests' private repos on the shared server may match too
    assert out == {
        "alice_sees": True,
        "bob_lists": [],
        "anyone_lists": [],
        "bob": "RepositoryNotFoundError",
        "nobody": "RepositoryNotFoundError",
    }


CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def test_web_pages_in_headless_chromium(server: Server, tmp_path: Path) -> None:
    import shutil

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        if os.environ.get("CI"):
            pytest.fail("chromium must be installed in CI (scripts/setup.sh installs Debian's chromium as root)")
        pytest.skip("no chromium here")
    package = init_env("showcase", "single-turn", tmp_path)
    (package / "eval").mkdir()
    (package / "eval" / "metadata.json").write_text(json.dumps({"metrics": {"pass@1": 0.625, "mean_reward": 0.7}}))
    from verihub.hub.remote import RemoteHub

    RemoteHub(server.url, server.tokens["alice"]).push(package)
    profile = tmp_path / "profile"

    def browse(url: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, url],
            capture_output=True,
            text=True,
            timeout=120,
        )

    page = browse(f"{server.url}/alice/showcase", "--dump-dom").stdout  # where packages were: redirected
    assert "verihub install alice/showcase@0.1.0" in page and "0.625" in page and "environment.yaml" in page
    assert "<h1>showcase</h1>" in page  # the card, rendered from Markdown
    assert "RL environment" in page and 'load_env("hf://datasets/alice/showcase")' in page  # how to use it
    listing = browse(f"{server.url}/?q=showcase", "--dump-dom").stdout
    assert 'href="/datasets/alice/showcase"' in listing
    screenshot = tmp_path / "package-page.png"
    browse(f"{server.url}/datasets/alice/showcase", f"--screenshot={screenshot}", "--window-size=1200,900")
    assert screenshot.stat().st_size > 10_000 and screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_uv_installs_from_the_served_index(server: Server, tmp_path: Path) -> None:
    uv = Path(sys.executable).with_name("uv")
    if not uv.exists():
        pytest.skip("uv is not installed")
    package = init_env("uv-served", "single-turn", tmp_path)
    LocalHub(server.data).push(package, owner="alice")
    target = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True)
    installed = subprocess.run(
        [
            str(uv),
            "pip",
            "install",
            "--python",
            str(target / "bin" / "python"),
            "--no-deps",
            "--index-url",
            f"{server.url}/simple/",
            "alice-uv-served==0.1.0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "UV_NO_CACHE": "1"},
    )
    assert installed.returncode == 0, installed.stderr
    site = next((target / "lib").glob("python3.*/site-packages"))
    assert (site / "uv_served_env" / "environment.yaml").is_file()


def test_organization_members_write_and_see_its_repositories(server: Server, tmp_path: Path) -> None:
    added = subprocess.run(
        [VERIHUB, "hub", "org", "add", "acme", "alice", "--data", str(server.data)], capture_output=True, text=True
    )
    assert added.returncode == 0, added.stderr
    script = f"""
        import json
        from huggingface_hub import HfApi
        alice, bob = HfApi(token={server.tokens["alice"]!r}), HfApi(token={server.tokens["bob"]!r})
        out = {{"orgs": [o["name"] for o in alice.whoami()["orgs"]]}}
        alice.create_repo("acme/internal", private=True, repo_type="dataset")
        alice.upload_file(path_or_fileobj=b"# acme", path_in_repo="README.md", repo_id="acme/internal",
                          repo_type="dataset")
        out["alice_lists"] = [m.id for m in alice.list_datasets(author="acme")]
        out["bob_lists"] = [m.id for m in bob.list_datasets(author="acme")]
        try:
            bob.create_repo("acme/bobs", repo_type="dataset")
            out["bob_creates"] = "created"
        except Exception as error:
            out["bob_creates"] = error.response.status_code
        print(json.dumps(out))
    """
    result = client(server, script, tmp_path)
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out == {"orgs": ["acme"], "alice_lists": ["acme/internal"], "bob_lists": [], "bob_creates": 403}


def test_publishing_with_only_huggingface_hub_and_pip(server: Server, tmp_path: Path) -> None:
    """The "Done when": huggingface_hub publishes (source + dist/ + a v-tag) and plain pip installs."""
    from verihub.hub.build import PackageSource
    from verihub.ids import RepoId

    package = init_env("plain", "single-turn", tmp_path)
    dist = package / "dist"
    dist.mkdir()
    for name, data in PackageSource(package).build(RepoId("alice", "plain")).files.items():
        (dist / name).write_bytes(data)
    script = f"""
        from huggingface_hub import HfApi
        api = HfApi(token={server.tokens["alice"]!r})
        api.create_repo("alice/plain")
        api.upload_folder(folder_path={str(package)!r}, repo_id="alice/plain")
        api.create_branch("alice/plain", branch="dev")
        api.create_tag("alice/plain", tag="v0.1.0")
        print(sorted(e.path for e in api.get_paths_info("alice/plain", ["dist", "environment.yaml", "nope"])))
        try:
            api.upload_file(path_or_fileobj=b"x", path_in_repo="../escape.txt", repo_id="alice/plain")
        except Exception as error:
            print("traversal", type(error).__name__)
        api.create_repo("alice/temporary")
        api.delete_repo("alice/temporary")
        print("deleted", api.repo_exists("alice/temporary"))
    """
    result = client(server, script, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "['dist', 'environment.yaml']" and lines[-1] == "deleted False"
    assert lines[1].startswith("traversal")
    target = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True)
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(target / "bin" / "python"),
            "install",
            "--no-deps",
            "--index-url",
            f"{server.url}/simple/",
            "alice-plain==0.1.0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr


def test_archives_with_escaping_paths_are_refused(server: Server, tmp_path: Path) -> None:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        wheel.writestr("../../etc/cron.d/evil", "* * * * * root true")
    script = f"""
        from huggingface_hub import HfApi
        api = HfApi(token={server.tokens["alice"]!r})
        api.create_repo("alice/slip")
        api.upload_file(path_or_fileobj={buffer.getvalue()!r}, path_in_repo="dist/alice_slip-1.0.0-py3-none-any.whl",
                        repo_id="alice/slip")
        try:
            api.create_tag("alice/slip", tag="v1.0.0")
            print("published")
        except Exception as error:
            print(error.response.status_code, error.response.json()["error"])
    """
    result = client(server, script, tmp_path)
    assert "400" in result.stdout and "points outside the archive" in result.stdout, result.stdout + result.stderr


def test_server_installs_never_overwrite_another_owners_package(
    server: Server, tmp_path: Path, fresh_python: str
) -> None:
    from verihub.errors import VerihubError
    from verihub.hub.remote import RemoteHub

    alice, bob = RemoteHub(server.url, server.tokens["alice"]), RemoteHub(server.url, server.tokens["bob"])
    alice.push(init_env("twin", "single-turn", tmp_path / "a"))
    bob.push(init_env("twin", "single-turn", tmp_path / "b"))
    alice.install("alice/twin", python=fresh_python)
    with pytest.raises(VerihubError, match="would overwrite 'twin_env', which alice-twin installed"):
        bob.install("bob/twin", python=fresh_python)
