"""Unit tests against model-written code, run in the sandbox: ``python_tests``."""

from __future__ import annotations

import ast
import secrets
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidationInfo, model_validator

from verihub.checks import _harness
from verihub.checks._extract import fenced_blocks, strip_think
from verihub.checks.base import CheckParams, CheckResult
from verihub.errors import DataError, SandboxInfraError
from verihub.spec.models import SandboxSpec as Limits

__all__ = ["PythonTestsParams", "python_tests"]


class PythonTestsParams(CheckParams):
    tests_field: str = Field(
        "tests",
        description="Column with the tests: test_* functions and/or unittest classes that import from `solution`.",
    )
    extract: Literal["code_block", "full"] = Field("code_block", description="The last ```python block, or all text.")
    partial: bool = Field(True, description="Score the share of passing tests; otherwise all or nothing.")
    wall_s: float | None = Field(
        None, gt=0, le=600, description="Time limit of the test run (default: the environment's sandbox.wall_s)."
    )
    memory_mb: int | None = Field(
        None, ge=64, description="Memory limit (default: the environment's sandbox.memory_mb)."
    )
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
    limits = params.limits
    if limits.max_procs < 2:  # the runner and the candidate's process
        limits = limits.model_copy(update={"max_procs": 2})
    nonce = secrets.token_hex(16)
    result = sandbox.run_python(
        _harness.program(),
        files={"solution.py": code},
        limits=limits,
        stdin=_harness.stdin(tests, expected, nonce, limits.wall_s),
    )
    if result.status is sandbox.RunStatus.INFRA_ERROR:
        raise SandboxInfraError(f"python_tests: the sandbox failed: {result.reason}")
    verdict = _harness.read_verdict(result.stdout, nonce)
    if verdict is not None and "infra" in verdict:
        raise SandboxInfraError(f"python_tests: the test runner failed: {verdict['infra']}")
    outcomes = _outcomes(verdict)
    if outcomes is None:
        tail = (result.stderr.strip().splitlines() or [""])[-1][:200]
        return CheckResult(0.0, f"the tests did not finish ({result.status}: {result.reason or tail})")
    for name in expected - set(outcomes):
        outcomes[name] = ["error", "did not run"]
    passed = [name for name, (outcome, _) in outcomes.items() if outcome == "passed"]
    total = len(outcomes)
    if total == 0:
        raise DataError(f"column {params.tests_field!r} holds no test_* functions or unittest classes")
    failed = [
        f"{name} ({message or outcome})"
        for name, (outcome, message) in sorted(outcomes.items())
        if outcome not in ("passed", "skipped")
    ]
    score = len(passed) / total if params.partial else float(len(passed) == total)
    detail = f"{len(passed)}/{total} tests passed" + (f"; failed: {'; '.join(failed)}"[:600] if failed else "")
    return CheckResult(score, detail)


def _candidate(completion: str, extract: str) -> str | None:
    text = strip_think(completion)
    if extract == "full":
        return text
    blocks = fenced_blocks(text)  # one linear scan: a regex from every opener was quadratic on a line of them
    return blocks[-1][1] if blocks else None


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
            names |= {
                f"{node.name}.{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef) and item.name.startswith("test")
            }
    return names


def _outcomes(verdict: dict[str, Any] | None) -> dict[str, list[str]] | None:
    if verdict is None or not isinstance(verdict.get("results"), dict):
        return None
    return {
        str(name): [str(outcome[0]), str(outcome[1]) if len(outcome) > 1 else ""]
        for name, outcome in verdict["results"].items()
    }
