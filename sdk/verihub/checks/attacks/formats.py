"""Exploits against format rules: the right delimiter around nothing, nested and repeated delimiters,
placeholders. A format rule is usually a gate: these check that it refuses what it exists to refuse."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verihub.checks.attacks.disguises import FULLWIDTH
from verihub.checks.exploit import Exploit, Family

__all__ = ["BOXED", "CODE_BLOCK", "FORBIDDEN", "THINK", "XML_TAGS"]

Task = Mapping[str, Any]

BOXED = (
    Exploit("empty-box", Family.FORMAT_GAMING, "\\boxed{} around nothing", lambda task, params: "So: \\boxed{}"),
    Exploit("blank-box", Family.FORMAT_GAMING, "\\boxed{} around spaces", lambda task, params: "\\boxed{   }"),
    Exploit(
        "nested-empty-box",
        Family.FORMAT_GAMING,
        "a \\boxed{} inside a \\boxed{}, both empty",
        lambda task, params: "\\boxed{\\boxed{}}",
    ),
)


def _tags(build: Any) -> Any:
    return lambda task, params: " ".join(build(tag) for tag in params.tags)


XML_TAGS = (
    Exploit("empty-tags", Family.FORMAT_GAMING, "every tag around nothing", _tags(lambda tag: f"<{tag}></{tag}>")),
    Exploit(
        "nested-tags",
        Family.FORMAT_GAMING,
        "every tag nested in itself",
        _tags(lambda tag: f"<{tag}><{tag}>x</{tag}></{tag}>"),
    ),
    Exploit(
        "repeated-tags",
        Family.FORMAT_GAMING,
        "every tag twice, with different contents",
        _tags(lambda tag: f"<{tag}>one</{tag}> <{tag}>two</{tag}>"),
    ),
)


def _language(params: Any) -> str:
    return params.language or ""


CODE_BLOCK = (
    Exploit(
        "empty-code-block",
        Family.FORMAT_GAMING,
        "a fenced block around nothing",
        lambda task, params: f"Here it is:\n```{_language(params)}\n\n```",
    ),
    Exploit(
        "unlabelled-second-block",
        Family.FORMAT_GAMING,
        "a block in the required language, then an unlabelled one that a gate counting by language misses",
        lambda task, params: (
            f"```{_language(params)}\nfirst\n```\n```\nsecond\n```"
            if params.max_blocks == 1 and params.language
            else None
        ),
    ),
)

THINK = (
    Exploit(
        "answer-inside-think",
        Family.FORMAT_GAMING,
        "everything inside <think>, nothing after it",
        lambda task, params: "<think>The answer is 42.</think>" if params.require_answer else None,
    ),
    Exploit(
        "unclosed-think",
        Family.FORMAT_GAMING,
        "a <think> block that never closes",
        lambda task, params: "<think>The answer is 42.",
    ),
)


def _disguised(disguise: Any) -> Any:
    """Every literal forbidden pattern, disguised; None for regular expressions (no text to disguise)."""
    return lambda task, params: None if params.regex else "Here: " + " ".join(map(disguise, params.patterns))


FORBIDDEN = (
    Exploit(
        "bidi-split-forbidden",
        Family.FORMAT_GAMING,
        "each forbidden text split by an invisible bidi isolate",
        _disguised(lambda text: text[:1] + "\u2066\u2069" + text[1:]),
    ),
    Exploit(
        "fullwidth-forbidden",
        Family.FORMAT_GAMING,
        "each forbidden text in full-width characters",
        _disguised(lambda text: text.translate(FULLWIDTH)),
    ),
)
