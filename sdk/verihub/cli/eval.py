"""``verihub eval``: rollouts of environments against a model, their metrics, saved and optionally pushed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from verihub.cli import plugins
from verihub.cli.app import (
    GraderOption,
    GraderTimeoutOption,
    GraderTokenOption,
    HubOption,
    TokenOption,
    app,
    err,
    grader_pool,
    load_named,
    out,
)
from verihub.errors import VerihubError


@app.command("eval")
def eval_command(
    envs: Annotated[
        list[str],
        typer.Argument(
            help="Environments (directories, installed names, reasoning-gym:NAME), "
            "or `all`: every installed one. Several give a per-domain table."
        ),
    ],
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            help="openai:MODEL@URL (any OpenAI-compatible endpoint), "
            "hf:PATH_OR_ID (local transformers) or vllm:PATH_OR_ID.",
        ),
    ],
    n: Annotated[int | None, typer.Option("-n", help="Tasks to evaluate (default: the spec's eval.n).")] = None,
    k: Annotated[int | None, typer.Option("-k", help="Samples per task (default: the spec's eval.k).")] = None,
    concurrency: Annotated[int, typer.Option(help="Generation requests in flight.")] = 32,
    split: Annotated[str | None, typer.Option(help="Split (default: the spec's eval.split).")] = None,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature (default: the spec's).")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Most tokens per turn (default: the spec's).")] = None,
    seed: Annotated[int | None, typer.Option(help="Sampling seed, where the server supports one.")] = None,
    logprobs: Annotated[
        bool,
        typer.Option(
            "--logprobs", help="Keep each generated token's log-probability in the results (a list per assistant turn)."
        ),
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Directory for results.parquet, metadata.json, rollouts.jsonl "
            "(one subdirectory per environment when there are several)."
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue the run in --out: keep its graded rollouts, rerun "
            "missing and faulted ones; refused unless model, sampling, tasks and "
            "environment (version and content) are the same.",
        ),
    ] = False,
    judge_model: Annotated[str | None, typer.Option(help="Model for judge layers, overriding the spec.")] = None,
    adapter: Annotated[
        Path | None,
        typer.Option(help="A LoRA adapter directory (from `verihub train --lora`) on top of an hf: or vllm: model."),
    ] = None,
    push: Annotated[
        bool,
        typer.Option(
            "--push",
            help="Upload the results (results.parquet, metadata.json) to the "
            "hub as a dataset linked to the environment's version: a row of its "
            "leaderboard.",
        ),
    ] = False,
    results_for: Annotated[
        str | None,
        typer.Option(
            help="With --push: the environment's hub repository OWNER/NAME "
            "(default: the ENV argument when it is one, else "
            "YOUR_NAMESPACE/ENV_ID)."
        ),
    ] = None,
    hub: HubOption = None,
    token: TokenOption = None,
    grader: GraderOption = [],  # noqa: B006 - typer copies a list default per call
    grader_token: GraderTokenOption = None,
    grader_timeout: GraderTimeoutOption = 120.0,
) -> None:
    """Evaluate environments against a model: rollouts, grades, pass@k, saved results.

    With several environments (or `all`), each is evaluated in turn with the same model and a table
    compares them by domain: the before/after check for general capability around a training run."""
    import asyncio
    import shutil
    import tempfile

    from verihub.environment.installed import installed_envs
    from verihub.generation import load_backend

    if resume and out is None:
        raise typer.BadParameter("--resume needs --out (where the earlier results are)", param_hint="--resume")
    names = sorted(installed_envs()) if envs == ["all"] else envs
    if results_for is not None and (not push or len(names) > 1):
        raise typer.BadParameter("takes --push and one environment", param_hint="--results-for")
    publish_to = plugins.open_hub(hub, token) if push else None  # before the run: a push that cannot happen fails now
    environments = [load_named(name, hub=hub, token=token, judge_model=judge_model) for name in names]
    if adapter is not None and not (adapter / "adapter_config.json").is_file():
        raise typer.BadParameter(
            f"{adapter} holds no adapter_config.json (a peft adapter directory)", param_hint="--adapter"
        )
    try:
        backend = load_backend(model, adapter=str(adapter) if adapter else None, concurrency=concurrency)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--adapter" if adapter else "--model") from None
    graders = grader_pool(grader, grader_token, grader_timeout)
    options = {
        "n": n,
        "k": k,
        "concurrency": concurrency,
        "split": split,
        "temperature": temperature,
        "max_tokens": max_tokens,
        "seed": seed,
        "logprobs": logprobs,
        "resume": resume,
        "graders": graders,
    }

    async def run_all() -> list[Any]:
        try:  # one event loop for every environment: an endpoint's connection pool belongs to one
            return [
                await _evaluate_one(
                    environment,
                    backend,
                    model,
                    out / environment.id if out is not None and len(environments) > 1 else out,
                    options,
                )
                for environment in environments
            ]
        finally:
            await backend.aclose()
            if graders is not None:
                await graders.aclose()

    scratch = push and out is None  # the results are pushed from the files eval writes
    if scratch:
        out = Path(tempfile.mkdtemp(prefix="verihub-eval-"))
    reports = asyncio.run(run_all())
    if len(reports) > 1:
        _print_domains(reports)
    if push:
        assert out is not None
        try:
            _push_results(names, environments, out, results_for, publish_to)
        except VerihubError as error:
            if not scratch:
                raise
            raise VerihubError(f"{error}\n(the results are kept in {out})") from None
        if scratch:
            shutil.rmtree(out, ignore_errors=True)


def _push_results(
    names: list[str], environments: list[Any], directory: Path, results_for: str | None, hub: Any
) -> None:
    from verihub.ids import RepoId

    for name, environment in zip(names, environments, strict=True):
        target = results_for or (name if "/" in name and not Path(name).exists() else None)
        pushed = hub.push_results(
            directory / environment.id if len(environments) > 1 else directory, RepoId.parse(target) if target else None
        )
        where = f"{hub.url}/{pushed.environment}" if hasattr(hub, "url") else str(pushed.environment)
        done = "pushed" if pushed.created else "already on the hub:"
        out.print(
            f"{done} results of {pushed.environment}@{pushed.version} to the dataset {pushed.dataset} "
            f"(run {pushed.run}{', private' if pushed.private else ''}); leaderboard: {where}",
            highlight=False,
        )


async def _evaluate_one(environment: Any, backend: Any, model: str, out: Path | None, options: dict[str, Any]) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from verihub.eval.evaluate import aevaluate
    from verihub.generation import Sampling

    defaults = environment.spec.eval
    temperature, max_tokens = options["temperature"], options["max_tokens"]
    sampling = Sampling(
        temperature=defaults.temperature if temperature is None else temperature,
        top_p=defaults.top_p,
        max_tokens=defaults.max_tokens if max_tokens is None else max_tokens,
        seed=options["seed"],
        logprobs=options["logprobs"],
    )
    split = options["split"]
    tasks = min(options["n"] or defaults.n, len(environment.dataset(split or defaults.split)))
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    ) as progress:
        bar = progress.add_task(f"{environment.id} x {model}", total=tasks * (options["k"] or defaults.k))
        if options["resume"]:
            progress.update(bar, description=f"{environment.id} x {model} (resuming)")
        report = await aevaluate(
            environment,
            backend,
            n=options["n"],
            k=options["k"],
            sampling=sampling,
            split=split,
            concurrency=options["concurrency"],
            out=out,
            resume=options["resume"],
            graders=options["graders"],
            on_rollout=lambda _: progress.advance(bar),
        )
        progress.update(bar, completed=len(report.rollouts))
    _print_metrics(report)
    if out is not None:
        err.print(f"saved {out / 'results.parquet'} and metadata.json", highlight=False)
    return report


def _print_domains(reports: list[Any]) -> None:
    table = Table(
        title=f"{reports[0].model}: every environment, by domain",
        title_justify="left",
        caption="pass@1 and mean reward count a faulted rollout as failed; pass@1 graded leaves out the "
        "faulted rollouts and lost tasks (none graded) shown",
        caption_justify="left",
    )
    for column in (
        "domain",
        "environment",
        "tasks x k",
        "pass@1",
        "pass@1 graded",
        "mean reward",
        "faulted rollouts",
        "tasks lost",
    ):
        table.add_column(column, justify="left" if column in ("domain", "environment") else "right")
    for report in sorted(reports, key=lambda r: (r.domain, r.env_id)):
        metrics = report.metrics
        table.add_row(
            report.domain,
            f"{report.env_id}@{report.env_version}",
            f"{report.tasks} x {report.k}",
            _rate(metrics["pass@1"]),
            _rate(metrics["pass@1_graded"]),
            _rate(metrics["mean_reward"]),
            f"{metrics['rollouts_faulted']}/{metrics['rollouts']}",
            f"{metrics['tasks_lost']}/{metrics['tasks']}",
        )
    out.print(table)


def _print_metrics(report: Any) -> None:
    metrics, k = report.metrics, report.k
    table = Table(
        title=f"{report.env_id}@{report.env_version} x {report.model}: {report.tasks} tasks x {k}", title_justify="left"
    )
    table.add_column("metric")
    table.add_column("faults count as failed", justify="right")
    table.add_column("graded only", justify="right")
    table.add_column("faults left out of graded only", justify="right")
    left_out = (
        f"{metrics['rollouts_faulted']}/{metrics['rollouts']} rollouts, "
        f"{metrics['tasks_lost']}/{metrics['tasks']} tasks"
    )
    rates = [("pass@1", metrics["pass@1"], metrics["pass@1_graded"])]
    if k > 1:
        rates.append((f"pass@{k}", metrics[f"pass@{k}"], metrics[f"pass@{k}_graded"]))
    rates.append(("mean reward", metrics["mean_reward"], metrics["mean_reward_graded"]))
    rates += [
        (f"layer {name} pass rate", rate, metrics["layer_pass_rate_graded"][name])
        for name, rate in metrics["layer_pass_rate"].items()
    ]
    for name, headline, graded in rates:
        table.add_row(name, _rate(headline), _rate(graded), left_out)
    table.add_section()
    table.add_row("faulted rollouts", str(metrics["rollouts_faulted"]), "", f"{metrics['env_error_rate']:.1%} of asked")
    for reason, count in metrics["env_errors_by_reason"].items():
        table.add_row(f"  {escape(reason)}", str(count), "", "")
    table.add_row(
        "tasks with a fault", str(metrics["tasks_with_faults"]), "", f"{metrics['tasks_lost']} with no rollout graded"
    )
    if metrics.get("faults_without_evidence"):  # faults nothing could weigh: a policy's probe would go unpenalised
        table.add_row(
            "faults without evidence",
            str(metrics["faults_without_evidence"]),
            "",
            "not weighed: no gold, canary or other answer graded",
        )
    if metrics.get("answer_faults"):  # faults the answers caused: graded wrong, in every rate above
        table.add_row(
            "answer faults (graded wrong)",
            str(metrics["answer_faults"]),
            "",
            ", ".join(f"{escape(layer)} {count}" for layer, count in metrics["answer_faults_by_layer"].items()),
        )
    if metrics.get("judge_injections"):  # answers that addressed their judge: the attempt, whatever it earned
        table.add_row(
            "judge-injection attempts",
            str(metrics["judge_injections"]),
            "",
            ", ".join(f"{escape(sign)} {count}" for sign, count in metrics["judge_injections_by_sign"].items()),
        )
    table.add_row(
        "tokens (prompt / completion)", f"{metrics['prompt_tokens']} / {metrics['completion_tokens']}", "", ""
    )
    table.add_row("wall time", f"{report.wall_s:.1f}s", "", f"{report.rerun} rollouts run now")
    out.print(table)


def _rate(value: float) -> str:
    return "n/a" if value != value else f"{value:.3f}"  # NaN: nothing graded to take a rate of
