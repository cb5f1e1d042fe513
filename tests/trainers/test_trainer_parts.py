"""The trainer's own parts, without a training loop: mixing, rewards, curriculum, sampler, monitors."""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO
from verihub.trainers.curriculum import AdaptiveCurriculum, MixtureSampler, StaticMix, make_curriculum
from verihub.trainers.heldout import HeldoutRate
from verihub.trainers.mixture import mixed_dataset, parse_env_option, resolve_envs
from verihub.trainers.monitors import RunMonitor
from verihub.trainers.rewards import EnvReward, GradeLedger, Outcome

RAISING_CHECK = "def broken(completion, task):\n    raise RuntimeError('the checker crashed')\n"


def test_mixed_dataset_has_every_task_with_its_environment() -> None:
    mix = resolve_envs({str(REPO / "envs/arithmetic"): 3, str(REPO / "envs/json-extract"): 1})
    assert [(item.name, item.weight) for item in mix] == [("arithmetic", 0.75), ("json-extract", 0.25)]
    dataset = mixed_dataset(mix)
    counts = Counter(dataset["environment"])
    assert counts == {item.name: len(item.env.dataset("train")) for item in mix}
    row = dataset[0]
    task = json.loads(row["task"])
    assert row["prompt"] == mix[0].env.render(task) and row["task_id"] == task["id"]
    assert row["difficulty"] == str(task["difficulty"])


def test_env_option_parsing_and_bad_weights() -> None:
    assert parse_env_option("alice/arithmetic@^1.0:0.7") == ("alice/arithmetic@^1.0", 0.7)
    assert parse_env_option("envs/arithmetic") == ("envs/arithmetic", 1.0)
    with pytest.raises(ValueError, match="weight of envs/arithmetic must be a positive number"):
        resolve_envs({"envs/arithmetic": 0})
    with pytest.raises(ValueError, match="name at least one"):
        resolve_envs([])


def _score(reward: EnvReward, rows: list[tuple[str, str, str]]) -> list[float | None]:
    return asyncio.run(
        reward(
            prompts=[[]] * len(rows),
            completions=[[{"role": "assistant", "content": text}] for _, _, text in rows],
            environment=[env for env, _, _ in rows],
            task=[task for _, task, _ in rows],
            difficulty=["all"] * len(rows),
        )
    )


def test_rewards_are_none_off_domain_and_on_faults_never_zero(make_env: Any) -> None:
    good = resolve_envs([make_env()])[0]
    spec = make_env().joinpath("environment.yaml").read_text().replace("use: numeric}", "use: 'checks_mod:broken'}")
    broken_dir = make_env(spec.replace("id: tiny", "id: broken"), files={"checks_mod.py": RAISING_CHECK}, name="broken")
    broken = resolve_envs([broken_dir])[0]
    task = json.dumps({"id": "t1", "question": "1 + 1", "answer": "2", "wrong": "3"})
    ledger = GradeLedger()
    rows = [
        ("tiny", task, "\\boxed{2}"),
        ("tiny", task, "\\boxed{3}"),
        ("broken", task, "\\boxed{2}"),
        ("tiny", task, "no box"),
    ]
    assert _score(EnvReward(good, ledger), rows) == [1.0, 0.0, None, 0.0]
    assert _score(EnvReward(broken, ledger), rows) == [None, None, None, None]  # off-domain, fault, off, off
    outcomes = ledger.take(len(rows))
    assert [o.status for o in outcomes] == ["ok", "wrong", "env_error", "wrong"]
    assert "the checker crashed" in outcomes[2].reason
    assert outcomes[3].rules_passed is False and outcomes[0].checks_passed is True
    assert ledger.take(1) == [None]  # taken: the next batch starts empty


def _outcome(
    env: str, difficulty: str, passed: bool, text: str = "x", *, rules: bool | None = True, fault: bool = False
) -> Outcome:
    status = "env_error" if fault else "ok" if passed else "wrong"
    return Outcome(env, difficulty, status, None if fault else float(passed), rules, passed, len(text), text)


def test_adaptive_curriculum_favours_the_learning_zone_with_floors() -> None:
    curriculum = AdaptiveCurriculum(min_samples=4, smoothing=0.0)
    sizes = {("math", "1"): 10, ("math", "2"): 10, ("math", "3"): 10, ("code", "1"): 10}
    curriculum.bind(sizes, {"math": 0.5, "code": 0.5})
    before = curriculum.weights()
    assert before[("math", "1")] == pytest.approx(before[("math", "2")])  # unmeasured: all worth trying
    outcomes = (
        [_outcome("math", "1", True)] * 8
        + [_outcome("math", "2", i % 2 == 0) for i in range(8)]
        + [_outcome("math", "3", False)] * 8
        + [_outcome("code", "1", False)] * 8
        + [_outcome("code", "1", True, fault=True)] * 8
    )  # faults say nothing about the model
    curriculum.observe(outcomes)
    weights = curriculum.weights()
    assert sum(weights.values()) == pytest.approx(1.0)
    assert weights[("math", "2")] > 5 * weights[("math", "1")]  # the learning zone, over solved...
    assert weights[("math", "2")] > 5 * weights[("math", "3")]  # ...and over hopeless
    assert weights[("math", "1")] > 0 and weights[("math", "3")] > 0  # bucket floors
    assert weights[("code", "1")] >= 0.1  # a hopeless domain keeps its floor share
    assert curriculum.pass_rates[("code", "1")] == 0.0


def test_curriculum_floors_hold_after_normalising() -> None:
    """Every bucket keeps bucket_floor x an even share of its environment's weight, and every environment
    domain_floor x its nominal share, whatever the pass rates (a floor applied before normalising was
    diluted: one hopeless bucket beside nine fresh ones got a fifth of its promised share)."""
    rng = random.Random(0)
    for trial in range(200):
        curriculum = AdaptiveCurriculum(
            min_samples=1,
            smoothing=0.0,
            bucket_floor=rng.choice([0.05, 0.1, 0.5]),
            domain_floor=rng.choice([0.1, 0.25, 0.9]),
        )
        sizes = {(env, str(level)): 5 for env in ("a", "b") for level in range(rng.randint(1, 10))}
        env_weights = {"a": rng.uniform(0.1, 1), "b": rng.uniform(0.1, 1)}
        curriculum.bind(sizes, env_weights)
        # Each bucket solved, hopeless, in the learning zone or never measured.
        curriculum.observe(
            [
                _outcome(env, level, rng.random() < rate)
                for (env, level) in sizes
                if (rate := rng.choice([0.0, 1.0, 0.5, None])) is not None
                for _ in range(4)
            ]
        )
        weights = curriculum.weights()
        assert sum(weights.values()) == pytest.approx(1.0)
        for env in env_weights:
            buckets = [bucket for bucket in sizes if bucket[0] == env]
            env_share = sum(weights[bucket] for bucket in buckets)
            nominal = env_weights[env] / sum(env_weights.values())
            assert env_share >= curriculum.domain_floor * nominal - 1e-12, (trial, env)
            for bucket in buckets:
                assert weights[bucket] >= curriculum.bucket_floor * env_share / len(buckets) - 1e-12, (trial, bucket)


def test_static_mix_and_curriculum_knobs() -> None:
    mix = StaticMix()
    mix.bind({("a", "1"): 30, ("a", "2"): 10, ("b", "all"): 5}, {"a": 0.8, "b": 0.2})
    assert mix.weights() == pytest.approx({("a", "1"): 0.6, ("a", "2"): 0.2, ("b", "all"): 0.2})
    assert isinstance(make_curriculum({"min_samples": 2}), AdaptiveCurriculum)
    with pytest.raises(ValueError, match="knobs: smoothing"):
        make_curriculum({"warmup": 3})
    with pytest.raises(ValueError, match="use None, 'adaptive'"):
        make_curriculum("linear")


def test_sampler_keeps_trl_order_and_follows_weights() -> None:
    mix = StaticMix()
    mix.bind({("a", "1"): 50, ("b", "1"): 50}, {"a": 0.9, "b": 0.1})
    buckets = {("a", "1"): list(range(50)), ("b", "1"): list(range(50, 100))}
    sampler = MixtureSampler(buckets, mix, mini_repeat_count=4, batch_size=5, repeat_count=2, seed=3)
    drawn = list(sampler)
    assert len(drawn) == len(sampler) == 100 // 5 * 5 * 4 * 2
    chunk = drawn[:40]  # 5 prompts x 4 generations, then the same block again (repeat_count)
    assert chunk[:20] == chunk[20:] and all(len(set(chunk[i : i + 4])) == 1 for i in range(0, 20, 4))
    share_a = sum(index < 50 for index in drawn) / len(drawn)
    assert 0.8 < share_a < 0.97
    again = MixtureSampler(buckets, mix, mini_repeat_count=4, batch_size=5, repeat_count=2, seed=3)
    assert list(again) == drawn  # every process draws the same sequence


def test_monitor_metrics_and_alerts(caplog: pytest.LogCaptureFixture) -> None:
    monitor = RunMonitor(["math"], group_size=2)
    for _ in range(2):  # early windows: short answers, half right, format mostly failing
        monitor.observe([_outcome("math", "1", True, "ab"), _outcome("math", "1", False, "cd", rules=False)])
        monitor.flush()
    monitor.record_heldout({"math": HeldoutRate(0.6, 0.6, 0, 0, 0, 0)})
    monitor.record_heldout({"math": HeldoutRate(0.3, 0.5, 0, 4, 0, 1)})  # faults counted as failed
    # now: every answer passes the format, is long, identical within its group, and passes in training
    monitor.observe(
        [_outcome("math", "1", True, "x" * 50)] * 2
        + [_outcome("math", "1", True, "y" * 50)] * 2
        + [_outcome("math", "1", False, "z", fault=True)] * 2
    )
    metrics, alerts = monitor.flush()
    assert metrics["verihub/math/pass_rate"] == 1.0 and metrics["verihub/math/fault_rate"] == pytest.approx(1 / 3)
    assert metrics["verihub/math/faults"] == 2 and metrics["verihub/math/heldout_pass_rate"] == 0.3
    assert metrics["verihub/math/heldout_pass_rate_graded"] == 0.5
    assert metrics["verihub/math/heldout_faulted"] == 4 and metrics["verihub/math/heldout_tasks_lost"] == 1
    kinds = {alert.split(" ")[0] for alert in alerts}
    assert {"heldout", "length", "collapse"} <= kinds
    assert metrics["alerts/collapse/math"] == 1.0
    assert "reward-hacking alert" in caplog.text and "environment fault in math" in caplog.text


@pytest.mark.parametrize(("samples", "fires"), [(80, False), (2000, True)])
def test_heldout_alert_tells_a_real_drop_from_measurement_noise(samples: int, fires: bool) -> None:
    monitor = RunMonitor(["math"], group_size=1)
    for _ in range(2):
        monitor.observe([_outcome("math", "1", True), _outcome("math", "1", False)])
        monitor.flush()
    monitor.record_heldout({"math": HeldoutRate(0.74, 0.74, samples, 0, samples, 0)})
    monitor.record_heldout(
        {"math": HeldoutRate(0.62, 0.62, samples, 0, samples, 0)}
    )  # 12 points: noise on 80, not 2000
    monitor.observe([_outcome("math", "1", True)] * 2)
    _, alerts = monitor.flush()
    assert any(alert.startswith("heldout in math") for alert in alerts) is fires


def test_format_alert_when_rules_pass_but_checks_do_not() -> None:
    monitor = RunMonitor(["json"], group_size=1)
    for _ in range(2):
        monitor.observe([_outcome("json", "1", False, rules=False)] * 3 + [_outcome("json", "1", True)])
        monitor.flush()
    monitor.observe([_outcome("json", "1", False, rules=True)] * 4)
    _, alerts = monitor.flush()
    assert any(alert.startswith("format in json") for alert in alerts)


def test_answer_faults_are_counted_scored_as_wrong_and_alert_when_frequent() -> None:
    monitor = RunMonitor(["math"], group_size=1)
    probing = Outcome(
        "math", "1", "wrong", 0.0, True, False, 9, "9" * 9, "layer 'correct': answer fault: ...", "correct"
    )
    monitor.observe([_outcome("math", "1", True)] * 9 + [probing])
    metrics, alerts = monitor.flush()
    assert metrics["verihub/math/answer_faults"] == 1 and metrics["verihub/math/faults"] == 0
    assert metrics["verihub/math/pass_rate"] == 0.9  # scored, as wrong
    assert any(alert.startswith("answer_faults in math") for alert in alerts)
    monitor.observe([_outcome("math", "1", True)] * 11 + [probing])  # under a tenth: counted, no alert
    metrics, alerts = monitor.flush()
    assert metrics["verihub/math/answer_faults"] == 2 and not any("answer_faults" in alert for alert in alerts)


def _operands(env_name: str, task: dict[str, Any]) -> frozenset[tuple[Any, int]]:
    """A question up to its equivalents: the multiset of its numbers, with the answer (a + b is b + a; '37 or
    52' is '52 or 37'; a word problem with other names or its numbers in another order is the same problem)."""
    if env_name == "compare":
        numbers: list[Any] = [task["a"], task["b"]]
    else:
        numbers = [*re.findall(r"\d+(?:\.\d+)?", task["question"]), "=" + task["answer"]]
    return frozenset(Counter(numbers).items())


@pytest.mark.parametrize(("name", "size"), [("sums", 400), ("compare", 1000), ("math-word", 252)])
def test_held_out_splits_hold_no_equivalent_of_a_training_question(name: str, size: int) -> None:
    """Held out means held out: no eval question has an equivalent (not just an identical) one in training."""
    env = resolve_envs([str(REPO / "envs" / name)])[0].env
    train, held_out = (list(env.dataset(split)) for split in ("train", "eval"))
    assert len(train) + len(held_out) == size
    twins = {_operands(name, task) for task in train} & {_operands(name, task) for task in held_out}
    assert not twins, f"{len(twins)} eval questions have an equivalent in train, e.g. {sorted(twins, key=str)[:3]}"


def test_sampler_with_fewer_rows_than_a_batch_still_draws_a_full_batch() -> None:
    mix = StaticMix()
    mix.bind({("a", "all"): 3}, {"a": 1.0})
    sampler = MixtureSampler({("a", "all"): [0, 1, 2]}, mix, mini_repeat_count=2, batch_size=8, repeat_count=1, seed=0)
    drawn = list(sampler)
    assert len(drawn) == len(sampler) == 16 and set(drawn) == {0, 1, 2}


def test_an_alert_warns_when_it_starts_not_at_every_step(caplog: pytest.LogCaptureFixture) -> None:
    monitor = RunMonitor(["math"], group_size=2)
    for _ in range(3):
        monitor.observe([_outcome("math", "1", True, "same")] * 2)
        metrics, alerts = monitor.flush()
        assert metrics["alerts/collapse/math"] == 1.0 and alerts
    assert caplog.text.count("reward-hacking alert (collapse)") == 1


def test_heldout_pass_rates_count_faults_as_failed_and_say_how_many(flaky_env: Path) -> None:
    import verihub
    from conftest import hedging_model
    from verihub.testing import ScriptedChatServer
    from verihub.trainers.heldout import heldout_pass_rates
    from verihub.trainers.mixture import MixedEnv

    mix = [MixedEnv("flaky", verihub.load_env(flaky_env), 1.0)]
    with ScriptedChatServer(hedging_model) as server:
        # sampled (greedy samples go one request each, and the scripted model hedges on the second of a request)
        rate = heldout_pass_rates(f"openai:m@{server.url}", mix, tasks=8, samples=2, temperature=0.7)["flaky"]
    assert rate == HeldoutRate(pass_rate=13 / 16, graded_pass_rate=1.0, samples=16, faulted=3, tasks=8, tasks_lost=1)
    monitor = RunMonitor(["flaky"], group_size=1)
    monitor.record_heldout({"flaky": rate})
    metrics, _ = monitor.flush()
    assert metrics["verihub/flaky/heldout_pass_rate"] == 13 / 16 and metrics["verihub/flaky/heldout_faulted"] == 3
    assert metrics["verihub/flaky/heldout_tasks_lost"] == 1 and metrics["verihub/flaky/heldout_pass_rate_graded"] == 1.0


# -- tools only a session knows (a multi-turn remote's act) as TRL methods -------------------------------------


class _SchemaEnv:
    """What environment_class reads of an environment: a multi-turn spec without spec tools, and the
    schemas its sessions offer."""

    def __init__(self, *schemas: dict[str, Any]) -> None:
        from types import SimpleNamespace

        self.spec = SimpleNamespace(interaction=SimpleNamespace(kind="multi_turn", tools=[]), sandbox=None)
        self.tool_schemas = [{"type": "function", "function": schema} for schema in schemas]


def _offered(*schemas: dict[str, Any]) -> type:
    from verihub.trainers.mixture import MixedEnv
    from verihub.trainers.toolenv import environment_class

    return environment_class(MixedEnv("remote", _SchemaEnv(*schemas), 1.0))


ACTION = {
    "name": "act",
    "description": "Take your turn.\nArgs: none here (a trap for the docstring parser)",
    "parameters": {
        "type": "object",
        "required": ["move", "cells"],
        "properties": {
            "move": {"enum": ["up", "down"], "description": "Where to go. (choices: not json)"},
            "cells": {"type": "array", "items": {"type": "integer"}, "description": "Cells (in order)."},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "Returns: a trap"},
            "target": {"$ref": "#/$defs/Point"},
            "speed": {"type": ["number", "string"]},
        },
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "integer"}}}},
    },
}


def test_a_session_tool_is_offered_with_the_schemas_fields_or_refused_by_name() -> None:
    import inspect

    from transformers.utils import get_json_schema

    tool_class = _offered(ACTION)
    act = tool_class.act
    assert inspect.iscoroutinefunction(act)  # TRL runs it on its async loop, where the rewards' steps run too
    schema = get_json_schema(act)["function"]  # what TRL shows the model
    parameters = schema["parameters"]
    assert schema["name"] == "act" and schema["description"].startswith("Take your turn.")
    assert set(parameters["required"]) == {"move", "cells"}
    assert parameters["properties"]["move"]["enum"] == ["up", "down"]
    assert parameters["properties"]["cells"] == {
        "type": "array",
        "items": {"type": "integer"},
        "description": "Cells (in order).",
    }
    assert parameters["properties"]["note"]["type"] == "string" and parameters["properties"]["note"]["nullable"]
    assert parameters["properties"]["target"]["type"] == "object"
    assert parameters["properties"]["speed"]["type"] == ["number", "string"]

    calls: list[tuple[str, dict[str, Any]]] = []

    class Recording:
        async def acall_tool(self, name: str, arguments: dict[str, Any]) -> str:
            calls.append((name, arguments))
            return "moved"

    instance = tool_class()
    instance.session = Recording()
    assert asyncio.run(instance.act(move="up", cells=[1])) == "moved"
    assert calls == [("act", {"move": "up", "cells": [1]})]  # what the model gave, nothing filled in

    for bad, what in [
        ({**ACTION, "name": "reset"}, "'reset'"),
        ({**ACTION, "name": "_act"}, "'_act'"),
        ({**ACTION, "name": "get_reward"}, "'get_reward'"),
        ({**ACTION, "name": "fault"}, "'fault'"),
        ({**ACTION, "parameters": {"properties": {"x-y": {}}}}, "'x-y'"),
        ({**ACTION, "parameters": {"properties": {"class": {}}}}, "'class'"),
        ({**ACTION, "parameters": {"properties": {"self": {}}}}, "'self'"),
    ]:
        with pytest.raises(ValueError, match=re.escape(what)):
            _offered(bad)


def test_a_hostile_remotes_action_schema_costs_a_bounded_walk() -> None:
    import time

    from transformers.utils import get_json_schema

    definitions = {f"D{i}": {"$ref": f"#/$defs/D{i + 1}"} for i in range(10_000)}
    definitions["loop"] = {"$ref": "#/$defs/loop"}
    wide = {"anyOf": [{"type": "array", "items": {"anyOf": [{"type": "integer"}] * 1000}}] * 1000}
    nested: dict[str, Any] = {"type": "integer"}
    for _ in range(10_000):
        nested = {"type": "array", "items": nested}
    start = time.perf_counter()
    tool_class = _offered(
        {
            "name": "act",
            "parameters": {
                "properties": {
                    "chain": {"$ref": "#/$defs/D0"},
                    "loop": {"$ref": "#/$defs/loop"},
                    "wide": wide,
                    "nested": nested,
                    "odd": {"enum": [{"a": 1}, [2]]},
                    "missing": {"$ref": "#/$defs/nowhere"},
                },
                "$defs": definitions,
            },
        }
    )
    schema = get_json_schema(tool_class.act)["function"]["parameters"]["properties"]
    assert time.perf_counter() - start < 2.0  # a walk without its bounds takes far longer, or never ends
    assert schema["chain"] == {"description": "chain"} and schema["loop"] == {"description": "loop"}  # Any
    assert schema["odd"] == {"description": "odd"} and schema["missing"] == {"description": "missing"}
    depth, node = 0, schema["nested"]
    while "items" in node:
        depth, node = depth + 1, node["items"]
    assert depth <= 8
