"""Which tasks a run draws: the mixture weights, and an adaptive curriculum on top of them.

Rows fall into buckets, one per (environment, difficulty). A curriculum gives each bucket a sampling
probability; :class:`MixtureSampler` draws each generation batch's prompts from those probabilities at
the moment the batch is drawn, so a curriculum that learns from live rewards steers the next batches.

- ``curriculum=None`` (:class:`StaticMix`): each environment gets its weight, spread over its buckets in
  proportion to their sizes — plain weighted mixing.
- ``curriculum="adaptive"`` (:class:`AdaptiveCurriculum`): tracks each bucket's pass rate from the
  grades of the run (a moving average) and favours the learning zone, where the model sometimes passes
  and sometimes fails: a bucket's score is ``4·p·(1-p)`` (1 at p=0.5, 0 when solved or hopeless).
  Floors keep every bucket and every environment in the mix, so nothing starves and a domain the model
  cannot do yet is still tried. Knobs: ``AdaptiveCurriculum(smoothing=..., min_samples=...,
  bucket_floor=..., domain_floor=...)``, or a dict of them as ``curriculum=``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from torch.utils.data import Sampler

from verihub.errors import UsageError
from verihub.trainers.rewards import Outcome

__all__ = ["AdaptiveCurriculum", "Bucket", "Curriculum", "MixtureSampler", "StaticMix", "make_curriculum"]

Bucket = tuple[str, str]  # (environment, difficulty)


class Curriculum(Protocol):
    def bind(self, sizes: Mapping[Bucket, int], env_weights: Mapping[str, float]) -> None:
        """Learn the buckets of the run (rows per bucket) and each environment's weight."""

    def weights(self) -> dict[Bucket, float]:
        """Sampling probability of each bucket (they sum to 1)."""

    def observe(self, outcomes: Sequence[Outcome]) -> None:
        """Learn from the grades of one batch."""


class StaticMix:
    """Environments by weight, buckets by size within each environment."""

    def bind(self, sizes: Mapping[Bucket, int], env_weights: Mapping[str, float]) -> None:
        per_env: dict[str, int] = {}
        for (env, _), size in sizes.items():
            per_env[env] = per_env.get(env, 0) + size
        self._weights = {bucket: env_weights[bucket[0]] * size / per_env[bucket[0]] for bucket, size in sizes.items()}

    def weights(self) -> dict[Bucket, float]:
        return dict(self._weights)

    def observe(self, outcomes: Sequence[Outcome]) -> None:
        return None


@dataclass
class AdaptiveCurriculum:
    """Favour buckets whose pass rate is neither 0 nor 1 (see the module docstring)."""

    smoothing: float = 0.8  # weight of the old pass rate in the moving average, per batch
    min_samples: int = 8  # grades a bucket needs before its own pass rate counts (until then: score 1)
    bucket_floor: float = 0.1  # a bucket keeps at least this fraction of an even share of its environment
    domain_floor: float = 0.25  # an environment keeps at least this fraction of its nominal weight
    pass_rates: dict[Bucket, float] = field(default_factory=dict)
    seen: dict[Bucket, int] = field(default_factory=dict)

    def bind(self, sizes: Mapping[Bucket, int], env_weights: Mapping[str, float]) -> None:
        for name in ("smoothing", "bucket_floor", "domain_floor"):
            if not 0 <= getattr(self, name) <= 1:
                raise UsageError(f"curriculum {name} must be within [0, 1] (got {getattr(self, name)})")
        self.sizes = dict(sizes)
        self.env_weights = dict(env_weights)

    def score(self, bucket: Bucket) -> float:
        if self.seen.get(bucket, 0) < self.min_samples:
            return 1.0  # not measured yet: worth trying
        rate = self.pass_rates[bucket]
        return 4.0 * rate * (1.0 - rate)

    def weights(self) -> dict[Bucket, float]:
        by_env: dict[str, list[Bucket]] = {}
        for bucket in self.sizes:
            by_env.setdefault(bucket[0], []).append(bucket)
        raw_env: dict[str, float] = {}
        within: dict[Bucket, float] = {}
        for env, buckets in by_env.items():
            scores = {bucket: self.score(bucket) for bucket in buckets}
            within.update(_floored_shares(scores, self.bucket_floor))
            # How much the environment as a whole is in its learning zone decides its share; zone <= 1, so
            # the floor holds after normalising.
            zone = sum(scores.values()) / len(buckets)
            raw_env[env] = self.env_weights[env] * max(zone, self.domain_floor)
        total_env = sum(raw_env.values())
        return {bucket: raw_env[bucket[0]] / total_env * share for bucket, share in within.items()}

    def observe(self, outcomes: Sequence[Outcome]) -> None:
        batch: dict[Bucket, list[bool]] = {}
        for outcome in outcomes:
            if not outcome.fault:  # a fault says nothing about the model
                batch.setdefault((outcome.env, outcome.difficulty), []).append(outcome.passed)
        for bucket, passed in batch.items():
            rate = sum(passed) / len(passed)
            previous = self.pass_rates.get(bucket)
            self.pass_rates[bucket] = (
                rate if previous is None else self.smoothing * previous + (1 - self.smoothing) * rate
            )
            self.seen[bucket] = self.seen.get(bucket, 0) + len(passed)


def _floored_shares(scores: Mapping[Bucket, float], floor: float) -> dict[Bucket, float]:
    """Scores as shares that sum to 1, each at least ``floor`` times an even share. The floor is mixed
    in after normalising (a floor applied before it is diluted by the other buckets' scores)."""
    even = 1.0 / len(scores)
    total = sum(scores.values())
    if total <= 0:
        return dict.fromkeys(scores, even)
    return {bucket: floor * even + (1.0 - floor) * score / total for bucket, score in scores.items()}


def make_curriculum(curriculum: str | Mapping[str, Any] | Curriculum | None) -> Curriculum:
    """``None`` (weights only), ``"adaptive"``, a dict of AdaptiveCurriculum knobs, or your own object."""
    if curriculum is None or curriculum == "none":
        return StaticMix()
    if curriculum == "adaptive":
        return AdaptiveCurriculum()
    if isinstance(curriculum, Mapping):
        try:
            return AdaptiveCurriculum(**curriculum)
        except TypeError as error:
            raise UsageError(
                f"curriculum: {error} (knobs: smoothing, min_samples, bucket_floor, domain_floor)"
            ) from None
    if isinstance(curriculum, str):
        raise UsageError(f"curriculum {curriculum!r}: use None, 'adaptive', a dict of its knobs or a Curriculum object")
    return curriculum


class MixtureSampler(Sampler[int]):
    """TRL's prompt order (each prompt ``mini_repeat_count`` times in a row, each chunk of ``batch_size``
    prompts ``repeat_count`` times), with the prompts of each chunk drawn by the curriculum's weights.

    Every process draws the same sequence (same seed, same weights: the curriculum learns from the
    gathered grades of all processes), as TRL's own sampler does. Within a bucket, rows come in a
    shuffled order that is renewed when used up, so a bucket repeats a row only after all of them.
    """

    def __init__(
        self,
        buckets: Mapping[Bucket, Sequence[int]],
        curriculum: Curriculum,
        *,
        mini_repeat_count: int,
        batch_size: int,
        repeat_count: int,
        seed: int,
    ) -> None:
        self.buckets = {bucket: list(rows) for bucket, rows in buckets.items() if rows}
        self.curriculum = curriculum
        self.mini_repeat_count, self.batch_size, self.repeat_count = mini_repeat_count, batch_size, repeat_count
        self.num_samples = sum(len(rows) for rows in self.buckets.values())
        self._rng = random.Random(seed)
        self._queues: dict[Bucket, list[int]] = {}
        self.last_weights: dict[Bucket, float] = {}
        self.last_chunk: list[int] = []  # the rows of the latest generation batch drawn, and its number
        self.chunks_drawn = 0

    @property
    def chunks(self) -> int:
        """Generation batches per pass: one per ``batch_size`` rows, and at least one (rows can repeat)."""
        return max(1, self.num_samples // self.batch_size)

    def __len__(self) -> int:
        return self.chunks * self.batch_size * self.mini_repeat_count * self.repeat_count

    def __iter__(self) -> Iterator[int]:
        for _ in range(self.chunks):
            chunk = self._draw_chunk()
            for _ in range(self.repeat_count):
                for index in chunk:
                    for _ in range(self.mini_repeat_count):
                        yield index

    def _draw_chunk(self) -> list[int]:
        weights = self.curriculum.weights()
        self.last_weights = weights
        buckets = [bucket for bucket in self.buckets if weights.get(bucket, 0) > 0]
        chosen = self._rng.choices(buckets, weights=[weights[bucket] for bucket in buckets], k=self.batch_size)
        self.last_chunk = [self._next_row(bucket) for bucket in chosen]
        self.chunks_drawn += 1
        return self.last_chunk

    def drawn(self) -> dict[str, Any]:
        """The latest draw, as plain data: what every process must agree on."""
        return {
            "chunk": self.chunks_drawn,
            "rows": list(self.last_chunk),
            "weights": {f"{env}/{difficulty}": weight for (env, difficulty), weight in self.last_weights.items()},
        }

    def _next_row(self, bucket: Bucket) -> int:
        queue = self._queues.get(bucket)
        if not queue:
            queue = self._queues[bucket] = self._rng.sample(self.buckets[bucket], len(self.buckets[bucket]))
        return queue.pop()
