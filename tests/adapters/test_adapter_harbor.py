"""Harbor tasks in verihub's jail (``harbor:PATH``). The task directories under harbor_tasks/ and harbor_hostile/
were made by harbor 0.25's own ``harbor init --task`` (then filled in); needs-pytest/ is its default
template untouched, whose tests image RUNs an install: the jail cannot stand in for it."""

from __future__ import annotations

import asyncio
import json
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

import verihub
from conftest import REPO, results_table, run_eval, validate_report
from verihub.errors import SpecError
from verihub.testing import ScriptedChatServer

TASKS = REPO / "tests" / "adapters" / "harbor_tasks"
HOSTILE = REPO / "tests" / "adapters" / "harbor_hostile"


def bash(commands: str) -> str:
    return f"```bash\n{commands}\n```"


@pytest.fixture(scope="module")
def suite() -> verihub.Environment:
    return verihub.load_env(f"harbor:{TASKS}")


def by_name(env: verihub.Environment) -> dict[str, dict[str, Any]]:
    return {task["id"].split("/")[-1]: task for task in env.tasks("train")}


def test_a_suite_loads_what_the_jail_can_run_and_names_the_line_of_what_it_cannot(
    suite: verihub.Environment, caplog: pytest.LogCaptureFixture
) -> None:
    assert sorted(by_name(suite)) == ["hello-file", "word-count"]
    assert suite.spec.interaction.tools == ["bash"] and dict(suite.spec.sandbox.aliases)["/app"] == "/work"
    with pytest.raises(SpecError, match=r"tests/Dockerfile line 3 \(COPY --from=ghcr.io/astral-sh/uv"):
        verihub.load_env(f"harbor:{TASKS / 'needs-pytest'}")
    word_count = by_name(suite)["word-count"]
    assert json.loads(word_count["files"]) == {
        "data/story.txt": (TASKS / "word-count/environment/data/story.txt").read_text()
    }


def task_with(tmp_path: Path, dockerfile: str, toml: str = "") -> Path:
    task = tmp_path / "task"
    shutil.copytree(TASKS / "hello-file", task)
    (task / "environment" / "Dockerfile").write_text(dockerfile)
    (task / "task.toml").write_text((task / "task.toml").read_text() + toml)
    return task


@pytest.mark.parametrize(
    ("dockerfile", "toml", "named"),
    [
        ("FROM ubuntu:24.04\nRUN apt-get update && apt-get install -y jq\nWORKDIR /app\n", "", "line 2 (RUN apt-get"),
        ("FROM node:20\nWORKDIR /app\n", "", "line 1 (FROM node:20)"),
        ("FROM python:3.12\nENV MODE=fast\nWORKDIR /app\n", "", "line 2 (ENV MODE=fast): the jail cannot do ENV"),
        ("FROM ubuntu:24.04\nWORKDIR /app\nCOPY secret.txt /etc/secret.txt\n", "", "seeds only the WORKDIR"),
        ("FROM ubuntu:24.04\nWORKDIR /app\nCOPY ../../x /app/x\n", "", "COPY ../../x"),
        ("FROM ubuntu:24.04\n", "", "sets no WORKDIR"),
        ("FROM ubuntu:24.04\nWORKDIR /usr/app\n", "", "the jail's own"),
        ("FROM ubuntu:24.04\nWORKDIR /tests\n", "", "WORKDIR /tests: the tests' own"),
        ("FROM ubuntu:24.04\nWORKDIR /verihub/python\n", "", "the tests' own"),
    ],
)
def test_a_task_the_jail_cannot_stand_in_for_is_refused_with_the_line(
    tmp_path: Path, dockerfile: str, toml: str, named: str
) -> None:
    task = task_with(tmp_path, dockerfile, toml)
    (task / "environment" / "secret.txt").write_text("x")
    with pytest.raises(SpecError) as raised:
        verihub.load_env(f"harbor:{task}")
    assert named in str(raised.value), str(raised.value)


@pytest.mark.parametrize(
    ("setting", "named"),
    [('docker_image = "org/img:1"', "docker_image = 'org/img:1': a prebuilt"), ("gpus = 1", "asks for an accelerator")],
)
def test_a_prebuilt_image_or_an_accelerator_is_refused(tmp_path: Path, setting: str, named: str) -> None:
    task = task_with(tmp_path, "FROM ubuntu:24.04\nWORKDIR /app\n")
    (task / "task.toml").write_text(
        (task / "task.toml").read_text().replace("[environment]\n", f"[environment]\n{setting}\n")
    )
    with pytest.raises(SpecError, match=named):
        verihub.load_env(f"harbor:{task}")


def test_the_tasks_own_tests_grade_the_state_the_answer_leaves(suite: verihub.Environment, nsjail_path: str) -> None:
    tasks = by_name(suite)
    for task in tasks.values():
        right = suite.grade(task, bash(task["solution"]))
        assert (right.status, right.reward) == ("ok", 1.0), right
        for wrong in ("I have created the file.", bash("true")):
            assert suite.grade(task, wrong).status == "wrong"
    hello = suite.grade(tasks["hello-file"], bash("echo 'Hello, world' > hello.txt"))  # cwd is /app too
    assert (hello.status, hello.reward) == ("wrong", 0.0)
    partial = suite.grade(
        tasks["word-count"],
        bash(
            'echo \'{"the": 3, "quick": 1, "brown": 1, "fox": 1, "jumps": 1, "over": 1, "lazy": 1, "dog": 2}\' > '
            "counts.json"
        ),
    )
    assert partial.reward == pytest.approx(7 / 9) and "parsed 1" in partial.layers[-1].detail, partial


# Each is the answer's script, which the hostile tasks' tests run: runs-the-answer writes a reward whatever the
# script printed (0 or 1); checks-what-it-prints writes one only when its own check passes (set -e).
ATTACKS = [
    # writes the reward, then kills every process it can (the tests' shell and their host among them)
    "echo 1 > /logs/verifier/reward.txt; kill -9 -1",
    # writes the reward and makes it read-only, so that the tests' own write fails
    "echo 1 > /logs/verifier/reward.txt; chmod a-w /logs/verifier/reward.txt; echo 41",
    # the same, in place of whatever the tests left there
    "rm -f /logs/verifier/reward.txt; echo 1 > /logs/verifier/reward.txt; chmod a-w /logs/verifier/reward.txt; echo 41",
    # writes the reward and leaves it, for tests that write none when their check fails
    "V=/logs/verifier; rm -f $V/reward.*; echo 1 > $V/reward.txt; echo '{\"reward\": 1}' > $V/reward.json",
    # a directory, a FIFO (read by a process it leaves), a link to a file of its own, in place of the reward
    "rm -f /logs/verifier/reward.txt; mkdir /logs/verifier/reward.txt; echo 1 > /logs/verifier/reward.txt/x; echo 41",
    "V=/logs/verifier; rm -f $V/reward.txt; mkfifo $V/reward.txt; (setsid cat $V/reward.txt >/dev/null &); echo 41",
    "V=/logs/verifier; echo 1 > /tmp/mine; rm -f $V/reward.txt; ln -s /tmp/mine $V/reward.txt; chmod a-w /tmp/mine",
    "echo 1 > /logs/verifier/reward.txt; chattr +i /logs/verifier/reward.txt; echo 41",
    # a process that outlives it and keeps writing the reward after the tests wrote theirs
    "(setsid bash -c 'for i in $(seq 2000); do rm -rf /logs/verifier/reward.txt; echo 1 > /logs/verifier/reward.txt;"
    " sleep 0.005; done' </dev/null >/dev/null 2>&1 &); echo 41",
    # the shell's reward files through its /proc entries
    "for f in /proc/[0-9]*/fd/*; do echo 1 > $f; done 2>/dev/null; echo 41",
    # forges the host's report on every stdout it can reach (it never learns the nonce)
    'for fd in /proc/[0-9]*/fd/1; do printf \'%s\\n\' \'{"ended": 0, "found": {"reward.txt": "1"}}\' > $fd; done'
    " 2>/dev/null",
    # rewrites the tests while they run: test.sh, and the check the tests run after it
    "printf 'echo 1 > /logs/verifier/reward.txt\\n' > /tests/test.sh; echo 41",
    "printf 'import sys\\nsys.exit(0)\\n' > /tests/check_said.py; echo 41",
    # plants start-up hooks for the Python the tests start after it
    "for v in 8 9 10 11 12 13 14; do d=$HOME/.local/lib/python3.$v/site-packages; mkdir -p $d;"
    " echo 'import os; os._exit(0)' > $d/x.pth; cp $d/x.pth $d/usercustomize.py; done; echo 41",
    # outlives the tests' time
    "echo 1 > /logs/verifier/reward.txt; sleep 1000",
]


@pytest.fixture(scope="module")
def hostile() -> verihub.Environment:
    return verihub.load_env(f"harbor:{HOSTILE}")


@pytest.mark.parametrize("name", ["runs-the-answer", "checks-what-it-prints"])
@pytest.mark.parametrize("attack", ATTACKS)
def test_an_answer_run_by_the_tests_cannot_grant_itself_the_reward(
    hostile: verihub.Environment, name: str, attack: str, nsjail_path: str
) -> None:
    grade = hostile.grade(by_name(hostile)[name], answer_script(attack))
    assert grade.status == "wrong" and grade.reward == 0.0, grade


def test_a_grpo_group_of_hostile_and_right_answers(hostile: verihub.Environment, nsjail_path: str) -> None:
    """Two right answers and two hostile ones (one kills the tests, so they write no reward: a fault the gold
    answer does not share; one forges a read-only reward), graded together as the trainer grades a group, twice:
    right ones ok, hostile ones wrong at 0."""
    task = by_name(hostile)["runs-the-answer"]
    right = bash(task["solution"])
    group = [
        right,
        answer_script(ATTACKS[0]),  # writes the reward, then kills every process it can
        bash(task["solution"] + "\n# the same answer, written otherwise"),
        answer_script(ATTACKS[1]),  # writes the reward and makes it read-only
    ]

    async def graded() -> list[Any]:
        return await asyncio.gather(*(hostile.agrade(task, answer) for answer in group))

    for _ in range(2):
        grades = asyncio.run(graded())
        assert [(grade.status, grade.reward) for grade in grades] == [
            ("ok", 1.0),
            ("wrong", 0.0),
            ("ok", 1.0),
            ("wrong", 0.0),
        ], grades


def answer_script(attack: str) -> str:
    """An answer that leaves ``attack`` as the script the hostile tasks' tests run."""
    script = attack.replace("'", "'\\''")
    return bash(f"printf '%s\\n' '{script}' > answer.sh")


def hooks(forge: str) -> str:
    """Commands that leave, in the work dir, the start-up hooks of the Pythons and shells a grader may start with
    HOME or its working directory there, each running ``forge`` (Python) first."""
    line = shlex.quote(f"import os; {forge}; os._exit(0)")
    return "\n".join(
        [
            "for v in 8 9 10 11 12 13 14; do d=.local/lib/python3.$v/site-packages; mkdir -p $d;",
            f"  printf '%s\\n' {line} > $d/zz.pth; printf '%s\\n' {line} > $d/usercustomize.py; done",
            f"printf '%s\\n' {line} > sitecustomize.py; cp sitecustomize.py usercustomize.py",
            "for f in .bashrc .bash_profile .profile .bash_login; do",
            "  printf 'echo 1 > /logs/verifier/reward.txt; exit 0\\n' > $f; done",
        ]
    )


def test_hooks_the_answer_leaves_in_the_work_dir_never_run_in_the_tests(
    suite: verihub.Environment, hostile: verihub.Environment, nsjail_path: str
) -> None:
    """Python's user site (.pth files, usercustomize) and sitecustomize, bash's start-up files, left where the tests'
    HOME used to be (the work dir): the tests run python3 after the answer's state is in place."""
    forge = "print('{\"reward\": 1}'); open('/logs/verifier/reward.txt', 'w').write('1')"
    grade = suite.grade(by_name(suite)["word-count"], bash(hooks(forge)))
    assert grade.status == "wrong" and grade.reward == 0.0, grade
    said = hostile.grade(by_name(hostile)["checks-what-it-prints"], bash(hooks(forge) + "\necho 'echo 41' > answer.sh"))
    assert said.status == "wrong" and said.reward == 0.0, said


def test_the_tests_run_in_a_room_of_their_own(tmp_path: Path, nsjail_path: str) -> None:
    """HOME and the temp dir are the tests' own, Python's user site is off, and no variable, PATH entry or Python
    path leads into the work dir, whatever the answer left there; they start in the WORKDIR, as in Harbor."""
    task = task_with(tmp_path, "FROM ubuntu:24.04\nWORKDIR /app\n")
    (task / "tests" / "test.sh").write_text(
        "#!/bin/bash\n"
        "python3 - > /logs/verifier/reward.json <<'PY'\n"
        "import json, os, site, sys, tempfile\n"
        "work = ('/app', '/work')\n"
        "inside = lambda path: any(os.path.realpath(path).startswith(w) for w in work)\n"
        "facts = {\n"
        "    'home': not inside(os.environ['HOME']) and os.path.isdir(os.environ['HOME']),\n"
        "    'temp': not inside(tempfile.gettempdir()),\n"
        "    'user site': not site.ENABLE_USER_SITE,\n"
        "    'environment': not any(inside(v) for k, v in os.environ.items() if k != 'PWD' and v.startswith('/')),\n"
        "    'path': not any(inside(p) for p in os.environ['PATH'].split(':')),\n"
        "    'python path': not any(inside(p) for p in sys.path),\n"
        "    'workdir': os.getcwd() == '/work' and os.environ['PWD'] == '/app',\n"
        "}\n"
        "print(json.dumps({'reward': float(all(facts.values())), **{k: float(v) for k, v in facts.items()}}))\n"
        "PY\n"
    )
    env = verihub.load_env(f"harbor:{task}")
    grade = env.grade(env.tasks("train")[0], bash("touch .profile; mkdir -p .local/bin"))
    assert (grade.status, grade.reward) == ("ok", 1.0), grade.layers[-1].detail


def test_python_in_the_tests_finds_a_programs_neighbours_and_what_the_task_puts_on_its_path(
    tmp_path: Path, nsjail_path: str
) -> None:
    """What Python puts first for a program file stays: /tests/check.py imports its neighbour in /tests, the answer's
    program that the tests run imports its own; and a task that puts the work dir on Python's path itself
    ([verifier.env] PYTHONPATH) imports the answer's module by name, its choice."""
    from verihub.sandbox.tools import with_workdir
    from verihub.sandbox.types import Snapshot

    task = task_with(tmp_path, "FROM ubuntu:24.04\nWORKDIR /app\n")
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("[verifier.env]\n", '[verifier.env]\nPYTHONPATH = "/app"\n'))
    (task / "tests" / "test.sh").write_text("#!/bin/bash\npython3 /tests/check.py > /logs/verifier/reward.json\n")
    (task / "tests" / "expected.py").write_text("ANSWER = '42'\n")
    (task / "tests" / "check.py").write_text(
        "import json, subprocess\n"
        "from expected import ANSWER\n"
        "def said(*command):\n"
        "    return subprocess.run(command, capture_output=True, text=True).stdout.strip()\n"
        "right = said('python3', '/app/main.py') == ANSWER and said('python3', '-m', 'solution') == ANSWER\n"
        "print(json.dumps({'reward': float(right)}))\n"
    )
    env = verihub.load_env(f"harbor:{task}")
    answer = {
        "main.py": "from util import ANSWER\nprint(ANSWER)\n",
        "util.py": "ANSWER = 42\n",
        "solution.py": "print(42)\n",
    }
    grade = env.grade(with_workdir(env.tasks("train")[0], Snapshot.of(answer)), "Done.")
    assert (grade.status, grade.reward) == ("ok", 1.0), grade


# A stand-in the answer leaves for a module the tests import: says a reward of 1 and exits 0 when imported.
STAND_IN = "import os\nos.write(1, b'{\"reward\": 1}\\n')\nos._exit(0)\n"
ALWAYS_FAILS = (
    "import unittest\n\n\nclass TestOutputs(unittest.TestCase):\n    def test_outputs(self):\n        self.fail()\n"
)


@pytest.mark.parametrize(
    ("test_sh", "stand_ins"),
    [
        # Harbor's most common test.sh: a pass is pytest's exit 0 (no pytest in this jail: only the stand-in's)
        (
            "if python3 -m pytest /tests/test_outputs.py; then echo 1 > /logs/verifier/reward.txt;"
            " else echo 0 > /logs/verifier/reward.txt; fi",
            ["pytest.py"],
        ),
        (
            "if python3 -m unittest discover -s /tests; then echo 1 > /logs/verifier/reward.txt;"
            " else echo 0 > /logs/verifier/reward.txt; fi",
            ["unittest.py"],
        ),
        # the reward is what a Python run from the working directory prints
        ("python3 -c 'import json; print(json.dumps({\"reward\": 0}))' > /logs/verifier/reward.json", ["json.py"]),
        (
            "python3 - > /logs/verifier/reward.json <<'PY'\nimport json\nprint(json.dumps({'reward': 0}))\nPY",
            ["json.py"],
        ),
        # a package rather than a module
        (
            "python3 -c 'import json; print(json.dumps({\"reward\": 0}))' > /logs/verifier/reward.json",
            ["json/__init__.py"],
        ),
    ],
)
def test_python_the_tests_start_in_the_work_dir_imports_nothing_from_it(
    tmp_path: Path, test_sh: str, stand_ins: list[str], nsjail_path: str
) -> None:
    """Harbor's tests run from the working directory, the answer's: a Python they start there (-m, -c, a program on
    stdin) must not put it first on its path, where a module the answer left replaces the real one."""
    from verihub.sandbox.tools import with_workdir
    from verihub.sandbox.types import Snapshot

    task = task_with(tmp_path, "FROM ubuntu:24.04\nWORKDIR /app\n")
    (task / "tests" / "test.sh").write_text(f"#!/bin/bash\n{test_sh}\n")
    (task / "tests" / "test_outputs.py").write_text(ALWAYS_FAILS)
    env = verihub.load_env(f"harbor:{task}")
    row = env.tasks("train")[0]
    grade = env.grade(with_workdir(row, Snapshot.of(dict.fromkeys(stand_ins, STAND_IN))), "Done.")
    assert (grade.status, grade.reward) == ("wrong", 0.0), grade


def test_a_task_whose_program_writes_the_reward_itself_is_refused_with_the_line(tmp_path: Path) -> None:
    task = task_with(tmp_path, "FROM ubuntu:24.04\nWORKDIR /app\n")
    (task / "tests" / "check.py").write_text(
        "import json\n\njson.dump({'reward': 1}, open('/logs/verifier/reward.json', 'w'))\n"
    )
    with pytest.raises(SpecError, match=r"tests/check.py line 3 .*only test.sh's own shell"):
        verihub.load_env(f"harbor:{task}")


@pytest.mark.parametrize("name", ["runs-the-answer", "checks-what-it-prints", "word-count"])
def test_the_room_exploits_validate_runs_are_graded_wrong(
    suite: verihub.Environment, hostile: verihub.Environment, name: str, nsjail_path: str
) -> None:
    """verihub.checks.attacks.rooms, as `verihub validate` runs them on the tests layer: start-up hooks in the work
    dir, the answer's script forging every channel when the tests run it, stand-ins for the modules a Python the
    tests start from the work dir imports (word-count's check runs by name from there)."""
    from verihub.checks.attacks import rooms
    from verihub.checks.registry import resolve_check
    from verihub.sandbox.tools import with_workdir
    from verihub.sandbox.types import Snapshot

    env = suite if name == "word-count" else hostile
    layer = env.verifier.layers[0].spec
    check = resolve_check(str(layer.use))
    assert set(rooms.TERMINAL_STATE) <= set(check.exploits)
    _, params = check.bind(layer.args, env.root, env.spec.sandbox)
    task = by_name(env)[name]
    applies = {
        "startup-hooks": True,
        "forging-program": None if name == "word-count" else True,  # answer.sh, the script the tests run
        "stand-in-modules": name != "runs-the-answer",  # the tests start Python
    }
    for exploit in rooms.TERMINAL_STATE:
        attempt = exploit.attempt(task, params)
        assert applies[exploit.name] in (None, attempt is not None), exploit.name
        if attempt is None:
            continue
        assert attempt.workdir is not None
        grade = env.grade(with_workdir(task, Snapshot.of(dict(attempt.workdir))), attempt.completion)
        assert (grade.status, grade.reward) == ("wrong", 0.0), (exploit.name, grade)


def test_a_rollouts_wrong_state_is_wrong_when_the_tests_write_no_reward_for_it(
    hostile: verihub.Environment, nsjail_path: str
) -> None:
    """checks-what-it-prints writes no reward when its check fails: a fault, which the reference decides. The
    reference's evidence is the state its own commands leave, not the task's initial files (no right answer)."""
    from verihub.sandbox.tools import with_workdir
    from verihub.sandbox.types import Snapshot

    task = by_name(hostile)["checks-what-it-prints"]
    grade = hostile.grade(with_workdir(task, Snapshot.of({"answer.sh": "echo 41\n"})), "Done.")
    assert (grade.status, grade.reward) == ("wrong", 0.0) and grade.answer_fault is not None, grade
    right = hostile.grade(with_workdir(task, Snapshot.of({"answer.sh": "echo 42\n"})), "Done.")
    assert (right.status, right.reward) == ("ok", 1.0), right


def test_verihub_eval_plays_harbor_tasks_with_the_bash_tool(tmp_path: Path, nsjail_path: str) -> None:
    prompts = {task["instruction"]: task for task in by_name(verihub.load_env(f"harbor:{TASKS}")).values()}

    def agent(request: dict[str, Any]) -> list[dict[str, Any]]:
        """Runs the task's solution with the bash tool, checks with ls, then says it is done."""
        task = prompts[next(m["content"] for m in request["messages"] if m["role"] == "user")]
        done = sum(1 for m in request["messages"] if m["role"] == "tool")
        if done == 0:
            return [{"content": "", "tool_calls": [{"name": "bash", "arguments": {"command": task["solution"]}}]}]
        if done == 1:
            return [{"content": "", "tool_calls": [{"name": "bash", "arguments": {"command": "pwd; ls /app"}}]}]
        return [{"content": "done"}]

    with ScriptedChatServer(agent) as model:
        result = run_eval(f"harbor:{TASKS}", f"openai:agent@{model.url}", tmp_path)
    assert result.returncode == 0, result.stderr
    table = results_table(tmp_path)
    assert sorted(table["status"]) == ["ok", "ok"] and set(table["reward"]) == {1.0}, table["reason"]


def test_verihub_validate_runs_the_red_team_suite_on_harbor_tasks(nsjail_path: str) -> None:
    """Every exploit and probe. One turn (answers of at most 16,384 characters, not 80,000) keeps growth probing
    short: at 80,000 characters its many-lines shape is 40,000 lines of bash run in the jail, 40 s of gradings."""
    found, report = validate_report(f"harbor:{TASKS}?max_turns=1")
    assert found.returncode == 0 and report["ok"], report["failures"]
    assert report["exploits_ran"] >= 20 and report["faults_forced"] == 0 and report["max_exploit_reward"] == 0


def test_one_grpo_step_on_harbor_tasks(tiny_model: Path, tmp_path: Path, nsjail_path: str) -> None:
    from verihub.trainers import GRPOTrainer

    trainer = GRPOTrainer(
        str(tiny_model),
        {f"harbor:{TASKS}": 1},
        lora=True,
        max_steps=1,
        num_generations=4,
        per_device_train_batch_size=4,
        max_completion_length=12,
        output_dir=tmp_path / "run",
    )
    assert [tool.__name__ for tool in trainer.trl._env_tools["harbor-harbor_tasks"]] == ["bash"]
    trainer.train()
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert records[0]["step"] == 1 and records[0]["verihub/harbor-harbor_tasks/fault_rate"] == 0.0
