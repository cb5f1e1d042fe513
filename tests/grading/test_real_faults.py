"""No real fault is misattributed (issue 31, deliverable 4). Infrastructure faults caused for real, not
mocked: the jail killed mid-run, the host's temp disk full, the judge's server failing, a check that raises
on every answer, the only grader server killed mid-batch. Each grades a WRONG answer that is not the task's
reference (the case where fault attribution could turn a fault into ``wrong``) and a RIGHT answer that is
not the reference verbatim: each stays ``env_error``/``timeout`` (reward None, no answer fault), never
``wrong``, and the right answer is never graded ``wrong``."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import verihub
from conftest import REPO, MakeEnv, free_port, start_serve, stop_serve
from verihub.testing import ScriptedChatServer


def assert_fault_kept(grade: Any, why: str = "") -> None:
    """The grade is the environment's fault: never wrong, no reward, nothing blamed on the answer."""
    assert grade.status in ("env_error", "timeout"), grade
    assert grade.reward is None and grade.answer_fault is None, grade
    assert why in grade.reason, grade.reason


# -- the jail killed mid-run ---------------------------------------------------------------------------


def _process_tree() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    return children


def _below(tree: dict[int, list[int]], pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class JailKiller:
    """Kills (SIGKILL, from the host) every nsjail this test process started, directly or through a check
    worker, once its program runs (``busy`` processes inside: 2 = the test runner and the candidate it
    forked), or after 0.1 s in any case: an outage of the jail that lasts through every retry."""

    def __init__(self, nsjail_path: str, busy: int) -> None:
        self.binary, self.busy, self.kills = os.path.realpath(nsjail_path), busy, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        seen: dict[int, float] = {}
        while not self._stop.is_set():
            tree = _process_tree()
            for pid in _below(tree, os.getpid()):
                try:
                    if os.path.realpath(f"/proc/{pid}/exe") != self.binary:
                        continue
                except OSError:
                    continue
                first = seen.setdefault(pid, time.monotonic())
                if len(_below(tree, pid)) >= self.busy or time.monotonic() - first > 0.1:
                    try:
                        os.kill(pid, signal.SIGKILL)
                        self.kills += 1
                    except ProcessLookupError:
                        pass
            time.sleep(0.003)

    def __enter__(self) -> JailKiller:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def code_repair_answers(task: dict[str, Any]) -> dict[str, str]:
    return {
        "wrong": f"```python\n{task['wrong_fix']}```",
        "right": f"Here is the fix.\n\n```python\n# fixed\n{task['fix']}```",
    }


def shell_answers(task: dict[str, Any]) -> dict[str, str]:
    return {"wrong": f"```bash\n{task['partial']}\n```", "right": f"Done:\n```bash\n{task['solution']}\n```\nAll set."}


KILLED_NSJAIL = """\
#!/bin/sh
# The real nsjail, killed from outside 50 ms into its run; then this stand-in, the process verihub started,
# dies by SIGKILL too, so every run ends killed however fast the jailed program is.
echo run >> {runs}
{real} "$@" <&0 &
jail=$!
sleep 0.05
kill -9 $jail 2>/dev/null
kill -9 $$
"""


@pytest.fixture
def every_jail_killed(nsjail_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default sandbox, for this test, starts nsjail through :data:`KILLED_NSJAIL`: an outage of the
    jail that lasts through every retry (a timed killer thread missed fast runs on a busy machine)."""
    from verihub import sandbox, settings
    from verihub.sandbox.nsjail import NsjailSandbox

    stand_in = tmp_path / "nsjail"
    stand_in.write_text(
        KILLED_NSJAIL.format(real=shlex.quote(os.path.realpath(nsjail_path)), runs=shlex.quote(str(tmp_path / "runs")))
    )
    stand_in.chmod(0o755)
    monkeypatch.setitem(sandbox._defaults, settings.sandbox_backend(), NsjailSandbox(str(stand_in)))
    return stand_in


@pytest.mark.parametrize(("name", "answers"), [("code-repair", code_repair_answers), ("shell-task", shell_answers)])
def test_a_jail_killed_from_outside_mid_run_is_env_error_never_wrong(
    every_jail_killed: Path, name: str, answers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the fix nsjail's own SIGKILL read as the program's ("killed by SIGKILL"): python_tests then
    found no test results and graded both answers, the right one too, ``wrong``."""
    env = verihub.load_env(REPO / "envs" / name)
    task = env.tasks("eval")[0]
    runs = every_jail_killed.with_name("runs")
    for text in answers(task).values():
        before = len(runs.read_text().splitlines()) if runs.exists() else 0
        assert_fault_kept(env.grade(task, text), "killed from outside")
        assert len(runs.read_text().splitlines()) - before >= 3  # the answer, its retry and the reference
    monkeypatch.undo()  # the jail back; nothing remembered from the outage
    env = verihub.load_env(REPO / "envs" / name)
    assert {kind: env.grade(task, text).status for kind, text in answers(task).items()} == {
        "wrong": "wrong",
        "right": "ok",
    }


def test_nsjail_killed_from_outside_is_an_infra_error_and_the_programs_own_sigkill_is_not(nsjail_path: str) -> None:
    from verihub import sandbox
    from verihub.sandbox.nsjail import NsjailSandbox

    jail, limits = NsjailSandbox(nsjail_path), sandbox.Limits(wall_s=10)
    with JailKiller(nsjail_path, 2):
        killed = sandbox.run("sleep 5", limits=limits, sandbox=jail)
    assert killed.status is sandbox.RunStatus.INFRA_ERROR and killed.attempts == 3
    assert "nsjail itself ended by SIGKILL" in killed.reason
    own = sandbox.run("kill -9 $$", limits=limits, sandbox=jail)  # the program's doing: still its own
    assert (own.status, own.reason) == (sandbox.RunStatus.KILLED, "killed by SIGKILL")


def test_a_warm_pool_worker_killed_mid_run_is_an_infra_error(nsjail_path: str) -> None:
    from verihub import sandbox
    from verihub.sandbox.pool import WarmPool

    with WarmPool(1, nsjail_path=nsjail_path) as pool:
        assert sandbox.run_python("print(1)", sandbox=pool).ok
        with JailKiller(nsjail_path, 3):  # the worker, the run it forked, and that run's child
            result = sandbox.run_python(
                "import subprocess; subprocess.run(['sleep', '5'])", sandbox=pool, limits=sandbox.Limits(wall_s=10)
            )
    assert result.status is sandbox.RunStatus.INFRA_ERROR and "worker exited (code -9)" in result.reason


# -- the host's disk full ------------------------------------------------------------------------------

# Grading writes to the host's disk in one place: the jail's /etc (a few files, once per process, in the
# temp dir). The jail's /work and /tmp are tmpfs, snapshots and verdicts stay in memory.
_DISK_GRADE = """\
import json, os, sys
import verihub
from verihub import sandbox

def fill(directory):
    try:
        with open(os.path.join(directory, "fill"), "wb", buffering=0) as handle:
            while True:
                handle.write(b"x" * 4096)
    except OSError:
        pass
    count = 0
    while True:
        try:
            open(os.path.join(directory, f"f{count}"), "w").close()
            count += 1
        except OSError:
            return

env = verihub.load_env(sys.argv[1])
task = env.tasks("eval")[0]
if sys.argv[2] == "later":
    assert sandbox.run_python("print(1)").ok  # a grading process already running when the disk fills
for directory in ("/tmp", "/var/tmp"):
    fill(directory)
grades = {}
for kind, text in json.loads(sys.argv[3]).items():
    grade = env.grade(task, text)
    grades[kind] = [grade.status, grade.reward, grade.answer_fault is not None, grade.reason]
print(json.dumps(grades))
"""


@pytest.mark.parametrize("when", ["from_the_start", "later"])
def test_a_full_temp_disk_is_env_error_or_no_fault_at_all(nsjail_path: str, tmp_path: Path, when: str) -> None:
    """In a mount namespace of its own (the host's /tmp untouched), /tmp and /var/tmp are a full 64 KiB
    tmpfs, inodes and bytes. Full from the start, the jail's /etc cannot be written: every run is an
    infra_error and both answers env_error. Full once grading runs, nothing is written: verdicts as usual."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare to mount a full tmpfs in a private mount namespace")
    hidden = [
        path
        for path in (Path(sys.executable), REPO)
        for temp in ("/tmp", "/var/tmp")
        if path.resolve().is_relative_to(temp)
    ]
    if hidden:
        pytest.skip(f"{hidden[0]} lies under the temp dirs the test replaces with a full tmpfs")
    env = verihub.load_env(REPO / "envs" / "code-repair")
    answers = code_repair_answers(env.tasks("eval")[0])
    script = tmp_path / "grade.py"
    script.write_text(_DISK_GRADE)
    mount = (
        "mount -t tmpfs -o size=64k,nr_inodes=64 tmpfs /tmp && mount -t tmpfs -o size=64k,nr_inodes=64 "
        'tmpfs /var/tmp && cd /tmp && exec "$@"'
    )
    # the script is read before /tmp is replaced: python gets it on its stdin
    argv = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        mount,
        "sh",
        sys.executable,
        "-",
        str(REPO / "envs" / "code-repair"),
        when,
        json.dumps(answers),
    ]
    done = subprocess.run(
        argv, stdin=script.open(), capture_output=True, text=True, timeout=300, env={**os.environ, "TMPDIR": "/tmp"}
    )
    if done.returncode and "mount" in done.stderr and "permission" in done.stderr.lower():
        pytest.skip(f"cannot mount here: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    grades = json.loads(done.stdout.strip().splitlines()[-1])
    if when == "later":
        assert {kind: grade[:3] for kind, grade in grades.items()} == {
            "wrong": ["wrong", 0.0, False],
            "right": ["ok", 1.0, False],
        }
        return
    for status, reward, blamed, reason in grades.values():
        assert (status, reward, blamed) == ("env_error", None, False), reason
        assert "the host cannot set up the jail" in reason and "No usable temporary directory" in reason


# -- the judge's server failing ------------------------------------------------------------------------


@pytest.fixture
def judge_env(tmp_path: Path) -> Path:
    from verihub.spec.scaffold import init_env

    return init_env("explainer", "judge", tmp_path)


def judge_answers(env: verihub.Environment, task: Any) -> dict[str, str]:
    # wrong, yet past the rule gates (15 to 120 words, no lists): only the judge can say it is wrong
    return {
        "wrong": "It just happens that way, as far as anyone can tell; nobody has ever found out why, and "
        "nobody ever will, because it is simply how things are.",
        "right": "In short: " + env.reference(task),
    }


@pytest.mark.parametrize("outage", ["503 on every request", "nothing listening"])
def test_a_judge_failing_on_every_request_is_env_error_for_wrong_and_right_answers(
    judge_env: Path, outage: str
) -> None:
    def judge(request: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"content": '{"score": 1, "reason": "fine"}'}]

    with ScriptedChatServer(judge, fail_first=10**9) as server:
        url = server.url if outage.startswith("503") else f"http://127.0.0.1:{free_port()}/v1"
        env = verihub.load_env(judge_env, judge_model=f"openai:judge@{url}")
        task = env.dataset("train")[0]
        grades = {kind: env.grade(task, text) for kind, text in judge_answers(env, task).items()}
    for grade in grades.values():
        assert_fault_kept(grade, "judge unreachable")
        assert grade.layer("quality").score is None


# -- a check that raises on every answer ---------------------------------------------------------------

RAISING_SPEC = """\
id: raising
version: 0.1.0
domain: test
description: Sums graded by a check that raises on every answer, the reference's too.
dataset: {{source: data/tasks.jsonl, split: {{eval: 1.0}}}}
prompt: {{user: "What is {{question}}?"}}
verifier:
  - {{name: format, layer: rule, use: boxed, gate: true, weight: 0.2}}
  - {{name: correct, layer: check, use: "raising_checks:{check}", weight: 0.8, timeout_s: 5}}
gold:
  reference: '\\\\boxed{{{{{{answer}}}}}}'
"""

RAISING_CHECKS = '''\
import os

from verihub.checks.base import check


def raises(completion, task):
    raise RuntimeError("the check's own bug")


@check(mode="process")
def kills_its_process(completion, task):
    """A check run in a worker process that takes the worker down on every answer."""
    os._exit(3)
'''

ROWS = [{"id": f"t{i}", "question": f"{i} + {i}", "answer": str(2 * i)} for i in range(1, 3)]


@pytest.mark.parametrize("check", ["raises", "kills_its_process"])
def test_a_check_that_faults_on_every_answer_is_env_error_for_wrong_and_right_answers(
    make_env: MakeEnv, check: str
) -> None:
    root = make_env(
        RAISING_SPEC.format(check=check),
        rows=ROWS,
        files={"raising_checks.py": RAISING_CHECKS},
        name=f"raising-{check}",
    )
    env = verihub.load_env(root)
    task = env.tasks("eval")[0]
    for text in (f"\\boxed{{{int(task['answer']) + 1}}}", f"So it is \\boxed{{{task['answer']}}}."):
        assert_fault_kept(env.grade(task, text), "the task's reference faults there too")
        assert_fault_kept(asyncio.run(env.agrade(task, text + " ")), "the task's reference faults there too")


# -- the only grader server killed mid-batch -----------------------------------------------------------


@pytest.fixture
def arithmetic_server() -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A real ``verihub serve`` of envs/arithmetic on loopback (tests/serve/test_serve.py starts it)."""
    process, url = start_serve("envs/arithmetic")
    yield process, url
    stop_serve(process)


def test_the_only_grader_server_killed_mid_batch_leaves_env_error_never_wrong(
    arithmetic_server: tuple[subprocess.Popen[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from verihub.serve.graders import GraderPool

    server, url = arithmetic_server
    env = verihub.load_env(REPO / "envs" / "arithmetic")
    tasks = list(env.dataset("eval"))[:40]
    pairs = [
        (task, kind, text)
        for task in tasks
        for kind, text in (("wrong", f"\\boxed{{{task['wrong']}}}"), ("right", f"So it is \\boxed{{{task['answer']}}}"))
    ]
    with GraderPool([url], timeout_s=20) as pool:
        # The kill lands between batches, deterministically: the first POST /grade is answered, the
        # server is killed, and only then do the other batches go out (a timed killer raced a fast server).
        send, first_answered = pool.request, None

        async def first_batch_then_kill(server_of_pool: Any, method: str, path: str, **options: Any) -> Any:
            nonlocal first_answered
            if path != "/grade":
                return await send(server_of_pool, method, path, **options)
            if first_answered is None:
                first_answered = asyncio.get_running_loop().create_future()
                try:
                    return await send(server_of_pool, method, path, **options)
                finally:
                    server.kill()
                    server.wait(timeout=10)
                    first_answered.set_result(None)
            await first_answered
            return await send(server_of_pool, method, path, **options)

        monkeypatch.setattr(pool, "request", first_batch_then_kill)
        grades = asyncio.run(pool.grader(env).agrade_many([task for task, _, _ in pairs], [text for *_, text in pairs]))
    assert server.wait(timeout=10) is not None
    outcomes = [(kind, grade.status) for (_, kind, _), grade in zip(pairs, grades, strict=True)]
    assert set(outcomes) <= {("wrong", "wrong"), ("right", "ok"), ("wrong", "env_error"), ("right", "env_error")}
    assert ("right", "ok") in outcomes and ("wrong", "env_error") in outcomes and ("right", "env_error") in outcomes
    for grade in grades:
        assert grade.answer_fault is None
        if grade.status == "env_error":
            assert grade.reward is None and "no grader could grade it" in grade.reason, grade.reason
