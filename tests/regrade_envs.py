"""A throwaway environment whose verifier changes between versions, for `verihub regrade`'s tests: sums answered in
\\boxed{}. Version 1.0.0's check has a hole (the answer anywhere in the completion pays, so one answer listing every
sum passes every task) and a false negative (an answer with a space fails); version 2.0.0 fixes both.

:func:`scripted` answers it as a model would: on each task sample 0 right, sample 1 the exploit, sample 2 right
with spaces; the last task's requests fail (its rollouts fault before any answer).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

TASKS = [{"id": f"t{i}", "question": f"{i} + {i}", "answer": str(2 * i), "wrong": str(2 * i + 1)} for i in range(1, 9)]
EXPLOIT = "\\boxed{246810121416}"  # every answer of TASKS at once

SPEC = """\
id: {id}
version: {version}
domain: math
description: Sums, with a verifier that changes between versions.
dataset:
  source: data/tasks.jsonl
  split: {{eval: 1.0}}
prompt:
  system: "Answer in \\\\boxed{{{{}}}}."
  user: "What is {{question}}?"
verifier:
  - {{name: format, layer: rule, use: boxed, gate: true}}
  - {{name: correct, layer: check, use: "{check}:score"}}
gold:
  reference: '\\boxed{{{{{{answer}}}}}}'
  negatives: ['\\boxed{{{{{{wrong}}}}}}']
"""

OPEN = '''\
def score(completion, task):
    """The answer anywhere in the completion (a hole), and no spaces (a false negative)."""
    return 1.0 if task["answer"] in completion and " " not in completion else 0.0
'''

FIXED = '''\
import re


def score(completion, task):
    """The one boxed integer equals the answer."""
    found = re.fullmatch(r"\\\\boxed\\{\\s*([-+]?\\d+)\\s*\\}", completion.strip())
    return 1.0 if found is not None and int(found.group(1)) == int(task["answer"]) else 0.0
'''


def hole_env(root: Path, version: str, *, fixed: bool, env_id: str = "hole", package: bool = False) -> Path:
    """The environment at ``version``, in ``root``: a directory whose check is a module of its own (named per
    version, so that both versions load in one process), or (``package``) a publishable package whose check is
    ``<id>_env.checks`` in both versions, as a real package's would be."""
    if package:
        from verihub.spec.scaffold import init_env

        root = init_env(env_id, "single-turn", root)
        module = f"{env_id.replace('-', '_')}_env.checks"
        (root / module.replace(".", "/")).with_suffix(".py").write_text(FIXED if fixed else OPEN)
        pyproject = root / "pyproject.toml"
        pyproject.write_text(pyproject.read_text().replace('version = "0.1.0"', f'version = "{version}"', 1))
    else:
        module = f"{env_id.replace('-', '_')}_{'fixed' if fixed else 'open'}_check"
        root.mkdir(parents=True, exist_ok=True)
        (root / f"{module}.py").write_text(FIXED if fixed else OPEN)
    (root / "environment.yaml").write_text(SPEC.format(id=env_id, version=version, check=module))
    (root / "data").mkdir(exist_ok=True)
    (root / "data" / "tasks.jsonl").write_text("".join(json.dumps(task) + "\n" for task in TASKS))
    return root


def scripted(request: dict[str, Any]) -> list[dict[str, Any]]:
    """A ScriptedChatServer model for the hole environment (see the module docstring)."""
    question = re.search(r"What is (\d+) \+ (\d+)\?", request["messages"][-1]["content"])
    assert question is not None, request["messages"]
    value = int(question.group(1)) + int(question.group(2))
    if value == 16:
        raise RuntimeError("the model server fell over")
    answers = [f"\\boxed{{{value}}}", EXPLOIT, f"\\boxed{{ {value} }}"]
    return [{"content": answers[index % 3]} for index in range(request.get("n", 1))]
