"""Exploits against ``python_tests``: the harness attacks of :mod:`verihub.checks.code_exploits` (forged
result lines, a rebound test runner, early exits...), each a generic ``solution.py`` whose module-level
``__getattr__`` provides whatever function the tests import, wrapped the way the check extracts code."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from verihub.checks import code_exploits
from verihub.checks.exploit import Exploit

__all__ = ["PYTHON_TESTS"]


def _candidate(source: str, task: Mapping[str, Any], params: Any) -> str:
    return source if getattr(params, "extract", "code_block") == "full" else f"```python\n{source.strip()}\n```"


PYTHON_TESTS = tuple(
    Exploit(
        name,
        family,  # type: ignore[arg-type]  # code_exploits names each family by Family's values
        f"solution.py that attempts {name.replace('-', ' ')}",
        functools.partial(_candidate, source),
        tasks=2,
    )
    for name, family, source in code_exploits.EXPLOITS
)
