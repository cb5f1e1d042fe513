"""The README and docs/ name only what exists: every ``verihub`` command line they show is a real command with
real flags, every relative link leads to a file, every page is linked from the README, every Python block
parses, and the README stays short (issue 32: a README a newcomer reads in five minutes)."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer

from conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
INLINE = re.compile(r"`(verihub [^`\n=]+)`")  # a log line's prefix (`verihub draw step=...`) is no command
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def the_cli() -> Any:
    """The ``verihub`` command as click sees it (typer's own click: compared by what it has, not its class)."""
    from verihub.cli import app
    from verihub.cli.plugins import add_commands

    add_commands(app)  # the hub's and the trainers' commands, as `verihub` adds them
    return typer.main.get_command(app)


def command_lines(text: str) -> list[str]:
    """Every ``verihub ...`` invocation: a line of a shell block, or an inline code span."""
    found = []
    for language, body in FENCE.findall(text):
        if language in ("bash", "sh", "shell", "console", ""):
            for line in body.splitlines():
                line = line.strip().removeprefix("$ ")
                if line.startswith("verihub "):
                    found.append(line)
    found += INLINE.findall(text)
    return found


def words_of(line: str) -> list[str]:
    line = re.sub(r"\s+#.*$", "", line)  # a comment after the command
    try:
        return shlex.split(line)
    except ValueError:  # an unbalanced quote in a sketch: its words are still words
        return line.split()


def check_invocation(cli: Any, line: str) -> str | None:
    """What ``line`` names that does not exist, or None."""
    words = words_of(line)[1:]
    command = cli
    path = ["verihub"]
    while hasattr(command, "commands") and words and not words[0].startswith("-"):
        sub = command.commands.get(words[0])
        if sub is None:
            if words[0].isupper() or words[0] in ("...", "COMMAND", "[OPTIONS]"):  # a placeholder
                return None
            return f"{' '.join(path)} has no command {words[0]!r}"
        command, path = sub, [*path, words.pop(0)]
    flags = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)} | {"--help"}
    for word in words:
        flag = word.split("=", 1)[0]
        if flag.startswith("--") and flag.rstrip(",.;:)") not in flags and flag != "--":
            return f"{' '.join(path)} has no flag {flag!r}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_command_and_flag_a_page_names_exists(page: Path) -> None:
    cli = the_cli()
    lines = command_lines(page.read_text())
    wrong = [f"{line!r}: {problem}" for line in lines if (problem := check_invocation(cli, line)) is not None]
    assert not wrong, "\n".join(wrong)


def test_the_check_can_fail() -> None:
    cli = the_cli()
    assert (
        check_invocation(cli, "verihub validate envs/sums --no-such-flag")
        == "verihub validate has no flag '--no-such-flag'"
    )
    assert check_invocation(cli, "verihub frobnicate") == "verihub has no command 'frobnicate'"
    assert check_invocation(cli, "verihub hub serve --help") is None


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_link_leads_to_a_file_and_every_python_block_parses(page: Path) -> None:
    text = page.read_text()
    for target in LINK.findall(text):
        if not target.startswith(("http://", "https://", "mailto:")):
            assert (page.parent / target).exists(), f"{page.name} links to {target}, which does not exist"
    for language, body in FENCE.findall(text):
        if language == "python":
            ast.parse(body)  # a SyntaxError names the line


def test_the_readme_is_short_and_links_every_page() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    for page in (REPO / "docs").glob("*.md"):
        assert f"(docs/{page.name})" in readme, f"the README does not link docs/{page.name}"
