"""sophistry-bench-sprint's environment from PyPI, unmodified, with one paid reward function added to its own
rubric that raises on every reply: how verihub grades a published legacy environment whose scorer breaks."""

from __future__ import annotations

from typing import Any

from sophistry_bench_sprint import load_environment as published


def load_environment(**kwargs: Any) -> Any:
    env = published(**kwargs)
    env.rubric.add_reward_func(broken_lookup, weight=1.0)
    return env


def broken_lookup(completion: Any, info: Any, **kwargs: Any) -> float:
    return float(info["a field this package's rows do not have"])
