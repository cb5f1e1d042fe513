"""Malformed ``environment.yaml`` files: each problem is reported with its field path and line."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

import pytest

from verihub import load_env
from verihub.errors import SpecError, SpecProblem
from verihub.spec.loader import load_spec

HEAD = """\
id: tiny-math
version: 0.1.0
domain: math
description: Tiny arithmetic tasks.
dataset:
  source: data/tasks.jsonl
  seed: 0
  split:
    train: 0.5
    eval: 0.5
prompt:
  system: "Answer inside \\\\boxed{{}}."
  user: "What is {question}?"
interaction:
  kind: single_turn
  max_turns: 1
"""
VERIFIER = """\
verifier:
  - name: format
    layer: rule
    use: boxed
    gate: true
  - name: correct
    layer: check
    use: numeric
    args:
      field: answer
      rel_tol: 0.000001
    weight: 1.0
    pass_score: 1.0
    timeout_s: 5
"""
GOLD = """\
gold:
  reference: '\\boxed{{{answer}}}'
  negatives:
    - '\\boxed{{{wrong}}}'
    - "{answer}"
"""
# Lines of BASE: 1 id, 2 version, 5 dataset, 6 source, 7 seed, 8 split, 10 eval, 11 prompt, 12 system,
# 13 user, 14 interaction, 15 kind, 16 max_turns, 17 verifier, 18-21 verifier[0] (name, layer, use, gate),
# 22-30 verifier[1] (name, layer, use, args, field, rel_tol, weight, pass_score, timeout_s),
# 31 gold, 32 reference, 33 negatives, 34-35 negatives[0] and [1].
BASE = HEAD + VERIFIER + GOLD

DATA = "data/tasks.jsonl"
TASKS = "".join(
    json.dumps(task) + "\n"
    for task in (
        {"id": "t1", "question": "1 + 1", "answer": "2", "wrong": "3"},
        {"id": "t2", "question": "2 * 3", "answer": "6", "wrong": "5"},
    )
)
WITH_DATA: Mapping[str, str] = {DATA: TASKS}


class Case(NamedTuple):
    id: str
    yaml: str
    path: str
    line: int
    phrase: str
    files: Mapping[str, str] = WITH_DATA


def edit(replacements: dict[str, str], base: str = BASE) -> str:
    """``base`` with each old text (which must occur exactly once) replaced by its new text."""
    text = base
    for old, new in replacements.items():
        assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in the base spec"
        text = text.replace(old, new)
    return text


def write_env(root: Path, yaml_text: str, files: Mapping[str, str] = WITH_DATA) -> Path:
    """An environment directory holding ``environment.yaml`` and ``files`` (name -> content)."""
    for name, content in {"environment.yaml": yaml_text, **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    return root


@pytest.fixture(autouse=True)
def _restore_sys_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Loading a spec puts the environment's directory on sys.path; undo that after each test."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The environment directory, made the working directory so problems name 'environment.yaml'."""
    root = tmp_path / "env"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


def assert_problem(error: SpecError, path: str, line: int, phrase: str) -> SpecProblem:
    shown = "\n".join(f"  {p}" for p in error.problems)
    at_path = [p for p in error.problems if p.path == path]
    assert at_path, f"no problem at path {path!r}; got:\n{shown}"
    matching = [p for p in at_path if phrase in p.message]
    assert matching, f"no problem at {path!r} mentions {phrase!r}; got:\n{shown}"
    problem = matching[0]
    assert problem.line == line, f"{path!r} reported at line {problem.line}, expected {line}; got:\n{shown}"
    assert str(problem).startswith(f"environment.yaml:{line}:"), str(problem)
    return problem


SPEC_CASES = [
    # Unknown keys.
    Case("unknown-top-level-key", edit({"verifier:": "verifer:"}), "verifer", 17, "did you mean 'verifier'?"),
    Case(
        "unknown-nested-key",
        edit({"  kind: single_turn": "  knd: single_turn"}),
        "interaction.knd",
        15,
        "did you mean 'kind'?",
    ),
    Case(
        "unknown-layer-key", edit({"    gate: true": "    gaet: true"}), "verifier[0].gaet", 21, "did you mean 'gate'?"
    ),
    Case(
        "duplicate-yaml-key", edit({"    pass_score: 1.0": "    weight: -1"}), "verifier[1].weight", 29, "duplicate key"
    ),
    # Bounds, enums and patterns.
    Case("negative-weight", edit({"weight: 1.0": "weight: -1"}), "verifier[1].weight", 28, "must be >= 0"),
    Case(
        "pass-score-above-1", edit({"pass_score: 1.0": "pass_score: 1.5"}), "verifier[1].pass_score", 29, "must be <= 1"
    ),
    Case("timeout-zero", edit({"timeout_s: 5": "timeout_s: 0"}), "verifier[1].timeout_s", 30, "must be > 0"),
    Case(
        "bad-layer-kind",
        edit({"layer: check": "layer: checker"}),
        "verifier[1].layer",
        23,
        "must be one of 'rule', 'check' or 'judge'",
    ),
    Case(
        "bad-interaction-kind",
        edit({"kind: single_turn": "kind: chat"}),
        "interaction.kind",
        15,
        "must be one of 'single_turn' or 'multi_turn'",
    ),
    Case("bad-semver", edit({"version: 0.1.0": "version: v1.0.0"}), "version", 2, "semantic version"),
    Case("version-is-a-number", edit({"version: 0.1.0": "version: 1.0"}), "version", 2, "must be a valid string"),
    Case("bad-id", edit({"id: tiny-math": "id: Tiny Math"}), "id", 1, "does not match the pattern"),
    Case("verifier-not-a-list", HEAD + "verifier: format\n" + GOLD, "verifier", 17, "must be a valid list"),
    Case("empty-verifier", HEAD + "verifier: []\n" + GOLD, "verifier", 17, "at least 1 item"),
    # Required fields: reported at the closest line that exists.
    Case("missing-gold", HEAD + VERIFIER, "gold", 1, "required field is missing"),
    Case(
        "missing-prompt-user",
        edit({'  user: "What is {question}?"': "  # user removed"}),
        "prompt.user",
        11,
        "required field is missing",
    ),
    # Checks and their arguments.
    Case(
        "unknown-check", edit({"use: numeric": "use: nosuchcheck"}), "verifier[1].use", 24, "Available: exact, numeric"
    ),
    Case("check-did-you-mean", edit({"use: numeric": "use: numerc"}), "verifier[1].use", 24, "Did you mean 'numeric'"),
    Case(
        "unimportable-check",
        edit({"use: numeric": "use: no_such_module_xyz:check"}),
        "verifier[1].use",
        24,
        "cannot import",
    ),
    Case(
        "unknown-check-arg",
        edit({"      field: answer": "      feild: answer"}),
        "verifier[1].args.feild",
        26,
        "did you mean 'field'?",
    ),
    Case(
        "bad-check-arg-type",
        edit({"rel_tol: 0.000001": 'rel_tol: "abc"'}),
        "verifier[1].args.rel_tol",
        27,
        "must be a valid number",
    ),
    Case(
        "invalid-regex",
        edit({"    use: boxed\n    gate: true": "    use: regex\n    args: {pattern: '(open'}"}),
        "verifier[0].args.pattern",
        21,
        "invalid regular expression",
    ),
    Case(
        "length-without-bounds",
        edit({"    use: boxed": "    use: length"}),
        "verifier[0].args",
        18,
        "set at least one of",
    ),
    Case(
        "arg-for-check-without-args",
        edit({"    gate: true": "    args: {x: 1}"}),
        "verifier[0].args.x",
        21,
        "no arguments",
    ),
    Case(
        "check-module-raises",
        edit({"use: numeric": "use: broken_check_mod:fn"}),
        "verifier[1].use",
        24,
        "broken_check_mod",
        files={**WITH_DATA, "broken_check_mod.py": "raise RuntimeError('boom')\n"},
    ),
    # Dataset.
    Case("missing-data-file", BASE, "dataset.source", 6, "'data/tasks.jsonl' not found", files={}),
    Case(
        "unsupported-data-suffix",
        edit({"source: data/tasks.jsonl": "source: data/tasks.txt"}),
        "dataset.source",
        6,
        "unsupported data file type '.txt'",
        files={"data/tasks.txt": "1 + 1 = 2\n"},
    ),
    Case(
        "unimportable-generator",
        edit({"source: data/tasks.jsonl": "source: no_such_module_xyz:make", "  seed: 0": "  size: 10"}),
        "dataset.source",
        6,
        "cannot import generator module 'no_such_module_xyz'",
    ),
    Case(
        "generator-module-broken",
        edit({"source: data/tasks.jsonl": "source: broken_gen_mod:make", "  seed: 0": "  size: 10"}),
        "dataset.source",
        6,
        "broken_gen_mod",
        files={"broken_gen_mod.py": "def make(:\n"},
    ),
    Case(
        "generator-without-size",
        edit({"source: data/tasks.jsonl": "source: random:random"}),
        "dataset.size",
        5,
        "needs 'size'",
    ),
    Case(
        "size-for-file-source", edit({"  seed: 0": "  size: 10"}), "dataset.size", 7, "apply only to a generator source"
    ),
    Case("split-sum-above-1", edit({"eval: 0.5": "eval: 0.7"}), "dataset.split", 8, "must sum to at most 1"),
    Case("split-fraction-zero", edit({"eval: 0.5": "eval: 0"}), "dataset.split", 8, "fraction for 'eval' must be > 0"),
    Case("split-fraction-bool", edit({"eval: 0.5": "eval: true"}), "dataset.split.eval", 10, "'eval'"),
    Case(
        "split-name-not-a-string",
        edit({"    eval: 0.5": "    2: 0.5"}),
        "dataset.split.2",
        10,
        "must be a valid string",
    ),
    Case(
        "split-mixed-values",
        edit({"eval: 0.5": "eval: test"}),
        "dataset.split",
        8,
        "either fractions for every split or source split names",
    ),
    # Interaction.
    Case(
        "tools-on-single-turn",
        edit({"  max_turns: 1": "  tools: [python]"}),
        "interaction.tools",
        16,
        "need kind: multi_turn",
    ),
    Case(
        "unknown-tool",
        edit({"kind: single_turn": "kind: multi_turn", "  max_turns: 1": "  tools: [pyhton]"}),
        "interaction.tools",
        16,
        "unknown tool 'pyhton'",
    ),
    # Layer kinds.
    Case(
        "judge-without-rubric",
        edit({"    layer: rule\n    use: boxed": "    layer: judge\n    model: gpt-x"}),
        "verifier[0].rubric",
        18,
        "needs 'rubric'",
    ),
    Case(
        "judge-rubric-missing",
        edit({"    layer: rule\n    use: boxed": "    layer: judge\n    rubric: rubric.md"}),
        "verifier[0].rubric",
        20,
        "rubric file 'rubric.md' not found",
    ),
    Case("rule-without-use", edit({"    use: boxed": "    weight: 0"}), "verifier[0].use", 18, "needs 'use'"),
    Case(
        "duplicate-layer-name",
        edit({"  - name: correct": "  - name: format"}),
        "verifier[1].name",
        22,
        "'format' is already used by verifier[0]",
    ),
    # Templates.
    Case(
        "template-unclosed-brace",
        edit({'"What is {question}?"': '"What is {question?"'}),
        "prompt.user",
        13,
        "bad template",
    ),
    Case(
        "template-bad-conversion",
        edit({'"What is {question}?"': '"What is {question!x}?"'}),
        "prompt.user",
        13,
        "bad template",
    ),
    Case(
        "template-empty-placeholder",
        edit({'"Answer inside \\\\boxed{{}}."': '"Answer inside \\\\boxed{}."'}),
        "prompt.system",
        12,
        "empty placeholder",
    ),
    Case(
        "template-stray-close-brace",
        edit({"- '\\boxed{{{wrong}}}'": "- 'wrong}'"}),
        "gold.negatives[0]",
        34,
        "bad template",
    ),
    # Not a spec at all.
    Case(
        "yaml-syntax-error",
        edit({'  user: "What is {question}?"': "  user: What is: {question}?"}),
        "",
        13,
        "invalid YAML: mapping values are not allowed here",
    ),
    Case("yaml-bad-indent", edit({"    layer: check": "   layer: check"}), "", 23, "invalid YAML"),
    Case(
        "top-level-list", "- id: tiny-math\n- version: 0.1.0\n", "", 1, "must be a mapping of keys to values, got list"
    ),
    Case("empty-file", "", "", 1, "got an empty file"),
    Case("comments-only", "# nothing here yet\n", "", 1, "got an empty file"),
]

COLUMN_CASES = [
    Case(
        "placeholder-not-a-column",
        edit({'"What is {question}?"': '"What is {question}? Hint: {hint}"'}),
        "prompt.user",
        13,
        "placeholder {hint} is not a dataset column",
    ),
    Case(
        "gold-placeholder-not-a-column",
        edit({"reference: '\\boxed{{{answer}}}'": "reference: '\\boxed{{{answr}}}'"}),
        "gold.reference",
        32,
        "placeholder {answr} is not a dataset column",
    ),
    Case(
        "nested-placeholder-not-a-column",
        edit({'"What is {question}?"': '"What is {question:>{width}}?"'}),
        "prompt.user",
        13,
        "placeholder {width} is not a dataset column",
    ),
    Case("data-file-not-json", BASE, "dataset.source", 6, "data/tasks.jsonl", files={DATA: "not json\n"}),
    Case(
        "check-field-not-a-column",
        edit({"      field: answer": "      field: solution"}),
        "verifier[1].args.field",
        26,
        "check reads column 'solution'",
    ),
]


def test_base_spec_is_valid(root: Path) -> None:
    env = load_env(write_env(root, BASE))
    assert env.id == "tiny-math"
    assert env.verifier.layers and len(env.spec.verifier) == 2


@pytest.mark.parametrize("case", SPEC_CASES, ids=[case.id for case in SPEC_CASES])
def test_load_spec_reports_problem(case: Case, root: Path) -> None:
    write_env(root, case.yaml, case.files)
    with pytest.raises(SpecError) as caught:
        load_spec(root)
    assert_problem(caught.value, case.path, case.line, case.phrase)


@pytest.mark.parametrize("case", COLUMN_CASES, ids=[case.id for case in COLUMN_CASES])
def test_load_env_reports_dataset_column(case: Case, root: Path) -> None:
    write_env(root, case.yaml, case.files)
    load_spec(root)
    with pytest.raises(SpecError) as caught:
        load_env(root)
    assert_problem(caught.value, case.path, case.line, case.phrase)


def test_every_problem_is_reported_at_once(root: Path) -> None:
    text = edit({"version: 0.1.0": "version: one", "    gate: true": "    gaet: true", "timeout_s: 5": "timeout_s: -1"})
    write_env(root, text)
    with pytest.raises(SpecError) as caught:
        load_spec(root)
    problems = caught.value.problems
    assert len(problems) >= 3
    assert_problem(caught.value, "version", 2, "semantic version")
    assert_problem(caught.value, "verifier[0].gaet", 21, "did you mean 'gate'?")
    assert_problem(caught.value, "verifier[1].timeout_s", 30, "must be > 0")
    assert str(caught.value).startswith(f"invalid environment spec ({len(problems)} problems):")


def test_problems_are_ordered_by_line(root: Path) -> None:
    text = edit(
        {
            "pass_score: 1.0": "pass_score: 2",
            "id: tiny-math": "id: Tiny",
            "kind: single_turn": "kind: chat",
            "use: numeric": "use: numerc",
            "  - name: correct": "  - name: format",
        }
    )
    write_env(root, text, files={})
    with pytest.raises(SpecError) as caught:
        load_spec(root)
    lines = [problem.line or 0 for problem in caught.value.problems]
    assert len(lines) >= 5 and all(lines)
    assert lines == sorted(lines)


def test_non_utf8_file_is_a_spec_error(root: Path) -> None:
    (root / "environment.yaml").write_bytes(BASE.encode() + b"# caf\xe9\n")
    with pytest.raises(SpecError) as caught:
        load_spec(root)
    assert_problem(caught.value, "", 36, "UTF-8")


def test_env_modules_import_when_loaded_by_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two environments loaded one after the other as '.' each run their own generator module."""
    for name in ("first_env_gen", "second_env_gen"):
        text = edit({"source: data/tasks.jsonl": f"source: {name}:make", "  seed: 0": "  size: 2"})
        rows = f"[{{'id': '{name}-' + str(i), 'question': '1 + 1', 'answer': '2', 'wrong': '3'}} for i in range(n)]"
        monkeypatch.chdir(write_env(tmp_path / name, text, {f"{name}.py": f"def make(n, seed):\n    return {rows}\n"}))
        env = load_env(".")
        ids = [*env.dataset("train")["id"], *env.dataset("eval")["id"]]
        assert sorted(ids) == [f"{name}-0", f"{name}-1"]
    # Each directory went on sys.path resolved: a relative '.' would follow the next chdir.
    assert "." not in sys.path
    assert {str((tmp_path / name).resolve()) for name in ("first_env_gen", "second_env_gen")} <= set(sys.path)
