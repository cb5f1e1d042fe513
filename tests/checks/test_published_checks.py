"""Checks published by an installed package through the ``verihub.checks`` entry-point group."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import verihub
from conftest import MakeEnv
from verihub.checks.registry import available_check_names, resolve_check

MODULE = '''
from verihub import CheckResult, check

@check(mode="inline")
def within_budget(completion, task, budget=20):
    """Business rule: the quoted price stays within the budget."""
    import re
    prices = [int(p) for p in re.findall(r"\\$(\\d+)", completion)]
    ok = bool(prices) and max(prices) <= budget
    return CheckResult(1.0 if ok else 0.0, "" if ok else f"prices {prices} over {budget}")
'''


@pytest.fixture
def installed_verifier_package(tmp_path: Path) -> Iterator[None]:
    """A distribution on sys.path, as pip would leave it: a module plus dist-info with entry points."""
    site = tmp_path / "site"
    (site / "acme_rules").mkdir(parents=True)
    (site / "acme_rules" / "__init__.py").write_text(MODULE)
    info = site / "acme_rules-1.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-rules\nVersion: 1.0.0\n")
    (info / "entry_points.txt").write_text("[verihub.checks]\nacme_budget = acme_rules:within_budget\n")
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    yield
    sys.path.remove(str(site))
    sys.modules.pop("acme_rules", None)
    importlib.invalidate_caches()


def test_published_check_is_listed_resolved_and_used(installed_verifier_package: None, make_env: MakeEnv) -> None:
    assert "acme_budget" in available_check_names()
    check = resolve_check("acme_budget")
    assert check.mode == "inline" and "budget" in check.description
    spec = """\
id: quotes
version: 1.0.0
domain: business
description: Uses a check from another package.
dataset: {source: data/tasks.jsonl}
prompt: {user: "{question}"}
verifier:
  - {name: budget, layer: check, use: acme_budget, args: {budget: 15}}
gold: {reference: "It costs $12.", negatives: ["It costs $99."]}
"""
    env = verihub.load_env(make_env(spec))
    task = env.dataset("train")[0]
    assert env.grade(task, "It costs $12.").passed
    assert "over 15" in env.grade(task, "It costs $99.").layer("budget").detail


def test_unknown_argument_of_a_published_check(installed_verifier_package: None, make_env: MakeEnv) -> None:
    spec = """\
id: quotes
version: 1.0.0
domain: business
description: Bad argument.
dataset: {source: data/tasks.jsonl}
prompt: {user: "{question}"}
verifier:
  - {name: budget, layer: check, use: acme_budget, args: {limit: 15}}
gold: {reference: "x"}
"""
    with pytest.raises(verihub.SpecError, match="verifier\\[0\\].args: check 'within_budget'.*limit"):
        verihub.load_env(make_env(spec))
