"""A verifiers v1 taskset for verihub's tests: sums, scored by two weighted rewards (written against
verifiers' own API; verifiers' Task.score runs them)."""

import verifiers.v1 as vf


class SumsData(vf.TaskData):
    answer: int


class SumsTask(vf.Task[SumsData, vf.State, vf.TaskConfig]):
    @vf.reward(weight=0.75)
    async def correct(self, task: SumsData, trace: vf.Trace) -> float:
        words = trace.last_reply.replace(".", " ").split()
        return 1.0 if words[-1:] == [str(task.answer)] else 0.0

    @vf.reward(weight=0.25)
    async def brief(self, task: SumsData, trace: vf.Trace) -> float:
        return 1.0 if len(trace.last_reply) <= 40 else 0.0


class SumsTaskset(vf.Taskset[SumsTask, vf.TasksetConfig]):
    def load(self):
        for a in range(1, 11):
            yield SumsTask(SumsData(id=f"sum-{a}", prompt=f"What is {a} + {2 * a}?", answer=3 * a), self.config.task)


__all__ = ["SumsTaskset"]
