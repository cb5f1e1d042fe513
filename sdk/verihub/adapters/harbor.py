"""Harbor tasks (the terminal-bench format of ``harbor`` 0.25) as a verihub environment, run in verihub's jail.

>>> env = verihub.load_env("harbor:path/to/tasks")  # doctest: +SKIP  (a task directory, or a folder of them)

A folder's tasks are the directories holding a ``task.toml`` at most :data:`MAX_DEPTH` folders below it (Harbor
datasets on the Hub keep them under ``tasks/``, often grouped), found without following links; a task holding a
link anywhere is refused (its files are its own). ``env.load_report`` names every task refused, and why.

A Harbor task is a directory: ``instruction.md`` (the prompt), ``task.toml``, ``environment/Dockerfile`` (its
container), ``tests/test.sh`` (run after the agent from the working directory; it writes a reward to
``/logs/verifier/reward.txt``, or several to ``reward.json``) and, often, ``solution/solve.sh`` (the oracle).

- **image**: the jail stands in for the container: the host's userland (bash, coreutils, python3 ...) with
  no network. It can replace an image whose Dockerfile names a Debian, Ubuntu or Python base (``FROM``), a
  ``WORKDIR``, and ``COPY``s of the task's own text files; one that ``RUN``s anything (installs, builds),
  sets ``ENV``, copies from elsewhere, a tests/Dockerfile that does, a prebuilt ``docker_image``, GPUs or
  several steps need what the jail cannot provide: such a task is refused with the line that needs it. A
  directory of tasks loads the others and logs each refusal; it fails, with every reason, when none is left.
- **interaction**: several turns with the ``bash`` tool, in the task's WORKDIR (an alias of the jail's work
  dir, :attr:`~verihub.spec.models.SandboxSpec.aliases`) with the copied files in place.
- **verifier**: one check layer, ``tests``: the task's tests/ placed in /tests and ``/tests/test.sh`` run on
  the final work dir; the grade is the reward they write (reward.txt, or reward.json's ``reward``, else its
  first value), which must lie in [0, 1]. A plain text answer (``validate``, ``grade``) is first run as its
  ```bash blocks on the task's initial files, as shell-task does.
- **gold**: ``solution/solve.sh`` is the reference, when every task has one.

The tests run in one jail with what the answer left, apart from it (:mod:`._harbor_tests`): their files
read-only, a HOME and temp dir of their own, the system's PATH, and Python that never looks in the work dir on
its own: they start in the WORKDIR as in Harbor, but every Python they start runs with ``PYTHONSAFEPATH`` and its
user site off, so ``python3 -m pytest`` or ``python3 -c`` there imports no module, package, plugin or hook the
answer left (a program file's own folder stays first on its path, as Python puts it). Their reward only test.sh's
own shell can write: ``/logs/verifier/reward.txt`` and ``reward.json`` lead to files that shell holds, which no
program it runs (the answer's among them) can open, so a reward file a program wrote, locked or left never
counts; a program's output counts when test.sh redirects it there. A task whose tests/ files (other than
test.sh) write the reward themselves is refused, with the line. What the tests choose to trust stays theirs:
the answer's program they run, the work dir they put on Python's path themselves (``PYTHONPATH=/app``, in
[verifier.env] or test.sh), pytest run on the work dir. Tests that end without a reward, or killed, are a
fault, whose fault verihub's one rule decides (the task's reference through the same tests).
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import Field

from verihub.adapters._harbor_tests import LOGS, RESERVED, TESTS, run_tests
from verihub.checks.attacks import rooms
from verihub.checks.base import CheckResult, SandboxParams, check
from verihub.checks.terminal_state import final_work_dir, sandboxed
from verihub.environment.core import Environment
from verihub.environment.origin import LoadReport
from verihub.errors import CheckError, SpecError, SpecProblem, describe_error
from verihub.sandbox.types import Limits

__all__ = ["PREFIX", "HarborTask", "harbor_spec", "load_harbor", "read_task", "task_tests"]

PREFIX = "harbor:"
OPTIONS = ("max_turns", "seed")
logger = logging.getLogger("verihub.adapters.harbor")

# The bases whose userland the jail's (the host's Debian) stands in for.
_BASES = ("debian", "ubuntu", "python", "buildpack-deps")
_IGNORED = ("ARG", "LABEL", "MAINTAINER", "EXPOSE", "CMD", "ENTRYPOINT", "USER", "SHELL", "STOPSIGNAL", "HEALTHCHECK")
_MAX_FILE = 1 << 20  # bytes of one copied or test file
_SPLIT_FROM = 5  # tasks from which a suite is split 80/20 into train and eval; below, all are one split
MAX_DEPTH = 6  # folders between a task folder's root and a task (tasks/<group>/<task>/ and deeper)
MAX_TASKS = 10_000  # tasks one folder may hold
_REWARD_PATH = re.compile(r"/logs/verifier/reward\.(?:txt|json)")
_SYSTEM = (
    "You work in a Linux shell through the bash tool, in {workdir}. Each call runs a command line there; the "
    "files persist from call to call, nothing else does (each call starts a fresh shell). There is no network "
    "and nothing can be installed: use what is there (bash, coreutils, grep, sed, perl, python3 and its standard "
    "library). Do the task with the tool, check the result, and when it is done reply with a short summary "
    "and no tool call. Only the state you leave behind is graded, by the task's tests."
)


class Refused(Exception):
    """A task the jail cannot stand in for; the message says which file and line needs what."""


@dataclass(frozen=True)
class HarborTask:
    """One task directory, read: what the jail needs to run it."""

    id: str
    version: str
    instruction: str
    workdir: str
    files: dict[str, str]  # the work dir's initial files (the Dockerfile's COPYs), relative to WORKDIR
    tests: dict[str, str]  # tests/, relative to /tests
    solution: str | None
    env: dict[str, str]  # [verifier.env]
    timeout_s: float  # [verifier] timeout_sec

    def row(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "instruction": self.instruction,
            "files": json.dumps(self.files),
            "tests": json.dumps(self.tests),
            "test_env": json.dumps(self.env),
            "solution": self.solution or "",
        }


def read_task(directory: Path) -> HarborTask:
    """The task in ``directory``; :class:`Refused` if the jail cannot stand in for its image."""
    _refuse_links(directory)
    try:
        config = tomllib.loads((directory / "task.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise Refused(f"task.toml: {error}") from None
    environment = config.get("environment", {})
    if environment.get("docker_image"):
        raise Refused(f"task.toml: [environment] docker_image = {environment['docker_image']!r}: a prebuilt image")
    if environment.get("gpus") or environment.get("tpu"):
        raise Refused("task.toml: [environment] asks for an accelerator")
    if str(environment.get("os", "linux")).lower() != "linux":
        raise Refused(f"task.toml: [environment] os = {environment['os']!r}")
    if config.get("steps"):
        raise Refused("task.toml: a multi-step task")
    dockerfile = directory / "environment" / "Dockerfile"
    if not dockerfile.is_file():
        raise Refused("environment/Dockerfile is missing")
    workdir, copies = _read_dockerfile(dockerfile, "environment/Dockerfile")
    if workdir is None:
        raise Refused("environment/Dockerfile sets no WORKDIR (the directory the jail's work dir stands for)")
    if any(workdir == path or workdir.startswith(path + "/") for path in RESERVED):
        raise Refused(f"environment/Dockerfile WORKDIR {workdir}: the tests' own (/tests, /logs, /verihub)")
    if workdir != "/work":
        try:
            Limits(aliases={workdir: "/work"})
        except ValueError as error:
            raise Refused(f"environment/Dockerfile WORKDIR {workdir}: {describe_error(error, 200)}") from None
    tests_dir = directory / "tests"
    if (tests_dir / "Dockerfile").is_file():
        _read_dockerfile(tests_dir / "Dockerfile", "tests/Dockerfile")  # refuses what the jail cannot do
    tests = _text_files(tests_dir, "tests", skip={"Dockerfile"})
    if "test.sh" not in tests:
        raise Refused("tests/test.sh is missing")
    _refuse_reward_writers(tests)
    files: dict[str, str] = {}
    for source, target in copies:
        _copy(directory / "environment", source, target, workdir, files)
    task = config.get("task", {})
    solution = directory / "solution" / "solve.sh"
    verifier = config.get("verifier", {})
    return HarborTask(
        id=str(task.get("name") or directory.name),
        version=str(task.get("version") or "0.0.0"),
        instruction=(directory / "instruction.md").read_text(encoding="utf-8").strip(),
        workdir=workdir,
        files=files,
        tests=tests,
        solution=solution.read_text(encoding="utf-8") if solution.is_file() else None,
        env={str(key): str(value) for key, value in verifier.get("env", {}).items()},
        timeout_s=float(verifier.get("timeout_sec", 600.0)),
    )


def _read_dockerfile(path: Path, name: str) -> tuple[str | None, list[tuple[str, str]]]:
    """(WORKDIR, [(source, target) of each COPY]); :class:`Refused` at the first line the jail cannot do."""
    workdir, copies, bases = None, [], 0
    logical = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))
    for number, line in enumerate(logical.splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        instruction, arguments = (
            words[0].upper(),
            [word for word in words[1:] if not word.startswith("--chown") and not word.startswith("--chmod")],
        )
        where = f"{name} line {number} ({line.strip()[:80]})"
        if instruction == "FROM":
            bases += 1
            image = arguments[0].split("@")[0].rsplit("/", 1)[-1].split(":")[0] if arguments else ""
            if bases > 1 or image not in _BASES:
                raise Refused(f"{where}: the jail stands in for one {', '.join(_BASES)} base only")
        elif instruction == "WORKDIR" and len(arguments) == 1 and arguments[0].startswith("/"):
            workdir = str(PurePosixPath(arguments[0]))
        elif (
            instruction in ("COPY", "ADD")
            and len(arguments) >= 2
            and not any(
                word.startswith(("--", "http://", "https://")) or word.endswith((".tar", ".gz", ".tgz", ".xz"))
                for word in arguments
            )
        ):
            copies += [
                (
                    source,
                    arguments[-1] if arguments[-1].startswith("/") or workdir is None else f"{workdir}/{arguments[-1]}",
                )
                for source in arguments[:-1]
            ]
        elif instruction in ("COPY", "ADD"):
            raise Refused(
                f"{where}: the jail seeds its work dir with the task's own files only (no other image, URL or archive)"
            )
        elif instruction not in _IGNORED:
            raise Refused(f"{where}: the jail cannot do {instruction} (it runs no build: nothing is installed)")
    return workdir, copies


def _copy(context: Path, source: str, target: str, workdir: str, files: dict[str, str]) -> None:
    """One COPY into ``files`` (relative to ``workdir``): the jail's work dir is all it can seed."""
    base = PurePosixPath(target)
    tests_copy = base == PurePosixPath(TESTS) or PurePosixPath(TESTS) in base.parents
    if tests_copy:
        return  # a tests image copying tests/ to /tests: the verifier places them anyway
    if base != PurePosixPath(workdir) and PurePosixPath(workdir) not in base.parents:
        raise Refused(f"COPY {source} {target}: the jail seeds only the WORKDIR ({workdir})")
    found = (context / source).resolve()
    if context.resolve() != found and context.resolve() not in found.parents:
        raise Refused(f"COPY {source}: outside the task's environment/")
    relative = base.relative_to(workdir)
    if found.is_dir():
        for name, text in _text_files(found, f"environment/{source}").items():
            files[str(relative / name)] = text
    elif found.is_file():
        copied = relative / found.name if target.endswith("/") or base == PurePosixPath(workdir) else relative
        files[str(copied)] = _text(found, f"environment/{source}")
    else:
        raise Refused(f"COPY {source}: no such file in the task's environment/")


def _text_files(directory: Path, name: str, skip: set[str] = frozenset()) -> dict[str, str]:  # type: ignore[assignment]  # an immutable default, never changed
    if not directory.is_dir():
        raise Refused(f"{name}/ is missing")
    return {
        str(path.relative_to(directory)): _text(path, f"{name}/{path.relative_to(directory)}")
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.name not in skip
    }


def _text(path: Path, name: str) -> str:
    if path.stat().st_size > _MAX_FILE:
        raise Refused(f"{name}: larger than {_MAX_FILE >> 20} MiB")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise Refused(f"{name}: not UTF-8 text (the jail's work dir is seeded with text)") from None


def _refuse_reward_writers(tests: Mapping[str, str]) -> None:
    """:class:`Refused` if a file of tests/ other than test.sh names a reward file: in the jail only test.sh's own
    shell writes the reward (no program it runs can open it), so such a task could never be graded."""
    for name, text in sorted(tests.items()):
        if name == "test.sh":
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if _REWARD_PATH.search(line):
                raise Refused(
                    f"tests/{name} line {number} ({line.strip()[:80]}): a program of the tests writes the reward "
                    "itself; in verihub's jail only test.sh's own shell can (redirect the program's output: "
                    f"prog > /logs/verifier/reward.json)"
                )


def _refuse_links(directory: Path) -> None:
    """:class:`Refused` if anything in the task's directory is a link: a task's files are its own (a link to a host
    file would be read into the jail)."""
    for folder, subfolders, names in os.walk(directory):
        for name in [*subfolders, *names]:
            if os.path.islink(os.path.join(folder, name)):
                where = Path(folder, name).relative_to(directory)
                raise Refused(f"{where} is a symbolic link: a task's files must be its own")


def _task_dirs(root: Path) -> list[Path]:
    """The task directories under ``root`` (itself, if it holds a task.toml): at most MAX_DEPTH folders down,
    links and hidden folders never followed, a task's own folders never searched."""
    if (root / "task.toml").is_file():
        return [root]
    found: list[Path] = []
    folders = [(root, 0)]
    while folders:
        folder, depth = folders.pop()
        with os.scandir(folder) as entries:
            children = sorted(
                Path(entry.path)
                for entry in entries
                if entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".")
            )
        for child in children:
            if (child / "task.toml").is_file() and not (child / "task.toml").is_symlink():
                found.append(child)
                if len(found) > MAX_TASKS:
                    raise SpecError(
                        [SpecProblem(str(root), None, "path", f"holds more than {MAX_TASKS:,} Harbor tasks")]
                    )
            elif depth + 1 < MAX_DEPTH:
                folders.append((child, depth + 1))
    return sorted(found)


def harbor_spec(ref: str, *, max_turns: int = 16, seed: int = 0) -> tuple[Any, list[HarborTask], list[tuple[str, str]]]:
    """The :class:`~verihub.spec.loader.LoadedSpec` of ``harbor:PATH``, its tasks and the tasks it refused, each
    (its directory relative to PATH, why) (see the module docstring)."""
    from verihub.adapters.openenv import SPLIT
    from verihub.spec.lines import LineMap
    from verihub.spec.loader import LoadedSpec
    from verihub.spec.models import EnvSpec

    root = Path(ref.removeprefix(PREFIX).strip()).expanduser()
    directories = _task_dirs(root) if root.is_dir() else []
    if not directories:
        raise SpecError(
            [SpecProblem(ref, None, "path", f"{root} is no Harbor task (task.toml) nor a directory of them")]
        )
    tasks, refused = [], []
    for directory in directories:
        try:
            tasks.append(read_task(directory))
        except Refused as why:
            refused.append(SpecProblem(str(directory), None, "image", f"refused: {why}"))
    for problem in refused:
        logger.warning("harbor task %s %s", problem.file, problem.message)
    if not tasks or (refused and len(directories) == 1):
        raise SpecError(refused)
    left_out = [
        (Path(problem.file).relative_to(root).as_posix() or ".", problem.message.removeprefix("refused: "))
        for problem in refused
    ]
    workdirs = {task.workdir for task in tasks}
    if len(workdirs) > 1:
        raise SpecError(
            [
                SpecProblem(
                    ref,
                    None,
                    "WORKDIR",
                    f"the tasks' WORKDIRs differ ({', '.join(sorted(workdirs))}); "
                    "load each WORKDIR's tasks on their own",
                )
            ]
        )
    workdir = workdirs.pop()
    aliases = {"/logs": LOGS}  # /tests is bound read-only in the tests' jail only
    if workdir != "/work":
        aliases[workdir] = "/work"
    timeout_s = min(600.0, max(task.timeout_s for task in tasks))
    name = re.sub(r"[^a-z0-9._-]+", "-", (root.name or "tasks").lower()).strip("-.") or "tasks"
    reference = {"reference": "```bash\n{solution}\n```"} if all(task.solution for task in tasks) else {}
    spec = EnvSpec.model_validate(
        {
            "id": f"harbor-{name}"[:64],
            "version": tasks[0].version
            if len(tasks) == 1 and re.fullmatch(r"\d+\.\d+\.\d+", tasks[0].version)
            else "0.0.0",
            "domain": "shell",
            "description": f"{len(tasks)} Harbor task(s) from {root}, run in verihub's jail.",
            "tags": ["harbor", "shell", "terminal-state"],
            "dataset": {
                "source": f"{__name__}:rows",
                "size": len(tasks),
                "seed": seed,
                "args": {"path": str(root)},
                "split": SPLIT if len(tasks) >= _SPLIT_FROM else {"train": 1.0},
            },
            "eval": {"split": "eval" if len(tasks) >= _SPLIT_FROM else "train", "n": len(tasks), "max_tokens": 1024},
            "prompt": {"system": _SYSTEM.format(workdir=workdir), "user": "{instruction}"},
            "interaction": {"kind": "multi_turn", "max_turns": max_turns, "tools": ["bash"]},
            "verifier": [
                {
                    "name": "tests",
                    "layer": "check",
                    "use": f"{__name__}:task_tests",
                    "args": {"timeout_s": timeout_s},
                    "timeout_s": 2 * timeout_s + 30,
                }
            ],  # the answer's commands, then the tests
            "sandbox": {
                "wall_s": 60,
                "memory_mb": 2048,
                "max_procs": 64,
                "disk_mb": 256,
                "max_file_mb": 64,
                "aliases": aliases,
            },
            "gold": {
                **reference,
                "min_pass_rate": 1.0 if reference else 0.0,
                "negatives": ["I have finished the task.", "```bash\ntrue\n```"],
            },
        }
    )
    return LoadedSpec(spec, root / "environment.yaml", LineMap()), tasks, left_out


def rows(n: int, seed: int, path: str) -> list[dict[str, Any]]:
    """The tasks under ``path`` as rows (the dataset generator); refused ones are left out."""
    found = []
    for directory in _task_dirs(Path(path)):
        try:
            found.append(read_task(directory).row())
        except Refused:
            continue
    return found[:n]


class TestsParams(SandboxParams):
    """The tests' time; the environment's sandbox limits (for the answer's commands and the tests)."""

    timeout_s: float = Field(600.0, gt=0, description="Wall-clock limit of one run of the tests.")

    def columns(self) -> set[str]:
        return {"tests", "test_env"}


@check(params=TestsParams, mode="thread", exploits=rooms.TERMINAL_STATE)
def task_tests(completion: str, task: Mapping[str, Any], params: TestsParams) -> CheckResult:
    """The reward the task's tests write for the final work dir (``task["workdir"]``, else the state the
    completion's ```bash blocks leave on the initial files)."""
    state = final_work_dir(completion, task, params.limits)
    if isinstance(state, str):
        return CheckResult(0.0, state)
    nonce = secrets.token_hex(16)
    tests = json.loads(str(task["tests"]))
    env = json.loads(str(task["test_env"] or "{}"))
    limits = params.limits.model_copy(update={"wall_s": params.timeout_s})
    ran = sandboxed(run_tests(state or None, tests, env, nonce, limits))
    report = next((line[len(nonce) :] for line in ran.stdout.splitlines() if line.startswith(nonce)), None)
    if report is None:
        raise CheckError(f"the task's tests did not finish ({ran.status}: {ran.reason or ran.stderr[-300:]})")
    return _reward(json.loads(report))


def _reward(report: Mapping[str, Any]) -> CheckResult:
    """The grade of what the tests' shell wrote: a fault (raised) when it wrote no reward or was killed."""
    found, ended = report["found"], report["ended"]
    said = str(report.get("said") or "").strip().splitlines()
    last = f" (their output ends: {said[-1][:200]})" if said else ""
    if ended < 0:
        raise RuntimeError(f"the task's tests were killed by signal {-ended}{last}")
    if found.get("reward.txt") is not None:
        text = found["reward.txt"].strip()
        try:
            rewards = {"reward": float(text)}
        except ValueError:
            raise RuntimeError(f"reward.txt holds {text[:80]!r}, not a number") from None
    elif found.get("reward.json") is not None:
        try:
            rewards = json.loads(found["reward.json"])
        except ValueError:
            raise RuntimeError("reward.json is not JSON") from None
        if (
            not isinstance(rewards, dict)
            or not rewards
            or not all(isinstance(value, int | float) and not isinstance(value, bool) for value in rewards.values())
        ):
            raise RuntimeError("reward.json must be an object of numbers")
    else:
        raise RuntimeError(
            f"the task's tests (exit {ended}) wrote no reward to /logs/verifier{last}; only test.sh's own shell "
            "writes it (a program's output counts through a redirection: prog > /logs/verifier/reward.json)"
        )
    reward = float(rewards.get("reward", next(iter(rewards.values()))))
    if not 0.0 <= reward <= 1.0:
        raise RuntimeError(f"the task's tests wrote a reward of {reward:g}, outside [0, 1]")
    detail = ", ".join(f"{key} {float(value):g}" for key, value in rewards.items())
    return CheckResult(reward, f"{detail} (tests exit {ended})")


def load_harbor(ref: str, **options: Any) -> Environment:
    """``verihub.load_env("harbor:PATH")``: ``max_turns`` and ``seed``; ``judge`` and ``on_missing_judge`` go
    to the environment."""
    from verihub.adapters.openenv import ref_options

    env_options = {key: options.pop(key) for key in ("judge", "on_missing_judge") if key in options}
    ref, given = ref_options(ref)
    merged = {**given, **{key: value for key, value in options.items() if value is not None}}
    if unknown := sorted(set(merged) - set(OPTIONS)):
        raise TypeError(f"harbor: environments take no {', '.join(unknown)} (options: {', '.join(OPTIONS)})")
    loaded, tasks, left_out = harbor_spec(ref, **merged)
    env = Environment(loaded, **env_options)
    env.load_report = LoadReport(f"{PREFIX}{loaded.root}", "harbor", len(tasks), tuple(left_out))
    return env
