"""Checks on answer text: exact match, regular expressions, multiple choice, required and forbidden content."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cached_property
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from verihub.checks._extract import WHITESPACE, Extract, find_answer, strip_think
from verihub.checks._unicode import LOOKALIKE_CAPITALS, compatibility_fold, fold
from verihub.checks.base import CheckParams, CheckResult
from verihub.errors import DataError

_EDGES = WHITESPACE + ".,;:!?\"'`()[]"  # cut from both ends (str.strip: linear where a regex ``[...]+$`` is not)
_SPACES = re.compile(r"\s+")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_TEXT_WRAPPER = re.compile(r"\\text\{([^{}]*)\}")


class ExactParams(CheckParams):
    field: str = Field("answer", description="Column with the expected answer (a string or a list of accepted ones).")
    extract: Extract = Field("auto", description="Which part of the completion is the answer.")
    case_sensitive: bool = False
    ignore_punctuation: bool = Field(True, description="Ignore punctuation at the ends and LaTeX $ and \\text{}.")
    ignore_articles: bool = Field(False, description="Ignore 'a', 'an', 'the'.")

    def columns(self) -> set[str]:
        return {self.field}


def normalise(text: str, params: ExactParams) -> str:
    # fold, not NFKC: NFKC reads "2³" as "23" and "Ⅻ" as "XII"
    text = fold(text)
    if params.ignore_punctuation:
        text = _TEXT_WRAPPER.sub(r"\1", text.strip().strip("$")).strip(_EDGES)
    if not params.case_sensitive:
        text = text.casefold()
    if params.ignore_articles:
        text = _ARTICLES.sub(" ", text)
    return _SPACES.sub(" ", text).strip()


def exact(completion: str, task: Mapping[str, Any], params: ExactParams) -> CheckResult:
    """The answer equals the expected one after normalisation (case, spaces, edge punctuation)."""
    expected = task[params.field]
    accepted = expected if isinstance(expected, list) else [expected]
    found = find_answer(completion, params.extract)
    if found.problem:
        return CheckResult(0.0, found.problem)
    answer = normalise(found.text, params)
    if any(answer == normalise(str(option), params) for option in accepted):
        return CheckResult(1.0)
    return CheckResult(0.0, f"got {answer[:80]!r}, expected {str(expected)[:80]!r}")


PATTERN_TIMEOUT_S = 0.25
"""How long one of an environment's own regular expressions may run on one answer. An answer built to
make a pattern backtrack catastrophically (a megabyte of unclosed ``<answer>`` for ``<answer>.*?</answer>``)
would otherwise stall an inline check: past the limit the pattern counts as not matching (``regex``,
``contains``) or as matching (``forbidden``), so such an answer is wrong, never a fault."""


class PatternTimeout(Exception):
    """A pattern ran past :data:`PATTERN_TIMEOUT_S` on an answer."""


def compile_pattern(pattern: str, flags: int = 0) -> Any:
    """An environment's pattern, compiled by the ``regex`` module (``re``'s syntax; its matches take a
    timeout). A ValueError says why a pattern is invalid."""
    import regex as patterns  # imported when an environment uses a pattern: light installs stay light

    try:
        return patterns.compile(pattern, flags)
    except patterns.error as error:
        raise DataError(f"invalid regular expression {pattern!r}: {error}") from None


def search(pattern: Any, text: str, *, full: bool = False) -> Any:
    """``pattern``'s match in ``text`` (or None), within :data:`PATTERN_TIMEOUT_S`; PatternTimeout past it."""
    try:
        return (pattern.fullmatch if full else pattern.search)(text, timeout=PATTERN_TIMEOUT_S)
    except TimeoutError:
        raise PatternTimeout(
            f"the pattern {pattern.pattern[:60]!r} ran past {PATTERN_TIMEOUT_S:g}s on this answer"
        ) from None


def must_compile(pattern: str) -> str:
    """``pattern`` if it is a valid regular expression; a ValueError saying why otherwise."""
    compile_pattern(pattern)
    return pattern


_FLAGS = {"IGNORECASE": re.IGNORECASE, "MULTILINE": re.MULTILINE, "DOTALL": re.DOTALL}  # the regex module's values


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
    def compiled(self) -> Any:
        flags = 0
        for name in self.flags:
            flags |= _FLAGS[name]
        return compile_pattern(self.pattern, flags)


def regex(completion: str, task: Mapping[str, Any], params: RegexParams) -> CheckResult:
    """The answer matches a regular expression (an answer refused by extraction, e.g. a hedge, does not)."""
    found = find_answer(completion, params.extract)
    if found.problem:
        return CheckResult(0.0, found.problem)
    try:
        matched = search(params.compiled, found.text, full=params.fullmatch) is not None
    except PatternTimeout as timeout:
        return CheckResult(0.0, str(timeout))
    return CheckResult(1.0) if matched else CheckResult(0.0, "no match")


class MultipleChoiceParams(CheckParams):
    field: str = Field("answer", description="Column with the correct option letter.")
    choices: str = Field("ABCD", min_length=2, description="The option letters.")

    def columns(self) -> set[str]:
        return {self.field}


def multiple_choice(completion: str, task: Mapping[str, Any], params: MultipleChoiceParams) -> CheckResult:
    """The one option the answer names (in \\boxed{}, <answer>, 'answer is X', '(X)' or a lone letter) is the
    right one; an answer naming several options ("A or B", every option, one per line) chose none."""
    chosen, problem = chosen_option(completion, params.choices)
    expected = str(task[params.field]).strip().upper()
    if chosen == expected:
        return CheckResult(1.0)
    return CheckResult(0.0, problem or f"chose {chosen or 'nothing'}, expected {expected}")


def chosen_option(completion: str, choices: str) -> tuple[str | None, str]:
    """The option letter the answer names, or (None, why): none, or several (a hedge)."""
    answer = find_answer(completion, "auto")
    if answer.problem:
        return None, answer.problem
    text, letters = answer.text, choices.upper()
    # An option written in look-alike letters (Cyrillic "В") is an option a reader sees: "B or С" is a hedge.
    disguised = LOOKALIKE_CAPITALS.intersection(text)
    if disguised and re.search(rf"(?<!\w)[{''.join(sorted(disguised))}](?!\w)", text):
        return None, "the answer names an option in look-alike letters of another script"
    if len(text.strip("().: ")) == 1 and text.strip("().: ").upper() in letters:
        return text.strip("().: ").upper(), ""
    named = {m.upper() for m in re.findall(rf"\(([{re.escape(letters + letters.lower())}])\)", text)}
    # Standalone capitals; on an undelimited last line an English article "A word" is not option A.
    article = r"(?!\s+[a-z])" if answer.source == "last_line" else ""
    named |= set(re.findall(rf"\b([{re.escape(letters)}])\b{article}", text))
    if len(named) > 1:
        return None, f"the answer names {len(named)} options ({', '.join(sorted(named))}): a hedge chooses none"
    return (named.pop(), "") if named else (None, "")


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
    def compiled(self) -> list[Any]:
        flags = 0 if self.case_sensitive else re.IGNORECASE
        return [compile_pattern(p if self.regex else re.escape(p), flags) for p in self.patterns]


class ContainsParams(PatternsParams):
    mode: Literal["all", "any"] = Field("all", description="Require every pattern, or at least one.")


def contains(completion: str, task: Mapping[str, Any], params: ContainsParams) -> CheckResult:
    """The completion contains the required patterns."""
    found = find_answer(completion, params.extract)
    if found.problem:
        return CheckResult(0.0, found.problem)
    text = found.text
    try:
        missing = [p.pattern for p in params.compiled if search(p, text) is None]
    except PatternTimeout as timeout:
        return CheckResult(0.0, str(timeout))
    ok = not missing if params.mode == "all" else len(missing) < len(params.compiled)
    return CheckResult(1.0) if ok else CheckResult(0.0, f"missing {missing[:3]}")


def forbidden(completion: str, task: Mapping[str, Any], params: PatternsParams) -> CheckResult:
    """Safety: the completion contains none of the forbidden patterns (also when written in compatibility
    forms such as fullwidth letters, or split by invisible characters)."""
    text = strip_think(completion)  # all of it: with extract "full", or when there is no single answer
    if params.extract != "full" and not (answer := find_answer(completion, params.extract)).problem:
        text = answer.text
    text = compatibility_fold(text).strip()
    for pattern in params.compiled:
        try:
            found = search(pattern, text)
        except PatternTimeout as timeout:
            return CheckResult(0.0, f"{timeout}: counted as forbidden")
        if found is not None:
            return CheckResult(0.0, f"forbidden {found.group(0)[:60]!r}")
    return CheckResult(1.0)
