"""Runs inside the sandbox (the jail's python3, standard library only; keep it compatible with older Pythons than
the host's).

Reads ``{"nonce", "queries": {name: sql}, "max_rows", "timeout_s", "max_chars"}`` as JSON on stdin, loads the
dump ``db.sql`` into an in-memory SQLite database, makes the connection read-only (``PRAGMA query_only`` and
an authorizer that allows only reads), then runs the queries in the order given and prints one line per query:

    VERIHUB-SQL <nonce> <name> {"columns": [...], "rows": [[...], ...]}    or    ... {"error": KIND, "message": ...}

Each line is flushed before the next query starts, so a run that dies on a later query still reports the
earlier ones. Blobs are written as ["blob", HEX]; SQLite values are never lists, so that is unambiguous.
"""

import json
import sqlite3
import sys
import time

DUMP = "db.sql"
HEAP_LIMIT = 96 * 1024 * 1024  # SQLite's own allocations; past it a query fails with "out of memory"

# Reading tables, running a SELECT, calling functions and recursive CTEs; everything else is refused.
_ALLOWED = frozenset([sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, 33])  # 33: RECURSIVE
_REFUSED_FUNCTIONS = frozenset(["load_extension", "readfile", "writefile"])


def _authorize(action, arg1, arg2, database, trigger):
    if action not in _ALLOWED:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _REFUSED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def load(dump):
    """An in-memory database holding ``dump``, from then on read-only."""
    connection = sqlite3.connect(":memory:", isolation_level=None)
    connection.executescript(dump)
    connection.execute(f"PRAGMA hard_heap_limit = {HEAP_LIMIT}")
    connection.execute("PRAGMA query_only = ON")
    connection.set_authorizer(_authorize)
    return connection


def _value(value):
    if isinstance(value, bytes):
        return ["blob", value.hex()]
    return value


def run_query(connection, sql, max_rows=1000, timeout_s=2.0):
    """``{"columns", "rows"}`` or ``{"error": kind, "message"}``; kind is one of refused, multiple, timeout,
    too_many_rows, no_rows_returned, error."""
    deadline = time.monotonic() + timeout_s
    connection.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 1000)
    try:
        cursor = connection.execute(sql)
        rows = cursor.fetchmany(max_rows + 1)
    except (sqlite3.Error, sqlite3.Warning) as error:
        message = str(error)
        if "not authorized" in message:
            kind = "refused"
        elif "one statement at a time" in message:
            kind = "multiple"
        elif "interrupted" in message:
            kind = "timeout"
            message = f"the query ran longer than {timeout_s:g}s"
        else:
            kind = "error"
        return {"error": kind, "message": f"{type(error).__name__}: {message}"}
    finally:
        connection.set_progress_handler(None, 0)
    if cursor.description is None:
        return {"error": "no_rows_returned", "message": "the statement returns no result set"}
    if len(rows) > max_rows:
        return {"error": "too_many_rows", "message": f"the query returns more than {max_rows} rows"}
    return {
        "columns": [column[0] for column in cursor.description],
        "rows": [[_value(value) for value in row] for row in rows],
    }


def main():
    request = json.loads(sys.stdin.read())
    with open(DUMP, encoding="utf-8") as handle:
        connection = load(handle.read())
    for name, sql in request["queries"]:
        result = run_query(connection, sql, request.get("max_rows", 1000), request.get("timeout_s", 2.0))
        text = json.dumps(result)
        limit = request.get("max_chars", 500000)
        if len(text) > limit:
            text = json.dumps(
                {"error": "too_large", "message": f"the result is larger than {limit} characters of JSON"}
            )
        sys.stdout.write(f"VERIHUB-SQL {request['nonce']} {name} {text}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
