"""The run log (verihub.trainers.runlog): the dependencies' warnings and notices leave the terminal for the
run's trl.log while it is active; verihub's own warnings, and anyone's errors, still show."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from verihub.trainers.runlog import RunLog

SLOW = pytest.mark.slow  # each starts an interpreter that imports transformers

# Warnings attributed to a module, as Python attributes them (the frame stacklevel points at).
SCRIPT = textwrap.dedent("""\
    import logging, sys, warnings
    from verihub.trainers.runlog import RunLog

    def warn(module, category, message):
        warnings.warn_explicit(message, category, module.replace(".", "/") + ".py", 1, module=module,
                               registry={})

    def everything(tag):
        warn("transformers.training_args", FutureWarning, f"`gradient_checkpointing` is deprecated {tag}")
        warn("verihub.trainers.grpo", UserWarning, "You are using 'environment_factory', which is an "
             f"experimental feature {tag}")  # TRL's notice, attributed to its caller
        warn("trl.trainer.grpo_trainer", UserWarning, f"a TRL user warning that is not on the list {tag}")
        warn("verihub.trainers.grpo", FutureWarning, f"verihub calls something deprecated {tag}")
        warn("verihub.trainers.grpo", UserWarning, f"another warning of the GRPO trainer {tag}")
        logging.getLogger("trl.trainer.grpo_trainer").warning(f"All reward functions returned None {tag}")
        logging.getLogger("transformers.tokenization_utils_base").error(f"a transformers error {tag}")
        logging.getLogger("verihub.trainers").warning(f"reward-hacking alert (collapse) in sums {tag}")

    with RunLog(sys.argv[1]) as log:
        everything("[inside]")
        log.write("{'step': 1, 'loss': '0.5'}")
    everything("[after]")
""")


@SLOW
def test_dependency_noise_goes_to_the_file_ours_and_errors_to_the_terminal(tmp_path: Path) -> None:
    log = tmp_path / "run" / "trl.log"
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(log)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    inside = "\n".join(line for line in result.stderr.splitlines() if "[inside]" in line)
    assert "gradient_checkpointing" not in inside and "environment_factory" not in inside  # filtered
    assert "a TRL user warning that is not on the list" in inside  # narrow: only the listed ones
    assert "verihub calls something deprecated" in inside  # attributed to verihub: ours to fix, so it shows
    assert "another warning of the GRPO trainer" in inside
    assert "reward-hacking alert (collapse) in sums" in inside and "a transformers error" in inside
    assert "All reward functions returned None" not in inside  # a dependency's notice: in the file
    written = log.read_text()
    assert "WARNING trl.trainer.grpo_trainer: All reward functions returned None [inside]" in written
    assert "{'step': 1, 'loss': '0.5'}" in written and "[after]" not in written
    after = "\n".join(line for line in result.stderr.splitlines() if "[after]" in line)
    for restored in ("gradient_checkpointing", "environment_factory", "All reward functions returned None"):
        assert restored in after, restored  # everything as it was once the run log is left


@SLOW
def test_python_w_options_decide_alone(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-W", "default", "-c", SCRIPT, str(tmp_path / "trl.log")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    inside = "\n".join(line for line in result.stderr.splitlines() if "[inside]" in line)
    assert "gradient_checkpointing" in inside


def test_a_new_run_log_starts_the_file_afresh_and_nested_ones_restore_the_outer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outer_path, inner_path = tmp_path / "trl.log", tmp_path / "sft" / "trl.log"
    outer_path.write_text("a previous run\n")
    outer = RunLog(outer_path)
    assert outer_path.read_text() == ""
    notices = logging.getLogger("transformers.modeling_utils")
    with outer:
        notices.warning("outer one")
        with RunLog(inner_path):
            notices.warning("inner")
        notices.warning("outer two")
    assert outer_path.read_text().splitlines() == [
        "WARNING transformers.modeling_utils: outer one",
        "WARNING transformers.modeling_utils: outer two",
    ]
    assert inner_path.read_text() == "WARNING transformers.modeling_utils: inner\n"
