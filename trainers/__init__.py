"""GRPO and SFT trainers over TRL (``pip install "verihub[train]"``).

Not built yet; see the trainer issue. Importing it is safe and cheap and never imports torch.
"""

__all__: list[str] = []
