"""Checks: the scoring functions verifier layers ``use``. See :mod:`verihub.checks.registry`."""

from verihub.checks.base import Check, CheckParams, CheckResult, Mode, as_check, check

__all__ = ["Check", "CheckParams", "CheckResult", "Mode", "as_check", "check"]
