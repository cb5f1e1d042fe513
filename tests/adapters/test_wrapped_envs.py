"""Other ecosystems' environments published as hub packages: a small environment.yaml names the source
(``source: textarena:GAME``, ``skyrl-gym:ENV`` with its data file shipped beside it) and the package pins
what it needs; ``verihub push`` publishes it, pip installs it, and ``load_env(OWNER/NAME)`` loads it under
its own id and version."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import verihub
from conftest import VERIHUB
from verihub.errors import SpecError, VerihubError
from verihub.hub.env_view import environment_view
from verihub.hub.local import LocalHub
from verihub.ids import RepoId

PYPROJECT = """\
[build-system]
requires = ["hatchling>=1.25"]
build-backend = "hatchling.build"

[project]
name = "{name}"
version = "{version}"
requires-python = ">=3.12"
dependencies = ["verihub>=0.1", {pins}]

[project.entry-points."verihub.environments"]
{name} = "{module}"

[tool.hatch.build.targets.wheel]
packages = ["{module}"]

[tool.hatch.build.targets.wheel.force-include]
"environment.yaml" = "{module}/environment.yaml"
{shipped}
"""


def wrapped(
    root: Path, name: str, spec: str, pins: str, files: dict[str, str] | None = None, version: str = "1.0.0"
) -> Path:
    module = name.replace("-", "_") + "_env"
    (root / module).mkdir(parents=True)
    (root / module / "__init__.py").write_text("")
    (root / "environment.yaml").write_text(spec)
    shipped = ""
    for relative, text in (files or {}).items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
        shipped += f'"{relative}" = "{module}/{relative}"\n'
    (root / "pyproject.toml").write_text(
        PYPROJECT.format(name=name, version=version, pins=pins, module=module, shipped=shipped)
    )
    return root


GUESS = """\
id: guess-the-number
version: 1.0.0
description: textarena's GuessTheNumber, ten turns to find it.
tags: [game, textarena]
source: textarena:GuessTheNumber-v0
options: {size: 10, max_turns: 10}
"""
ARITHMETIC = """\
id: skyrl-arithmetic
version: 1.0.0
description: Products, graded by skyrl-gym's gsm8k scorer.
source: skyrl-gym:gsm8k
options: {data: data/tasks.jsonl}
"""
ROWS = "".join(
    json.dumps(
        {"prompt": [{"role": "user", "content": f"What is {a} times 3?"}], "reward_spec": {"ground_truth": str(3 * a)}}
    )
    + "\n"
    for a in range(1, 11)
)

GRADE = """
import json, sys, verihub
env = verihub.load_env(sys.argv[1])
task = env.tasks("eval")[0]
print(json.dumps({"id": env.id, "version": env.version, "root": str(env.root), "prompt": task["prompt"],
                  "reward": env.grade(task, sys.argv[2]).reward if sys.argv[2] else None}))
"""


def test_a_wrapped_spec_loads_its_source_under_its_own_identity(tmp_path: Path) -> None:
    root = wrapped(tmp_path / "guess", "guess-the-number", GUESS, '"textarena>=0.7.4,<0.8"')
    env = verihub.load_env(root)
    assert (env.id, env.version, env.domain) == ("guess-the-number", "1.0.0", "games")
    assert env.spec.tags == ["game", "textarena"] and env.spec.interaction.max_turns == 10
    assert len(env.tasks("train")) == 8 and [t["function"]["name"] for t in env.tool_schemas] == ["act"]
    checked = subprocess.run([VERIHUB, "validate", str(root), "--json"], capture_output=True, text=True, timeout=600)
    assert checked.returncode == 0 and json.loads(checked.stdout)["ok"], checked.stdout[-2000:]


@pytest.mark.parametrize(
    ("spec", "complaint"),
    [
        (GUESS.replace("textarena:", "nowhere:"), "'nowhere:.*' names no installed adapter"),
        (GUESS.replace("textarena:", "Nowhere "), "must be another ecosystem's load_env ref"),
        (GUESS + "verifier: []\n", "verifier"),
        (GUESS.replace("version: 1.0.0", "version: one"), "version"),
    ],
)
def test_a_bad_wrapped_spec_says_what_is_wrong(tmp_path: Path, spec: str, complaint: str) -> None:
    (tmp_path / "environment.yaml").write_text(spec)
    with pytest.raises(SpecError, match=complaint):
        verihub.load_env(tmp_path)


@pytest.mark.slow
def test_push_install_and_load_wrapped_environments_by_name(tmp_path: Path, fresh_python: str) -> None:
    hub = LocalHub(tmp_path / "hub")
    guess = wrapped(tmp_path / "guess", "guess-the-number", GUESS, '"textarena>=0.7.4,<0.8"')
    arithmetic = wrapped(
        tmp_path / "arithmetic",
        "skyrl-arithmetic",
        ARITHMETIC,
        '"skyrl-gym>=0.4,<0.5"',
        files={"data/tasks.jsonl": ROWS},
    )
    for root, name, answer in ((guess, "guess-the-number", ""), (arithmetic, "skyrl-arithmetic", "#### 30")):
        published = hub.push(root, owner="ci")
        assert published.created and published.version == "1.0.0"
        hub.install(f"ci/{name}", python=fresh_python)
        loaded = subprocess.run(
            [fresh_python, "-c", GRADE, f"ci/{name}", answer], capture_output=True, text=True, timeout=300, cwd=tmp_path
        )
        assert loaded.returncode == 0, loaded.stderr[-2000:]
        found = json.loads(loaded.stdout)
        assert (found["id"], found["version"]) == (name, "1.0.0")
        if answer:  # the installed copy's data file, shipped in the wheel beside its spec
            assert found["reward"] == (1.0 if "10 times" in found["prompt"] else 0.0)
    repo = RepoId.parse("ci/guess-the-number")
    page = environment_view(hub.storage, repo, hub.storage.resolve(repo, "v1.0.0"))  # what its hub page shows
    assert page.source == "wraps textarena:GuessTheNumber-v0" and page.description.startswith("textarena's")
    broken = wrapped(
        tmp_path / "broken",
        "skyrl-broken",
        ARITHMETIC.replace("skyrl-arithmetic", "skyrl-broken"),
        '"skyrl-gym>=0.4,<0.5"',
        files={"data/tasks.jsonl": ROWS},
    )
    pyproject = broken / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace('"data/tasks.jsonl" = "skyrl_broken_env/data/tasks.jsonl"\n', "")
    )
    with pytest.raises(VerihubError, match="missing files the spec's options name"):
        hub.push(broken, owner="ci")
