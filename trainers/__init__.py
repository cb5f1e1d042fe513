"""Training on verihub environments with TRL: ``GRPOTrainer`` (RL) and ``SFTTrainer`` (the warm start).

    from verihub.trainers import GRPOTrainer          # pip install "verihub[train]"
    GRPOTrainer("Qwen/Qwen2.5-0.5B-Instruct", {"envs/arithmetic": 0.7, "alice/sql@^1.0": 0.3},
                lora=True, curriculum="adaptive", max_steps=200).train()

Importing this package is cheap; torch, transformers and TRL load when a trainer is first used.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AdaptiveCurriculum", "GRPOTrainer", "SFTTrainer"]

_WHERE = {"GRPOTrainer": "grpo", "SFTTrainer": "sft", "AdaptiveCurriculum": "curriculum"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        from importlib import import_module

        return getattr(import_module(f"verihub.trainers.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'verihub.trainers' has no attribute {name!r}")
