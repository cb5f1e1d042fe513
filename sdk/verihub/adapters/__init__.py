"""Environments built from other libraries' task generators.

``verihub.load_env("reasoning-gym:NAME", ...)`` builds an environment from one of reasoning-gym's
procedural datasets (:mod:`verihub.adapters.reasoning_gym`); ``verihub.load_env("openenv:URL")`` one
from an OpenEnv server, Space or installed package (:mod:`verihub.adapters.openenv`). Each adapter imports
its library only when an environment of it is loaded. Adapters build on the environment and everything
under it (and serve an installed OpenEnv package behind :mod:`verihub.serve`'s gate); never the eval, the
hub or the trainers.
"""
