"""Custom checks for __ENV_NAME__, used from environment.yaml as "__MODULE__.checks:NAME"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verihub import CheckResult, check


@check(mode="inline")
def concise(completion: str, task: Mapping[str, Any], max_words: int = 60) -> CheckResult:
    """Rewards answers that stay short after the tool calls."""
    words = len(completion.split())
    return CheckResult(1.0) if words <= max_words else CheckResult(0.0, f"{words} words, at most {max_words}")
