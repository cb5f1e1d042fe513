"""A verifiers v1 taskset for verihub's tests of whose fault a fault is: sums scored by a reward strict about its
input (``int(reply)``: it raises on any reply that is no integer, the task's prompt among them) that spins,
holding its interpreter, on a reply that starts with ``SPIN`` (a scorer's own work exploding on a crafted reply)."""

import verifiers.v1 as vf


class StrictData(vf.TaskData):
    answer: int


class StrictTask(vf.Task[StrictData, vf.State, vf.TaskConfig]):
    @vf.reward
    async def exact(self, task: StrictData, trace: vf.Trace) -> float:
        reply = trace.last_reply
        while reply.startswith("SPIN"):  # never returns: the bridge stalls until verihub kills it
            pass
        return 1.0 if int(reply) == task.answer else 0.0


class StrictTaskset(vf.Taskset[StrictTask, vf.TasksetConfig]):
    def load(self):
        for a in range(1, 11):
            yield StrictTask(
                StrictData(id=f"strict-{a}", prompt=f"What is {a} + {2 * a}?", answer=3 * a), self.config.task
            )


__all__ = ["StrictTaskset"]
