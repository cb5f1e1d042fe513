"""Process check workers start from verihub's own entry point, never from the user's script.

Each test runs the README's first example (the ``## Use`` block) as a real script, the three ways
Python can be given one, and counts its top-level side effects: on main the math pool's workers
re-imported ``__main__`` (the script ran again in every worker), and from stdin every math grade was
``env_error``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO


def readme_example() -> str:
    """The first Python block under the README's ``## Use``."""
    readme = (REPO / "README.md").read_text()
    use = readme[readme.index("\n## Use\n") :]
    match = re.search(r"```python\n(.*?)```", use, re.DOTALL)
    assert match is not None, "the README's ## Use section has no python block"
    return match.group(1)


def script(tmp_path: Path) -> str:
    side_effects = tmp_path / "side-effects.log"
    return (
        f"with open({str(side_effects)!r}, 'a') as log:\n    log.write('ran\\n')\n"
        f"{readme_example()}"
        "print('status', grade.status, grade.reward)\n"
        "reference = env.grade(task, env.reference(task))\n"
        "print('reference', reference.status, reference.reason)\n"
    )


@pytest.mark.slow
@pytest.mark.parametrize("how", ["file", "stdin", "-c"])
def test_a_script_using_the_math_pool_runs_once_and_grades(tmp_path: Path, how: str) -> None:
    text = script(tmp_path)
    path = tmp_path / "example.py"
    path.write_text(text)
    argv, stdin = {"file": ([str(path)], None), "stdin": (["-"], text), "-c": (["-c", text], None)}[how]
    done = subprocess.run([sys.executable, *argv], input=stdin, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "side-effects.log").read_text() == "ran\n"  # the script's top level ran once
    assert done.stdout.count("status ") == 1, done.stdout
    assert "status wrong 0.0" in done.stdout or "status ok 1.0" in done.stdout, done.stdout + done.stderr[-2000:]
    assert "reference ok " in done.stdout, done.stdout + done.stderr[-2000:]
