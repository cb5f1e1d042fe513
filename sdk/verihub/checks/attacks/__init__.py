"""The exploits known against the built-in checks, one module per check family (see
:mod:`verihub.checks.exploit`). :mod:`~verihub.checks.attacks.common` holds the ones every verifier must
resist whatever its checks, :mod:`~verihub.checks.attacks.judge` those against judge layers."""
