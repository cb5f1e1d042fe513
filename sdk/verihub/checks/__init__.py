"""Checks: the scoring functions verifier layers ``use``. See :mod:`verihub.checks.registry`.

A check declares the exploits known against it (:class:`Exploit`); ``verihub validate`` runs them.
The names below load their module on first use: importing one check's module pays for no other.
Imports only the spec, the sandbox (code checks run there) and :mod:`verihub.errors`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from verihub import _lazy

if TYPE_CHECKING:
    from verihub.checks._extract import bash_commands, fenced_blocks, strip_think
    from verihub.checks.base import Check, CheckParams, CheckResult, Mode, as_check, check
    from verihub.checks.exploit import Attempt, Exploit, Family

_WHERE = {
    "bash_commands": "_extract",
    "fenced_blocks": "_extract",
    "strip_think": "_extract",
    "Check": "base",
    "CheckParams": "base",
    "CheckResult": "base",
    "Mode": "base",
    "as_check": "base",
    "check": "base",
    "Attempt": "exploit",
    "Exploit": "exploit",
    "Family": "exploit",
}
__all__ = sorted(_WHERE)
__getattr__, __dir__ = _lazy.lazy_names(globals(), _WHERE)
