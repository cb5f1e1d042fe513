"""reasoning-gym's generators as environments: load_env("reasoning-gym:NAME", ...), its own score_answer."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from enum import Enum
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

reasoning_gym = pytest.importorskip("reasoning_gym")

import verihub  # noqa: E402 - after importorskip: skipped without reasoning-gym
from conftest import REPO  # noqa: E402 - after importorskip: skipped without reasoning-gym
from verihub.adapters import reasoning_gym as adapter  # noqa: E402 - after importorskip: skipped without reasoning-gym

VERIHUB = str(Path(sys.executable).with_name("verihub"))


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [VERIHUB, *args], cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"}
    )


def tasks(env: verihub.Environment) -> list[dict]:
    return [dict(task) for split in env.split_names for task in env.dataset(split)]


def test_lists_the_datasets() -> None:
    infos = {info.name: info for info in adapter.list_datasets()}
    assert len(infos) >= 50
    arithmetic = infos["basic_arithmetic"]
    assert arithmetic.category == "arithmetic"
    assert {"min_digits", "max_digits", "operators"} <= set(arithmetic.settings)
    assert "seed" not in arithmetic.settings and "size" not in arithmetic.settings
    assert arithmetic.levels["num_digits"] >= 2 and arithmetic.max_level is not None
    assert "composite" not in infos  # verihub mixes environments itself


@pytest.mark.parametrize("name", ["basic_arithmetic", "leg_counting", "knights_knaves"])
def test_generators_load_and_grade_with_their_own_scorer(name: str) -> None:
    env = verihub.load_env(f"reasoning-gym:{name}", size=30, seed=5)
    assert env.id == "rg-" + name.replace("_", "-")
    assert env.version == adapter.rg_version()
    assert env.domain == adapter._category(reasoning_gym.factory.DATASETS[name][0])
    assert (len(env.dataset("train")), len(env.dataset("eval"))) == (24, 6)
    source = reasoning_gym.create_dataset(name, size=30, seed=5)
    for task in tasks(env):
        assert task["question"] == source[task["index"]]["question"]  # exactly reasoning-gym's tasks
        assert env.render(task)[-1] == {"role": "user", "content": task["question"]}
        assert "<answer>" in env.render(task)[0]["content"]
        good = env.grade(task, f"Let me think.\n<answer>{task['answer']}</answer>")
        assert (good.status, good.reward) == ("ok", 1.0), good
        bad = env.grade(task, f"<answer>{task['wrong']}</answer>")
        assert bad.status == "wrong" and bad.reward < 1.0, bad
        untagged = env.grade(task, task["answer"])
        assert untagged.status == "wrong" and untagged.layers[0].status == "failed"


def test_entries_that_json_cannot_hold_are_regenerated() -> None:
    env = verihub.load_env("reasoning-gym:knights_knaves", size=4, seed=1)  # numpy strings in its metadata
    task = env.dataset("train")[0]
    assert task["entry"] == ""
    assert env.grade(task, f"<answer>{task['answer']}</answer>").status == "ok"


def test_same_seed_same_tasks_other_seed_other_tasks() -> None:
    first = tasks(verihub.load_env("reasoning-gym:basic_arithmetic", size=40, seed=7))
    again = tasks(verihub.load_env("reasoning-gym:basic_arithmetic", size=40, seed=7))
    other = tasks(verihub.load_env("reasoning-gym:basic_arithmetic", size=40, seed=8))
    assert first == again
    assert [t["question"] for t in first] != [t["question"] for t in other]


def test_settings_change_the_tasks() -> None:
    easy = verihub.load_env(
        "reasoning-gym:basic_arithmetic", size=30, seed=1, min_terms=2, max_terms=2, min_digits=1, max_digits=1
    )
    for task in tasks(easy):
        metadata = json.loads(task["entry"])["metadata"]
        assert (metadata["num_terms"], metadata["num_digits"]) == (2, 1)
        assert task["difficulty"] == "max_digits=1,max_terms=2,min_digits=1,min_terms=2"
    same = verihub.load_env(
        "reasoning-gym:basic_arithmetic",
        size=30,
        seed=1,
        config={"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1},
    )
    assert tasks(same) == tasks(easy)
    default = verihub.load_env("reasoning-gym:basic_arithmetic", size=30, seed=1)
    assert {t["question"] for t in tasks(default)} != {t["question"] for t in tasks(easy)}
    assert {t["difficulty"] for t in tasks(default)} == {"default"}


def test_settings_read_enums_from_strings() -> None:
    env = verihub.load_env("reasoning-gym:word_sorting", size=6, transformation="uppercase")
    for task in tasks(env):
        assert "transformation" in task["config"]
        assert env.grade(task, f"<answer>{task['answer']}</answer>").status == "ok"


def test_difficulty_levels_from_the_curriculum() -> None:
    env = verihub.load_env("reasoning-gym:basic_arithmetic", size=40, seed=3, difficulty=[0, 3])
    rows = sorted(tasks(env), key=lambda task: task["id"])
    assert [row["difficulty"] for row in rows[:4]] == ["level-0", "level-3", "level-0", "level-3"]
    digits = {"level-0": set(), "level-3": set()}
    for row in rows:
        digits[row["difficulty"]].add(json.loads(row["entry"])["metadata"]["num_digits"])
        assert env.grade(row, f"<answer>{row['answer']}</answer>").status == "ok"
    assert digits["level-0"] == {1}
    assert max(digits["level-3"]) > 1
    one = verihub.load_env("reasoning-gym:basic_arithmetic", size=10, difficulty=2)
    assert {row["difficulty"] for row in tasks(one)} == {"level-2"}
    mapped = verihub.load_env(
        "reasoning-gym:basic_arithmetic", size=10, difficulty={"num_digits": 0, "*": 1}, max_terms=2
    )  # an explicit setting wins over the level's
    for row in tasks(mapped):
        metadata = json.loads(row["entry"])["metadata"]
        assert metadata["num_digits"] == 1 and metadata["num_terms"] == 2
        assert row["difficulty"] == "num_digits=0,*=1"
    # gsm_symbolic has no levels but a setting called difficulty: difficulty= sets it
    assert (
        '"difficulty": 1.0'
        in tasks(verihub.load_env("reasoning-gym:gsm_symbolic", size=3, difficulty=1.0))[0]["config"]
    )


def test_options_in_the_ref() -> None:
    by_ref = verihub.load_env("reasoning-gym:basic_arithmetic?size=12&seed=2&max_digits=2&difficulty=[0,1]")
    by_args = verihub.load_env("reasoning-gym:basic_arithmetic", size=12, seed=2, max_digits=2, difficulty=[0, 1])
    assert tasks(by_ref) == tasks(by_args)
    assert adapter.parse_ref('reasoning-gym:x?operators=["+","-"]&a=1') == ("x", {"operators": ["+", "-"], "a": 1})
    assert verihub.load_env("reasoning-gym:leg-counting", size=3).id == "rg-leg-counting"  # hyphens work too


def test_the_spec_is_an_ordinary_environment_yaml(tmp_path: Path) -> None:
    env = verihub.load_env("reasoning-gym:basic_arithmetic", size=20, seed=4, max_digits=2, difficulty=[0, 1])
    (tmp_path / "environment.yaml").write_text(yaml.safe_dump(env.spec.model_dump(mode="json", exclude_none=True)))
    again = verihub.load_env(tmp_path)
    assert tasks(again) == tasks(env)
    task = again.dataset("eval")[0]
    assert again.grade(task, f"<answer>{task['answer']}</answer>").status == "ok"


def test_scorer_errors_on_a_bad_answer_are_wrong_on_the_oracle_a_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    env = verihub.load_env("reasoning-gym:leg_counting", size=4, seed=9)
    task = env.dataset("train")[0]
    instance = adapter._instance(task["source_dataset"], task["config"])
    oracle = task["answer"]

    def picky(answer: str, entry: dict) -> float:
        if answer != oracle:
            raise ValueError("cannot parse")
        return 1.0

    monkeypatch.setattr(instance, "score_answer", picky)
    grade = env.grade(task, "<answer>many legs</answer>")
    assert grade.status == "wrong" and "cannot parse" in grade.layers[1].detail

    def broken(answer: str, entry: dict) -> float:
        raise RuntimeError("scorer bug")

    monkeypatch.setattr(instance, "score_answer", broken)
    grade = env.grade(task, "<answer>lots of legs</answer>")
    assert grade.status == "env_error" and grade.reward is None and "scorer bug" in grade.reason


def test_unknown_names_and_bad_settings_say_what_is_wrong() -> None:
    with pytest.raises(verihub.EnvNotFoundError, match="Did you mean 'basic_arithmetic'"):
        verihub.load_env("reasoning-gym:basic_arithmatic")
    with pytest.raises(
        verihub.SpecError, match="max_digitz: unknown setting of basic_arithmetic; did you mean 'max_digits'"
    ):
        verihub.load_env("reasoning-gym:basic_arithmetic", max_digitz=3)
    with pytest.raises(verihub.SpecError, match="max_digits must be >= min_digits"):
        verihub.load_env("reasoning-gym:basic_arithmetic", min_digits=5, max_digits=2)
    with pytest.raises(verihub.SpecError, match="size: must be an integer of at least 3"):
        verihub.load_env("reasoning-gym:basic_arithmetic", size=2)
    with pytest.raises(verihub.SpecError, match="level 9 is out of range"):
        verihub.load_env("reasoning-gym:basic_arithmetic", difficulty=9)
    with pytest.raises(verihub.SpecError, match="no difficulty attribute 'num_digit'; did you mean 'num_digits'"):
        verihub.load_env("reasoning-gym:basic_arithmetic", difficulty={"num_digit": 1})
    with pytest.raises(verihub.SpecError, match="transformation: 'upper' is not one of"):
        verihub.load_env("reasoning-gym:word_sorting", transformation="upper")
    with pytest.raises(verihub.SpecError, match="could not generate task 0"):  # weights no longer match
        verihub.load_env("reasoning-gym:aiw", size=3, task_types=["friends"])
    with pytest.raises(TypeError, match="unexpected keyword arguments size .environments of other ecosystems"):
        verihub.load_env(REPO / "envs/arithmetic", size=3)


def test_json_keeps_python_types() -> None:
    class Local(Enum):
        A = 1

    value = {
        "t": (1, (2, 3)),
        "s": {3, 1},
        "f": frozenset({"a"}),
        "k": {1: "x", (2, 3): "y"},
        "q": Fraction(1, 3),
        "d": datetime.date(2020, 1, 2),
        "tm": datetime.time(1, 2),
        "n": None,
        "__tuple__": 1,
        "e": reasoning_gym.algorithmic.word_sorting.TextTransformation.UPPERCASE,
        "x": float("inf"),
    }
    assert adapter.loads(adapter.dumps(value)) == value
    assert adapter.loads(adapter.dumps({"__tuple__": [1]})) == {"__tuple__": [1]}
    with pytest.raises(TypeError):
        adapter.dumps({"e": Local.A})  # only reasoning-gym's own classes are rebuilt by name


def test_without_reasoning_gym_the_error_says_what_to_install() -> None:
    code = """
import sys
sys.modules["reasoning_gym"] = None  # as if it were not installed
import verihub
from verihub.errors import MissingDependencyError
assert "reasoning_gym" not in [m for m in sys.modules if sys.modules[m] is not None]
try:
    verihub.load_env("reasoning-gym:basic_arithmetic")
except MissingDependencyError as error:
    print(error)
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert 'pip install "verihub[reasoning-gym]"' in result.stdout


def test_import_verihub_does_not_import_reasoning_gym() -> None:
    code = "import sys, verihub, verihub.cli; assert 'reasoning_gym' not in sys.modules"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_trainer_env_options_take_reasoning_gym_refs() -> None:
    from verihub.trainers.mixture import parse_env_option

    assert parse_env_option("reasoning-gym:leg_counting:0.5") == ("reasoning-gym:leg_counting", 0.5)
    assert parse_env_option("reasoning-gym:leg_counting") == ("reasoning-gym:leg_counting", 1.0)


def test_cli_lists_validates_and_grades() -> None:
    listed = cli("envs", "--reasoning-gym")
    assert listed.returncode == 0, listed.stderr
    assert "basic_arithmetic" in listed.stdout and "leg_counting" in listed.stdout and "num_digits" in listed.stdout
    valid = cli("validate", "reasoning-gym:basic_arithmetic")
    assert valid.returncode == 0, valid.stdout + valid.stderr
    assert "valid: references passed 500/500" in valid.stdout
    graded = cli("grade", "reasoning-gym:leg_counting?size=10", "--completion", "<answer>-1</answer>", "--json")
    assert graded.returncode == 1 and json.loads(graded.stdout)["status"] == "wrong"
    unknown = cli("validate", "reasoning-gym:leg_countin")
    assert unknown.returncode == 2 and "Did you mean 'leg_counting'" in unknown.stderr
