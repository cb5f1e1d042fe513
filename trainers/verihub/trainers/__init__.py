"""Training on verihub environments with TRL: ``GRPOTrainer`` (RL) and ``SFTTrainer`` (the warm start).

    from verihub.trainers import GRPOTrainer          # pip install "verihub[train]"
    GRPOTrainer("Qwen/Qwen2.5-0.5B-Instruct", {"envs/arithmetic": 0.7, "alice/sql@^1.0": 0.3},
                lora=True, curriculum="adaptive", max_steps=200).train()

Importing this package is cheap; torch, transformers and TRL load when a trainer is first used. The
trainers are a distribution of their own (verihub-trainers) on the SDK and the hub (environments named
``owner/name@spec`` install from it); neither imports them.
"""

from __future__ import annotations

from verihub import _lazy

__all__ = ["AdaptiveCurriculum", "AsyncGRPOTrainer", "GRPOTrainer", "SFTTrainer"]
_WHERE = {
    "GRPOTrainer": "grpo",
    "AsyncGRPOTrainer": "async_grpo",
    "SFTTrainer": "sft",
    "AdaptiveCurriculum": "curriculum",
}
__getattr__, __dir__ = _lazy.lazy_names(globals(), _WHERE)
