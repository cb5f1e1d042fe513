"""The rollout worker of asynchronous GRPO (TRL's ``RolloutWorkerProtocol``), in this process.

A thread with its own event loop keeps up to ``inflight`` groups in flight. For each it draws a task through
the run's curriculum, asks the vLLM server for the K samples of its prompt in one request (the prompt's
token ids in; the sampled token ids and their log-probabilities out, from the adapter of the policy version
live when the request left), grades them with the environment's verifier (:class:`~.rewards.EnvReward`: a
fault is no reward, so it takes no advantage and stays out of the group's baseline), shows the grades to
the curriculum and the monitors, and queues one ``RolloutSample`` per sample, stamped with that policy
version. TRL drops the samples more than ``max_staleness`` versions old and trains on the rest while the
next groups generate. Generation that keeps failing stops the run (``check_health``), it never stalls it.
"""

from __future__ import annotations

import asyncio
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from verihub.errors import RolloutStalledError, RolloutWorkerError, describe_error
from verihub.trainers.rewards import EnvReward, Outcome

__all__ = ["RolloutWorker"]

_ATTEMPTS = 5


class RolloutWorker:
    """Draws, generates, grades and queues; see the module docstring. ``rows`` are the mixed dataset's rows
    (``prompt``, ``environment``, ``task``, ``difficulty``), ``draw`` yields row numbers by the curriculum,
    ``observe`` takes the outcomes of each graded group."""

    def __init__(
        self,
        *,
        server_url: str,
        model_name: str,
        lora_name: str | None,
        tokenizer: Any,
        rows: Sequence[Mapping[str, Any]],
        draw: Iterator[int],
        rewards: Mapping[str, EnvReward],
        observe: Callable[[list[Outcome | None]], None],
        num_generations: int,
        max_tokens: int,
        temperature: float,
        top_p: float,
        inflight: int,
        queue_size: int,
        request_timeout_s: float,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.server_url, self.model_name, self.lora_name = server_url.rstrip("/"), model_name, lora_name
        self.tokenizer, self.rows, self.draw = tokenizer, rows, draw
        self.rewards, self.observe = rewards, observe
        self.k, self.max_tokens, self.temperature, self.top_p = num_generations, max_tokens, temperature, top_p
        self.inflight, self.request_timeout_s = inflight, request_timeout_s
        self.headers = dict(headers or {})  # the server's key
        self.rollout_buffer: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self.metrics_queue: queue.Queue[dict[str, Any]] = queue.Queue()
        self.model_version = 0
        self._groups = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._beat = time.monotonic()
        self._drawing = threading.Lock()  # the draw and the curriculum it reads belong to one group at a time

    # -- TRL's RolloutWorkerProtocol ----------------------------------------------------------------------

    def start(self) -> None:
        self._beat = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="verihub-rollouts", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def update_model_version(self, model_version: int) -> None:
        self.model_version = model_version

    def check_health(self, stale_after_s: float) -> None:
        if self._error is not None:
            raise RolloutWorkerError(f"the rollout worker stopped: {describe_error(self._error)}") from self._error
        if self._thread is not None and not self._thread.is_alive() and not self._stop.is_set():
            raise RolloutWorkerError("the rollout worker's thread ended")
        if time.monotonic() - self._beat > stale_after_s:
            raise RolloutStalledError(f"the rollout worker produced nothing for {stale_after_s:.0f} s")

    # -- the loop -----------------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._loop())
        except BaseException as error:  # noqa: BLE001 - reported to the trainer by check_health
            self._error = error

    async def _loop(self) -> None:
        import httpx

        async with httpx.AsyncClient(
            base_url=self.server_url, headers=self.headers, timeout=self.request_timeout_s
        ) as client:
            running: set[asyncio.Task[None]] = set()
            while not self._stop.is_set():
                while len(running) < self.inflight and not self._stop.is_set():
                    running.add(asyncio.create_task(self._group(client)))
                done, running = await asyncio.wait(running, timeout=0.5, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()  # a group that could not be generated stops the worker, and with it the run
            for task in running:
                task.cancel()

    async def _group(self, client: Any) -> None:
        with self._drawing:
            row = self.rows[next(self.draw)]
            group_id = self._groups
            self._groups += 1
        prompt_ids = self.tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True)
        prompt_ids = list(prompt_ids["input_ids"] if isinstance(prompt_ids, Mapping) else prompt_ids)
        version = self.model_version  # the policy that answers this request
        began = time.perf_counter()
        choices = await self._generate(client, prompt_ids, version)
        generated = time.perf_counter()
        texts = [self.tokenizer.decode(choice["token_ids"], skip_special_tokens=True) for choice in choices]
        rewards, outcomes = await self._grade(row, texts)
        self._beat = time.monotonic()
        with self._drawing:
            self.observe(outcomes)
        self.metrics_queue.put(
            {
                "verihub/rollout/generation_s": generated - began,
                "verihub/rollout/grading_s": time.perf_counter() - generated,
            }
        )
        for sample in _samples(row, prompt_ids, choices, texts, rewards, version, group_id):
            while not self._stop.is_set():  # a full queue waits here without holding up the loop (or a stop)
                try:
                    self.rollout_buffer.put_nowait(sample)
                    break
                except queue.Full:
                    await asyncio.sleep(0.05)

    async def _generate(self, client: Any, prompt_ids: list[int], version: int) -> list[dict[str, Any]]:
        """The K samples, each with ``token_ids`` and ``logprobs``; retried, then raised."""
        body = {
            "model": self._model(version),
            "prompt": prompt_ids,
            "n": self.k,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "logprobs": 0,
            "return_token_ids": True,
            "seed": random.getrandbits(63),
        }
        problem = ""
        for attempt in range(_ATTEMPTS):
            if attempt:
                await asyncio.sleep(min(8.0, 0.5 * 2**attempt))
            try:
                response = await client.post("/v1/completions", json=body)
            except Exception as error:  # noqa: BLE001 - a connection that failed is tried again
                problem = f"{describe_error(error)}"
                continue
            if response.status_code == 200:
                choices = sorted(response.json()["choices"], key=lambda choice: choice["index"])
                return [
                    {"token_ids": choice["token_ids"], "logprobs": choice["logprobs"]["token_logprobs"]}
                    for choice in choices
                ]
            problem = f"HTTP {response.status_code}: {response.text[:300]}"
        raise RuntimeError(f"the vLLM server at {self.server_url} failed {_ATTEMPTS} times: {problem}")

    def _model(self, version: int) -> str:
        # an adapter is a model name to vLLM: naming the base while an adapter is loaded serves the base
        return f"{self.lora_name}-v{version}" if self.lora_name else self.model_name

    async def _grade(self, row: Mapping[str, Any], texts: list[str]) -> tuple[list[float | None], list[Outcome | None]]:
        count = len(texts)
        outcomes = await self.rewards[row["environment"]].grade_rows(
            [row["task"]] * count,
            [row["difficulty"]] * count,
            [[{"role": "assistant", "content": text}] for text in texts],
        )
        return [None if outcome.fault else outcome.reward for outcome in outcomes], list(outcomes)


def _samples(
    row: Mapping[str, Any],
    prompt_ids: list[int],
    choices: list[dict[str, Any]],
    texts: list[str],
    rewards: list[float | None],
    version: int,
    group_id: int,
) -> list[Any]:
    """One RolloutSample per sample: advantages within the group over the graded ones (a fault: none)."""
    from trl.experimental.async_grpo.async_rollout_worker import RolloutSample

    scores = np.array([np.nan if value is None else value for value in rewards], dtype=float)
    graded = ~np.isnan(scores)
    advantages = np.zeros_like(scores)
    if graded.any():
        advantages[graded] = (scores[graded] - scores[graded].mean()) / (scores[graded].std() + 1e-8)
    samples = []
    for choice, text, score, advantage in zip(choices, texts, scores, advantages, strict=True):
        output = list(choice["token_ids"])
        logprobs = [float(value) for value in choice["logprobs"]]
        samples.append(
            RolloutSample(
                prompt=list(row["prompt"]),
                completion=[{"role": "assistant", "content": text}],
                input_ids=np.asarray(prompt_ids + output, dtype=np.int64),
                completion_mask=np.asarray([0] * len(prompt_ids) + [1] * len(output), dtype=np.int64),
                old_log_probs=np.asarray([0.0] * len(prompt_ids) + logprobs, dtype=np.float32),
                advantage=float(advantage),
                model_version=version,
                group_id=group_id,
                metrics={"reward": float(score), f"rewards/{row['environment']}": float(score)},
                enqueued_at=time.time(),
            )
        )
    return samples
