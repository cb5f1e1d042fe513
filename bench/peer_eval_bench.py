"""Eval throughput against the peer: `verihub eval` and verifiers 0.4's eval on the same math tasks.

    python bench/peer_eval_bench.py [--tasks 64] [-k 4] [--concurrency 32] [--latency-s 0.2]
        [--verifiers-python /tmp/vf04/bin/python] [--also-verihub /work/main/.venv/bin/python]

One loopback OpenAI-compatible endpoint (``verihub.testing.ScriptedChatServer``, in a process of its
own) answers every request after a fixed latency, from a fixed table: each task of the bundled
``math-word`` environment has K completions (right, an equivalent form, wrong, unboxed), handed out in
turn per prompt, so a tool that asks for the K samples in one request (``n=K``) and one that sends K
requests both get the same K completions, and their pass rates must agree.

- verihub: ``verihub.eval.evaluate.aevaluate`` on ``envs/math-word`` (its verifier as shipped), with ``out``
  (``rollouts.jsonl``, ``results.parquet``, ``metadata.json``), at ``--concurrency`` requests in flight.
- verifiers 0.4: its own eval path, unmodified: a ``vf.Taskset`` of the same tasks whose reward is
  ``vf.verify_boxed_math_answer``, run by ``vf-eval``'s entry point with its tool-less chat harness
  (``null``) on the subprocess runtime, ``--max-concurrent`` rollouts in flight. It lives in its own
  interpreter (its dependencies conflict with verihub's): ``--verifiers-python``, or
  ``$VERIFIERS_PYTHON``; without one that imports verifiers 0.4 the bench says so and skips it.
  Set one up with ``python3.12 -m venv /tmp/vf04 && /tmp/vf04/bin/pip install "verifiers>=0.4,<0.5" uv``.

Each half runs in a subprocess of its interpreter after a warm-up run; the timed run is one call of
the tool's eval (environment already loaded). ``--also-verihub PYTHON`` adds another interpreter's
verihub (e.g. main's venv) to the same run. The last line prints rollouts/s of each and the ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import io
import json
import multiprocessing
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
ENV_DIR = REPO / "envs" / "math-word"
VF_PACKAGE = "verihub_bench_math"
VF_TASKSET = '''\
"""The bench's math tasks as a verifiers 0.4 taskset: the reward is verifiers' own math scoring."""

import json

import verifiers.v1 as vf

TASKS = {tasks!r}


class MathData(vf.TaskData):
    answer: str


class MathTask(vf.Task[MathData]):
    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return vf.verify_boxed_math_answer(trace.last_reply, self.data.answer)


class BenchMathTaskset(vf.Taskset[MathTask, vf.TasksetConfig]):
    def load(self) -> list[MathTask]:
        with open(TASKS, encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle]
        return [MathTask(MathData(idx=index, name=row["id"], prompt=row["user"], system_prompt=row["system"],
                                  answer=row["answer"]), self.config.task) for index, row in enumerate(rows)]


__all__ = ["BenchMathTaskset"]
'''


# --- the fixture: tasks and the completions the endpoint hands out -------------------------------


def completions_for(task: dict[str, Any], k: int) -> list[str]:
    """K completions of one task, drawn (seeded by the task id) from: the reference answer, an
    equivalent form of it, the task's wrong answer, and the right answer without a box."""
    answer, wrong = str(task["answer"]), str(task["wrong_answer"])
    work = (
        f"Let me read the problem carefully. {task['question']} I will set up the quantities, "
        "compute step by step, and check the units before writing the final answer.\n"
    )
    forms = {
        "right": f"{work}So the answer is \\boxed{{{answer}}}.",
        "equivalent": f"{work}That is \\boxed{{{equivalent(answer)}}}.",
        "wrong": f"{work}So the answer is \\boxed{{{wrong}}}.",
        "unboxed": f"{work}The answer is {answer}.",
    }
    draw = random.Random(str(task["id"]))
    return [forms[draw.choices(list(forms), weights=(4, 2, 3, 1))[0]] for _ in range(k)]


def equivalent(answer: str) -> str:
    """The same number written another way: 52.5 -> \\frac{105}{2}, \\frac{5}{3} -> 10/6, 7 -> 14/2."""
    fraction = re.fullmatch(r"\\frac\{(\d+)\}\{(\d+)\}", answer)
    value = Fraction(int(fraction[1]), int(fraction[2])) if fraction else Fraction(answer)
    if fraction or value.denominator == 1:
        return f"{2 * value.numerator}/{2 * value.denominator}"
    return f"\\frac{{{value.numerator}}}{{{value.denominator}}}"


def make_fixture(root: Path, tasks: int, k: int, split: str) -> dict[str, Any]:
    """The tasks (rendered as verihub renders them), the completion table, the verifiers taskset."""
    import verihub

    env = verihub.load_env(ENV_DIR)
    dataset = env.dataset(split)
    rows = [dataset[index] for index in range(min(tasks, len(dataset)))]
    table: dict[str, list[str]] = {}
    with (root / "tasks.jsonl").open("w", encoding="utf-8") as handle:
        for task in rows:
            system, user = (message["content"] for message in env.render(task))
            handle.write(
                json.dumps({"id": task["id"], "system": system, "user": user, "answer": task["answer"]}) + "\n"
            )
            table[user] = completions_for(task, k)
    (root / "table.json").write_text(json.dumps(table), encoding="utf-8")
    package = root / "vf" / VF_PACKAGE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(VF_TASKSET.format(tasks=str(root / "tasks.jsonl")), encoding="utf-8")
    return {"tasks": len(rows), "table": str(root / "table.json"), "vf_path": str(root / "vf")}


# --- the endpoint ---------------------------------------------------------------------------------


def serve(table_path: str, latency_s: float, urls: Any) -> None:
    """The endpoint, in its own process (as a real server would be), so it shares no GIL with a tool."""
    from verihub.testing import ScriptedChatServer

    table = json.loads(Path(table_path).read_text(encoding="utf-8"))
    handed: dict[str, int] = {}
    lock = threading.Lock()

    def respond(request: dict[str, Any]) -> list[dict[str, Any]]:
        prompt = str(request["messages"][-1].get("content"))
        options = table.get(prompt) or ["?"]
        count = int(request.get("n") or 1)
        with lock:  # the next `count` of this prompt's completions, in turn
            first = handed.get(prompt, 0)
            handed[prompt] = first + count
        return [{"content": options[(first + index) % len(options)]} for index in range(count)]

    with ScriptedChatServer(respond, latency_s=latency_s) as server:
        urls.put(server.url)
        threading.Event().wait()


# --- the halves (each in a subprocess of its own interpreter) -------------------------------------


def verihub_half(options: argparse.Namespace) -> dict[str, Any]:
    import asyncio

    import verihub
    from verihub.eval.evaluate import aevaluate

    env = verihub.load_env(ENV_DIR)
    model = f"openai:bench@{options.url}"

    async def run() -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as scratch:
            await aevaluate(
                env,
                model,
                n=min(8, options.tasks),
                k=options.k,
                split=options.split,
                concurrency=options.concurrency,
                out=Path(scratch) / "warm-up",
            )
            start, cpu = time.perf_counter(), time.process_time()
            report = await aevaluate(
                env,
                model,
                n=options.tasks,
                k=options.k,
                split=options.split,
                concurrency=options.concurrency,
                out=Path(scratch) / "run",
            )
            wall_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu
        passed = {task_id: 0 for task_id in {r.task_id for r in report.rollouts}}
        for rollout in report.rollouts:
            passed[rollout.task_id] += rollout.status == "ok"
        return {
            "tool": f"verihub {verihub.__version__} ({Path(verihub.__file__).parent.parent})",
            "rollouts": len(report.rollouts),
            "wall_s": wall_s,
            "passed": passed,
            "faulted": report.metrics["rollouts_faulted"],
            "where": f"eval process CPU {cpu_s:.2f}s (requests, bookkeeping, grading's inline layers; "
            "math checks run in worker processes)",
        }

    return asyncio.run(run())


def verifiers_half(options: argparse.Namespace) -> dict[str, Any]:
    import verifiers
    from verifiers.v1.cli.eval.main import main

    if not verifiers.__version__.startswith("0.4."):
        raise SystemExit(f"this interpreter has verifiers {verifiers.__version__}, not 0.4")
    sys.path.insert(0, options.vf_path)
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # its uv
    os.environ["VERIHUB_BENCH_KEY"] = "unused"

    def run(out: Path, tasks: int) -> float:
        argv = [
            VF_PACKAGE,
            "-m",
            "bench",
            "--client.base-url",
            options.url,
            "--client.api-key-var",
            "VERIHUB_BENCH_KEY",
            "-n",
            str(tasks),
            "-r",
            str(options.k),
            "-c",
            str(options.concurrency),
            "--no-rich",
            "--no-push",
            "--env.agent.harness.id",
            "null",
            "--env.agent.runtime.type",
            "subprocess",
            "-o",
            str(out),
        ]
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):  # --no-rich prints every trace at the end
            main(argv)
        return time.perf_counter() - start

    with tempfile.TemporaryDirectory() as scratch:
        run(Path(scratch) / "warm-up", min(2, options.tasks))
        wall_s = run(Path(scratch) / "run", options.tasks)
        passed: dict[str, int] = {}
        rollouts = faulted = 0
        phases: dict[str, list[float]] = {"setup": [], "program": [], "model": [], "scoring": []}
        for path in glob.glob(str(Path(scratch) / "run" / "*" / "traces.jsonl")):
            for line in Path(path).read_text(encoding="utf-8").splitlines():
                episode = json.loads(line)
                name = episode["task"]["data"]["name"]
                rollouts += 1
                traces = episode["traces"]
                rewards = [trace.get("rewards", {}).get("correct", {}).get("score") for trace in traces]
                if episode["errors"] or not rewards or rewards[0] is None:
                    faulted += 1
                passed[name] = passed.get(name, 0) + (rewards[:1] == [1.0])
                for trace in traces[:1]:  # where a rollout's time goes, by verifiers' own clock
                    timing = trace["timing"]
                    model = timing["agent"]["model"]["duration"]
                    phases["setup"].append(timing["setup"]["end"] - timing["setup"]["start"])
                    phases["program"].append(timing["agent"]["harness"]["duration"] - model)
                    phases["model"].append(model)
                    phases["scoring"].append(timing["scoring"]["end"] - timing["scoring"]["start"])
    where = ", ".join(f"{phase} {statistics.fmean(values):.2f}s" for phase, values in phases.items() if values)
    return {
        "tool": f"verifiers {verifiers.__version__}",
        "rollouts": rollouts,
        "wall_s": wall_s,
        "passed": passed,
        "faulted": faulted,
        "where": f"per rollout: {where} (program: the chat program's run less its model calls)",
    }


def run_half(python: str, half: str, options: argparse.Namespace, url: str, fixture: dict[str, Any]) -> dict[str, Any]:
    command = [
        python,
        __file__,
        "--half",
        half,
        "--url",
        url,
        "--vf-path",
        fixture["vf_path"],
        "--tasks",
        str(fixture["tasks"]),
        "-k",
        str(options.k),
        "--concurrency",
        str(options.concurrency),
        "--split",
        options.split,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=options.timeout_s, cwd=REPO)
    if result.returncode != 0:
        raise SystemExit(f"the {half} half under {python} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def verifiers_python(choice: str | None) -> tuple[str | None, str]:
    """The interpreter that has verifiers 0.4, or None and why not."""
    python = choice or os.environ.get("VERIFIERS_PYTHON")
    if not python:
        return None, "no --verifiers-python (or $VERIFIERS_PYTHON) given"
    try:
        probe = subprocess.run(
            [python, "-c", "import verifiers.v1, verifiers; print(verifiers.__version__)"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except OSError as error:
        return None, f"{python}: {error.strerror}"
    version = probe.stdout.strip()
    if probe.returncode != 0 or not version.startswith("0.4."):
        return None, f"{python} has no verifiers 0.4 ({version or probe.stderr.strip().splitlines()[-1:]})"
    return python, version


# --- the run --------------------------------------------------------------------------------------


def pass_at_1(half: dict[str, Any], k: int) -> float:
    return statistics.fmean(count / k for count in half["passed"].values()) if half["passed"] else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=64, help="tasks of math-word's split (each tool runs all)")
    parser.add_argument("-k", type=int, default=4, help="samples per task")
    parser.add_argument("--concurrency", type=int, default=32, help="verihub: requests in flight; verifiers: rollouts")
    parser.add_argument("--latency-s", type=float, default=0.2, help="per request, at the endpoint")
    parser.add_argument("--split", default="train")
    parser.add_argument("--repeat", type=int, default=3, help="timed verihub runs (the median counts)")
    parser.add_argument("--verifiers-python", help="an interpreter with verifiers 0.4 (default: $VERIFIERS_PYTHON)")
    parser.add_argument(
        "--also-verihub",
        action="append",
        default=[],
        metavar="PYTHON",
        help="another interpreter whose verihub runs too (e.g. main's venv)",
    )
    parser.add_argument("--timeout-s", type=float, default=1800, help="per half")
    parser.add_argument("--half", choices=["verihub", "verifiers"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--vf-path", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.half:
        print(json.dumps((verihub_half if options.half == "verihub" else verifiers_half)(options)))
        return
    peer, peer_note = verifiers_python(options.verifiers_python)
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as scratch:
        fixture = make_fixture(Path(scratch), options.tasks, options.k, options.split)
        urls = context.Queue()
        endpoint = context.Process(target=serve, args=(fixture["table"], options.latency_s, urls), daemon=True)
        endpoint.start()
        try:
            url = urls.get(timeout=120)
            print(
                f"math-word ({options.split}): {fixture['tasks']} tasks x {options.k}, concurrency "
                f"{options.concurrency} "
                f"(verihub: requests of n={options.k} in flight; verifiers: rollouts in flight), endpoint latency "
                f"{options.latency_s}s",
                flush=True,
            )
            floor = -(-fixture["tasks"] // options.concurrency) * options.latency_s
            print(
                f"latency floor (one request a task, {options.concurrency} at a time): {floor:.2f}s = "
                f"{fixture['tasks'] * options.k / floor:.0f} rollouts/s",
                flush=True,
            )
            interpreters = [sys.executable, *options.also_verihub]
            runs: dict[str, list[dict[str, Any]]] = {python: [] for python in interpreters}
            for _ in range(max(1, options.repeat)):  # interleaved, so a change in the machine's load hits each
                for python in interpreters:
                    runs[python].append(run_half(python, "verihub", options, url, fixture))
            halves = [median_run(runs[python]) for python in interpreters]
            for python in interpreters:
                show(median_run(runs[python]), options.k, [r["wall_s"] for r in runs[python]])
            if peer is not None:
                halves.append(run_half(peer, "verifiers", options, url, fixture))
                show(halves[-1], options.k)
        finally:
            endpoint.terminate()
    ours = halves[0]
    ours_rate = ours["rollouts"] / ours["wall_s"]
    if peer is None:
        print(
            f"verifiers 0.4 not measured: {peer_note}; set it up with: python3.12 -m venv /tmp/vf04 && "
            '/tmp/vf04/bin/pip install "verifiers>=0.4,<0.5" uv, then --verifiers-python /tmp/vf04/bin/python'
        )
        print(f"verihub {ours_rate:.1f} rollouts/s; verifiers 0.4 not installed: no ratio")
        return
    theirs = halves[-1]
    theirs_rate = theirs["rollouts"] / theirs["wall_s"]
    same = ours["passed"] == theirs["passed"]
    print(
        f"same completions, same verdicts per task: {'yes' if same else 'NO'} "
        f"(pass@1 verihub {pass_at_1(ours, options.k):.4f}, verifiers {pass_at_1(theirs, options.k):.4f})"
    )
    print(
        f"verihub {ours_rate:.1f} rollouts/s, verifiers 0.4 {theirs_rate:.1f} rollouts/s, "
        f"ratio {ours_rate / theirs_rate:.2f}x (goal >= 1.5x)"
    )
    if not same or ours["faulted"] or theirs["faulted"]:
        sys.exit(1)  # the rates are not comparable


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return sorted(runs, key=lambda run: run["wall_s"])[len(runs) // 2]


def show(half: dict[str, Any], k: int, walls: list[float] | None = None) -> None:
    rate = half["rollouts"] / half["wall_s"]
    spread = f" (median of {', '.join(f'{w:.2f}s' for w in walls)})" if walls and len(walls) > 1 else ""
    print(
        f"{half['tool']}: {half['rollouts']} rollouts in {half['wall_s']:.2f}s = {rate:.1f} rollouts/s{spread}, "
        f"pass@1 {pass_at_1(half, k):.4f}, faulted {half['faulted']}",
        flush=True,
    )
    if half.get("where"):
        print(f"  {half['where']}", flush=True)


if __name__ == "__main__":
    main()
