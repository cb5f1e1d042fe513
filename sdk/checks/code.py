"""Unit tests against model-written code, run in the sandbox: ``python_tests``."""

from __future__ import annotations

import ast
import json
import re
import secrets
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidationInfo, model_validator

from verihub.checks._extract import strip_think
from verihub.checks.base import CheckParams, CheckResult
from verihub.errors import SandboxInfraError
from verihub.spec import SandboxSpec as Limits

__all__ = ["PythonTestsParams", "python_tests"]

# Runs in the jail under its Python (stdlib only). The nonce arrives on stdin and is read before the
# candidate's code is imported, so the candidate cannot print a convincing result line of its own.
_RUNNER = r'''
import json, sys, traceback, unittest
nonce = sys.stdin.readline().strip()
expected = json.loads(sys.stdin.readline() or "[]")
results = {}
def record(name, outcome, message=""):
    results[name] = [outcome, message[-300:]]
try:
    import test_solution as tests
except BaseException as error:
    message = "".join(traceback.format_exception_only(type(error), error)).strip().splitlines()[-1]
    for name in expected or ["import"]:
        record(name, "error", message)
else:
    for name, value in list(vars(tests).items()):
        if name.startswith("test") and callable(value) and not isinstance(value, type):
            try:
                value()
                record(name, "passed")
            except AssertionError as error:
                record(name, "failed", "AssertionError: %s" % (str(error) or "assertion failed"))
            except BaseException as error:
                record(name, "error", "".join(traceback.format_exception_only(type(error), error)).strip())
        elif isinstance(value, type) and issubclass(value, unittest.TestCase):
            for case in unittest.defaultTestLoader.loadTestsFromTestCase(value):
                outcome = unittest.TestResult()
                case.run(outcome)
                label = "%s.%s" % (name, case._testMethodName)
                if outcome.failures:
                    record(label, "failed", outcome.failures[0][1].strip().splitlines()[-1])
                elif outcome.errors:
                    record(label, "error", outcome.errors[0][1].strip().splitlines()[-1])
                elif outcome.skipped:
                    record(label, "skipped")
                else:
                    record(label, "passed")
sys.stdout.flush()
print("\nVERIHUB-TESTS %s %s" % (nonce, json.dumps(results)), flush=True)
'''

_CODE_BLOCK = re.compile(r"```(?:python|py)?[^\n]*\n(.*?)```", re.DOTALL)


class PythonTestsParams(CheckParams):
    tests_field: str = Field("tests", description="Column with the tests: test_* functions and/or unittest classes "
                             "that import from `solution`.")
    extract: Literal["code_block", "full"] = Field("code_block", description="The last ```python block, or all text.")
    partial: bool = Field(True, description="Score the share of passing tests; otherwise all or nothing.")
    wall_s: float | None = Field(None, gt=0, le=600, description="Time limit of the test run "
                                 "(default: the environment's sandbox.wall_s).")
    memory_mb: int | None = Field(None, ge=64, description="Memory limit (default: the environment's sandbox.memory_mb).")
    _limits: Limits = PrivateAttr(default_factory=Limits)

    @model_validator(mode="after")
    def _limits_from_the_environment(self, info: ValidationInfo) -> PythonTestsParams:
        limits = (info.context or {}).get("sandbox") or Limits()
        overrides = {key: value for key, value in (("wall_s", self.wall_s), ("memory_mb", self.memory_mb)) if value}
        self._limits = limits.model_copy(update=overrides)
        return self

    @property
    def limits(self) -> Limits:
        return self._limits

    def columns(self) -> set[str]:
        return {self.tests_field}


def python_tests(completion: str, task: Mapping[str, Any], params: PythonTestsParams) -> CheckResult:
    """The candidate code (saved as solution.py) passes the task's unit tests, run in the sandbox."""
    from verihub import sandbox

    code = _candidate(completion, params.extract)
    if code is None:
        return CheckResult(0.0, "no ```python code block in the answer")
    tests = str(task[params.tests_field])
    expected = _test_names(tests)
    nonce = secrets.token_hex(16)
    result = sandbox.run_python(_RUNNER, files={"solution.py": code, "test_solution.py": tests},
                                stdin=f"{nonce}\n{json.dumps(sorted(expected))}\n", limits=params.limits)
    if result.status is sandbox.RunStatus.INFRA_ERROR:
        raise SandboxInfraError(f"python_tests: the sandbox failed: {result.reason}")
    outcomes = _outcomes(result.stdout, nonce)
    if outcomes is None:
        tail = (result.stderr.strip().splitlines() or [""])[-1][:200]
        return CheckResult(0.0, f"the tests did not finish ({result.status}: {result.reason or tail})")
    for name in expected - set(outcomes):
        outcomes[name] = ["error", "did not run"]
    passed = [name for name, (outcome, _) in outcomes.items() if outcome == "passed"]
    total = len(outcomes)
    if total == 0:
        raise ValueError(f"column {params.tests_field!r} holds no test_* functions or unittest classes")
    failed = [f"{name} ({message or outcome})" for name, (outcome, message) in sorted(outcomes.items())
              if outcome not in ("passed", "skipped")]
    score = len(passed) / total if params.partial else float(len(passed) == total)
    detail = f"{len(passed)}/{total} tests passed" + (f"; failed: {'; '.join(failed)}"[:600] if failed else "")
    return CheckResult(score, detail)


def _candidate(completion: str, extract: str) -> str | None:
    text = strip_think(completion)
    if extract == "full":
        return text
    blocks = _CODE_BLOCK.findall(text)
    return blocks[-1] if blocks else None


def _test_names(tests: str) -> set[str]:
    """The tests the file defines, found without running it (so a run that skips some cannot pass)."""
    try:
        module = ast.parse(tests)
    except SyntaxError as error:
        raise ValueError(f"the task's tests do not parse: {error}") from None
    names: set[str] = set()
    for node in module.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names |= {f"{node.name}.{item.name}" for item in node.body
                      if isinstance(item, ast.FunctionDef) and item.name.startswith("test")}
    return names


def _outcomes(stdout: str, nonce: str) -> dict[str, list[str]] | None:
    marker = f"VERIHUB-TESTS {nonce} "
    for line in reversed(stdout.splitlines()):
        if line.startswith(marker):
            return dict(json.loads(line[len(marker):]))
    return None
