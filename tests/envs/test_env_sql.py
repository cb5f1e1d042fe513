"""The bundled sql environment: its data, splits, the result-set check and the gold answers."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import tomllib
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import verihub
from conftest import REPO
from verihub import sandbox
from verihub.grading.grade import GradeStatus

ROOT = REPO / "envs" / "sql"
FAMILIES = ("shop", "school", "library", "flights")
COLUMNS = ("id", "family", "difficulty", "ordered", "main_table", "question", "query", "wrong_query", "schema")


@pytest.fixture(scope="module")
def env() -> verihub.Environment:
    return verihub.load_env(ROOT)


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (ROOT / "data" / "tasks.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def by_id(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["id"]: row for row in rows}


@pytest.fixture
def jailed(nsjail_path: str) -> None:
    """Grading runs queries in the sandbox: skip (or fail in CI) where nsjail cannot run."""


def sql(query: str) -> str:
    return f"Here is the query:\n```sql\n{query}\n```"


def local_rows(family: str, query: str) -> list[tuple[Any, ...]]:
    """``query``'s rows straight from SQLite, outside the sandbox (to set up the tests)."""
    connection = sqlite3.connect(":memory:")
    connection.executescript((ROOT / "data" / f"{family}.sql").read_text())
    return connection.execute(query).fetchall()


def result_layer(grade: verihub.Grade) -> Any:
    return next(layer for layer in grade.layers if layer.name == "result")


# -- data -----------------------------------------------------------------------------------------------------


def test_tasks_cover_families_and_difficulties(rows: list[dict[str, Any]]) -> None:
    assert len(rows) >= 60
    assert len({row["id"] for row in rows}) == len(rows)
    per_family = Counter(row["family"] for row in rows)
    assert set(per_family) == set(FAMILIES) and min(per_family.values()) >= 15, per_family
    cells = Counter((row["family"], row["difficulty"]) for row in rows)
    assert all(cells[family, level] >= 4 for family in FAMILIES for level in (1, 2, 3)), cells
    assert {True, False} == {row["ordered"] for row in rows}
    for row in rows:
        assert all(row.get(column) not in (None, "") for column in COLUMNS), row["id"]
        assert row["query"] != row["wrong_query"], row["id"]
        assert row["query"].upper().startswith(("SELECT", "WITH")), row["id"]
        assert ("ORDER BY" in row["query"].upper()) or not row["ordered"], row["id"]
        assert f"CREATE TABLE {row['main_table']} (" in row["schema"], row["id"]


def test_splits_are_disjoint_and_cover_the_data(env: verihub.Environment, rows: list[dict[str, Any]]) -> None:
    train, held_out = ({task["id"] for task in env.dataset(name)} for name in ("train", "eval"))
    assert train and held_out and not train & held_out
    assert train | held_out == {row["id"] for row in rows}


def test_the_data_is_what_the_script_writes() -> None:
    # -m from the environment's directory imports the source tree's sql_env, not an installed copy
    done = subprocess.run(
        [sys.executable, "-m", "sql_env.make_data", "--check"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "up to date (64 tasks)" in done.stdout


def test_the_wheel_lists_every_data_file() -> None:
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    shipped = table["force-include"]
    for path in sorted((ROOT / "data").iterdir()):
        assert shipped.get(f"data/{path.name}") == f"sql_env/data/{path.name}", path.name
    assert {"environment.yaml", "README.md"} <= set(shipped)


def test_prompt_shows_the_schema_but_not_the_answer(env: verihub.Environment) -> None:
    task = env.dataset("eval")[0]
    messages = env.render(task)
    user = messages[-1]["content"]
    assert task["question"] in user and "CREATE TABLE" in user
    assert task["query"] not in json.dumps(messages)
    assert "```sql" in messages[0]["content"]


# -- comparing results ----------------------------------------------------------------------------------------


def test_comparison_rules() -> None:
    from sql_env.compare import compare_results

    assert compare_results([[1, "a"], [2, "b"]], [[2, "b"], [1, "a"]], ordered=False)[0]
    same, why = compare_results([[1, "a"], [2, "b"]], [[2, "b"], [1, "a"]], ordered=True)
    assert not same and "wrong order" in why
    assert compare_results([[3]], [[3.0]], ordered=False)[0]  # numbers compare as numbers
    assert compare_results([[0.1 + 0.2]], [[0.3]], ordered=True)[0]  # within the tolerance
    assert not compare_results([[17.1]], [[17.11]], ordered=False)[0]
    assert not compare_results([["3"]], [[3]], ordered=False)[0]  # text is not a number
    assert not compare_results([[None]], [[0]], ordered=False)[0]
    assert not compare_results([["a"], ["b"]], [["a"], ["a"]], ordered=False)[0]  # multisets, not sets
    same, why = compare_results([["a"]], [["a"], ["a"]], ordered=False)
    assert not same and "expected 1 rows, got 2" in why
    same, why = compare_results([["a", 1]], [["a"]], ordered=False)
    assert not same and "columns" in why
    assert compare_results([], [], ordered=False, expected_columns=2, got_columns=2)[0]
    # values within the tolerance that sort apart still match
    assert compare_results([[1.0, "b"], [1.0000000001, "a"]], [[1.0000000001, "b"], [1.0, "a"]], ordered=False)[0]


def test_statement_screening() -> None:
    from sql_env.checks import extract_sql, statement_problem

    assert extract_sql("```sql\nSELECT 1\n```\nand\n```SQL\nSELECT 2\n```") == "SELECT 2\n"
    assert extract_sql("<think>```sql\nSELECT 1\n```</think>no query") is None
    assert extract_sql("```python\nprint(1)\n```") is None
    assert statement_problem("  -- the answer\n/* ok */ select 1") is None
    assert statement_problem("WITH x AS (SELECT 1) SELECT * FROM x") is None
    for text in (
        "DELETE FROM orders",
        "update books set pages = 1",
        "DROP TABLE loans",
        "PRAGMA query_only = 0",
        "ATTACH DATABASE 'x' AS y",
        "-- only a comment",
        "",
    ):
        assert statement_problem(text) is not None, text
    assert "starts with 'DELETE'" in (statement_problem("delete from orders") or "")


# -- grading in the sandbox -----------------------------------------------------------------------------------


def sample(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first task of each (family, difficulty), fixed so failures reproduce."""
    picked: dict[tuple[str, int], dict[str, Any]] = {}
    for row in rows:
        picked.setdefault((row["family"], row["difficulty"]), row)
    return list(picked.values())


@pytest.mark.nsjail
def test_reference_passes_and_wrong_query_fails(
    jailed: None, env: verihub.Environment, rows: list[dict[str, Any]]
) -> None:
    tasks = sample(rows)
    assert len(tasks) == 12
    references = env.verifier.grade_many(tasks, [env.reference(task) for task in tasks])
    wrongs = env.verifier.grade_many(tasks, [sql(task["wrong_query"]) for task in tasks])
    for task, reference, wrong in zip(tasks, references, wrongs, strict=True):
        assert reference.status is GradeStatus.OK and reference.reward == 1.0, (task["id"], reference.layers)
        assert wrong.status is GradeStatus.WRONG and wrong.reward == 0.0, (task["id"], wrong.layers)
        assert result_layer(wrong).detail.startswith("different result"), task["id"]


@pytest.mark.nsjail
def test_row_order_counts_only_when_the_question_asks_for_one(
    jailed: None, env: verihub.Environment, by_id: dict[str, dict[str, Any]]
) -> None:
    unordered = by_id["sql-shop-12"]  # customers who never ordered
    assert not unordered["ordered"]
    reordered = f"SELECT * FROM ({unordered['query']}) ORDER BY 1 DESC"
    assert local_rows("shop", reordered) != local_rows("shop", unordered["query"])  # really another order
    assert sorted(local_rows("shop", reordered)) == sorted(local_rows("shop", unordered["query"]))
    grade = env.grade(unordered, sql(reordered))
    assert grade.status is GradeStatus.OK, grade.layers

    ordered = by_id["sql-school-01"]  # fourth-year students in alphabetical order
    assert ordered["ordered"]
    backwards = "SELECT name FROM students WHERE year = 4 ORDER BY name DESC"
    grade = env.grade(ordered, sql(backwards))
    assert grade.status is GradeStatus.WRONG and grade.reward == 0.0
    assert "wrong order" in result_layer(grade).detail
    # the same rows are right when the task does not ask for an order
    as_unordered = dict(ordered, ordered=False, id="sql-school-01-unordered")  # its own id: grades are cached by id
    assert env.grade(as_unordered, sql(backwards)).status is GradeStatus.OK


@pytest.mark.nsjail
def test_a_syntax_error_is_a_wrong_answer(
    jailed: None, env: verihub.Environment, by_id: dict[str, dict[str, Any]]
) -> None:
    grade = env.grade(by_id["sql-shop-02"], sql("SELECT COUNT(*) FROM customers WHERE country = = 'Estria'"))
    assert grade.status is GradeStatus.WRONG and grade.reward == 0.0
    assert "syntax error" in result_layer(grade).detail
    missing = env.grade(by_id["sql-shop-02"], sql("SELECT COUNT(*) FROM clients"))
    assert missing.status is GradeStatus.WRONG and "no such table" in result_layer(missing).detail


@pytest.mark.nsjail
@pytest.mark.parametrize(
    ("statement", "detail"),
    [
        ("DELETE FROM customers", "starts with 'DELETE'"),
        ("UPDATE products SET price = 0", "starts with 'UPDATE'"),
        ("INSERT INTO customers VALUES (99, 'x', 'y', 'z', '2025-01-01')", "starts with 'INSERT'"),
        ("DROP TABLE orders", "starts with 'DROP'"),
        ("WITH doomed AS (SELECT 1) DELETE FROM customers", "tries to do more than read"),
        ("SELECT COUNT(*) FROM customers; DELETE FROM customers", "more than one statement"),
        ("SELECT * FROM pragma_table_info('customers')", "tries to do more than read"),
    ],
)
def test_writes_are_refused(
    jailed: None, env: verihub.Environment, by_id: dict[str, dict[str, Any]], statement: str, detail: str
) -> None:
    grade = env.grade(by_id["sql-shop-02"], sql(statement))
    assert grade.status is GradeStatus.WRONG and grade.reward == 0.0
    assert detail in result_layer(grade).detail


@pytest.mark.nsjail
def test_numbers_match_within_a_small_tolerance(
    jailed: None, env: verihub.Environment, by_id: dict[str, dict[str, Any]]
) -> None:
    task = by_id["sql-shop-05"]  # an average rounded to 2 decimals
    close = "SELECT ROUND(AVG(price), 2) + 0.0000000001 FROM products WHERE category = 'Electronics'"
    assert env.grade(task, sql(close)).status is GradeStatus.OK
    unrounded = "SELECT AVG(price) FROM products WHERE category = 'Electronics'"
    assert env.grade(task, sql(unrounded)).status is GradeStatus.WRONG
    as_float = "SELECT COUNT(*) * 1.0 FROM customers WHERE country = 'Estria'"
    assert env.grade(by_id["sql-shop-02"], sql(as_float)).status is GradeStatus.OK


@pytest.mark.nsjail
def test_a_runaway_query_scores_zero(jailed: None, env: verihub.Environment, by_id: dict[str, dict[str, Any]]) -> None:
    forever = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT COUNT(*) FROM n"
    grade = env.grade(by_id["sql-shop-02"], sql(forever))
    assert grade.status is GradeStatus.WRONG and "took too long" in result_layer(grade).detail
    endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT i FROM n"
    grade = env.grade(by_id["sql-shop-02"], sql(endless))
    assert grade.status is GradeStatus.WRONG and "too many rows" in result_layer(grade).detail


def test_answers_without_a_sql_block_fail_the_gate(env: verihub.Environment, by_id: dict[str, dict[str, Any]]) -> None:
    task = by_id["sql-shop-02"]
    for text in (task["query"], f"```python\n{task['query']}\n```", sql("SELECT 1") + "\n" + sql("SELECT 2")):
        grade = env.grade(task, text)
        assert grade.status is GradeStatus.WRONG and grade.layers[0].name == "format"
        assert result_layer(grade).status == "skipped"


def test_a_sandbox_fault_is_an_environment_error(
    env: verihub.Environment, by_id: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> sandbox.Result:
        return sandbox.Result(sandbox.RunStatus.INFRA_ERROR, None, "", "", 0.0, reason="nsjail did not start")

    monkeypatch.setattr(sandbox, "run_python", broken)
    task = dict(by_id["sql-shop-02"], id="sql-shop-02-fault")  # never graded (and cached) before
    grade = env.grade(task, env.reference(task))
    assert grade.status is GradeStatus.ENV_ERROR and grade.reward is None
    assert "nsjail did not start" in result_layer(grade).detail


@pytest.mark.nsjail
def test_a_broken_reference_is_an_environment_error(
    jailed: None, env: verihub.Environment, by_id: dict[str, dict[str, Any]]
) -> None:
    task = dict(by_id["sql-shop-02"], id="sql-shop-02-broken", query="SELECT COUNT(*) FROM no_such_table")
    grade = env.grade(task, sql("SELECT 1"))
    assert grade.status is GradeStatus.ENV_ERROR and grade.reward is None
    assert "reference query fails" in result_layer(grade).detail


@pytest.mark.nsjail
@pytest.mark.slow
def test_gold_self_check(jailed: None, env: verihub.Environment) -> None:
    from verihub.validation.validate import validate_env

    report = validate_env(env)
    assert report.ok, report.failures
    assert report.references == 64 and report.negatives == 3 * 64


# -- packaging ------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_wheel_carries_the_data(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("verihub_env_sql-1.0.0-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"sql_env/data/{path.name}" for path in (ROOT / "data").iterdir()}
    expected |= {"sql_env/environment.yaml", "sql_env/README.md", "sql_env/runner.py", "sql_env/checks.py"}
    assert expected <= names, expected - names


def test_installed_environment_loads_by_name() -> None:
    env = verihub.load_env("sql")
    assert env.root != ROOT  # the installed copy, not the source tree
    assert {path.name for path in (env.root / "data").iterdir()} >= {f"{family}.sql" for family in FAMILIES}
    assert len(env.dataset("train")) + len(env.dataset("eval")) >= 60
