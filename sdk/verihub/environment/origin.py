"""Where an environment came from, when that is more than a directory: :class:`LoadReport`, what a loader from
another place (a hub's dataset at a pinned revision, a folder of another framework's tasks) says of its work.

``env.load_report`` is ``None`` for an environment read from its own ``environment.yaml``. Otherwise its
``source`` is the exact thing loaded (``hf://datasets/ORG/NAME@<commit>``), which eval results and training
metrics record as part of the environment's identity, and ``left_out`` names every item the loader refused
and why (a Harbor task whose image the jail cannot stand in for, say), so nothing is dropped in silence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["LoadReport"]


@dataclass(frozen=True)
class LoadReport:
    source: str  # what was loaded, pinned: hf://datasets/ORG/NAME@<40-hex commit>, or harbor:/path/to/tasks
    framework: str  # whose format it is: verihub, harbor, verifiers
    loaded: int  # tasks (or packages) taken
    left_out: tuple[tuple[str, str], ...] = ()  # (item, why), each refused item
    notes: tuple[str, ...] = field(default_factory=tuple)  # what a user should know (the default layers chosen)

    def lines(self) -> list[str]:
        """The report as a user reads it."""
        head = f"{self.source}: {self.framework}, {self.loaded} task(s)"
        if self.left_out:
            head += f", {len(self.left_out)} left out"
        return [head, *(f"  left out {item}: {why}" for item, why in self.left_out), *self.notes]
