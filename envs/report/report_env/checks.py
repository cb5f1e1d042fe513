"""Checks of the report environment.

``constraints`` (a rule): the answer keeps to the task's own limits, read from its columns ``max_words``,
``form`` (``paragraph``, ``sentence``, ``bullets`` or ``numbered``), ``min_items`` and ``max_items``.
Words are counted without list markers, so "- Ship it." is two words.

``key_facts`` (a check): the share of the task's ``fact_patterns`` (one case-insensitive regular expression
per key fact; ``.`` does not cross lines, so a pattern can tie an owner to an action on one list line) that
the answer matches. It is a cheap, literal proxy for coverage; the judge layer weighs paraphrase and
faithfulness.

A task row whose columns are malformed raises ``ValueError``: an environment fault, never a wrong answer.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from verihub import CheckParams, CheckResult, check

__all__ = ["FORMS", "constraint_problem", "constraints", "count_words", "key_facts", "list_items"]

FORMS = ("paragraph", "sentence", "bullets", "numbered")

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_BULLET = re.compile(r"^\s*[-*\u2022]\s+(\S.*)$")
_NUMBERED = re.compile(r"^\s*(\d{1,2})[.)]\s+(\S.*)$")
_MARKER = re.compile(r"^\s*(?:[-*\u2022]|\d{1,2}[.)])\s+", re.MULTILINE)
_WORD = re.compile(r"\w")
_SENTENCE_BREAK = re.compile(r"[.!?]\s+[A-Z(\"']")


def _answer(completion: str) -> str:
    """The answer without closed <think> blocks (an unclosed one leaves nothing)."""
    text = _THINK.sub("", completion)
    opened = text.find("<think>")
    return (text[:opened] if opened != -1 else text).strip()


def count_words(text: str) -> int:
    """Words with at least one letter or digit, list markers left out."""
    return sum(1 for token in _MARKER.sub("", text).split() if _WORD.search(token))


def list_items(text: str, form: str) -> list[str] | None:
    """The items of a bullet or numbered list filling the whole of ``text``, or None when some line is not one.
    Numbered items must run 1, 2, 3, ..."""
    lines = [line for line in text.splitlines() if line.strip()]
    items = []
    for position, line in enumerate(lines, 1):
        if form == "bullets":
            match = _BULLET.match(line)
            if match is None:
                return None
            items.append(match.group(1))
        else:
            match = _NUMBERED.match(line)
            if match is None or int(match.group(1)) != position:
                return None
            items.append(match.group(2))
    return items


def _int_column(task: Mapping[str, Any], name: str) -> int:
    value = task.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"task {task.get('id')!r}: column {name!r} must be a non-negative integer, got {value!r}")
    return value


def constraint_problem(answer: str, task: Mapping[str, Any]) -> str | None:
    """Why ``answer`` breaks the task's length or form constraint, or None when it keeps to both."""
    form, max_words = task.get("form"), _int_column(task, "max_words")
    if form not in FORMS:
        raise ValueError(f"task {task.get('id')!r}: form must be one of {', '.join(FORMS)}, got {form!r}")
    words = count_words(answer)
    if words == 0:
        return "the answer is empty"
    if max_words and words > max_words:
        return f"{words} words, at most {max_words} allowed"
    if form in ("paragraph", "sentence"):
        if any(_NUMBERED.match(line) or _BULLET.match(line) for line in answer.splitlines()):
            return f"a list where one {form} was asked for"
        if re.search(r"\n\s*\n", answer):
            return f"several paragraphs where one {form} was asked for"
        if form == "sentence" and ("\n" in answer or _SENTENCE_BREAK.search(answer)):
            return "more than one sentence"
        return None
    items = list_items(answer, form)
    kind = 'bullet points ("- ")' if form == "bullets" else 'numbered items ("1. ", "2. ", ...)'
    if items is None:
        return f"the answer must consist only of {kind}"
    low, high = _int_column(task, "min_items"), _int_column(task, "max_items")
    if len(items) < max(low, 1) or (high and len(items) > high):
        wanted = f"exactly {low}" if low == high else f"{low} to {high}"
        return f"{len(items)} {kind}, {wanted} asked for"
    return None


class _ConstraintColumns(CheckParams):
    def columns(self) -> set[str]:
        return {"form", "max_words", "min_items", "max_items"}


@check(mode="inline", params=_ConstraintColumns)
def constraints(completion: str, task: Mapping[str, Any], params: _ConstraintColumns) -> CheckResult:
    """The answer keeps to the task's word limit and required form (paragraph, sentence, bullets, numbered)."""
    problem = constraint_problem(_answer(completion), task)
    return CheckResult(0.0, problem) if problem else CheckResult(1.0)


class _FactColumns(CheckParams):
    def columns(self) -> set[str]:
        return {"fact_patterns", "key_facts"}


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


@check(mode="inline", params=_FactColumns)
def key_facts(completion: str, task: Mapping[str, Any], params: _FactColumns) -> CheckResult:
    """The share of the task's key facts (one regular expression each) that the answer states."""
    patterns: Sequence[str] = task["fact_patterns"]
    facts: Sequence[str] = task["key_facts"]
    if not patterns or len(patterns) != len(facts):
        raise ValueError(f"task {task.get('id')!r}: needs one fact pattern per key fact")
    answer = _answer(completion)
    missing = [fact for fact, pattern in zip(facts, patterns, strict=True) if not _compiled(pattern).search(answer)]
    score = 1 - len(missing) / len(patterns)
    return CheckResult(score, f"missing: {'; '.join(missing)}"[:300] if missing else "")
