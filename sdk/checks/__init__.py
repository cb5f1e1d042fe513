"""Checks: the scoring functions verifier layers ``use``. See :mod:`verihub.checks.registry`.

A check declares the exploits known against it (:class:`Exploit`); ``verihub validate`` runs them.
"""

from verihub.checks._extract import fenced_blocks, strip_think
from verihub.checks.base import Check, CheckParams, CheckResult, Mode, as_check, check
from verihub.checks.exploit import Attempt, Exploit, Family

__all__ = ["Attempt", "Check", "CheckParams", "CheckResult", "Exploit", "Family", "Mode", "as_check", "check",
           "fenced_blocks", "strip_think"]
