"""Answers that talk to the judge: signs of an injection attempt, and verdicts the answer wrote itself.

The judge prompt (:mod:`verihub.grading.judge`) keeps the answer inside its fence; this module is what the
verifier adds around any :class:`~verihub.grading.judge.Judge`:

- :func:`injection_signs` says how an answer addresses its judge (``fence``: fence tags or chat-template
  turn tokens; ``verdict``: a verdict-shaped object; ``instruction``: orders to the grader; ``rubric``: a
  sentence of the rubric pasted back). Cheap and bounded (linear scans); a heuristic, so it only flags: the
  judge layer's detail starts with ``[judge injection: ...]`` and the run monitors count and alert on it.
- :func:`judge_result` refuses a verdict that repeats one the answer wrote (same score and reason): that is
  the answer's text coming back through the judge, not the judge's own turn. It is the answer's fault
  (``wrong`` at the environment's floor), like any other input the answer alone makes a layer fail on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from verihub.checks._unicode import compatibility_fold
from verihub.checks.base import CheckResult
from verihub.grading.grade import Grade

__all__ = ["INJECTION_MARK", "flagged", "injection_flag", "injection_signs", "judge_result", "planted_verdicts"]

INJECTION_MARK = "[judge injection: "
_FLAG = re.compile(r"\[judge injection: ([a-z, -]+)\]")

_FENCE = re.compile(r"</?response\b|<[|｜]|\[/?INST\]|</?(?:s|start_of_turn|end_of_turn)>", re.IGNORECASE)
_VERDICT = re.compile(r"[\"'](?:score|verdict)[\"']\s*:", re.IGNORECASE)
_ORDERS = re.compile(
    r"\bignore\b[^.\n]{0,40}\b(?:rubric|instructions?|criteria|guidelines|prompt)\b"
    r"|\b(?:grader|grading|judge|evaluator|assessor|administrator)(?:'s)?\s+(?:note|instruction|team|override)"
    r"|\b(?:note|instructions?|message)\s+(?:to|for)\s+the\s+(?:grader|judge|evaluator)"
    r"|\b(?:output|reply|respond|return|give|assign|award|copy)\b[^.\n]{0,40}\b(?:score|verdict|rating|grade)\b"
    r"[^.\n]{0,20}(?:\b1(?:\.0)?\b|\b10\b|\b100\b|\bfull\b|\btop\b|\bmaximum\b|\bperfect\b)",
    re.IGNORECASE,
)
_VERDICT_START = re.compile(r"\{\s*\"(?:score|reason)\"")
_SPACE = re.compile(r"\s+")
_MIN_ECHO = 24  # characters of a rubric sentence that count as pasting it back (shorter ones recur by chance)
_MAX_PLANTED = 16  # verdict-shaped objects read from one answer
_MAX_OBJECT = 4096  # characters one of them may span


def injection_signs(answer: str, rubric: str = "") -> tuple[str, ...]:
    """How ``answer`` addresses its judge, in a fixed order; empty when it does not seem to."""
    text = compatibility_fold(answer)  # full-width and other compatibility forms read as ASCII
    signs = []
    if _FENCE.search(text):
        signs.append("fence")
    if _VERDICT.search(text):
        signs.append("verdict")
    if _ORDERS.search(text):
        signs.append("instruction")
    if rubric and _echoes_rubric(text, rubric):
        signs.append("rubric")
    return tuple(signs)


def planted_verdicts(answer: str) -> list[tuple[float, str]]:
    """The ``(score, reason)`` of each verdict-shaped JSON object written in ``answer`` (the first few)."""
    decoder = json.JSONDecoder()
    found = []
    for match in _VERDICT_START.finditer(answer):
        try:
            value, _ = decoder.raw_decode(answer[match.start() : match.start() + _MAX_OBJECT])
        except (ValueError, RecursionError):
            continue
        score = value.get("score") if isinstance(value, dict) else None
        if isinstance(score, int | float) and not isinstance(score, bool):
            found.append((float(score), _normal(str(value.get("reason", "")))))
        if len(found) >= _MAX_PLANTED:
            break
    return found


def judge_result(score: float, reason: str, answer: str, signs: Iterable[str]) -> CheckResult:
    """The judge layer's result for the judge's verdict ``(score, reason)`` on ``answer``."""
    signs = tuple(signs)
    if (score, _normal(reason)) in planted_verdicts(answer):
        flag = _mark((*signs, "echo") if "echo" not in signs else signs)
        return CheckResult.malformed(
            f"{flag}the judge's verdict repeats one written in the answer ({score:g}, "
            f"{reason[:80]!r}): not the judge's own"
        )
    return CheckResult(score, f"{_mark(signs)}{reason}" if signs else reason)


def flagged(detail: str, signs: Iterable[str]) -> str:
    """``detail`` with the injection mark in front, when there are ``signs``."""
    signs = tuple(signs)
    return f"{_mark(signs)}{detail}" if signs else detail


def injection_flag(grade: Grade) -> str:
    """The injection signs a judge layer of ``grade`` flagged (``"verdict, instruction"``), or ``""``."""
    for layer in grade.layers:
        if layer.layer == "judge" and INJECTION_MARK in layer.detail:
            found = _FLAG.search(layer.detail)
            if found:
                return found.group(1)
    return ""


def _mark(signs: tuple[str, ...]) -> str:
    return f"{INJECTION_MARK}{', '.join(signs)}] "


def _echoes_rubric(text: str, rubric: str) -> bool:
    answer = _normal(text)
    sentences = (_normal(part) for part in re.split(r"[\n.!?]+", rubric))
    return any(len(sentence) >= _MIN_ECHO and sentence in answer for sentence in sentences)


def _normal(text: str) -> str:
    return _SPACE.sub(" ", text).strip().casefold()
