"""A second verifiers v1 taskset for verihub's tests: capitals, with a system prompt, a reward that needs
verifiers' runtime (which verihub cannot run: it is skipped and named), and a scorer that raises on one input
(a bug of the taskset's: on every reply, with task.broken, an environment fault; on one reply only, that
reply's fault, by verihub's one rule)."""

import verifiers.v1 as vf

CAPITALS = {
    "France": "Paris",
    "Japan": "Tokyo",
    "Kenya": "Nairobi",
    "Peru": "Lima",
    "Chile": "Santiago",
    "Egypt": "Cairo",
    "Canada": "Ottawa",
    "Spain": "Madrid",
}


class CapitalData(vf.TaskData):
    country: str
    capital: str


class CapitalsTaskConfig(vf.TaskConfig):
    broken: bool = False  # the scorer raises on every reply


class CapitalTask(vf.Task[CapitalData, vf.State, CapitalsTaskConfig]):
    @vf.reward
    async def named(self, task: CapitalData, trace: vf.Trace) -> float:
        reply = trace.last_reply
        if "CRASH" in reply or self.config.broken:
            raise RuntimeError("the scorer cannot read this reply")
        return 1.0 if task.capital.lower() in reply.lower() else 0.0

    @vf.reward(weight=0.0)
    async def in_sandbox(self, task: CapitalData, trace: vf.Trace, runtime: vf.Runtime) -> float:
        return 1.0


class CapitalsConfig(vf.TasksetConfig):
    countries: int = 8
    task: CapitalsTaskConfig = CapitalsTaskConfig()


class CapitalsTaskset(vf.Taskset[CapitalTask, CapitalsConfig]):
    def load(self):
        for country, capital in list(CAPITALS.items())[: self.config.countries]:
            yield CapitalTask(
                CapitalData(
                    id=country.lower(),
                    prompt=f"What is the capital of {country}?",
                    system_prompt="Answer with one city.",
                    country=country,
                    capital=capital,
                ),
                self.config.task,
            )


__all__ = ["CapitalsTaskset"]
