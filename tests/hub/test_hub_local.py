"""The embedded hub: push with immutable versions, search, info, and install with real pip."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import verihub
from verihub.errors import EnvNotFoundError, VerihubError
from verihub.hub.local import LocalHub, VersionExistsError
from verihub.ids import RepoId
from verihub.spec.scaffold import init_env

pytestmark = pytest.mark.slow


@pytest.fixture
def hub(tmp_path: Path) -> LocalHub:
    return LocalHub(tmp_path / "hub")


def run_python(python: str, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=300)


def test_push_is_immutable_and_bump_makes_a_new_version(hub: LocalHub, tmp_path: Path) -> None:
    package = init_env("quiz", "single-turn", tmp_path)
    first = hub.push(package, owner="alice")
    assert first.created and first.version == "0.1.0" and first.repo == RepoId("alice", "quiz")
    assert sorted(first.files) == ["alice_quiz-0.1.0-py3-none-any.whl", "alice_quiz-0.1.0.tar.gz"]
    assert hub.push(package, owner="alice").created is False  # the same content: a no-op
    (package / "data" / "tasks.jsonl").write_text(
        (package / "data" / "tasks.jsonl").read_text().replace("Paris", "Paris ")
    )
    with pytest.raises(VersionExistsError, match="bump it"):
        hub.push(package, owner="alice")
    bumped = hub.push(package, owner="alice", bump="patch")
    assert bumped.version == "0.1.1" and "version: 0.1.1" in (package / "environment.yaml").read_text()
    assert hub.versions(RepoId("alice", "quiz")) == ["0.1.0", "0.1.1"]
    assert hub.storage.resolve(RepoId("alice", "quiz"), "v0.1.0") == first.commit
    info = hub.info(RepoId("alice", "quiz"))
    assert info["latest"] == "0.1.1" and info["install"] == "verihub install alice/quiz@0.1.1"
    assert [found["repo"] for found in hub.search("quiz")] == ["alice/quiz"] and hub.search("nothing-like-it") == []


def test_push_refuses_an_environment_that_does_not_validate(hub: LocalHub, tmp_path: Path) -> None:
    package = init_env("broken", "single-turn", tmp_path)
    spec = package / "environment.yaml"
    spec.write_text(
        spec.read_text().replace('reference: "<answer>{answer}</answer>"', 'reference: "<answer>{wrong}</answer>"')
    )
    with pytest.raises(VerihubError, match="does not pass `verihub validate`"):
        hub.push(package, owner="alice")
    assert hub.storage.repos() == []


def test_install_with_pip_then_load_by_owner_and_name(hub: LocalHub, tmp_path: Path, fresh_python: str) -> None:
    package = init_env("trivia", "single-turn", tmp_path)
    hub.push(package, owner="alice")
    hub.push(package, owner="alice", bump="minor")
    repo, version = hub.install("alice/trivia@^0.1", python=fresh_python)
    assert (repo, version) == (RepoId("alice", "trivia"), "0.1.0")  # ^0.1 stops before 0.2
    loaded = run_python(
        fresh_python,
        "import verihub; env = verihub.load_env('alice/trivia'); "
        "t = env.dataset('train')[0]; print(env.version, env.grade(t, env.reference(t)).status)",
    )
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split() == ["0.1.0", "ok"]
    upgrade = hub.install("alice/trivia@latest", python=fresh_python)
    assert upgrade[1] == "0.2.0"
    upgraded = run_python(fresh_python, "import verihub; print(verihub.load_env('alice/trivia').version)")
    assert upgraded.stdout.split() == ["0.2.0"], upgraded.stderr  # pip really installed it, not only the resolver
    with pytest.raises(EnvNotFoundError, match="not installed here \\(verihub install bob/trivia\\)"):
        verihub.load_env("bob/trivia")


def test_two_owners_one_name_never_overwrite(hub: LocalHub, tmp_path: Path, fresh_python: str) -> None:
    alice = init_env("shared", "single-turn", tmp_path / "alice")
    bob = init_env("shared", "single-turn", tmp_path / "bob")
    hub.push(alice, owner="alice")
    hub.push(bob, owner="bob")
    hub.install("alice/shared", python=fresh_python)
    script = (
        "import sys; from verihub.hub.local import LocalHub; "
        f"LocalHub({str(hub.root)!r}).install('bob/shared', python=sys.executable)"
    )
    refused = run_python(fresh_python, script)
    assert refused.returncode != 0 and "would overwrite 'shared_env', which alice-shared installed" in refused.stderr


def decoy_index(root: Path, project: str, version: str, module: str) -> str:
    """A PEP 503 index on disk holding one wheel of ``project`` (a decoy squatting a hub package's name on an
    index pip reads), whose ``module`` says it is the decoy; its URL."""
    import base64
    import hashlib
    import zipfile

    dist = project.replace("-", "_")
    wheel = root / "files" / f"{dist}-{version}-py3-none-any.whl"
    wheel.parent.mkdir(parents=True)
    info = f"{dist}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": b"DECOY = True\nraise ImportError('the PyPI decoy was installed')\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = (
        "".join(
            f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
            for name, data in files.items()
        )
        + f"{dist}-{version}.dist-info/RECORD,,\n"
    )
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr(f"{dist}-{version}.dist-info/RECORD", record)
    page = root / "simple" / project / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<a href="../../files/{wheel.name}">{wheel.name}</a>')
    return (root / "simple").as_uri()


def test_a_verifier_package_travels_with_the_environment(
    hub: LocalHub, tmp_path: Path, fresh_python: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An environment's hub dependency, declared by repository id, comes from the hub at its release, never
    from an index by name: a decoy of the same name and a higher version on an index pip reads is ignored."""
    rules = tmp_path / "rules"
    (rules / "acme_pricing").mkdir(parents=True)
    (rules / "acme_pricing" / "__init__.py").write_text(
        "from verihub import CheckResult, check\n\n"
        "@check(mode='inline')\ndef within_budget(completion, task, budget=20):\n"
        "    '''The quoted price stays within the budget.'''\n"
        "    import re\n    prices = [int(p) for p in re.findall(r'\\$(\\d+)', completion)]\n"
        "    return CheckResult(1.0 if prices and max(prices) <= budget else 0.0)\n"
    )
    (rules / "README.md").write_text("# rules\n\nAcme's pricing rules.\n")
    (rules / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling>=1.25"]\nbuild-backend = "hatchling.build"\n\n'
        '[project]\nname = "rules"\nversion = "1.0.0"\nreadme = "README.md"\nrequires-python = ">=3.12"\n'
        'dependencies = ["verihub>=0.1"]\n\n[project.entry-points."verihub.checks"]\nacme_budget = '
        '"acme_pricing:within_budget"\n\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["acme_pricing"]\n'
    )
    assert hub.push(rules, owner="acme").repo == RepoId("acme", "rules")
    assert hub.info(RepoId("acme", "rules"))["kind"] == "verifier"
    quotes = init_env("quotes", "single-turn", tmp_path)
    spec = quotes / "environment.yaml"
    spec.write_text(
        spec.read_text()
        .replace(
            "  - {name: correct, layer: check, use: exact, args: {field: answer, extract: answer_tag, "
            "ignore_articles: true}}",
            "  - {name: budget, layer: check, use: acme_budget, args: {budget: 15}}",
        )
        .replace('reference: "<answer>{answer}</answer>"', 'reference: "<answer>$12</answer>"')
        .replace('negatives: ["<answer>{wrong}</answer>", "{answer}"]', 'negatives: ["<answer>$99</answer>"]')
    )
    pyproject = quotes / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace(
            'dependencies = ["verihub>=0.1"]', 'dependencies = ["verihub>=0.1", "acme-rules>=1.0"]'
        )
        + '\n[tool.verihub]\nhub-dependencies = ["acme/rules"]\n'
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--index-url", hub.index_url, "acme-rules"], check=True
    )
    try:  # the author has the verifier installed while developing: push validates with it
        hub.push(quotes, owner="alice")
    finally:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", "acme-rules"], check=True)
        sys.modules.pop("acme_pricing", None)
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", decoy_index(tmp_path / "decoy", "acme-rules", "99.0.0", "acme_pricing"))
    assert hub.install("alice/quotes", python=fresh_python) == (RepoId("alice", "quotes"), "0.1.0")
    installed = run_python(fresh_python, "from importlib.metadata import version; print(version('acme-rules'))")
    assert installed.stdout.strip() == "1.0.0", installed.stderr  # the hub's release, not the decoy's 99.0.0
    graded = run_python(
        fresh_python,
        "import verihub; env = verihub.load_env('alice/quotes'); t = env.dataset('train')[0]; "
        "print(env.grade(t, '<answer>$12</answer>').status, env.grade(t, '<answer>$99</answer>').status)",
    )
    assert graded.returncode == 0, graded.stderr
    assert graded.stdout.split() == ["ok", "wrong"]


def test_push_refuses_a_wheel_that_lacks_files_the_spec_names(hub: LocalHub, tmp_path: Path) -> None:
    package = init_env("judged", "judge", tmp_path)
    pyproject = package / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"rubric.md" = "judged_env/rubric.md"\n', ""))
    with pytest.raises(VerihubError, match="wheel is missing files the spec names.*rubric.md"):
        hub.push(package, owner="alice")
    assert hub.versions(RepoId("alice", "judged")) == []
