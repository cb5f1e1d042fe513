"""Format rules: XML tags, a boxed answer, think tags, code blocks, length bounds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from verihub.checks._extract import fenced_blocks, find_answer, strip_think
from verihub.checks.base import CheckParams, CheckResult


class XmlTagsParams(CheckParams):
    tags: list[str] = Field(min_length=1, description="Tags that must each appear exactly once, e.g. [think, answer].")
    in_order: bool = Field(True, description="The tags must appear in the listed order.")
    nothing_outside: bool = Field(False, description="No text outside the tags (whitespace aside).")


def xml_tags(completion: str, task: Mapping[str, Any], params: XmlTagsParams) -> CheckResult:
    """Each listed tag appears exactly once as <tag>...</tag> (one opening and one closing tag, so no
    nesting), in order, non-empty."""
    spans = []
    for tag in params.tags:
        opening, closing = f"<{tag}>", f"</{tag}>"
        opened, closed = completion.count(opening), completion.count(closing)
        if opened != 1 or closed != 1:
            times = opened if opened == closed else f"{opened} (opening) and {closed} (closing)"
            return CheckResult(0.0, f"<{tag}> appears {times} times, expected once")
        start, end = completion.find(opening), completion.find(closing)
        if end < start:
            return CheckResult(0.0, f"</{tag}> comes before <{tag}>")
        if not completion[start + len(opening) : end].strip():
            return CheckResult(0.0, f"<{tag}> is empty")
        spans.append((start, end + len(closing)))
    if params.in_order and spans != sorted(spans):
        return CheckResult(0.0, f"tags are not in the order {params.tags}")
    if params.nothing_outside:
        outside = completion
        for start, end in sorted(spans, reverse=True):
            outside = outside[:start] + outside[end:]
        if outside.strip():
            return CheckResult(0.0, f"text outside the tags: {outside.strip()[:60]!r}")
    return CheckResult(1.0)


class NoParams(CheckParams):
    pass


def boxed(completion: str, task: Mapping[str, Any], params: NoParams) -> CheckResult:
    """The answer (outside <think>) is one non-empty \\boxed{...}: not empty, not nested, one line, and
    not several different boxed answers."""
    answer = find_answer(completion, "boxed")
    return CheckResult(0.0, answer.problem) if answer.problem else CheckResult(1.0)


class ThinkParams(CheckParams):
    require_answer: bool = Field(True, description="Some answer text must follow </think>.")


def think(completion: str, task: Mapping[str, Any], params: ThinkParams) -> CheckResult:
    """The completion opens with one closed <think>...</think> block."""
    text = completion.lstrip()
    if not text.startswith("<think>"):
        return CheckResult(0.0, "does not start with <think>")
    if completion.count("<think>") != 1 or completion.count("</think>") != 1:
        return CheckResult(0.0, "needs exactly one <think>...</think> block")
    if params.require_answer and not text.split("</think>", 1)[1].strip():
        return CheckResult(0.0, "nothing after </think>")
    return CheckResult(1.0)


class CodeBlockParams(CheckParams):
    language: str | None = Field(None, description="Required fence language, e.g. python (for min_blocks).")
    min_blocks: int = Field(1, ge=0, description="Fewest non-empty blocks in the required language.")
    max_blocks: int | None = Field(1, ge=1, description="Most fenced blocks allowed, of any language (null: no limit).")


def code_block(completion: str, task: Mapping[str, Any], params: CodeBlockParams) -> CheckResult:
    """The answer holds fenced code blocks (```lang ... ```), as many as allowed. Every block counts
    toward ``max_blocks`` whatever its language (a check reading "the last block" must not see one the gate
    did not count); an empty block is not code."""
    blocks = fenced_blocks(strip_think(completion))
    if params.max_blocks is not None and len(blocks) > params.max_blocks:
        return CheckResult(0.0, f"{len(blocks)} code blocks, at most {params.max_blocks} allowed")
    wanted = [
        body for language, body in blocks if params.language is None or language.lower() == params.language.lower()
    ]
    code = [body for body in wanted if body.strip()]
    if len(code) < params.min_blocks:
        kind = f"```{params.language}" if params.language else "fenced code"
        empty = f" ({len(wanted) - len(code)} empty)" if len(wanted) > len(code) else ""
        return CheckResult(0.0, f"{len(code)} {kind} blocks{empty}, need at least {params.min_blocks}")
    return CheckResult(1.0)


class LengthParams(CheckParams):
    min_chars: int | None = Field(None, ge=0)
    max_chars: int | None = Field(None, ge=1)
    min_words: int | None = Field(None, ge=0)
    max_words: int | None = Field(None, ge=1)
    of: Literal["answer", "completion"] = Field("answer", description="Measure without <think> blocks, or all.")

    @model_validator(mode="after")
    def _some_bound(self) -> LengthParams:
        if all(v is None for v in (self.min_chars, self.max_chars, self.min_words, self.max_words)):
            raise ValueError("set at least one of min_chars, max_chars, min_words, max_words")
        return self


def length(completion: str, task: Mapping[str, Any], params: LengthParams) -> CheckResult:
    """The answer's length in characters and words is within bounds."""
    text = (strip_think(completion) if params.of == "answer" else completion).strip()
    chars, words = len(text), len(text.split())
    for value, low, high, unit in (
        (chars, params.min_chars, params.max_chars, "characters"),
        (words, params.min_words, params.max_words, "words"),
    ):
        if low is not None and value < low:
            return CheckResult(0.0, f"{value} {unit}, need at least {low}")
        if high is not None and value > high:
            return CheckResult(0.0, f"{value} {unit}, at most {high} allowed")
    return CheckResult(1.0)
