"""A verifiers v1 taskset whose load is not deterministic, for verihub's tests of evidence scored on a bridge of its
own: each load (each bridge process) rotates the tasks by one more place, counted in ``VF_SHIFTING_DIR/loads``;
its reward is exact, but fails once, the first time any reply ending in ``!`` is scored (a transient fault, marked
in ``VF_SHIFTING_DIR/flaked``)."""

import os
from pathlib import Path

import verifiers.v1 as vf


def _state(name: str) -> Path:
    return Path(os.environ["VF_SHIFTING_DIR"]) / name


class ShiftingData(vf.TaskData):
    answer: int


class ShiftingTask(vf.Task[ShiftingData, vf.State, vf.TaskConfig]):
    @vf.reward
    async def exact(self, task: ShiftingData, trace: vf.Trace) -> float:
        reply = trace.last_reply
        if reply.endswith("!") and not _state("flaked").exists():
            _state("flaked").touch()
            raise RuntimeError("the scorer failed this once")
        return 1.0 if int(reply.rstrip("!")) == task.answer else 0.0


class ShiftingTaskset(vf.Taskset[ShiftingTask, vf.TasksetConfig]):
    def load(self):
        counter = _state("loads")
        loads = int(counter.read_text()) if counter.exists() else 0
        counter.write_text(str(loads + 1))
        tasks = [
            ShiftingTask(
                ShiftingData(id=f"shift-{a}", prompt=f"What is {a} + {2 * a}?", answer=3 * a), self.config.task
            )
            for a in range(1, 11)
        ]
        shift = loads % len(tasks)
        yield from tasks[shift:] + tasks[:shift]


__all__ = ["ShiftingTaskset"]
