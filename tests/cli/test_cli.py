"""The command line, run as users run it: a real `verihub` process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, MakeEnv

VERIHUB = str(Path(sys.executable).with_name("verihub"))
COMMANDS = [
    "schema",
    "validate",
    "grade",
    "init",
    "checks",
    "envs",
    "eval",
    "push",
    "install",
    "search",
    "info",
    "models",
    "models tiny",
    "sandbox",
    "sandbox run",
    "login",
    "hub",
    "hub serve",
    "hub token create",
    "hub org add",
]


def run(*args: str, cwd: Path = REPO, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [VERIHUB, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_every_command_has_help(command: str) -> None:
    result = run(*command.split(), "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout


@pytest.mark.parametrize("env", sorted(path.name for path in (REPO / "envs").iterdir() if path.is_dir()))
def test_bundled_environments_validate(env: str) -> None:
    result = run("validate", f"envs/{env}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "valid: references passed" in result.stdout


def test_validate_fails_when_a_reference_fails(make_env: MakeEnv) -> None:
    spec = (REPO / "tests/conftest.py").read_text()  # reuse the base spec text with a wrong gold reference
    from conftest import BASE_SPEC

    root = make_env(BASE_SPEC.replace("reference: '\\boxed{{{answer}}}'", "reference: '\\boxed{{{wrong}}}'"))
    result = run("validate", str(root), "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["references_passed"] == 0
    assert "failed (correct: got" in report["failures"][0]
    assert spec  # keeps the import honest


def test_validate_reports_a_broken_row_as_an_environment_fault(make_env: MakeEnv) -> None:
    from conftest import BASE_SPEC, TASKS

    rows = [dict(row) for row in TASKS]
    rows[0]["answer"] = "not a number"  # one broken row: an environment fault, reported as such
    result = run("validate", str(make_env(BASE_SPEC, rows=rows)), "--json")
    report = json.loads(result.stdout)
    assert result.returncode == 1 and report["faults"] >= 1
    assert any("environment fault" in failure for failure in report["failures"])


def test_validate_min_pass_rate_override(make_env: MakeEnv) -> None:
    from conftest import BASE_SPEC, TASKS

    # References from their own column: one of the 8 is wrong (a wrong answer, not a fault).
    rows = [{**row, "ref": row["answer"] if index else row["wrong"]} for index, row in enumerate(TASKS)]
    root = make_env(BASE_SPEC.replace("reference: '\\boxed{{{answer}}}'", "reference: '\\boxed{{{ref}}}'"), rows=rows)
    strict = run("validate", str(root), "--json")
    assert strict.returncode == 1 and json.loads(strict.stdout)["references_passed"] == 7
    lenient = run("validate", str(root), "--json", "--min-pass-rate", "0.8")
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr
    assert json.loads(lenient.stdout)["ok"] is True


def test_invalid_spec_exits_2_with_every_problem(make_env: MakeEnv) -> None:
    from conftest import BASE_SPEC

    bad = BASE_SPEC.replace("use: numeric}", "use: numeric, weight: -1}").replace("version: 0.1.0", "version: one")
    result = run("validate", str(make_env(bad)))
    assert result.returncode == 2
    assert "environment.yaml:2: version: must be a semantic version" in result.stderr
    assert "environment.yaml:13: verifier[1].weight: must be >= 0" in result.stderr


def test_schema_is_json_schema() -> None:
    result = run("schema")
    schema = json.loads(result.stdout)
    assert schema["title"] == "EnvSpec" and "verifier" in schema["properties"]
    assert schema["additionalProperties"] is False


def test_grade_command() -> None:
    import verihub

    task = verihub.load_env(str(REPO / "envs/arithmetic")).dataset("eval")[0]
    right = run(
        "grade", "envs/arithmetic", "--task", task["id"], "--completion", f"\\boxed{{{task['answer']}}}", "--json"
    )
    assert right.returncode == 0, right.stderr
    assert json.loads(right.stdout)["status"] == "ok"
    wrong = run("grade", "envs/arithmetic", "--completion", "-", "--json", stdin="\\boxed{999999}")
    assert wrong.returncode == 1
    assert json.loads(wrong.stdout)["status"] == "wrong"
    missing = run("grade", "envs/arithmetic", "--completion", "x", "--task", "nope")
    assert missing.returncode == 2 and "no task 'nope'" in missing.stderr


def test_checks_and_envs_listings() -> None:
    assert "math-verify" in run("checks").stdout
    assert "arithmetic_env" in run("envs").stdout


def test_unknown_environment_name() -> None:
    result = run("validate", "arithmetc")
    assert result.returncode == 2 and "Did you mean 'arithmetic'" in result.stderr


def test_no_torch_in_sdk_or_cli() -> None:
    """`import verihub` and every non-training command stay light: no torch, even when installed."""
    code = """
import sys
import verihub, verihub.hub, verihub.trainers
from typer.testing import CliRunner
from verihub.cli import app
runner = CliRunner()
for args in (["schema"], ["checks"], ["envs"], ["validate", "envs/json-extract"],
             ["grade", "envs/arithmetic", "--completion", "1"]):
    result = runner.invoke(app, args)
    assert result.exit_code in (0, 1), (args, result.output)
heavy = sorted(m for m in ("torch", "transformers", "trl", "peft", "vllm") if m in sys.modules)
assert not heavy, heavy
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("template", ["single-turn", "tool", "judge"])
def test_init_template_validates_and_pip_installs(template: str, tmp_path: Path) -> None:
    name = f"my-{template}"
    created = run("init", name, "--template", template, "--dir", str(tmp_path))
    assert created.returncode == 0, created.stderr
    root = tmp_path / name
    validated = run("validate", str(root))
    assert validated.returncode == 0, validated.stdout + validated.stderr
    # pip-install it as it is (hatchling is in the venv; no network), load it by name, then remove it.
    install = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", str(root)]
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    try:
        # The reference passes every layer; a judge layer with no judge configured is a fault, not a pass.
        expected = ("env_error", "passed", "no judge configured") if template == "judge" else ("ok", "passed", "")
        code = (
            f"import verihub; env = verihub.load_env({name!r}); t = env.dataset('train')[0]; "
            f"g = env.grade(t, env.reference(t)); rules = {{l.status for l in g.layers if l.layer == 'rule'}}; "
            f"assert (g.status, *rules) == {expected[:2]!r} and {expected[2]!r} in g.reason, g; print(env.root)"
        )
        loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
        assert loaded.returncode == 0, loaded.stderr
        assert "site-packages" in loaded.stdout
    finally:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", name], capture_output=True, timeout=120)


def test_init_refuses_bad_names_and_existing_dirs(tmp_path: Path) -> None:
    assert run("init", "Bad_Name", "--dir", str(tmp_path)).returncode == 2
    (tmp_path / "taken").mkdir()
    result = run("init", "taken", "--dir", str(tmp_path))
    assert result.returncode == 2 and "already exists" in result.stderr
    unknown = run("init", "fine", "--template", "nope", "--dir", str(tmp_path))
    assert unknown.returncode == 2 and "templates: single-turn, tool, judge" in unknown.stderr
    assert not (tmp_path / "fine").exists()


@pytest.mark.nsjail
def test_sandbox_run_command(nsjail_path: str) -> None:
    ok = run("sandbox", "run", "--", "python3", "-c", "import os; print('uid', os.getuid())")
    assert ok.returncode == 0 and ok.stdout == "uid 65534\n"
    assert run("sandbox", "run", "--", "bash", "-c", "exit 7").returncode == 7
    slow = run("sandbox", "run", "--wall-s", "1", "--", "sleep", "10")
    assert slow.returncode == 124 and "timeout" in slow.stderr
    described = json.loads(run("sandbox", "run", "--json", "--", "cat", stdin="piped").stdout)
    assert described["status"] == "ok" and described["stdout"] == "piped"
