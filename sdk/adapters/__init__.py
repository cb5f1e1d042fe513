"""Environments built from other libraries' task generators.

``verihub.load_env("reasoning-gym:NAME", ...)`` builds an environment from one of reasoning-gym's
procedural datasets (:mod:`verihub.adapters.reasoning_gym`). Each adapter imports its library only when
an environment of it is loaded.
"""
