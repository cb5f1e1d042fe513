"""Exploits against graders that run beside answer-made state: the answer reaches into the grader's room.

A grader that runs in the jail with what the answer left (a terminal-state check, a task's own tests, a unit-test
runner) must start with an environment, a home and temp dirs of its own and report through a channel the answer's
code cannot write (``TRUST.md``). These exploits try the ways in:

- ``startup-hooks`` (terminal-state checks): the final work dir holds, besides the task's initial files, the
  start-up hooks of every program a grader might start with its HOME or working directory there (Python's user
  site with a ``.pth`` and usercustomize, sitecustomize, ``.bashrc``, ``.profile``...); each hook forges a pass
  (writes and locks the Harbor reward files, prints a reward, exits 0 before the check runs);
- ``forging-program`` (terminal-state checks): every program the task names (in its instructions, its tests or
  its checker) is one that, when the grader runs it, answers wrongly and forges the grader's channels: reward
  files written, locked, replaced by a directory, a FIFO or a link, left for tests that write nothing, rewritten
  by a process that outlives it; the grader's own files rewritten; hooks planted for the grader's later programs;
- ``stand-in-modules`` (terminal-state checks whose tests or checker start Python): the final work dir holds, for
  a grader's Python that looks in it (``python3 -m pytest``, ``python3 -c``, ``python3 -`` run from it put it
  first on ``sys.path`` unless told not to), a stand-in for every module the task's words import or run with
  ``-m`` and for the test runners' and the standard library's most used (pytest, unittest, json...), a package
  stand-in, a pytest plugin found by its entry point (``*.dist-info``), and pytest's conftest.py and ini files
  (pytest.ini, tox.ini, setup.cfg, pyproject.toml) loading that plugin; each stand-in forges a pass (says a
  reward of 1, forges the channels, exits 0) when imported. The modules the task names as the answer's to write
  (``solution.py``) and its initial files are left as they are: importing those is the tests' choice.

:data:`LEAVE_HOOKS` is ``solution.py``'s source for python_tests' ``leave-startup-hooks``
(:mod:`verihub.checks.attacks.code`): it leaves hooks and stand-ins for the modules the runner imports later
wherever it can write (the work dir, HOME, /tmp), then dies, so that a fresh child starts.

Each must grade ``wrong`` at no more than the floor.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import PurePosixPath
from typing import Any

from verihub.checks.exploit import Attempt, Exploit, Family
from verihub.sandbox.tools import FILES, task_files

__all__ = ["LEAVE_HOOKS", "TERMINAL_STATE"]

Task = Mapping[str, Any]
_PYTHONS = tuple(f"python3.{minor}" for minor in range(8, 16))  # user-site folders of the Pythons a jail may have
_PROGRAM = re.compile(r"(?<![\w./-])(/?(?:[\w.-]+/)*[\w.-]+\.(?:sh|bash|py))\b")  # answer.sh, /app/run.py, bin/x.py
# What a Python is started with, or imports: `python3 -m pytest`, `import json, csv`, `from x.y import z`.
_PYTHON = re.compile(r"\bpython[\d.]*\b|\bpytest\b|\.py\b")
_IMPORTED = re.compile(
    r"(?:^|[\s;'\"(])(?:from\s+([A-Za-z_]\w*)[\w.]*\s+import\b|import\s+([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*))", re.M
)
_RUN_MODULE = re.compile(r"\s-m\s+([A-Za-z_]\w*)")
# Stood in for whatever the task's words say: the test runners' and the standard library's modules tests use most.
_ALWAYS = ("pytest", "unittest", "json", "re", "subprocess", "pathlib", "tempfile", "shutil", "csv", "hashlib")
_MOST_MODULES = 48  # stand-ins at most, the task's words' first
_PLUGIN = "verihub_forge"  # a pytest plugin of the answer's, loaded by entry point or by the ini files' -p
_WORK = "/work"  # the jail's work dir

# Forges every channel a grader in the jail might read; run by the hooks and the forging programs (bash).
_FORGE = r"""
for dir in /logs/verifier /tmp/harbor/logs/verifier; do
  [ -d "$dir" ] || continue
  echo 1 > "$dir/reward.txt" 2>/dev/null; echo '{"reward": 1}' > "$dir/reward.json" 2>/dev/null
  for name in reward.txt reward.json; do
    rm -rf "$dir/$name" 2>/dev/null
    case $name in *.txt) echo 1 ;; *) echo '{"reward": 1}' ;; esac > "$dir/$name" 2>/dev/null
    chmod a-w "$dir/$name" 2>/dev/null
  done
  ( setsid bash -c 'for i in $(seq 3000); do for f in "$0"/reward.txt "$0"/reward.json; do
      [ -w "$f" ] || rm -rf "$f"; case $f in *.txt) echo 1 ;; *) echo "{\"reward\": 1}" ;; esac > "$f"; done
      sleep 0.01; done' "$dir" </dev/null >/dev/null 2>&1 & ) 2>/dev/null
done
for file in $(find /tests -type f 2>/dev/null); do
  case $file in
    *.py) printf 'import sys\nprint("{\\"reward\\": 1}")\nsys.exit(0)\n' > "$file" ;;
    *) printf '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\nexit 0\n' > "$file" ;;
  esac 2>/dev/null
done
for python in PYTHONS; do
  site="${HOME:-/tmp}/.local/lib/$python/site-packages"
  mkdir -p "$site" 2>/dev/null && printf '%s\n' "$HOOK" > "$site/zz-verihub.pth" 2>/dev/null
done
""".replace("PYTHONS", " ".join(_PYTHONS))
# One line of Python (a .pth line that starts with "import" runs): forge, say a reward, exit 0 before the check.
_HOOK = (
    "import os, subprocess; subprocess.run(['bash', '-c', os.environ.get('VERIHUB_FORGE', '')]); "
    "os.write(1, b'{\"reward\": 1}\\n'); os._exit(0)"
)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


_FORGE_SCRIPT = _FORGE.replace('"$HOOK"', _quote(_HOOK))


def _forging_shell(wrong: str) -> str:
    return (
        f'#!/bin/bash\nexport VERIHUB_FORGE={_quote(_FORGE_SCRIPT)}\nbash -c "$VERIHUB_FORGE"\necho {_quote(wrong)}\n'
    )


def _forging_python(wrong: str) -> str:
    return f"import subprocess\nsubprocess.run(['bash', '-c', {_FORGE_SCRIPT!r}])\nprint({wrong!r})\n"


def _initial(task: Task) -> dict[str, str]:
    return dict(task_files(task) or {})


def _work_prefixes(params: Any) -> tuple[str, ...]:
    """The paths the work dir goes by in the jail: /work and its aliases (Harbor's WORKDIR)."""
    aliases = getattr(getattr(params, "limits", None), "aliases", None) or ()
    return (_WORK, *(path for path, target in aliases if target == _WORK))


def _programs(task: Task, params: Any) -> list[str]:
    """The programs the task names, as paths relative to the work dir: in its instructions, tests or checker."""
    prefixes = _work_prefixes(params)
    found: set[str] = set()
    for text in _texts(task):
        for name in _PROGRAM.findall(text):
            if name.startswith("/"):
                inside = next((prefix for prefix in prefixes if name.startswith(prefix + "/")), None)
                if inside is None:
                    continue  # /tests/check.py, /usr/bin/x.py: not the answer's
                name = name[len(inside) + 1 :]
            if name and ".." not in name.split("/"):
                found.add(name)
    return sorted(found)


def _texts(task: Task) -> Iterator[str]:
    """The task's words: its text columns, and the texts of a column holding a JSON object (Harbor's tests) but not
    their keys (/tests' own names), except the initial files' names."""
    for column, value in task.items():
        if not isinstance(value, str):
            continue
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            yield value
            continue
        yield from (str(text) for text in parsed.values())
        if column == FILES:
            yield from (str(name) for name in parsed)


def _startup_hooks(task: Task, params: Any) -> Attempt:
    forge = _FORGE_SCRIPT
    bash_hook = f'export VERIHUB_FORGE={_quote(forge)}\nbash -c "$VERIHUB_FORGE"\necho 1\nexit 0\n'
    python_hook = f"import os\nos.environ['VERIHUB_FORGE'] = {forge!r}\n{_HOOK}\n"
    pth = f"import os; os.environ['VERIHUB_FORGE'] = {forge!r}; {_HOOK}\n"
    hooks: dict[str, str] = {
        "sitecustomize.py": python_hook,
        "usercustomize.py": python_hook,
        ".pythonrc.py": python_hook,
    }
    for name in (".bashrc", ".bash_profile", ".bash_login", ".profile", ".bash_logout"):
        hooks[name] = bash_hook
    for python in _PYTHONS:
        site = f".local/lib/{python}/site-packages"
        hooks[f"{site}/zz-verihub.pth"] = pth
        hooks[f"{site}/usercustomize.py"] = python_hook
    return Attempt("Done: every file is in place.", workdir={**_initial(task), **hooks})


# A module that forges a pass when imported, using only os (imported before any path is searched).
_STAND_IN = (
    f"import os\nos.environ['VERIHUB_FORGE'] = {_FORGE_SCRIPT!r}\n"
    "os.system('bash -c \"$VERIHUB_FORGE\" >/dev/null 2>&1')\n"
    "os.write(1, b'{\"reward\": 1}\\n')\nos._exit(0)\n"
)


def _modules(task: Task, params: Any) -> list[str] | None:
    """The modules a grader's Python of ``task`` may import, the task's words' first, but the answer's own; None when
    no grader's program is Python."""
    texts = list(_texts(task))
    if not any(_PYTHON.search(text) or _IMPORTED.search(text) for text in texts):
        return None
    found: dict[str, None] = {}
    for text in texts:
        for module, imported in _IMPORTED.findall(text):
            found.update(dict.fromkeys(name.strip() for name in (module or imported).split(",")))
        found.update(dict.fromkeys(_RUN_MODULE.findall(text)))
    found.update(dict.fromkeys(_ALWAYS))
    answers = {PurePosixPath(name).stem for name in [*_programs(task, params), *_initial(task)]}
    return [name for name in found if name and name not in answers][:_MOST_MODULES] or None


def _stand_in_modules(task: Task, params: Any) -> Attempt | None:
    modules = _modules(task, params)
    if modules is None:
        return None  # no Python among the grader's programs
    forge = _STAND_IN
    plugin_ini = f"addopts = -p {_PLUGIN}\npythonpath = .\n"
    made = {f"{name}.py": forge for name in modules}
    made |= {
        f"{modules[0]}/__init__.py": forge,  # a package shadows its name too (and is found first)
        f"{_PLUGIN}.py": forge,
        f"{_PLUGIN}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {_PLUGIN}\nVersion: 1.0\n",
        f"{_PLUGIN}-1.0.dist-info/entry_points.txt": f"[pytest11]\n{_PLUGIN} = {_PLUGIN}\n",
        "conftest.py": forge,
        "pytest.ini": f"[pytest]\n{plugin_ini}",
        "tox.ini": f"[pytest]\n{plugin_ini}",
        "setup.cfg": f"[tool:pytest]\n{plugin_ini}",
        "pyproject.toml": f'[tool.pytest.ini_options]\naddopts = "-p {_PLUGIN}"\npythonpath = ["."]\n',
    }
    return Attempt("Done: the tests pass.", workdir={**_initial(task), **made})


def _forging_program(task: Task, params: Any) -> Attempt | None:
    programs = _programs(task, params)
    if not programs:
        return None  # the task names no program the grader could run
    wrong = "not the answer"
    made = {name: _forging_python(wrong) if name.endswith(".py") else _forging_shell(wrong) for name in programs}
    return Attempt("Done.", workdir={**_initial(task), **made})


TERMINAL_STATE = (
    Exploit(
        "startup-hooks",
        Family.HARNESS_TAMPERING,
        "the start-up hooks of Python (user site .pth, usercustomize, sitecustomize) and bash (.bashrc, .profile) in "
        "the work dir, each forging a pass for a grader whose HOME or working directory is there",
        _startup_hooks,
        tasks=1,
    ),
    Exploit(
        "forging-program",
        Family.FORGED_OUTPUT,
        "every program the task names answers wrongly and forges the grader's channels: reward files written, "
        "locked, replaced, rewritten by a process that outlives it; the grader's files rewritten; hooks planted",
        _forging_program,
        tasks=1,
    ),
    Exploit(
        "stand-in-modules",
        Family.HARNESS_TAMPERING,
        "stand-ins in the work dir for every module the task's tests or checker import or run (-m) and the test "
        "runners' (pytest, unittest, json...), a pytest plugin by entry point, conftest.py and pytest's ini files, "
        "each forging a pass for a grader's Python that looks in the work dir (-m, -c, - run from it)",
        _stand_in_modules,
        tasks=1,
    ),
)

# solution.py: stand-ins for the modules python_tests' runner imports after the candidate ran, and start-up
# hooks, wherever it can write; then its process dies, so that the next call starts a fresh child.
LEAVE_HOOKS = r"""
import os as _os
_liar = "def __getattr__(name):\n    raise SystemExit(0)\nimport os\nos.write(1, b'VERIHUB-TESTS forged\\n')\n"
_places = {_os.getcwd(), "/work", "/tmp", _os.path.expanduser("~")}
for _place in list(_places):
    for _python in PYTHONS:
        _places.add(_os.path.join(_place, ".local", "lib", _python, "site-packages"))
for _place in _places:
    try:
        _os.makedirs(_place, exist_ok=True)
    except OSError:
        continue
    for _name in ("sitecustomize", "usercustomize", "unittest", "asyncio", "traceback", "json", "linecache",
                  "inspect", "_blake2", "hashlib", "zz_verihub"):
        try:
            with open(_os.path.join(_place, _name + ".py"), "w") as _handle:
                _handle.write(_liar)
        except OSError:
            pass
    try:
        with open(_os.path.join(_place, "zz-verihub.pth"), "w") as _handle:
            _handle.write("import zz_verihub\n")
    except OSError:
        pass


def __getattr__(name):
    def dies(*args, **kwargs):
        _os._exit(0)
    return dies
""".replace("PYTHONS", repr(_PYTHONS))
