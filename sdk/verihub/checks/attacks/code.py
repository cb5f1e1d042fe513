"""Exploits against ``python_tests``: the harness attacks of :mod:`verihub.checks.code_exploits` (forged
result lines, a rebound test runner, early exits...), each a generic ``solution.py`` whose module-level
``__getattr__`` provides whatever function the tests import, wrapped the way the check extracts code; and
``leave-startup-hooks`` against the runner's room (:data:`verihub.checks.attacks.rooms.LEAVE_HOOKS`)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from verihub.checks import code_exploits
from verihub.checks.attacks import rooms
from verihub.checks.exploit import Exploit, Family

__all__ = ["PYTHON_TESTS"]


def _candidate(source: str, task: Mapping[str, Any], params: Any) -> str:
    return source if getattr(params, "extract", "code_block") == "full" else f"```python\n{source.strip()}\n```"


PYTHON_TESTS = (
    *(
        Exploit(
            name,
            family,  # type: ignore[arg-type]  # code_exploits names each family by Family's values
            f"solution.py that attempts {name.replace('-', ' ')}",
            functools.partial(_candidate, source),
            tasks=2,
        )
        for name, family, source in code_exploits.EXPLOITS
    ),
    Exploit(
        "leave-startup-hooks",
        Family.HARNESS_TAMPERING,
        "solution.py leaves sitecustomize, .pth files and stand-ins for the modules the runner imports later in "
        "the work dir, HOME and /tmp, then dies at its first call so that a fresh child starts",
        functools.partial(_candidate, rooms.LEAVE_HOOKS),
        tasks=1,
    ),
)
