"""One trainer config (verihub.trainers.config.RunConfig): the API's keywords, `verihub train`'s options and
docs/training.md's table all come from its fields, so none can disagree with another."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from conftest import REPO
from verihub.errors import UsageError
from verihub.trainers.config import RunConfig, knobs_table, split_knobs


def verihub_app() -> typer.Typer:
    """The `verihub` app with the trainers' commands added, as the console script adds them."""
    from verihub.cli import app
    from verihub.cli.plugins import add_commands

    add_commands(app)
    return app


def train_options() -> dict[str, object]:
    """`verihub train`'s options as click builds them: parameter name -> default."""
    command = typer.main.get_command(verihub_app()).commands["train"]
    return {parameter.name: parameter.default for parameter in command.params}


def test_every_knob_with_a_flag_is_an_option_with_the_apis_default() -> None:
    options = train_options()
    for field in dataclasses.fields(RunConfig):
        flag = field.metadata["flag"]
        if flag is None:
            assert field.name not in options
            continue
        assert field.name in options, f"{field.name} has no `verihub train` option"
        given = options[field.name]
        if flag.type is bool:
            assert given is False and field.default in (None, False)  # a flag off is the keyword's default
        elif flag.type == list[str]:
            assert given in ([], None, ()) and field.default is None
        else:
            same = given == field.default or str(given) == str(field.default)  # output_dir: a Path there
            assert same, f"--{field.name}: {given!r}, the API's {field.default!r}"
    assert options["curriculum"] == RunConfig().curriculum == "adaptive"  # once "adaptive" here, None in the API


def test_the_docs_table_is_the_configs() -> None:
    text = (REPO / "docs" / "training.md").read_text()
    shown = text.split("<!-- knobs:", 1)[1].split("-->", 1)[1].split("<!-- /knobs -->", 1)[0].strip()
    assert shown == knobs_table(), "paste verihub.trainers.config.knobs_table() into docs/training.md"


def test_keywords_and_a_config_object_are_one_thing() -> None:
    config, rest = split_knobs(None, {"lora": True, "heldout_every": 5, "learning_rate": 1e-5})
    assert (config.lora, config.heldout_every, config.curriculum) == (True, 5, "adaptive")
    assert rest == {"learning_rate": 1e-5}  # TRL's
    base = RunConfig(heldout_tasks=8)
    config, _ = split_knobs(base, {"heldout_every": 2})
    assert (config.heldout_tasks, config.heldout_every, base.heldout_every) == (8, 2, 0)


@pytest.mark.parametrize(
    "knobs",
    [{"heldout_tasks": 0}, {"heldout_every": -1}, {"max_staleness": -1}, {"heldout_temperature": float("nan")}],
)
def test_a_bad_knob_is_refused_by_name(knobs: dict[str, object]) -> None:
    with pytest.raises(UsageError, match=next(iter(knobs))):
        RunConfig(**knobs)  # type: ignore[arg-type]


def test_a_knob_the_other_trainer_reads_is_refused_not_ignored(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="max_staleness: only AsyncGRPOTrainer"):
        RunConfig(max_staleness=3).check_for("sync")
    with pytest.raises(UsageError, match="use_vllm, graders: only GRPOTrainer"):
        RunConfig(use_vllm=True, graders=["http://127.0.0.1:1"]).check_for("async")
    RunConfig(max_staleness=1).check_for("sync")  # at its default: nothing was asked
    result = CliRunner().invoke(
        verihub_app(),
        ["train", "--model", str(tmp_path), "--env", "envs/sums", "--async", "--grader", "http://127.0.0.1:1"],
    )
    assert result.exit_code == 2 and "graders: only GRPOTrainer" in result.output
