"""Growth probing covers the work-dir checks of terminal-state environments as it covers text layers (issue 39,
item 5): final work dirs of hostile shapes at half and at the full probe size, the host's own check of each
(what every tool call pays before the state becomes a snapshot) and every layer that grades the state timed,
and a step that grows faster than the work dir found without knowing its pattern."""

from __future__ import annotations

from typing import Any

import pytest

import verihub
from conftest import MakeEnv
from verihub.validation.growth import WORKDIR_CHECK, WORKDIR_SHAPES, probe_growth, probe_workdir_growth
from verihub.validation.redteam import EVERY_VERIFIER

SPEC = """\
id: {module}
version: 0.1.0
domain: test
description: A terminal-state environment with a check of its own.
dataset: {{source: data/tasks.jsonl, split: {{eval: 1.0}}}}
prompt: {{user: "Create the file {{name}}."}}
interaction: {{kind: multi_turn, max_turns: 2, tools: [bash]}}
verifier:
  - {{name: mine, layer: check, use: "{module}:{check}", timeout_s: 60}}
sandbox: {{wall_s: 20, memory_mb: 256}}
gold: {{reference: "```bash\\ntouch {{name}}\\n```"}}
"""
CHECKS = '''\
from verihub.checks.terminal_state import final_work_dir
from verihub.sandbox import Limits

LIMITS = Limits(wall_s=20, memory_mb=256)


def linear(completion, task):
    state = final_work_dir(completion, task, LIMITS)
    return not isinstance(state, str) and task["name"] in state.files()


def quadratic(completion, task):
    """Right states pass; but every name is looked for in a list of all of them (n^2 on entries)."""
    state = final_work_dir(completion, task, LIMITS)
    if isinstance(state, str):
        return False
    names = [entry.name for entry in state.entries()]
    sum(name in names for name in names)
    return task["name"] in state.files()
'''
ROWS = [{"id": f"t{i}", "name": f"made-{i}.txt"} for i in range(1, 5)]


def growth(make_env: MakeEnv, check: str) -> dict[str, Any]:
    module = f"workdir_{check}"
    root = make_env(SPEC.format(module=module, check=check), rows=ROWS, files={f"{module}.py": CHECKS}, name=module)
    env = verihub.load_env(root)
    return {outcome.name: outcome for outcome in probe_workdir_growth(env, env.tasks("eval")[0], EVERY_VERIFIER)}


@pytest.mark.nsjail
def test_a_check_quadratic_in_the_work_dir_is_found(make_env: MakeEnv) -> None:
    found = growth(make_env, "quadratic")
    faulted = {name: outcome.error for name, outcome in found.items() if outcome.verdict == "fault"}
    assert "growth-workdir-many-entries" in faulted, {name: o.verdict for name, o in found.items()}
    assert (
        "layer 'mine'" in faulted["growth-workdir-many-entries"]
        and "super-linear" in faulted["growth-workdir-many-entries"]
    )
    assert found["growth-workdir-many-entries"].family == "fault-forcing"


@pytest.mark.nsjail
def test_a_linear_terminal_state_environment_passes_every_work_dir_shape(make_env: MakeEnv) -> None:
    """Its layers and the host's own check of each shape (the chain of long links among them, which the
    host's old link resolution walked in cubic time) grow no faster than the work dir."""
    found = growth(make_env, "linear")
    shapes = {f"growth-workdir-{shape}" for shape in WORKDIR_SHAPES}
    assert shapes <= set(found)
    assert {name: found[name].verdict for name in shapes} == dict.fromkeys(shapes, "blocked"), {
        name: found[name].error for name in shapes
    }
    assert WORKDIR_CHECK == "(work dir check)"


def test_text_environments_get_no_work_dir_shapes(make_env: MakeEnv) -> None:
    env = verihub.load_env(make_env())  # conftest's BASE_SPEC: text answers, no sandboxed tools
    names = [outcome.name for outcome in probe_growth(env, env.tasks("eval")[0], EVERY_VERIFIER)]
    assert names and not [name for name in names if "workdir" in name]


def _cubic_links_out(links: dict[int, list[str]], tree: Any, clock: Any) -> list[int]:
    """The host's link resolution before issue 39: every link resolved from scratch, through up to 40 hops,
    the path so far joined anew at every part of every target."""

    def resolve(stack: list[str], target: str, hops: list[int]) -> list[str] | None:
        if not target or target.startswith("/"):
            return None
        stack = list(stack)
        for part in target.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if not stack:
                    return None
                stack.pop()
                continue
            stack.append(part)
            link = targets.get("/".join(stack))
            if link is not None:
                hops[0] += 1
                if hops[0] > 40:
                    return None
                found = resolve(stack[:-1], link, hops)
                if found is None:
                    return None
                stack = found
        return stack

    targets = {tree.names[node]: "/".join(parts) for node, parts in links.items()}
    return [node for node in links if resolve(tree.names[node].split("/")[:-1], targets[tree.names[node]], [0]) is None]


@pytest.mark.nsjail
def test_the_hosts_own_check_is_probed_and_the_old_cubic_walk_would_have_been_found(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the walk the issue found (put back for this test, on work dirs of 64 and 128 KB so that it
    takes seconds rather than minutes), growth probing fails the chain of long links on the host's check."""
    from verihub.sandbox import _archive
    from verihub.validation import growth as probing

    monkeypatch.setattr(_archive, "_links_out", _cubic_links_out)
    monkeypatch.setattr(probing, "WORKDIR_BYTES", 128 << 10)
    found = growth(make_env, "linear")
    chain = found["growth-workdir-link-chain"]
    assert chain.verdict == "fault" and f"layer {WORKDIR_CHECK!r}" in chain.error, chain.error
