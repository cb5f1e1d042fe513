"""The ``result_set`` check: run the candidate query and the task's reference query against the task's
database in the sandbox and compare what they return.

The database is the family's text dump (``data/<family>.sql``), loaded into an in-memory SQLite database by
:mod:`sql_env.runner` inside the jail; the connection is read-only (``PRAGMA query_only`` plus an authorizer
that allows only reads). Scores: 1 when the result sets match (as multisets of rows, or in order when the
task's ``ordered`` column is true), else 0 with the reason. A sandbox that fails to run raises
:class:`~verihub.errors.SandboxInfraError` and a broken reference query raises ``ValueError``: both are
environment faults (``env_error``), never a 0.
"""

from __future__ import annotations

import functools
import json
import re
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, PrivateAttr, ValidationInfo, model_validator

from sql_env.compare import compare_results
from sql_env.exploits import EXPLOITS
from verihub import CheckParams, CheckResult, check
from verihub.checks import fenced_blocks, strip_think
from verihub.errors import SandboxInfraError
from verihub.spec.models import SandboxSpec

__all__ = ["ResultSetParams", "extract_sql", "result_set", "statement_problem"]

_HERE = Path(__file__).resolve().parent
_LEADING_NOISE = re.compile(r"(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?(?:\*/|\Z))*", re.DOTALL)
_FAMILY = re.compile(r"[a-z][a-z0-9_-]*\Z")
_READ_ONLY = ("SELECT", "WITH")
_ONLY_SELECT = "only a single read-only SELECT (or WITH ... SELECT) query is allowed"

_ERROR_DETAIL = {
    "refused": f"the query tries to do more than read ({_ONLY_SELECT})",
    "multiple": f"more than one statement ({_ONLY_SELECT})",
    "timeout": "the query took too long",
    "too_many_rows": "the query returns too many rows",
    "too_large": "the query's result is too large",
    "no_rows_returned": f"the statement returns no rows ({_ONLY_SELECT})",
    "error": "the query fails",
}


class ResultSetParams(CheckParams):
    query_field: str = Field("query", description="Column with the reference query.")
    family_field: str = Field("family", description="Column naming the database: data_dir/<family>.sql.")
    ordered_field: str = Field("ordered", description="Column that is true when the row order counts.")
    data_dir: str = Field("data", description="Directory of the .sql dumps, relative to the environment.")
    rel_tol: float = Field(1e-6, ge=0, le=0.1, description="Relative tolerance for numbers.")
    abs_tol: float = Field(1e-6, ge=0, le=0.1, description="Absolute tolerance for numbers.")
    max_rows: int = Field(1000, ge=1, le=100_000, description="A query returning more rows scores 0.")
    query_timeout_s: float = Field(
        2.0,
        gt=0,
        le=120,
        description="Time limit of each query inside the sandbox "
        "(must leave room within the environment's sandbox.wall_s).",
    )
    max_query_chars: int = Field(20_000, ge=100, description="A longer query scores 0 without running.")
    _limits: SandboxSpec = PrivateAttr(default_factory=SandboxSpec)
    _data: Path = PrivateAttr(default=_HERE / "data")

    @model_validator(mode="after")
    def _resolve(self, info: ValidationInfo) -> ResultSetParams:
        context = info.context or {}
        self._limits = context.get("sandbox") or SandboxSpec()
        if 2 * self.query_timeout_s >= self._limits.wall_s:
            raise ValueError(
                f"query_timeout_s ({self.query_timeout_s}s) runs twice per grade and must fit well "
                f"within sandbox.wall_s ({self._limits.wall_s}s)"
            )
        root = context.get("root")
        candidates = (
            [Path(root) / self.data_dir] if root is not None else [_HERE / self.data_dir, _HERE.parent / self.data_dir]
        )
        found = next((path for path in candidates if path.is_dir()), None)
        if found is None:
            raise ValueError(f"data_dir {self.data_dir!r}: no such directory ({candidates[0]})")
        self._data = found
        return self

    @property
    def limits(self) -> SandboxSpec:
        return self._limits

    def columns(self) -> set[str]:
        return {self.query_field, self.family_field, self.ordered_field}

    def dump(self, family: str) -> str:
        """The text of ``family``'s dump; ``ValueError`` (an environment fault) when there is none."""
        if not _FAMILY.match(family):
            raise ValueError(f"task family {family!r} is not a valid database name")
        path = self._data / f"{family}.sql"
        if not path.is_file():
            raise ValueError(f"no database dump for family {family!r} ({path})")
        return _read(str(path), path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _read(path: str, mtime_ns: int) -> str:
    """A dump's text, read once per version of the file (``mtime_ns`` is part of the cache key)."""
    return Path(path).read_text(encoding="utf-8")


@functools.cache
def _runner_source() -> str:
    return (_HERE / "runner.py").read_text(encoding="utf-8")


def extract_sql(completion: str) -> str | None:
    """The last ```sql block of the answer (reasoning in <think> blocks ignored), or None. The blocks are
    the ones the code_block rule counts."""
    blocks = [body for language, body in fenced_blocks(strip_think(completion)) if language.lower() == "sql"]
    return blocks[-1] if blocks else None


def statement_problem(sql: str, max_chars: int = 20_000) -> str | None:
    """Why ``sql`` is refused before it runs, or None. Catches what is plain from its first keyword; the
    read-only connection in the sandbox catches the rest (``WITH ... DELETE``, a second statement)."""
    body = sql.strip()
    if not body:
        return "the ```sql block is empty"
    if len(body) > max_chars:
        return f"the query is {len(body)} characters long (at most {max_chars})"
    rest = body[_LEADING_NOISE.match(body).end() :]  # type: ignore[union-attr]  # the pattern always matches
    word = re.match(r"[A-Za-z_]+", rest)
    keyword = word.group(0).upper() if word else rest[:10]
    if keyword not in _READ_ONLY:
        return (
            f"{_ONLY_SELECT}; this statement starts with {keyword!r}"
            if keyword
            else f"{_ONLY_SELECT}; got only comments"
        )
    return None


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes")
    return bool(value)


def _outputs(stdout: str, nonce: str) -> dict[str, dict[str, Any]]:
    marker = f"VERIHUB-SQL {nonce} "
    found: dict[str, dict[str, Any]] = {}
    for line in stdout.splitlines():
        if line.startswith(marker):
            name, _, payload = line[len(marker) :].partition(" ")
            found[name] = json.loads(payload)
    return found


@check(params=ResultSetParams, mode="thread", exploits=EXPLOITS)
def result_set(completion: str, task: Mapping[str, Any], params: ResultSetParams) -> CheckResult:
    """The answer's ```sql query returns the same rows as the task's reference query (in order when the
    task's ``ordered`` column says so), both run read-only against the task's SQLite database in the sandbox."""
    from verihub import sandbox

    sql = extract_sql(completion)
    if sql is None:
        return CheckResult(0.0, "no ```sql code block in the answer")
    problem = statement_problem(sql, params.max_query_chars)
    if problem is not None:
        return CheckResult(0.0, problem)
    dump = params.dump(str(task[params.family_field]))
    ordered = _truthy(task.get(params.ordered_field, False))
    nonce = secrets.token_hex(16)
    request = {
        "nonce": nonce,
        "queries": [["reference", str(task[params.query_field])], ["candidate", sql]],
        "max_rows": params.max_rows,
        "timeout_s": params.query_timeout_s,
    }
    result = sandbox.run_python(
        _runner_source(), files={"db.sql": dump}, stdin=json.dumps(request), limits=params.limits
    )
    if result.status is sandbox.RunStatus.INFRA_ERROR:
        raise SandboxInfraError(f"sql result_set: the sandbox failed: {result.reason}")
    outputs = _outputs(result.stdout, nonce)
    reference = outputs.get("reference")
    if reference is None:
        tail = (result.stderr.strip().splitlines() or [""])[-1][:300]
        message = f"sql result_set: the reference query did not finish ({result.status}: {result.reason or tail})"
        if result.status in (sandbox.RunStatus.TIMEOUT, sandbox.RunStatus.KILLED):
            raise SandboxInfraError(message)
        raise RuntimeError(message)
    if "error" in reference:
        raise ValueError(f"the task's reference query fails: {reference['message']}")
    candidate = outputs.get("candidate")
    if candidate is None:
        why = {
            sandbox.RunStatus.TIMEOUT: "it ran past the sandbox's time limit",
            sandbox.RunStatus.MEMORY_LIMIT: "it ran out of memory",
            sandbox.RunStatus.OUTPUT_LIMIT: "its result is too large",
        }.get(
            result.status, f"{result.status}: {result.reason or (result.stderr.strip().splitlines() or [''])[-1][:200]}"
        )
        return CheckResult(0.0, f"the query did not finish ({why})")
    if "error" in candidate:
        kind = str(candidate["error"])
        return CheckResult(0.0, f"{_ERROR_DETAIL.get(kind, 'the query fails')}: {candidate.get('message', '')}"[:600])
    matched, why = compare_results(
        reference["rows"],
        candidate["rows"],
        ordered=ordered,
        rel_tol=params.rel_tol,
        abs_tol=params.abs_tol,
        expected_columns=len(reference["columns"]),
        got_columns=len(candidate["columns"]),
    )
    if matched:
        return CheckResult(1.0, f"{len(reference['rows'])} rows match ({'in order' if ordered else 'in any order'})")
    return CheckResult(0.0, f"different result ({'order counts' if ordered else 'order ignored'}): {why}"[:600])
