"""What the code promises in its docstrings, pinned: settings.py reads every ``VERIHUB_*`` variable (a read of one
anywhere else fails here), errors.py defines every exception verihub raises on purpose, and no public function
raises a bare built-in."""

from __future__ import annotations

import ast
import builtins
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


BUILT_IN_ERRORS = {
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
}
# Raised on purpose and still not verihub's: a caller's type bug and an unwritten method (Python's own contract),
# a protocol's exception from a dunder method (a mapping's __getitem__, an iterator's __next__), and the
# ValueError a pydantic validator raises (pydantic reports it as the ValidationError that names the field).
ANY_FUNCTION = {"TypeError", "NotImplementedError"}
DUNDER = {"KeyError", "IndexError", "AttributeError", "StopIteration", "StopAsyncIteration"}
VALIDATORS = {"field_validator", "model_validator", "validator", "root_validator"}


def bare_raises(tree: ast.AST, module_public: bool) -> Iterator[tuple[int, str]]:
    """(line, exception) of each raise of a built-in exception in a public function of a public module."""

    def walk(node: ast.AST, public: bool, function: ast.FunctionDef | ast.AsyncFunctionDef | None) -> Iterator:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                dunder = child.name.startswith("__") and child.name.endswith("__")
                yield from walk(child, public and (dunder or not child.name.startswith("_")), child)
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, public and not child.name.startswith("_"), function)
            elif isinstance(child, ast.Raise) and child.exc is not None and public:
                raised = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
                name = raised.id if isinstance(raised, ast.Name) else ""
                decorators = (
                    {ast.unparse(d).split("(")[0].rpartition(".")[2] for d in function.decorator_list}
                    if function
                    else set()
                )
                allowed = (
                    name in ANY_FUNCTION
                    or (function is not None and function.name.startswith("__") and name in DUNDER)
                    or (decorators & VALIDATORS and name in ("ValueError", "AssertionError"))
                )
                if name in BUILT_IN_ERRORS and not allowed:
                    yield child.lineno, name
            else:
                yield from walk(child, public, function)

    yield from walk(tree, module_public, None)


def test_no_public_entry_point_raises_a_bare_built_in() -> None:
    """Every exception raised on purpose from a public function is a VerihubError (whose families subclass the
    built-in a caller would catch), so `except VerihubError` sees all of them."""
    found = [
        f"{path.relative_to(REPO)}:{line}: {name}"
        for part, folder in (("sdk", REPO / "sdk"), ("hub", REPO / "hub"), ("trainers", REPO / "trainers"))
        for path in sorted((folder / "verihub").rglob("*.py"))
        if "templates" not in path.relative_to(folder).parts
        for line, name in bare_raises(
            ast.parse(path.read_text(), str(path)),
            not any(piece.startswith("_") and not piece.startswith("__") for piece in path.relative_to(folder).parts),
        )
    ]
    assert found == [], "raise a verihub.errors family instead (UsageError, DataError, ...):\n" + "\n".join(found)
    caught = """
class Thing:
    def run(self):
        raise ValueError("x")
    def _inner(self):
        raise ValueError("private")
    def __getitem__(self, key):
        raise KeyError(key)
    def __post_init__(self):
        raise RuntimeError("y")
    @field_validator("a")
    def check(cls, value):
        raise ValueError("a validator's")
def call(x):
    raise TypeError("a caller's type bug")
"""
    assert [name for _, name in bare_raises(ast.parse(caught), True)] == ["ValueError", "RuntimeError"]
