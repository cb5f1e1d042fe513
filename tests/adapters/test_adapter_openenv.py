"""`load_env("openenv:URL")` against real OpenEnv servers built with the openenv package, on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
import httpx
import pytest

import verihub
from conftest import REPO, first_step, free_port, one_step_trainer, wait_until_serving
from verihub.adapters.openenv import RemoteEnvError, base_url
from verihub.errors import SpecError
from verihub.grading.faults import lacks_evidence
from verihub.testing import ScriptedChatServer

pytest.importorskip("openenv.core.env_server.http_server")

VERIHUB = str(Path(sys.executable).with_name("verihub"))

# Two environments written the way OpenEnv's own are (Environment, Action, Observation, create_app), and
# a hostile server that speaks the protocol's shape but sends whatever a broken or malicious remote would.
SERVER = r'''
import json, random, sys, time
import uvicorn
from fastapi import FastAPI, WebSocket
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

WORDS = ["apple", "river", "stone", "cloud", "tiger", "lemon", "piano", "grape", "mango", "orbit"]


class Say(Action):
    message: str


class Text(Observation):
    text: str = ""


class Reverse(Environment):
    """Single turn: reverse the word. A few answers make the remote misbehave, as a broken one would."""
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state, self.word = State(), ""

    def reset(self, seed=None, episode_id=None, **kwargs):
        rng = random.Random(seed)
        self.word = rng.choice(WORDS) + str(rng.randint(10, 99))
        self._state = State(step_count=0)
        return Text(text=f"Reverse the word: {self.word}")

    def step(self, action, timeout_s=None, **kwargs):
        self._state.step_count += 1
        answer = action.message.strip()
        if answer == "HUGE":
            return Text(text="x" * (2 << 20), reward=1.0, done=True)
        if answer == "FIVE":
            return Text(reward=5.0, done=True)
        if answer == "NONE":
            return Text(reward=None, done=True)
        if answer == "CRASH":
            raise RuntimeError("the remote environment crashed")
        if answer == "SLOW":
            time.sleep(20)
        if answer == "HALF":
            return Text(reward=0.5, done=True)
        return Text(reward=1.0 if answer == self.word[::-1] else 0.0, done=True)

    @property
    def state(self):
        return self._state


class Guess(Action):
    guess: int


class Guessing(Environment):
    """Multi-turn: find a number in 1..100 in 8 guesses; the feedback says higher or lower."""
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state, self.target = State(), 0

    def reset(self, seed=None, episode_id=None, **kwargs):
        self.target = random.Random(seed).randint(1, 100)
        self._state = State(step_count=0)
        return Text(text="Guess my number between 1 and 100.")

    def step(self, action, timeout_s=None, **kwargs):
        self._state.step_count += 1
        if action.guess == self.target:
            return Text(text="correct", reward=1.0, done=True)
        if self._state.step_count >= 8:
            return Text(text="out of turns", reward=0.0, done=True)
        return Text(text="higher" if action.guess < self.target else "lower", done=False)

    @property
    def state(self):
        return self._state


class Quiz(Environment):
    """Single turn, with OpenEnv's task API: named splits of fixed questions, posed by reset(split, index)."""
    SUPPORTS_CONCURRENT_SESSIONS = True
    SPLITS = {"train": [(f"What is {a} + {a}?", str(2 * a)) for a in range(7)],
              "test": [(f"What is {a} * {a}?", str(a * a)) for a in range(3)]}

    def __init__(self):
        super().__init__()
        self._state, self.answer = State(), ""

    def list_splits(self):
        return [{"name": "train", "type": "train"}, {"name": "test", "type": "test"}]

    def num_tasks(self, split):
        return len(self.SPLITS[split])

    def reset(self, seed=None, episode_id=None, split="train", index=0, **kwargs):
        question, self.answer = self.SPLITS[split][index]
        return Text(text=question)

    def step(self, action, timeout_s=None, **kwargs):
        return Text(reward=float(action.message.strip() == self.answer), done=True)

    @property
    def state(self):
        return self._state


def hostile(drifting):
    app = FastAPI()
    schema = {"action": {"properties": {"message": {"type": "string"}}, "required": ["message"]}}
    app.get("/schema")(lambda: schema)
    app.get("/metadata")(lambda: {"name": "Hostile"})
    replies = {
        "garbage": "}{", "list": "[1, 2]", "deep": "[" * 100000 + "]" * 100000,
        "nan": '{"type": "observation", "data": {"observation": {}, "reward": NaN, "done": true}}',
        "inf": '{"type": "observation", "data": {"observation": {}, "reward": 1e999, "done": true}}',
        "string": '{"type": "observation", "data": {"observation": {}, "reward": "1.0", "done": true}}',
        "bigint": '{"type": "observation", "data": {"observation": {}, "reward": 1' + "0" * 400 + ', "done": true}}',
        "done": '{"type": "observation", "data": {"observation": {}, "reward": 1.0, "done": "yes"}}',
        "state": '{"type": "state", "data": {"reward": 1.0}}',
        "error": '{"type": "error", "data": {"code": "EXECUTION_ERROR", "message": "boom"}}',
    }

    @app.websocket("/ws")
    async def ws(websocket: WebSocket):
        await websocket.accept()
        while True:
            frame = json.loads(await websocket.receive_text())
            if frame["type"] == "reset":
                text = f"Say something ({random.random()})" if drifting else "Say something"
                await websocket.send_text(json.dumps({"type": "observation", "data": {
                    "observation": {"text": text}, "reward": None, "done": False}}))
            elif frame["type"] == "step":
                message = frame["data"]["message"]
                if message == "hangup":
                    await websocket.close()
                    return
                await websocket.send_text(replies[message])
            else:
                return

    return app


if __name__ == "__main__":
    port, kind = int(sys.argv[1]), sys.argv[2]
    if kind in ("hostile", "drifting"):
        app = hostile(kind == "drifting")
    elif kind == "narrow":  # OpenEnv's default: one session at a time
        app = create_app(Reverse, Say, Text, env_name="reverse")
    else:
        env, action = {"reverse": (Reverse, Say), "guess": (Guessing, Guess), "quiz": (Quiz, Say)}[kind]
        app = create_app(env, action, Text, env_name=kind, max_concurrent_envs=16)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
'''


class Remote:
    """An OpenEnv server in a subprocess (so that a test can kill it mid-run)."""

    def __init__(self, tmp: Path, kind: str) -> None:
        script = tmp / "openenv_server.py"
        script.write_text(SERVER)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, str(script), str(self.port), kind], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            wait_until_serving(self.url + "/schema", timeout_s=60)
        except TimeoutError:
            self.kill()
            raise

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)


@contextlib.contextmanager
def served(tmp_path_factory: pytest.TempPathFactory, kind: str) -> Iterator[Remote]:
    remote = Remote(tmp_path_factory.mktemp(kind), kind)
    try:
        yield remote
    finally:  # also when the test fails: no server outlives it
        remote.kill()


def _remote(tmp_path_factory: pytest.TempPathFactory, kind: str) -> Iterator[Remote]:
    with served(tmp_path_factory, kind) as remote:
        yield remote


@pytest.fixture(scope="module")
def reverse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remote]:
    yield from _remote(tmp_path_factory, "reverse")


@pytest.fixture(scope="module")
def guess(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remote]:
    yield from _remote(tmp_path_factory, "guess")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remote]:
    yield from _remote(tmp_path_factory, "hostile")


def _word(task: Any) -> str:
    return str(task["prompt"]).removeprefix("Reverse the word: ")


def test_tasks_are_the_remotes_seeded_episodes_and_grades_its_rewards(reverse: Remote) -> None:
    env = verihub.load_env(f"openenv:{reverse.url}", size=10, seed=3)
    assert (env.id, env.version) == ("openenv-reverse", "1.0.0") and isinstance(env, verihub.Environment)
    tasks = [*env.dataset("train"), *env.dataset("eval")]
    assert len(tasks) == 10 and sorted(json.loads(task["reset"])["seed"] for task in tasks) == list(range(3, 13))
    task = env.dataset("eval")[0]
    assert re.fullmatch(r"Reverse the word: [a-z]+\d\d", task["prompt"])
    assert env.render(task) == [{"role": "user", "content": task["prompt"]}]
    right = env.grade(task, _word(task)[::-1])
    assert (right.status, right.reward) == ("ok", 1.0)
    wrong = env.grade(task, _word(task))
    assert (wrong.status, wrong.reward) == ("wrong", 0.0)
    half = env.grade(task, "HALF")  # the remote's own reward, partial credit included
    assert (half.status, half.reward) == ("wrong", 0.5) and "remote reward 0.5" in half.reason + half.layers[0].detail
    again = verihub.load_env(f"openenv:{reverse.url}?size=10&seed=3")  # the CLI's form
    assert [t["prompt"] for t in again.dataset("eval")] == [t["prompt"] for t in env.dataset("eval")]


def test_a_remote_with_a_task_api_gives_its_own_splits(tmp_path_factory: pytest.TempPathFactory) -> None:
    with served(tmp_path_factory, "quiz") as remote:
        env = verihub.load_env(f"openenv:{remote.url}")
        assert env.split_names == ["train", "test"] and env.spec.eval.split == "test"
        assert env.dataset("test")["prompt"] == ["What is 0 * 0?", "What is 1 * 1?", "What is 2 * 2?"]
        assert len(env.dataset("train")) == 7 and env.dataset("train")[3]["id"] == "train-00003"
        task = env.dataset("test")[2]
        assert json.loads(task["reset"]) == {"split": "test", "index": 2}
        assert env.grade(task, "4").reward == 1.0 and env.grade(task, "5").status == "wrong"
        assert len(verihub.load_env(f"openenv:{remote.url}", size=5).dataset("train")) == 5  # the first 5 of each


def test_a_server_at_capacity_is_waited_for_not_a_fault(tmp_path_factory: pytest.TempPathFactory) -> None:
    with served(tmp_path_factory, "narrow") as remote:
        env = verihub.load_env(f"openenv:{remote.url}", size=8)
        tasks = list(env.dataset("train"))

        async def grade_all() -> list[Any]:
            return await asyncio.gather(*(env.agrade(task, _word(task)[::-1]) for task in tasks))

        grades = asyncio.run(grade_all())
        assert [(grade.status, grade.reward) for grade in grades] == [("ok", 1.0)] * len(tasks)
        impatient = verihub.load_env(f"openenv:{remote.url}?timeout_s=1", size=8)
        held = env.episode(tasks[0])
        held.reset()  # holds the only session: another waits up to timeout_s, then is a fault that says why
        start = time.perf_counter()
        grade = impatient.grade(tasks[1], _word(tasks[1])[::-1])
        assert (grade.status, grade.reward) == ("env_error", None) and "CAPACITY_REACHED" in grade.reason
        assert time.perf_counter() - start < 5
        held.close()
        assert impatient.grade(tasks[1], _word(tasks[1])[::-1]).reward == 1.0


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("HUGE", "message too big"),
        ("FIVE", "reward 5.0, not a finite number in [0, 1]"),
        ("NONE", "gave no reward"),
        ("CRASH", "error EXECUTION_ERROR: the remote environment crashed"),
    ],
)
def test_a_remote_misbehaving_on_one_answer_is_that_answers_fault(reverse: Remote, answer: str, reason: str) -> None:
    """The remote takes another answer to the task (the evidence: a remote has no gold, and its prompt is none)
    and breaks on this answer alone: a policy that found the answer would escape its penalty if the fault were
    env_error (issue 31's rule)."""
    env = verihub.load_env(f"openenv:{reverse.url}", size=5)
    task = env.dataset("train")[0]
    assert env.grade(task, _word(task)[::-1]).status == "ok"  # a right answer: evidence for this task
    grade = env.grade(task, answer)
    assert (grade.status, grade.reward) == ("wrong", 0.0) and grade.answer_fault is not None, grade
    assert reason in grade.reason and "answer fault" in grade.reason, grade.reason


def assert_fault(remote: Remote, answer: str, reason: str) -> None:
    """Grading ``answer`` on ``remote``'s first training task is a fault whose reason says ``reason`` (and that
    nothing shows the remote works on the task: it is broken on every action)."""
    env = verihub.load_env(f"openenv:{remote.url}", size=5)
    grade = env.grade(env.dataset("train")[0], answer)
    assert grade.status == "env_error" and grade.reward is None
    assert reason in grade.reason and lacks_evidence(grade.reason), grade.reason


def test_a_reward_range_is_rescaled_and_enforced(reverse: Remote) -> None:
    env = verihub.load_env(f"openenv:{reverse.url}", size=5, reward_range=[-1, 1])
    task = env.dataset("train")[0]
    assert env.grade(task, _word(task)[::-1]).reward == 1.0
    assert env.grade(task, "nope").reward == 0.5  # 0 in [-1, 1]; and evidence that the remote works on the task
    assert (env.grade(task, "FIVE").status, env.grade(task, "FIVE").reward) == ("wrong", 0.0)  # the answer's fault
    with pytest.raises(SpecError, match="reward_range"):
        verihub.load_env(f"openenv:{reverse.url}", size=5, reward_range=[1, float("inf")])


def test_bad_options_are_refused_each_by_name(reverse: Remote) -> None:
    with pytest.raises(SpecError) as caught:
        verihub.load_env(
            f"openenv:{reverse.url}", size=1, seed=-1, timeout_s=0, max_reply_bytes=10, reward_range=[2, 1]
        )
    assert [problem.path for problem in caught.value.problems] == [
        "size",
        "seed",
        "reward_range",
        "timeout_s",
        "max_reply_bytes",
    ]
    with pytest.raises(TypeError, match="take no temperature"):
        verihub.load_env(f"openenv:{reverse.url}?temperature=1")
    with pytest.raises(SpecError, match="the action has no field 'text'; fields: message"):
        verihub.load_env(f"openenv:{reverse.url}", size=5, action_field="text")


def test_a_slow_remote_times_out_as_a_fault(reverse: Remote) -> None:
    env = verihub.load_env(f"openenv:{reverse.url}", size=5, timeout_s=1)
    task = env.dataset("train")[0]
    assert env.grade(task, _word(task)[::-1]).status == "ok"  # a right answer: the remote works on the task
    start = time.perf_counter()
    grade = env.grade(env.dataset("train")[0], "SLOW")  # another answer got its reply at once: the answer's fault
    assert (grade.status, grade.reward) == ("wrong", 0.0) and grade.answer_fault is not None
    assert "no reply to step within 1s" in grade.reason and time.perf_counter() - start < 10


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("garbage", "malformed JSON"),
        ("deep", "malformed JSON"),
        ("list", "not {type, data"),
        ("nan", "reward nan"),
        ("inf", "reward inf"),
        ("string", "reward 1.0, not a finite number"),
        ("bigint", "reward 1000"),
        ("done", "non-boolean done"),
        ("state", "a 'state' frame, not 'observation'"),
        ("error", "error EXECUTION_ERROR: boom"),
        ("hangup", "broke during step"),
    ],
)
def test_malformed_replies_are_env_errors(hostile: Remote, answer: str, reason: str) -> None:
    assert_fault(hostile, answer, reason)


def test_a_remote_that_ignores_the_seed_is_refused(tmp_path_factory: pytest.TempPathFactory) -> None:
    with served(tmp_path_factory, "drifting") as remote:
        with pytest.raises(RemoteEnvError, match=r"does not reproduce an episode \(reset\(seed=0\) gave two"):
            verihub.load_env(f"openenv:{remote.url}", size=5)


def test_an_installed_openenv_package_is_served_on_loopback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "quiz_env_pkg"
    (package / "server").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "server" / "__init__.py").write_text("")
    (package / "server" / "app.py").write_text(
        SERVER + '\napp = create_app(Quiz, Say, Text, env_name="quiz", max_concurrent_envs=4)\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    env = verihub.load_env("openenv:quiz_env_pkg")  # OpenEnv's layout: the package's server/app.py holds `app`
    assert env.split_names == ["train", "test"] and env.remote.url.startswith("http://127.0.0.1:")
    task = env.dataset("test")[1]
    assert (task["prompt"], env.grade(task, "1").reward, env.grade(task, "2").reward) == ("What is 1 * 1?", 1.0, 0.0)
    assert verihub.load_env("openenv:quiz_env_pkg.server.app:app").remote.url == env.remote.url  # served once
    # a web page the user visits cannot drive it: neither through DNS rebinding nor from its own origin
    for headers in ({"Host": "rebound.attacker.example"}, {"Origin": "https://attacker.example"}):
        refused = httpx.post(f"{env.remote.url}/reset", json={}, headers=headers)
        assert refused.status_code == 403 and "reward" not in refused.text, (headers, refused.text)
    with pytest.raises(RemoteEnvError, match="no installed OpenEnv environment 'no_such_env_pkg'"):
        verihub.load_env("openenv:no_such_env_pkg")


def test_unreachable_remotes_say_so() -> None:
    with pytest.raises(RemoteEnvError, match="cannot reach the OpenEnv server at http://127.0.0.1"):
        verihub.load_env(f"openenv:http://127.0.0.1:{free_port()}", size=5)
    assert (
        base_url("openenv:openenv/echo_env") == "https://openenv-echo-env.hf.space"
    )  # not reached: tests stay on loopback
    with pytest.raises(TypeError, match="take no difficulty"):
        verihub.load_env("openenv:http://127.0.0.1:1?difficulty=2")
    with pytest.raises(TypeError, match="take no difficulty"):
        verihub.load_env("openenv:http://127.0.0.1:1", difficulty=2)


def test_multi_turn_sessions_step_through_the_remote_episode(guess: Remote) -> None:
    env = verihub.load_env(f"openenv:{guess.url}", size=6)
    assert env.remote.action_kind == "json"  # an integer field takes the completion parsed as JSON

    def play(session: Any) -> tuple[float | None, int]:
        assert session.reset() == "Guess my number between 1 and 100."
        low, high, turns = 1, 100, 0
        while True:
            middle = (low + high) // 2
            observation, reward, done, info = session.step(str(middle))
            turns += 1
            if done:
                return reward, turns
            assert reward is None and observation in ("higher", "lower") and session.state()["step_count"] == turns
            low, high = (middle + 1, high) if observation == "higher" else (low, middle - 1)

    for task in env.dataset("train"):
        with env.episode(task) as session:
            reward, turns = play(session)
        assert reward == 1.0 and 1 <= turns <= 7

    async def refused() -> tuple[Any, ...]:
        async with env.episode(env.dataset("eval")[0]) as session:
            await session.areset()
            return await session.astep('"fifty"')  # JSON, but not an integer: the server refuses the action

    _, reward, done, info = asyncio.run(refused())
    assert (reward, done, info["status"]) == (0.0, True, "wrong") and "VALIDATION_ERROR" in info["reason"]
    graded = env.grade(env.dataset("eval")[0], "fifty")  # not even JSON: the answer's fault too
    assert (graded.status, graded.reward) == ("wrong", 0.0)
    target = next(guess for guess in range(1, 101) if env.grade(env.dataset("eval")[0], str(guess)).reward)
    one_turn = env.grade(env.dataset("eval")[0], str(101 - target))  # wrong, and the episode goes on
    # the winning guess ended the episode in one step (the evidence: a remote has no gold): this one does not
    assert one_turn.status == "wrong" and one_turn.answer_fault is not None
    assert "drive it turn by turn with env.episode(task)" in one_turn.reason


def test_a_killed_remote_ends_a_session_and_later_grades_as_faults(tmp_path_factory: pytest.TempPathFactory) -> None:
    with served(tmp_path_factory, "guess") as remote:
        env = verihub.load_env(f"openenv:{remote.url}", size=5)
        task = env.dataset("train")[0]
        session = env.episode(task)
        session.reset()
        assert session.step("50")[2] in (False, True)
        remote.kill()
        observation, reward, done, info = session.step("25")
        assert (reward, done, info["status"]) == (None, True, "env_error") and "broke during step" in info["reason"]
        grade = env.grade(task, "42")
        assert grade.status == "env_error" and grade.reward is None and "cannot reach" in grade.reason, grade


def reversing_model(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Right on even samples, the word unreversed on odd ones."""
    word = request["messages"][-1]["content"].removeprefix("Reverse the word: ")
    return [{"content": word[::-1] if index % 2 == 0 else word} for index in range(request.get("n", 1))]


def test_verihub_eval_runs_an_openenv_environment(reverse: Remote, tmp_path: Path) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"  # a grader pool has nothing to do for a remote's rewards
    with ScriptedChatServer(reversing_model) as model:
        result = subprocess.run(
            [
                VERIHUB,
                "eval",
                f"openenv:{reverse.url}?size=20",
                "--model",
                f"openai:scripted@{model.url}",
                "-n",
                "4",
                "-k",
                "2",
                "--out",
                str(tmp_path),
                "--grader",
                nobody,
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "COLUMNS": "200"},
        )
    assert result.returncode == 0, result.stderr
    table = datasets.load_dataset("parquet", data_files=str(tmp_path / "results.parquet"), split="train")
    assert len(table) == 8 and sorted(table["reward"]) == [0.0] * 4 + [1.0] * 4
    metadata = json.loads((tmp_path / "metadata.json").read_text())
    assert metadata["environment"] == "openenv-reverse"
    assert metadata["metrics"]["pass@1"] == pytest.approx(0.5) and metadata["metrics"]["pass@2"] == 1.0


def test_verihub_eval_on_a_remote_killed_mid_run_reports_faults_not_zeros(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    with served(tmp_path_factory, "reverse") as remote:

        def kill_then_answer(request: dict[str, Any]) -> list[dict[str, Any]]:
            if remote.process.poll() is None:
                remote.kill()  # the tasks are loaded; the remote dies before anything is graded
            return reversing_model(request)

        with ScriptedChatServer(kill_then_answer) as model:
            result = subprocess.run(
                [
                    VERIHUB,
                    "eval",
                    f"openenv:{remote.url}?size=10",
                    "--model",
                    f"openai:scripted@{model.url}",
                    "-n",
                    "2",
                    "--out",
                    str(tmp_path),
                ],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=300,
                env={**os.environ, "COLUMNS": "200"},
            )
        table = datasets.load_dataset("parquet", data_files=str(tmp_path / "results.parquet"), split="train")
        assert set(table["status"]) == {"env_error"} and set(table["reward"]) == {None}, result.stdout
        assert all("cannot reach" in reason for reason in table["reason"])


def test_the_trainers_rewards_come_from_the_remote(reverse: Remote) -> None:
    from verihub.trainers.mixture import mixed_dataset, resolve_envs
    from verihub.trainers.rewards import EnvReward, GradeLedger

    mix = resolve_envs({verihub.load_env(f"openenv:{reverse.url}", size=10): 1.0})
    rows = mixed_dataset(mix)
    tasks = [json.loads(row["task"]) for row in rows][:3]
    completions = [_word(tasks[0])[::-1], _word(tasks[1]), "FIVE"]
    rewards = asyncio.run(
        EnvReward(mix[0], GradeLedger())(
            prompts=[row["prompt"] for row in rows][:3],
            completions=[[{"role": "assistant", "content": text}] for text in completions],
            environment=[mix[0].name] * 3,
            task=[rows[index]["task"] for index in (0, 1, 0)],  # FIVE beside a right answer to its task
            difficulty=["all"] * 3,
        )
    )
    assert rewards == [1.0, 0.0, 0.0]  # right, wrong, and a remote fault only this answer causes: its own


def test_the_train_commands_env_option_takes_an_openenv_url(reverse: Remote) -> None:
    from verihub.trainers.mixture import parse_env_option, resolve_envs

    option = f"openenv:{reverse.url}?size=10"  # the port is no weight, and a URL is no hub id
    assert parse_env_option(option) == (option, 1.0)
    assert parse_env_option(f"{option}:0.5") == (option, 0.5)
    assert parse_env_option(f"openenv:{reverse.url.rsplit(':', 1)[0]}/:0.5")[1] == 0.5
    (mixed,) = resolve_envs(dict([parse_env_option(f"openenv:{reverse.url}:0.5")]))
    assert mixed.weight == 1.0 and len(mixed.env.dataset("train")) > 0


@pytest.mark.slow
def test_the_trainer_plays_a_multi_turn_remote_through_its_act_tool(
    guess: Remote, tiny_model: Path, tmp_path: Path
) -> None:
    from transformers.utils import get_json_schema

    from verihub.trainers.rewards import EnvReward, GradeLedger

    trainer = one_step_trainer(tiny_model, [f"openenv:{guess.url}?size=8&max_turns=10"], tmp_path / "run")
    (item,) = trainer.mix
    (act,) = trainer.trl._env_tools[item.name]
    offered = get_json_schema(act)["function"]
    assert offered["name"] == "act" and offered["parameters"]["properties"]["guess"]["type"] == "integer"
    assert trainer.config.max_tool_calling_iterations == 9  # every call is a remote step; the answer one more
    trainer.train()
    record = first_step(tmp_path / "run")
    assert (
        record["step"] == 1
        and record[f"rewards/{item.name}/mean"] is not None
        and record[f"verihub/{item.name}/fault_rate"] == 0.0
    )

    task = item.env.tasks("train")[0]
    reward = EnvReward(item, GradeLedger())

    def scored(instance: Any, answer: str) -> list[float | None]:
        return asyncio.run(
            reward(
                prompts=[[]],
                completions=[[{"role": "assistant", "content": answer}]],
                environment=[item.name],
                task=[json.dumps(task)],
                difficulty=["all"],
                environments=[instance],
            )
        )

    async def bisect(instance: Any) -> list[str]:
        guesses = [50, 75]  # one turn, two calls: TRL runs them concurrently; the remote sees them in order
        replies = list(await asyncio.gather(*(instance.act(guess=number) for number in guesses)))
        low, high = 1, 100
        while True:
            for number, reply in zip(guesses, replies, strict=True):
                low, high = (
                    (max(low, number + 1), high)
                    if reply == "higher"
                    else (low, min(high, number - 1))
                    if reply == "lower"
                    else (low, high)
                )
            if instance.session.done:
                return replies
            guesses.append((low + high) // 2)
            replies.append(await instance.act(guess=guesses[-1]))

    player = type(act.__self__)()
    player.reset(task=json.dumps(dict(task)))
    replies = asyncio.run(bisect(player))
    assert replies[0] in ("higher", "lower", "correct") and "correct" in replies and player.session.turns <= 8
    assert scored(player, "done") == [1.0] and player.session._connection is None  # its end closed it

    quitter = type(act.__self__)()
    quitter.reset(task=json.dumps(dict(task)))
    assert asyncio.run(quitter.act(guess=0)) in ("higher", "lower")
    assert scored(quitter, "I give up") == [0.0]  # not a fault: the model stopped before the remote's end
    assert "rollout ended before" in quitter.session.grade.layers[0].detail and quitter.session._connection is None


# -- multi-turn remotes in verihub eval: the remote's episode is a Session the eval's tool loop drives -------


def bisecting_model(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Finds the number by bisection on the remote's answers: with the remote's one tool on even turns, in
    plain text on odd ones (a turn's text is an action too)."""
    (tool,) = request["tools"]
    assert tool["function"]["name"] == "act" and "guess" in tool["function"]["parameters"]["properties"]
    low, high, guesses = 1, 100, []
    for message in request["messages"]:
        if message["role"] == "assistant":
            calls = message.get("tool_calls") or []
            guesses.append(json.loads(calls[0]["function"]["arguments"])["guess"] if calls else int(message["content"]))
        elif message["role"] in ("tool", "user") and guesses:
            low, high = (guesses[-1] + 1, high) if message["content"] == "higher" else (low, guesses[-1] - 1)
    middle = (low + high) // 2
    if len(guesses) % 2:
        return [{"content": str(middle)}]
    return [{"content": "", "tool_calls": [{"name": "act", "arguments": {"guess": middle}}]}]


def _eval(ref: str, model: ScriptedChatServer, out: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [VERIHUB, "eval", ref, "--model", f"openai:scripted@{model.url}", "--out", str(out), *options],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_verihub_eval_plays_a_multi_turn_remote_through_its_tool(guess: Remote, tmp_path: Path) -> None:
    with ScriptedChatServer(bisecting_model) as model:
        result = _eval(
            f"openenv:{guess.url}?size=20&max_turns=10",
            model,
            tmp_path,
            "-n",
            "4",
            "-k",
            "2",
            "--grader",
            f"http://127.0.0.1:{free_port()}",
        )  # the remote's sessions stay here
    assert result.returncode == 0, result.stderr
    table = datasets.load_dataset("parquet", data_files=str(tmp_path / "results.parquet"), split="train")
    assert len(table) == 8 and set(table["status"]) == {"ok"} and set(table["reward"]) == {1.0}
    assert all(1 <= turns <= 7 for turns in table["turns"]) and max(table["turns"]) > 2  # a step a turn
    for messages in map(json.loads, table["messages"]):
        replies = [message["content"] for message in messages[1:] if message["role"] != "assistant"]
        assert replies[-1] == "correct" and set(replies[:-1]) <= {"higher", "lower"}
        assert {message["role"] for message in messages} >= {"tool", "assistant"}
    assert json.loads((tmp_path / "metadata.json").read_text())["metrics"]["pass@1"] == 1.0


def stubborn_model(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Always guesses 1 (one task's target, by chance, at most), now and then with a malformed call."""
    turn = sum(message["role"] == "assistant" for message in request["messages"])
    calls = [{"name": "act", "arguments": {"guess": "one"} if turn == 1 else {"guess": 1}}]
    if turn == 2:
        calls = [{"name": "guess", "arguments": {"guess": 1}}]  # no such tool: the model hears so
    return [{"content": "", "tool_calls": calls}]


def test_a_multi_turn_remotes_own_end_and_the_turn_limit_are_zeros_not_faults(guess: Remote, tmp_path: Path) -> None:
    with ScriptedChatServer(stubborn_model) as model:
        played = _eval(f"openenv:{guess.url}?size=20&max_turns=12", model, tmp_path / "played", "-n", "4")
        short = _eval(f"openenv:{guess.url}?size=20&max_turns=3", model, tmp_path / "short", "-n", "4")
    for result in (played, short):
        assert result.returncode == 0, result.stderr
    played_table = datasets.load_dataset(
        "parquet", data_files=str(tmp_path / "played" / "results.parquet"), split="train"
    )
    messages = [json.loads(text) for text in played_table["messages"]]
    assert all(m[-1]["content"] in ("out of turns", "correct") for m in messages)  # the remote ended each one
    assert set(played_table["status"]) <= {"wrong", "ok"} and 0.0 in played_table["reward"]
    tool_replies = [m["content"] for m in max(messages, key=len) if m["role"] == "tool"]
    assert "refused the action" in tool_replies[1] and "no tool named 'guess'" in tool_replies[2]
    assert max(played_table["turns"]) == 10  # two refused turns, then the remote's 8 guesses
    short_table = datasets.load_dataset(
        "parquet", data_files=str(tmp_path / "short" / "results.parquet"), split="train"
    )
    assert set(short_table["status"]) <= {"wrong", "ok"} and set(short_table["turns"]) <= {1, 3}
    assert any("did not end within 3 turns" in reason for reason in short_table["reason"])


def test_a_multi_turn_remote_killed_mid_episode_is_env_error_never_zero(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    with served(tmp_path_factory, "guess") as remote:

        def kill_mid_episode(request: dict[str, Any]) -> list[dict[str, Any]]:
            if len(request["messages"]) > 1 and remote.process.poll() is None:
                remote.kill()  # an episode has taken a step on the remote (no first guess is right, seed 1)
            return bisecting_model(request)

        with ScriptedChatServer(kill_mid_episode) as model:
            result = _eval(f"openenv:{remote.url}?size=20&seed=1&max_turns=10", model, tmp_path, "-n", "4")
    assert result.returncode == 0, result.stderr
    table = datasets.load_dataset("parquet", data_files=str(tmp_path / "results.parquet"), split="train")
    assert set(table["status"]) == {"env_error"} and set(table["reward"]) == {None}, table["reason"]
    # an episode the kill caught mid-step, or one that started (reset) or connected after it, or whose handshake
    # it cut (no valid HTTP response: seen under load)
    caught = "broke during (reset|step)|cannot reach|refused the connection: InvalidMessage"
    assert all(re.search(caught, reason) for reason in table["reason"]), table["reason"]


def test_multi_turn_sessions_and_bad_max_turns_through_the_api(guess: Remote) -> None:
    env = verihub.load_env(f"openenv:{guess.url}", size=5, max_turns=10)
    assert (env.spec.interaction.kind, env.spec.interaction.max_turns) == ("multi_turn", 10)
    session = env.session(env.dataset("train")[0])
    assert isinstance(session, verihub.environment.session.Session)
    observation = session.reset()
    assert observation["messages"][-1]["content"] == "Guess my number between 1 and 100."
    assert [tool["function"]["name"] for tool in observation["tools"]] == ["act"]
    observation, reward, done, info = session.step(
        {"content": "", "tool_calls": [{"id": "c1", "function": {"name": "act", "arguments": {"guess": 50}}}]}
    )
    assert (
        observation["messages"][0]["content"] in ("higher", "lower", "correct") and session.state()["step_count"] == 1
    )
    session.close()
    assert verihub.load_env(f"openenv:{guess.url}", size=5).spec.interaction.kind == "single_turn"
    with pytest.raises(SpecError, match="max_turns"):
        verihub.load_env(f"openenv:{guess.url}", size=5, max_turns=0)


def test_a_session_closed_from_another_thread_closes_its_connection_on_its_own_loop(guess: Remote) -> None:
    env = verihub.load_env(f"openenv:{guess.url}", size=5, max_turns=10)
    loop = asyncio.new_event_loop()  # the tools' loop (TRL's), on its own thread
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        session = env.session(env.dataset("train")[0])
        asyncio.run_coroutine_threadsafe(session.acall_tool("act", {"guess": 0}), loop).result(30)
        connection = session._connection
        assert connection is not None and connection._ws is not None
        session.close()  # from this thread, as TRL's reset() does between rollouts
        deadline = time.monotonic() + 10
        while connection._ws is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert connection._ws is None and session._connection is None  # closed there, not dropped open
    finally:

        async def settled() -> None:  # the close runs to its end before the loop stops
            others = asyncio.all_tasks() - {asyncio.current_task()}
            if others:
                await asyncio.wait(others, timeout=10)

        asyncio.run_coroutine_threadsafe(settled(), loop).result(15)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("nan", "reward nan"),
        ("bigint", "reward 1000"),
        ("done", "non-boolean done"),
        ("garbage", "malformed JSON"),
        ("error", "error EXECUTION_ERROR: boom"),
        ("hangup", "broke during step"),
    ],
)
def test_a_misbehaving_multi_turn_remote_ends_the_session_as_a_fault(hostile: Remote, answer: str, reason: str) -> None:
    env = verihub.load_env(f"openenv:{hostile.url}", size=5, max_turns=4)
    session = env.session(env.dataset("train")[0])
    session.reset()
    call = {"id": "c1", "function": {"name": "act", "arguments": {"message": answer}}}
    observation, reward, done, info = session.step({"content": "", "tool_calls": [call]})
    assert (reward, done, info["status"], session.grade) == (None, True, "env_error", None)
    assert reason in info["reason"], info["reason"]
    session.close()
