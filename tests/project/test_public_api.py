"""The public surface of `verihub` is deliberate: changing it should fail a test."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import verihub


def test_public_api_is_pinned() -> None:
    assert sorted(verihub.__all__) == sorted(
        [
            "Check",
            "CheckNotFoundError",
            "CheckParams",
            "CheckResult",
            "EnvNotFoundError",
            "EnvSpec",
            "Environment",
            "Grade",
            "GradeStatus",
            "LayerResult",
            "LayerStatus",
            "SpecError",
            "SpecProblem",
            "VerihubError",
            "__version__",
            "check",
            "load_env",
        ]
    )
    for name in verihub.__all__:
        assert hasattr(verihub, name), name
    assert set(verihub.__all__) <= set(dir(verihub))  # the names load lazily; dir() still lists them


# verihub 0.1's module paths that moved into subpackages, each with one name it held, and where it lives now
MOVED = [
    ("verihub.calibration", "DriftMonitor", "verihub.validation.calibration"),
    ("verihub.dataset", "load_splits", "verihub.environment.dataset"),
    ("verihub.environment", "load_env", "verihub.environment.core"),
    ("verihub.evaluate", "aevaluate", "verihub.eval.evaluate"),
    ("verihub.grade", "Grade", "verihub.grading.grade"),
    ("verihub.graders", "GraderPool", "verihub.serve.graders"),
    ("verihub.installed", "installed_envs", "verihub.environment.installed"),
    ("verihub.judge", "ModelJudge", "verihub.grading.judge"),
    ("verihub.redteam", "EVERY_VERIFIER", "verihub.validation.redteam"),
    ("verihub.rollout", "Rollout", "verihub.eval.rollout"),
    ("verihub.scaffold", "init_env", "verihub.spec.scaffold"),
    ("verihub.serve", "create_app", "verihub.serve.server"),
    ("verihub.session", "Session", "verihub.environment.session"),
    ("verihub.spec", "EnvSpec", "verihub.spec.models"),
    ("verihub.spec_loader", "load_spec", "verihub.spec.loader"),
    ("verihub.tools", "SandboxTools", "verihub.sandbox.tools"),
    ("verihub.toolschema", "function_schema", "verihub.environment.toolschema"),
    ("verihub.validate", "validate_env", "verihub.validation.validate"),
    ("verihub.verifier", "Verifier", "verihub.grading.verifier"),
    ("verihub.hub.ids", "RepoId", "verihub.ids"),
]
_OLD_IMPORT = """
import importlib, json, sys, warnings
old, name, new = sys.argv[1:]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    exec(f"from {old} import {name} as found")
print(json.dumps({"same": found is getattr(importlib.import_module(new), name),
                  "warned": [(w.category.__name__, str(w.message), w.filename) for w in caught]}))
"""


@pytest.mark.parametrize(("old", "name", "new"), MOVED, ids=[old for old, _, _ in MOVED])
def test_a_moved_module_path_still_imports_with_a_deprecation_warning(
    old: str, name: str, new: str, tmp_path: Path
) -> None:
    """In a fresh process, so that nothing has imported the module yet; the warning points at the line
    that used the old path (here the exec'd string), not at verihub's import machinery."""
    result = subprocess.run(
        [sys.executable, "-c", _OLD_IMPORT, old, name, new], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["same"], f"{old}.{name} is not {new}.{name}"
    moved = [w for w in found["warned"] if w[0] == "DeprecationWarning" and "moved to" in w[1]]
    assert len(moved) == 1, found["warned"]
    assert new in moved[0][1] and moved[0][2] == "<string>", moved[0]


def test_the_new_paths_import_without_a_warning(tmp_path: Path) -> None:
    code = (
        "import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
        + "\n".join(f"from {new} import {name}" for _, name, new in MOVED)
        + "\nfrom verihub.spec import lines, loader, models\nimport verihub.environment.session, verihub.serve.wire"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
