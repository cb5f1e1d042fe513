"""Checks on answer text: exact match, regular expressions, multiple choice, required and forbidden content."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from functools import cached_property
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from verihub.checks._extract import Extract, extract_answer, last_boxed, strip_think
from verihub.checks.base import CheckParams, CheckResult

_PUNCTUATION_EDGES = re.compile(r"^[\s.,;:!?\"'`()\[\]]+|[\s.,;:!?\"'`()\[\]]+$")
_SPACES = re.compile(r"\s+")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_LATEX_WRAPPERS = re.compile(r"^\$+|\$+$|\\text\{([^{}]*)\}")


class ExactParams(CheckParams):
    field: str = Field("answer", description="Column with the expected answer (a string or a list of accepted ones).")
    extract: Extract = Field("auto", description="Which part of the completion is the answer.")
    case_sensitive: bool = False
    ignore_punctuation: bool = Field(True, description="Ignore punctuation at the ends and LaTeX $ and \\text{}.")
    ignore_articles: bool = Field(False, description="Ignore 'a', 'an', 'the'.")

    def columns(self) -> set[str]:
        return {self.field}


def normalise(text: str, params: ExactParams) -> str:
    text = unicodedata.normalize("NFKC", text)
    if params.ignore_punctuation:
        text = _PUNCTUATION_EDGES.sub("", _LATEX_WRAPPERS.sub(r"\1", text.strip()))
    if not params.case_sensitive:
        text = text.casefold()
    if params.ignore_articles:
        text = _ARTICLES.sub(" ", text)
    return _SPACES.sub(" ", text).strip()


def exact(completion: str, task: Mapping[str, Any], params: ExactParams) -> CheckResult:
    """The answer equals the expected one after normalisation (case, spaces, edge punctuation)."""
    expected = task[params.field]
    accepted = expected if isinstance(expected, list) else [expected]
    answer = normalise(extract_answer(completion, params.extract), params)
    if any(answer == normalise(str(option), params) for option in accepted):
        return CheckResult(1.0)
    return CheckResult(0.0, f"got {answer[:80]!r}, expected {str(expected)[:80]!r}")


def must_compile(pattern: str) -> str:
    """``pattern`` if it is a valid regular expression; a ValueError saying why otherwise."""
    try:
        re.compile(pattern)
    except re.error as error:
        raise ValueError(f"invalid regular expression {pattern!r}: {error}") from None
    return pattern


_FLAGS = {"IGNORECASE": re.IGNORECASE, "MULTILINE": re.MULTILINE, "DOTALL": re.DOTALL}


class RegexParams(CheckParams):
    pattern: str = Field(description="Python regular expression.")
    fullmatch: bool = Field(False, description="The whole answer must match, not just a part of it.")
    flags: list[Literal["IGNORECASE", "MULTILINE", "DOTALL"]] = Field(default_factory=list)
    extract: Extract = Field("full", description="Which part of the completion to match.")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        return must_compile(pattern)

    @cached_property
    def compiled(self) -> re.Pattern[str]:
        flags = 0
        for name in self.flags:
            flags |= _FLAGS[name]
        return re.compile(self.pattern, flags)


def regex(completion: str, task: Mapping[str, Any], params: RegexParams) -> bool:
    """The answer matches a regular expression."""
    answer = extract_answer(completion, params.extract)
    matcher = params.compiled.fullmatch if params.fullmatch else params.compiled.search
    return matcher(answer) is not None


class MultipleChoiceParams(CheckParams):
    field: str = Field("answer", description="Column with the correct option letter.")
    choices: str = Field("ABCD", min_length=2, description="The option letters.")

    def columns(self) -> set[str]:
        return {self.field}


def multiple_choice(completion: str, task: Mapping[str, Any], params: MultipleChoiceParams) -> CheckResult:
    """The chosen option letter (from \\boxed{}, 'answer is X', '(X)' or a lone letter) is the right one."""
    chosen = choice_letter(strip_think(completion), params.choices)
    expected = str(task[params.field]).strip().upper()
    if chosen == expected:
        return CheckResult(1.0)
    return CheckResult(0.0, f"chose {chosen or 'nothing'}, expected {expected}")


def choice_letter(text: str, choices: str) -> str | None:
    letters = re.escape(choices.upper() + choices.lower())
    boxed = last_boxed(text)
    candidates = [boxed] if boxed is not None else []
    candidates += [m.group(1) for m in re.finditer(rf"answer\s*(?:is|:)\s*\(?([{letters}])\b", text, re.I)][::-1]
    candidates += [m.group(1) for m in re.finditer(rf"\(([{letters}])\)", text)][::-1]
    lines = [line for line in text.splitlines() if line.strip()]
    if lines:
        candidates += [m.group(1) for m in re.finditer(rf"\b([{letters}])\b", lines[-1])][::-1]
    for candidate in candidates:
        candidate = candidate.strip().strip("().").upper()
        if len(candidate) == 1 and candidate in choices.upper():
            return candidate
    return None


class PatternsParams(CheckParams):
    patterns: list[str] = Field(min_length=1, description="Substrings (or regular expressions if regex: true).")
    regex: bool = False
    case_sensitive: bool = True
    extract: Extract = Field("full", description="Which part of the completion to search.")

    @model_validator(mode="after")
    def _compiles(self) -> PatternsParams:
        if self.regex:
            for pattern in self.patterns:
                must_compile(pattern)
        return self

    @cached_property
    def compiled(self) -> list[re.Pattern[str]]:
        flags = 0 if self.case_sensitive else re.IGNORECASE
        return [re.compile(p if self.regex else re.escape(p), flags) for p in self.patterns]


class ContainsParams(PatternsParams):
    mode: Literal["all", "any"] = Field("all", description="Require every pattern, or at least one.")


def contains(completion: str, task: Mapping[str, Any], params: ContainsParams) -> CheckResult:
    """The completion contains the required patterns."""
    text = extract_answer(completion, params.extract)
    missing = [p.pattern for p in params.compiled if p.search(text) is None]
    ok = not missing if params.mode == "all" else len(missing) < len(params.compiled)
    return CheckResult(1.0) if ok else CheckResult(0.0, f"missing {missing[:3]}")


def forbidden(completion: str, task: Mapping[str, Any], params: PatternsParams) -> CheckResult:
    """Safety: the completion contains none of the forbidden patterns."""
    text = extract_answer(completion, params.extract)
    for pattern in params.compiled:
        found = pattern.search(text)
        if found is not None:
            return CheckResult(0.0, f"forbidden {found.group(0)[:60]!r}")
    return CheckResult(1.0)
