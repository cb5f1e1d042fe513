"""What the code promises in its docstrings, pinned: settings.py reads every ``VERIHUB_*`` variable (a read of one
anywhere else fails here), errors.py defines every exception verihub raises on purpose."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from conftest import REPO

SETTINGS = REPO / "sdk" / "verihub" / "settings.py"


def verihub_reads(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, name) of each ``VERIHUB_*`` variable ``tree`` reads from the process environment."""

    def named(node: ast.AST) -> str | None:
        is_name = isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("VERIHUB_")
        return node.value if is_name else None

    def is_environ(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Attribute)
            and node.attr == "environ"
            or isinstance(node, ast.Name)
            and node.id == "environ"
        )

    for node in ast.walk(tree):
        found: str | None = None
        if isinstance(node, ast.Subscript) and is_environ(node.value):
            found = named(node.slice)
        elif isinstance(node, ast.Call):
            function = node.func
            reads = isinstance(function, ast.Attribute) and (
                function.attr in ("get", "pop", "setdefault")
                and is_environ(function.value)
                or function.attr == "getenv"
            )
            if reads and node.args:
                found = named(node.args[0])
            found = found or next((named(keyword.value) for keyword in node.keywords if keyword.arg == "envvar"), None)
        if found:
            yield node.lineno, found


def test_no_verihub_variable_is_read_outside_settings() -> None:
    reads = [
        f"{path.relative_to(REPO)}:{line}: {name}"
        for part in ("sdk", "hub", "trainers")
        for path in sorted((REPO / part).rglob("*.py"))
        if path != SETTINGS
        for line, name in verihub_reads(ast.parse(path.read_text(), str(path)))
    ]
    assert reads == [], "read these through verihub.settings:\n" + "\n".join(reads)
    assert len(list(verihub_reads(ast.parse(SETTINGS.read_text())))) >= 10  # the walk sees settings' own reads


def test_every_way_of_reading_one_is_found() -> None:
    source = """
import os
from os import environ
import typer
a = os.environ.get("VERIHUB_A")
b = os.environ["VERIHUB_B"]
c = os.getenv("VERIHUB_C", "x")
d = environ.get("VERIHUB_D")
e = typer.Option(envvar="VERIHUB_E")
f = os.environ.get("HOME")
"""
    assert [name for _, name in verihub_reads(ast.parse(source))] == [f"VERIHUB_{c}" for c in "ABCDE"]


ERRORS_MODULES = {REPO / "sdk" / "verihub" / "errors.py", REPO / "hub" / "verihub" / "hub" / "errors.py"}


def error_classes(trees: dict[Path, ast.AST]) -> dict[str, Path]:
    """Every class deriving from VerihubError (by base names, transitively) and the file defining it."""
    bases: dict[str, tuple[Path, set[str]]] = {}
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                named = {base.id if isinstance(base, ast.Name) else getattr(base, "attr", "") for base in node.bases}
                bases[node.name] = (path, named)
    found: dict[str, Path] = {"VerihubError": bases["VerihubError"][0]}
    while grown := {name: path for name, (path, named) in bases.items() if name not in found and named & set(found)}:
        found.update(grown)
    return found


def test_every_verihub_error_is_defined_in_an_errors_module() -> None:
    """errors.py promises every exception verihub raises on purpose in one place (the hub's refusals in its own)."""
    trees = {
        path: ast.parse(path.read_text(), str(path))
        for part in ("sdk", "hub", "trainers")
        for path in sorted((REPO / part).rglob("*.py"))
    }
    found = error_classes(trees)
    elsewhere = sorted(
        f"{name} in {path.relative_to(REPO)}" for name, path in found.items() if path not in ERRORS_MODULES
    )
    assert elsewhere == [], "define these in verihub/errors.py:\n" + "\n".join(elsewhere)
    assert {"SessionError", "GenerationError", "RemoteEnvError", "WeightSyncError", "HubError"} <= set(found)
    stray = {REPO / "x.py": ast.parse("class Stray(SpecError):\n    pass\n")}
    assert error_classes({**trees, **stray})["Stray"] == REPO / "x.py"  # the walk sees one defined anywhere else


def test_a_caught_fault_is_written_by_one_formatter() -> None:
    """errors.describe_error writes every "Type: message" reason; a hand-written copy elsewhere fails here."""
    from verihub.errors import describe_error

    copies = [
        f"{path.relative_to(REPO)}:{number}"
        for part in ("sdk", "hub", "trainers")
        for path in sorted((REPO / part).rglob("*.py"))
        if path.name != "errors.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "__name__}: {" in line
    ]
    assert copies == [], "use verihub.errors.describe_error:\n" + "\n".join(copies)
    assert describe_error(ValueError("bad")) == "ValueError: bad" and describe_error(TimeoutError()) == "TimeoutError"
    assert describe_error(ValueError("x" * 900)) == "ValueError: " + "x" * 488
    assert describe_error(ValueError("x" * 900), 20) == "ValueError: xxxxxxxx"
