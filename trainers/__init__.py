"""Trainers over TRL (``pip install "verihub[train]"``). So far: tiny offline models for tests and
demos (:mod:`verihub.trainers.tiny`); GRPO and SFT arrive with the trainer issue. Importing this
package never imports torch."""

__all__: list[str] = []
