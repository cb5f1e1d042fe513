"""The layout shows the architecture, and keeps showing it: every module's import name is its path under
its part's folder, the SDK's root holds only what belongs to no subpackage, and imports go one way, from
the parts above to the parts below (an import against the direction fails here, lazy ones included)."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO

PARTS = {"sdk": REPO / "sdk", "hub": REPO / "hub", "trainers": REPO / "trainers"}  # folder -> a portion of `verihub`

# Bottom to top. A module may import its own layer and the layers below it, never one above.
LAYERS: list[tuple[str, ...]] = [
    (
        "verihub",
        "verihub._lazy",
        "verihub._sync",
        "verihub.errors",
        "verihub.settings",
        "verihub.ids",
        "verihub.testing",
    ),
    ("verihub.spec", "verihub.checks", "verihub.sandbox"),  # the vocabulary: schema, checks, the jail
    ("verihub.generation",),
    ("verihub.grading",),
    ("verihub.environment",),
    ("verihub.adapters", "verihub.validation", "verihub.serve"),
    ("verihub.eval",),
    ("verihub.cli",),
    ("verihub.hub",),  # a distribution of its own, on the SDK
    ("verihub.trainers",),  # likewise, on the SDK and the hub (environments installed by hub id)
]
# Imports against the direction on purpose, each with its reason: none (load_env finds adapters by entry point).
EXCEPTIONS: dict[tuple[str, str], str] = {}
# The SDK's root: the public API, and what every part shares. Anything else belongs in a subpackage.
SDK_ROOT = {"__init__", "_lazy", "_sync", "errors", "ids", "settings", "testing"}


def modules() -> Iterator[tuple[str, Path]]:
    """Every module of the three parts: its import name, read off its path, and its file."""
    for folder in PARTS.values():
        for path in sorted((folder / "verihub").rglob("*.py")):
            if "templates" in path.relative_to(folder).parts:
                continue  # package data that `verihub init` copies, not modules of verihub
            parts = path.relative_to(folder).with_suffix("").parts
            yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def layer_of(module: str) -> int:
    best = max(
        (prefix for layer in LAYERS for prefix in layer if module == prefix or module.startswith(prefix + ".")),
        key=len,
        default=None,
    )
    assert best is not None, f"{module} is in no layer: add its package to LAYERS"
    return next(index for index, layer in enumerate(LAYERS) if best in layer)


def imported(path: Path, module: str) -> Iterator[tuple[str, int]]:
    """The verihub modules ``path`` imports anywhere (top level, in functions, under TYPE_CHECKING)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names if alias.name.split(".")[0] == "verihub")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    [*package.split(".")[: len(package.split(".")) - node.level + 1], *filter(None, [base])]
                )
            if base.split(".")[0] != "verihub":
                continue
            for alias in node.names:  # `from verihub import sandbox` imports a module; `import check` a name
                candidate = f"{base}.{alias.name}"
                yield (candidate if _is_module(candidate) else base), node.lineno


def _is_module(name: str) -> bool:
    relative = Path(*name.split("."))
    return any(
        (folder / relative).with_suffix(".py").is_file()
        or (folder / relative / "__init__.py").is_file()
        or (folder / relative).is_dir()
        for folder in PARTS.values()
    )


def violations(found: Iterator[tuple[str, Path]]) -> list[str]:
    wrong = []
    for module, path in found:
        if module == "verihub":
            continue  # the public API: its names load lazily, from whichever layer holds them
        for target, line in sorted(imported(path, module), key=lambda found: found[1]):
            allowed = any(module.startswith(a) and (target == b or target.startswith(b + ".")) for a, b in EXCEPTIONS)
            if layer_of(target) > layer_of(module) and not allowed:
                wrong.append(
                    f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}:{line}: "
                    f"{module} imports {target}, a layer above it"
                )
    return wrong


def test_imports_go_one_way_from_the_parts_above_to_the_parts_below() -> None:
    assert violations(modules()) == []


def test_an_import_against_the_direction_is_found_lazy_or_not(tmp_path: Path) -> None:
    checks = tmp_path / "checks.py"
    checks.write_text("def later():\n    from verihub.serve import graders\n")
    sandbox = tmp_path / "pool.py"
    sandbox.write_text("if True:\n    import verihub.hub.storage\nfrom verihub import eval\n")
    found = violations(iter([("verihub.checks.fake", checks), ("verihub.sandbox.fake", sandbox)]))
    assert [line.split(": ", 1)[1] for line in found] == [
        "verihub.checks.fake imports verihub.serve.graders, a layer above it",
        "verihub.sandbox.fake imports verihub.hub.storage, a layer above it",
        "verihub.sandbox.fake imports verihub.eval, a layer above it",
    ]


def test_every_module_imports_from_the_file_its_name_reads_as() -> None:
    for module, path in modules():
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None, module
        assert Path(spec.origin).resolve() == path.resolve(), f"{module} loads {spec.origin}, not {path}"


def test_hub_and_trainers_are_portions_of_the_verihub_package() -> None:
    for name in ("hub", "trainers"):
        assert not (PARTS[name] / "verihub" / "__init__.py").exists(), f"{name}/verihub/ must not shadow the SDK's"
        assert sorted(path.name for path in (PARTS[name] / "verihub").iterdir() if path.name != "__pycache__") == [name]


def test_the_sdk_root_holds_only_what_belongs_to_no_subpackage() -> None:
    root = {path.stem for path in (PARTS["sdk"] / "verihub").glob("*.py")}
    assert root == SDK_ROOT, "a module at the SDK's root: put it in the subpackage whose name says what it is"


@pytest.mark.parametrize("package", sorted({m for m, path in modules() if path.name == "__init__.py"}))
def test_every_package_says_what_it_is_for(package: str) -> None:
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.origin is not None
    assert ast.get_docstring(ast.parse(Path(spec.origin).read_text())), f"{package}/__init__.py has no docstring"


def test_the_readme_layout_is_the_tree() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    tree = section.split("```", 2)[1]
    listed = set(re.findall(r"^ *([\w.-]+)/ ", tree, flags=re.M))  # one folder a line
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    folders = {name.split("/")[0] for name in files if "/" in name and not name.startswith(".")}
    subpackages = {path.parent.name for path in (PARTS["sdk"] / "verihub").glob("*/__init__.py")}
    assert folders <= listed, f"folders missing from the README's Layout: {folders - listed}"
    assert subpackages <= listed, f"SDK subpackages missing from the README's Layout: {subpackages - listed}"
    extra = listed - folders - subpackages - {"verihub"}
    assert not extra, f"in the README's Layout, not in the tree: {extra}"
