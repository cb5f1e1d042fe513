"""The monitors count, per environment, the faults the fault rule kept for want of evidence (no gold, no canary,
no other answer graded without a fault on the task): graded through the trainer's reward function, counted in
``verihub/<env>/faults_without_evidence`` beside the other per-environment metrics."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from verihub.trainers.mixture import resolve_envs
from verihub.trainers.monitors import RunMonitor
from verihub.trainers.rewards import EnvReward, GradeLedger

SPEC = """\
id: strict
version: 0.1.0
domain: test
description: Sums scored by a check that raises on any answer that is no integer; no gold answers.
dataset: {source: data/tasks.jsonl, split: {train: 1.0}}
prompt: {user: "What is {question}?"}
verifier:
  - {name: exact, layer: check, use: "strict_checks:strict"}
gold: {reference: "{question}", reference_is: placeholder, min_pass_rate: 0}
"""
CHECKS = "def strict(completion, task):\n    return int(completion.strip()) == int(task['answer'])\n"


def test_faults_without_evidence_are_counted_per_environment(make_env: Any) -> None:
    rows = [{"id": f"t{i}", "question": f"{i} + {i}", "answer": str(2 * i)} for i in (1, 2)]
    item = resolve_envs([make_env(SPEC, rows=rows, files={"strict_checks.py": CHECKS})])[0]
    ledger, monitor = GradeLedger(), RunMonitor([item.name], group_size=1)
    reward = EnvReward(item, ledger)
    first, second = (json.dumps(row) for row in rows)

    def batch(pairs: list[tuple[str, str]]) -> list[float | None]:
        scored = asyncio.run(
            reward(
                prompts=[[]] * len(pairs),
                completions=[[{"role": "assistant", "content": text}] for _, text in pairs],
                environment=[item.name] * len(pairs),
                task=[task for task, _ in pairs],
                difficulty=["all"] * len(pairs),
            )
        )
        monitor.observe(ledger.take(len(pairs)))
        return scored

    assert batch([(first, "two"), (second, "four")]) == [None, None]  # nothing vouches for the check yet
    metrics, _ = monitor.flush()
    assert metrics[f"verihub/{item.name}/faults_without_evidence"] == 2.0
    assert metrics[f"verihub/{item.name}/faults"] == 2.0
    assert batch([(first, "2"), (first, "two")]) == [1.0, 0.0]  # the right answer is the wrong one's evidence
    metrics, _ = monitor.flush()
    assert metrics[f"verihub/{item.name}/faults_without_evidence"] == 2.0  # cumulative, and no more
    assert metrics[f"verihub/{item.name}/answer_faults"] == 1.0
