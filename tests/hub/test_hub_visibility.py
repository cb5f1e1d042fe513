"""Visibility: a private repository is invisible to everyone but its namespace on every route (API, search,
tree, resolve, snapshot_download, the pip index, file downloads, web pages), yet pip, uv and `verihub
install` still install it for its owner with a token; namespaces compare exactly, and names are
case-insensitive. Driven by the unmodified huggingface_hub client, real pip and uv, over loopback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from conftest import JSON_INDEX, HubServer, hf
from verihub.hub.accounts import Accounts
from verihub.spec.scaffold import init_env

pytestmark = pytest.mark.slow
VERIHUB = str(Path(sys.executable).with_name("verihub"))


def pip(python: str, index: str, requirement: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--no-input",
            "--index-url",
            index,
            requirement,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )


def with_token(url: str, token: str) -> str:
    scheme, rest = url.split("://")
    return f"{scheme}://__token__:{token}@{rest}/simple/"


@pytest.fixture(scope="module")
def hidden(hub_server: HubServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """alice/hidden 0.1.0, a private repository published with the huggingface_hub client alone (source, dist/
    and a v-tag): its wheel's name and the sha256 of its bytes."""
    from verihub.hub.build import PackageSource
    from verihub.ids import RepoId

    scratch = tmp_path_factory.mktemp("hidden")
    package = init_env("hidden", "single-turn", scratch)
    (package / "dist").mkdir()
    built = PackageSource(package).build(RepoId("alice", "hidden")).files
    for name, data in built.items():
        (package / "dist" / name).write_bytes(data)
    hf(
        hub_server,
        f"""
        from huggingface_hub import HfApi
        api = HfApi(token={hub_server.tokens["alice"]!r})
        api.create_repo("alice/hidden", private=True)
        api.upload_folder(folder_path={str(package)!r}, repo_id="alice/hidden")
        api.create_tag("alice/hidden", tag="v0.1.0")
        print("{{}}")
    """,
        scratch,
    )
    wheel = next(name for name in built if name.endswith(".whl"))
    import hashlib

    return {"wheel": wheel, "sha256": hashlib.sha256(built[wheel]).hexdigest()}


def test_verihub_push_private(hub_server: HubServer, tmp_path: Path) -> None:
    package = init_env("pushed-secret", "single-turn", tmp_path)
    pushed = subprocess.run(
        [VERIHUB, "push", str(package), "--private", "--hub", hub_server.url, "--token", hub_server.tokens["alice"]],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pushed.returncode == 0, pushed.stderr
    owner = {"Authorization": f"Bearer {hub_server.tokens['alice']}"}
    assert httpx.get(f"{hub_server.url}/api/models/alice/pushed-secret", headers=owner).json()["private"] is True
    assert httpx.get(f"{hub_server.url}/simple/alice-pushed-secret/", headers=owner).status_code == 200
    assert httpx.get(f"{hub_server.url}/simple/alice-pushed-secret/").status_code == 404
    assert httpx.get(f"{hub_server.url}/api/models/alice/pushed-secret").status_code == 404


def test_the_pip_index_hides_private_packages(hub_server: HubServer, hidden: dict[str, str]) -> None:
    url, alice, bob = hub_server.url, hub_server.tokens["alice"], hub_server.tokens["bob"]
    wheel = f"/files/alice-hidden/{hidden['wheel']}"
    for who, auth in (("anonymous", None), ("bob", ("__token__", bob))):
        root = httpx.get(f"{url}/simple/", auth=auth)
        assert root.status_code == 200 and "alice-hidden" not in root.text, who
        assert (
            "alice-hidden" not in root.text
            and "alice-hidden" not in httpx.get(f"{url}/simple/", headers=JSON_INDEX, auth=auth).text
        ), who
        for path in ("/simple/alice-hidden/", wheel, f"{wheel}.metadata"):
            refused = httpx.get(f"{url}{path}", auth=auth)
            assert refused.status_code == 404 and refused.headers["X-Error-Code"] == "NotFound", (who, path)
    owner = ("__token__", alice)  # HTTP Basic, as pip sends an index URL's credentials
    assert "alice-hidden" in httpx.get(f"{url}/simple/", auth=owner).text
    assert hidden["wheel"] in httpx.get(f"{url}/simple/alice-hidden/", auth=owner).text
    import hashlib

    assert hashlib.sha256(httpx.get(f"{url}{wheel}", auth=owner).content).hexdigest() == hidden["sha256"]


def test_pip_uv_and_verihub_install_a_private_package_only_with_its_token(
    hub_server: HubServer, hidden: dict[str, str], tmp_path: Path, fresh_python: str
) -> None:
    url, alice, bob = hub_server.url, hub_server.tokens["alice"], hub_server.tokens["bob"]
    anonymous = pip(fresh_python, f"{url}/simple/", "alice-hidden==0.1.0")
    assert anonymous.returncode != 0 and "No matching distribution" in anonymous.stderr
    assert pip(fresh_python, with_token(url, bob), "alice-hidden==0.1.0").returncode != 0
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1 login __token__ password {alice}\n")
    netrc.chmod(0o600)
    via_netrc = pip(fresh_python, f"{url}/simple/", "alice-hidden==0.1.0", NETRC=str(netrc))
    assert via_netrc.returncode == 0, via_netrc.stderr
    loaded = subprocess.run(
        [fresh_python, "-c", "import verihub; print(verihub.load_env('alice/hidden').version)"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert loaded.stdout.strip() == "0.1.0", loaded.stderr
    subprocess.run([fresh_python, "-m", "pip", "uninstall", "-y", "-q", "alice-hidden"], check=True)
    via_url = pip(fresh_python, with_token(url, alice), "alice-hidden==0.1.0")
    assert via_url.returncode == 0, via_url.stderr
    assert alice not in via_url.stdout + via_url.stderr  # pip redacts the token
    uv = Path(sys.executable).with_name("uv")
    if uv.exists():
        target = tmp_path / "uv-venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True)
        common = [str(uv), "pip", "install", "--python", str(target / "bin" / "python"), "--no-deps", "--no-cache"]
        assert (
            subprocess.run(
                [*common, "--index-url", f"{url}/simple/", "alice-hidden==0.1.0"], capture_output=True, timeout=300
            ).returncode
            != 0
        )
        installed = subprocess.run(
            [*common, "--index-url", with_token(url, alice), "alice-hidden==0.1.0"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert installed.returncode == 0, installed.stderr
    from verihub.errors import VerihubError
    from verihub.hub.remote import RemoteHub

    with pytest.raises(VerihubError):
        RemoteHub(url, bob).install("alice/hidden", python=fresh_python)
    subprocess.run([fresh_python, "-m", "pip", "uninstall", "-y", "-q", "alice-hidden"], check=True)
    assert RemoteHub(url, alice).install("alice/hidden", python=fresh_python)[1] == "0.1.0"


def test_every_route_hides_a_private_repository(hub_server: HubServer, hidden: dict[str, str], tmp_path: Path) -> None:
    tokens = hub_server.tokens
    script = f"""
        import json, pathlib
        from huggingface_hub import HfApi, hf_hub_download, snapshot_download
        out = {{}}
        for who, token in (("alice", {tokens["alice"]!r}), ("bob", {tokens["bob"]!r}), ("nobody", False)):
            api = HfApi(token=token)
            D = "dataset"
            calls = {{
                "info": lambda: api.dataset_info("alice/hidden").id,
                "info_at": lambda: api.dataset_info("alice/hidden", revision="v0.1.0").sha is not None,
                "tree": lambda: len(api.list_repo_files("alice/hidden", revision="v0.1.0", repo_type=D)) > 0,
                "refs": lambda: [t.name for t in api.list_repo_refs("alice/hidden", repo_type=D).tags],
                "commits": lambda: len(api.list_repo_commits("alice/hidden", repo_type=D)) > 0,
                "paths": lambda: len(api.get_paths_info("alice/hidden", ["README.md"], repo_type=D)),
                "download": lambda: len(pathlib.Path(hf_hub_download(
                    "alice/hidden", "environment.yaml", revision="v0.1.0", token=token, repo_type=D,
                    cache_dir=f"{tmp_path}/files-{{who}}")).read_text()) > 0,
                "snapshot": lambda: pathlib.Path(snapshot_download("alice/hidden", revision="v0.1.0", token=token,
                                                                   repo_type=D,
                                                                   cache_dir=f"{tmp_path}/cache-{{who}}")).is_dir(),
                "legacy_info": lambda: api.model_info("alice/hidden").id,  # where packages were: still hidden
                "legacy_download": lambda: len(pathlib.Path(hf_hub_download(
                    "alice/hidden", "environment.yaml", revision="v0.1.0", token=token,
                    cache_dir=f"{tmp_path}/legacy-{{who}}")).read_text()) > 0,
                "exists": lambda: api.repo_exists("alice/hidden", repo_type=D),
                "search": lambda: [m.id for m in api.list_datasets(search="hidden")],
                "author": lambda: [m.id for m in api.list_datasets(author="alice") if m.id == "alice/hidden"],
                "everything": lambda: [m.id for m in api.list_datasets() if m.id == "alice/hidden"],
                "tagged": lambda: [m.id for m in api.list_datasets(filter="rl-environment") if m.id == "alice/hidden"],
                "legacy_search": lambda: [m.id for m in api.list_models(search="hidden")],
            }}
            for name, call in calls.items():
                try:
                    out[f"{{who}}.{{name}}"] = call()
                except Exception as error:
                    out[f"{{who}}.{{name}}"] = type(error).__name__
        print(json.dumps(out))
    """
    out = hf(hub_server, script, tmp_path)
    routes = ("info", "info_at", "tree", "refs", "commits", "paths", "download", "snapshot")
    for name in (*routes, "legacy_info", "legacy_download"):
        assert out[f"alice.{name}"] not in ("RepositoryNotFoundError", "HfHubHTTPError"), (name, out[f"alice.{name}"])
        for other in ("bob", "nobody"):
            assert out[f"{other}.{name}"] == "RepositoryNotFoundError", (other, name, out[f"{other}.{name}"])
    assert out["alice.exists"] is True and out["bob.exists"] is False and out["nobody.exists"] is False
    for listing in ("search", "author", "tagged", "legacy_search"):
        assert out[f"alice.{listing}"] == ["alice/hidden"], listing
        for other in ("bob", "nobody"):
            assert out[f"{other}.{listing}"] == [], (other, listing)
    assert out["bob.everything"] == [] and out["nobody.everything"] == []
    for auth in (None, ("__token__", tokens["bob"])):  # the web pages
        assert "alice/hidden" not in httpx.get(f"{hub_server.url}/", auth=auth).text
        assert "alice/hidden" not in httpx.get(f"{hub_server.url}/?q=hidden", auth=auth).text
        assert "alice/hidden" not in httpx.get(f"{hub_server.url}/?other=rl-environment", auth=auth).text
        for path in ("/alice/hidden", "/datasets/alice/hidden"):
            page = httpx.get(f"{hub_server.url}{path}", auth=auth)
            assert page.status_code == 404 and page.headers["X-Error-Code"] == "RepoNotFound"
    page = httpx.get(f"{hub_server.url}/datasets/alice/hidden", auth=("__token__", tokens["alice"]))
    assert page.status_code == 200 and "verihub install alice/hidden@0.1.0" in page.text
    assert (
        "alice/hidden"
        in httpx.get(f"{hub_server.url}/?q=hidden", headers={"Authorization": f"Bearer {tokens['alice']}"}).text
    )


def test_namespaces_compare_exactly(hub_server: HubServer, tmp_path: Path) -> None:
    """`a_c` is not a pattern for `abc`, `author=` is one exact owner, `%` matches nothing but itself."""
    accounts = Accounts(hub_server.data / "hub.db")
    abc, a_c = accounts.create_token("abc"), accounts.create_token("a_c")
    script = f"""
        import json
        from huggingface_hub import HfApi
        abc, a_c = HfApi(token={abc!r}), HfApi(token={a_c!r})
        D = "dataset"
        abc.create_repo("abc/secret", private=True, repo_type=D)
        abc.upload_file(path_or_fileobj=b"# the plan", path_in_repo="README.md", repo_id="abc/secret", repo_type=D)
        out = {{"abc": [m.id for m in abc.list_datasets(author="abc")]}}
        for name, call in {{
            "search": lambda: [m.id for m in a_c.list_datasets(search="secret")],
            "own": lambda: [m.id for m in a_c.list_datasets(author="a_c")],
            "theirs": lambda: [m.id for m in a_c.list_datasets(author="abc")],
            "wildcard": lambda: [m.id for m in a_c.list_datasets(author="%")],
            "underscore": lambda: [m.id for m in a_c.list_datasets(author="a_c", search="secret")],
            "prefix": lambda: [m.id for m in a_c.list_datasets(author="ab")],
            "info": lambda: a_c.dataset_info("abc/secret").id,
            "write": lambda: a_c.upload_file(path_or_fileobj=b"x", path_in_repo="x", repo_id="abc/secret",
                                             repo_type=D),
        }}.items():
            try:
                out[name] = call()
            except Exception as error:
                out[name] = type(error).__name__
        print(json.dumps(out))
    """
    out = hf(hub_server, script, tmp_path)
    assert out == {
        "abc": ["abc/secret"],
        "search": [],
        "own": [],
        "theirs": [],
        "wildcard": [],
        "underscore": [],
        "prefix": [],
        "info": "RepositoryNotFoundError",
        "write": "RepositoryNotFoundError",
    }


def test_names_are_case_insensitive_with_one_spelling(hub_server: HubServer, tmp_path: Path) -> None:
    """The rule (README): `ALICE` and `alice` are one user, `Alice/Case` and `alice/case` one repository,
    stored and shown lowercase."""
    shouting = Accounts(hub_server.data / "hub.db").create_token("ALICE")
    script = f"""
        import json
        from huggingface_hub import HfApi
        api = HfApi(token={shouting!r})
        D = "dataset"
        out = {{"whoami": api.whoami()["name"], "url": str(api.create_repo("Alice/Case", private=True, repo_type=D))}}
        api.upload_file(path_or_fileobj=b"# case", path_in_repo="README.md", repo_id="ALICE/CASE", repo_type=D)
        alice = HfApi(token={hub_server.tokens["alice"]!r})
        out["info"] = alice.dataset_info("alice/case").id
        out["listed"] = [m.id for m in alice.list_datasets(author="Alice") if m.id == "alice/case"]
        try:
            alice.create_repo("aLiCe/cAsE", repo_type=D)
            out["again"] = "created twice"
        except Exception as error:
            out["again"] = error.response.status_code
        print(json.dumps(out))
    """
    out = hf(hub_server, script, tmp_path)
    assert out == {
        "whoami": "alice",
        "url": f"{hub_server.url}/datasets/alice/case",
        "info": "alice/case",
        "listed": ["alice/case"],
        "again": 409,
    }


def test_every_route_goes_through_the_visibility_rule() -> None:
    """No route can forget visibility: repository routes live on routers that depend on `visible_repo`,
    distribution routes on one that depends on `visible_project`; the few others are listings that filter
    through the same rule, or account routes. And no route lets FastAPI parse a body (bodies are read
    after authorization, bounded)."""
    from fastapi.params import Depends

    from verihub.hub import deps
    from verihub.hub.server import ROUTERS

    scoped = {deps.visible_repo, deps.visible_project}
    unscoped = {
        ("GET", "/api/whoami-v2"),
        ("POST", "/api/repos/create"),
        ("DELETE", "/api/repos/delete"),
        ("POST", "/api/validate-yaml"),
        ("GET", "/api/models"),
        ("GET", "/api/datasets"),
        ("GET", "/simple/"),
        ("GET", "/"),
    }
    seen = set()
    for router in ROUTERS:
        guards = {dependency.dependency for dependency in router.dependencies if isinstance(dependency, Depends)}
        for route in router.routes:
            assert route.body_field is None, f"{route.path} lets FastAPI parse its body before authorization"
            if not guards & scoped:
                seen |= {(method, route.path) for method in route.methods}
    assert seen == unscoped


def test_push_private_never_claims_to_hide_a_public_repository(tmp_path: Path) -> None:
    from verihub.hub.errors import PrivacyMismatchError
    from verihub.hub.local import LocalHub

    hub = LocalHub(tmp_path / "hub")
    package = init_env("open", "single-turn", tmp_path)
    repo = hub.push(package, owner="alice").repo
    assert hub.storage.is_private(repo) is False
    with pytest.raises(PrivacyMismatchError, match="exists and is public"):
        hub.push(package, owner="alice", bump="patch", private=True)
    assert hub.versions(repo) == ["0.1.0"]
