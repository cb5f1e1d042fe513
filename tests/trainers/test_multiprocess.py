"""Training on several processes (CPU, gloo) and the held-out evaluation that interrupts it.

The launched runs read what each process did from its own log (``trl.log`` for the first,
``trl.rank1.log`` for the second): the ``verihub draw`` lines (prompts drawn, curriculum weights) and the
``verihub heldout`` lines (which held-out tasks it generated). Select them with ``-m multiprocess``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import BASE_SPEC, REPO, free_port

pytestmark = pytest.mark.slow

ENVS = ("envs/sums", "envs/compare")
HELDOUT_TASKS = 32  # the trainer's default heldout_tasks


def _launcher(name: str) -> list[str]:
    if name == "torchrun":
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    # accelerate starts several processes through its multi-GPU path; on CPU they meet over gloo
    return [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(free_port()),
    ]


def _mix() -> list[Any]:
    from verihub.trainers.mixture import resolve_envs

    return resolve_envs([REPO / env for env in ENVS])


def _train(
    launcher: list[str], tiny_model: Path, out: Path, *envs: str, timeout: float = 150, extra: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    env_options = [option for env in envs for option in ("--env", env)]
    return subprocess.run(
        [
            *launcher,
            "-m",
            "verihub.cli",
            "train",
            "--model",
            str(tiny_model),
            *env_options,
            "--max-steps",
            "4",
            "--heldout-every",
            "2",
            "--output-dir",
            str(out),
            "--log-format",
            "json",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


def _lines(log: Path, kind: str) -> list[str]:
    return [
        line.removeprefix(f"verihub {kind} ")
        for line in log.read_text().splitlines()
        if line.startswith(f"verihub {kind} ")
    ]


def _heldout(log: Path) -> dict[int, tuple[str, dict[str, set[str]]]]:
    """step -> (shard, env -> task ids that process generated)."""
    measured: dict[int, tuple[str, dict[str, set[str]]]] = {}
    for line in _lines(log, "heldout"):
        fields = dict(field.split("=", 1) for field in line.split())
        step = int(fields.pop("step"))
        assert step not in measured, f"held-out evaluated twice at step {step} by one process: {log}"
        shard = fields.pop("shard")
        fields.pop("seconds")
        measured[step] = (shard, {env: set(ids.split(",")) - {""} for env, ids in fields.items()})
    return measured


@pytest.mark.multiprocess
@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_two_processes_draw_alike_evaluate_held_out_once_and_write_metrics_once(
    launcher: str, tiny_model: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    began = time.perf_counter()
    trained = _train(_launcher(launcher), tiny_model, out, *ENVS)
    seconds = time.perf_counter() - began
    assert trained.returncode == 0, trained.stderr[-3000:]

    # the same prompts and curriculum weights on both processes, at every step
    draws = [_lines(out / "trl.log", "draw"), _lines(out / "trl.rank1.log", "draw")]
    assert len(draws[0]) == 4 and draws[0] == draws[1], draws
    weights = [json.loads(line.split(" ", 1)[1])["weights"] for line in draws[0]]
    assert all(sum(w.values()) == pytest.approx(1.0) for w in weights) and len({json.dumps(w) for w in weights}) > 1

    # held-out: at the start and at steps 2 and 4, each process generates its own half, together the set once
    from verihub.trainers.heldout import heldout_tasks

    expected = {item.name: {str(task["id"]) for task in heldout_tasks(item, HELDOUT_TASKS)} for item in _mix()}
    first, second = _heldout(out / "trl.log"), _heldout(out / "trl.rank1.log")
    assert sorted(first) == sorted(second) == [0, 2, 4]
    for step in first:
        (shard_a, mine), (shard_b, theirs) = first[step], second[step]
        assert (shard_a, shard_b) == ("0/2", "1/2")
        for env, ids in expected.items():
            assert not mine[env] & theirs[env] and mine[env] | theirs[env] == ids, (step, env)

    # metrics: written by the first process only, each step once, the held-out rates at the steps measured
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [record["step"] for record in records if "loss" in record] == [1, 2, 3, 4]
    for env in ("sums", "compare"):
        held = [record["step"] for record in records if f"verihub/{env}/heldout_pass_rate" in record]
        assert held == [1, 2, 4], held  # the start's measurement shows with the first step's metrics
        assert all(
            record[f"verihub/{env}/heldout_faulted"] == 0
            for record in records
            if f"verihub/{env}/heldout_faulted" in record
        )
    # metrics once; the grades each process made, in a log of its own (verihub.eval.gradelog)
    assert sorted(path.name for path in out.glob("*.jsonl")) == ["grades.jsonl", "grades.rank1.jsonl", "metrics.jsonl"]
    assert (out / "trl.log").read_text().count("{'step': ") == 5  # TRL's log lines: the main process's
    assert "{'step': " not in (out / "trl.rank1.log").read_text()
    assert [json.loads(line)["step"] for line in trained.stdout.splitlines()] == [1, 2, 3, 4, 4]
    assert seconds < 120, f"{launcher}: 4 steps with held-out evaluation took {seconds:.0f}s"


@pytest.mark.multiprocess
def test_processes_that_load_different_tasks_stop_with_a_clear_error(
    tiny_model: Path, tmp_path: Path, make_env: Any
) -> None:
    """A generator that ignores its seed gives each process other tasks under the same row numbers: the run
    must stop at the first batch, naming the cause, rather than train on groups of mismatched prompts."""
    spec = BASE_SPEC.replace("  source: data/tasks.jsonl\n", "  source: unseeded:make\n  size: 40\n  seed: 1\n")
    unseeded = (
        "import random\n\ndef make(n, seed):\n    rng = random.Random()  # the seed is ignored\n"
        "    for _ in range(n):\n        a = rng.randrange(10**6)\n"
        "        yield {'question': f'{a} + 1', 'answer': str(a + 1), 'wrong': str(a)}\n"
    )
    env = make_env(spec, files={"unseeded.py": unseeded})
    launched = _train(
        _launcher("torchrun"), tiny_model, tmp_path / "run", str(env), timeout=120, extra=("--heldout-every", "0")
    )
    assert launched.returncode != 0
    assert "process 1 drew other prompts than process 0" in launched.stderr
    assert "every process must load the same environments, data and seed" in launched.stderr


def test_heldout_generates_each_measurement_in_one_batch_at_the_envs_token_budget(tiny_model: Path) -> None:
    """One call of the model's ``generate`` for all the held-out tasks of both environments (they share
    sampling), at the environments' own ``max_tokens``; greedy answers as when asked one at a time."""
    import asyncio

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verihub.generation.local import HFBackend
    from verihub.trainers.heldout import heldout_rates, heldout_rollouts, heldout_tasks

    network = AutoModelForCausalLM.from_pretrained(tiny_model)
    calls: list[tuple[int, int]] = []
    generate = network.generate

    def counted(**options: Any) -> Any:
        calls.append((options["input_ids"].shape[0], options["max_new_tokens"]))
        return generate(**options)

    network.generate = counted
    policy = HFBackend.wrap(network, AutoTokenizer.from_pretrained(tiny_model), "hf:policy")
    mix = _mix()
    rollouts = asyncio.run(heldout_rollouts(policy, mix, tasks=12))
    assert calls == [(24, 32)]  # 12 tasks x 2 environments, each env's eval max_tokens (32)
    rates = heldout_rates(mix, rollouts, tasks=12)
    assert {name: (rate.tasks, rate.samples, rate.faulted) for name, rate in rates.items()} == {
        "sums": (12, 12, 0),
        "compare": (12, 12, 0),
    }

    alone = {}
    for item in mix:
        for task in heldout_tasks(item, 12)[:4]:
            [generation] = asyncio.run(policy.generate(item.env.render(task), _greedy(32)))
            alone[str(task["id"])] = generation.text
    batched = {rollout.task_id: rollout.completion for found in rollouts.values() for rollout in found}
    assert alone == {task_id: batched[task_id] for task_id in alone}


def test_heldout_shards_cover_the_set_once_and_rate_as_one(tiny_model: Path) -> None:
    import asyncio

    from verihub.generation.local import HFBackend
    from verihub.trainers.heldout import heldout_rates, heldout_rollouts

    policy = HFBackend(str(tiny_model))
    mix = _mix()
    whole = asyncio.run(heldout_rollouts(policy, mix, tasks=9))
    parts = [asyncio.run(heldout_rollouts(policy, mix, tasks=9, shard=(index, 3))) for index in range(3)]
    for name in ("sums", "compare"):
        ids = [sorted(rollout.task_id for rollout in part[name]) for part in parts]
        assert [len(found) for found in ids] == [3, 3, 3]
        assert sorted(sum(ids, [])) == sorted(rollout.task_id for rollout in whole[name])
    merged = {name: [rollout for part in parts for rollout in part[name]] for name in whole}
    assert heldout_rates(mix, merged, tasks=9) == heldout_rates(mix, whole, tasks=9)
    lost = heldout_rates(mix, parts[0], tasks=9)  # two shards never came back: faulted, never passed
    assert lost["sums"].faulted == 6 and lost["sums"].tasks_lost == 6 and lost["sums"].samples == 9
    with pytest.raises(ValueError, match="sums: held-out rollouts of 3 tasks outside its first 6 held-out tasks"):
        heldout_rates(mix, whole, tasks=6)  # a process that loaded other tasks than this one


def _greedy(max_tokens: int) -> Any:
    from verihub.generation import Sampling

    return Sampling(temperature=0.0, max_tokens=max_tokens)
