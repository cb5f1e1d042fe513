"""Where the dependencies' output goes during a run: into the run's ``trl.log``, not onto the terminal.

A run of TRL prints a raw log dict per logging step, progress bars for every dataset map and weight
load, deprecation notices about TRL's own use of transformers, and notices from their loggers. None of
it is something a user of verihub can act on, and all of it scrolls the run display away. While a
:class:`RunLog` is active (trainer construction, ``train()``, the demo's measurements):

- warnings in :data:`DEPENDENCY_WARNINGS` are filtered (each rule names a category, the dependency
  module the warning is attributed to, and for user warnings the message), unless the interpreter was
  started with ``-W``/``PYTHONWARNINGS``, which then decide alone. A warning attributed to verihub or to
  your code (a deprecated API *we* call) is not matched, so it still shows;
- the progress bars of transformers, datasets and huggingface_hub are off;
- records of the dependencies' loggers (:data:`DEPENDENCY_LOGGERS`) go to the log file; errors also
  to the terminal. verihub's own logger (alerts, faults) is untouched;
- :class:`TRLLogLines` appends TRL's log dict of each logging step to the same file.

With ``accelerate``/``torchrun``, each process other than the first writes ``trl.rank<N>.log``.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

from transformers import TrainerCallback

__all__ = ["DEPENDENCY_LOGGERS", "DEPENDENCY_WARNINGS", "TRL_LOG", "RunLog", "TRLLogLines"]

TRL_LOG = "trl.log"
DEPENDENCY_LOGGERS = ("transformers", "trl", "peft", "accelerate", "datasets", "huggingface_hub")

_DEPENDENCY = r"(transformers|trl|peft|accelerate|datasets|huggingface_hub|torch)(\.|$)"
# (category, module the warning is attributed to, message): deprecations inside the dependencies (TRL
# calling transformers' old names, say), and TRL's notice that environment_factory is experimental
# (verihub uses it for tool environments on purpose; TRL attributes it to its caller, our trainer).
DEPENDENCY_WARNINGS: tuple[tuple[type[Warning], str, str], ...] = (
    (FutureWarning, _DEPENDENCY, ""),
    (DeprecationWarning, _DEPENDENCY, ""),
    (PendingDeprecationWarning, _DEPENDENCY, ""),
    (UserWarning, r"verihub\.trainers\.grpo$", r"You are using 'environment_factory', which is an experimental"),
)


class _Stderr(logging.StreamHandler):
    """A handler on whatever ``sys.stderr`` is when a record comes (the live display redirects it)."""

    @property
    def stream(self) -> IO[str]:
        return sys.stderr

    @stream.setter
    def stream(self, _value: IO[str]) -> None:
        pass


class RunLog:
    """The run's log file and the dependency filters; a context manager, re-entered by each phase of a run.

    ``RunLog(path)`` starts the file afresh (a new run); ``with run_log:`` makes it active. Nested
    logs (a trainer's inside the demo's) restore the outer one on exit.
    """

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        rank = int(os.environ.get("RANK", "0") or 0)
        self.path = path.with_name(f"{path.stem}.rank{rank}{path.suffix}") if rank else path
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("", encoding="utf-8")
        self._stack: list[ExitStack] = []
        self._file: IO[str] | None = None

    def write(self, line: str) -> None:
        """One line into the file (while active)."""
        if self._file is not None:
            self._file.write(line.rstrip("\n") + "\n")
            self._file.flush()

    def __enter__(self) -> RunLog:
        stack = ExitStack()
        outer = self._file
        self._file = stack.enter_context(self.path.open("a", encoding="utf-8"))
        stack.callback(setattr, self, "_file", outer)
        if not sys.warnoptions:  # -W / PYTHONWARNINGS: the user decides what shows
            stack.enter_context(warnings.catch_warnings())
            for category, module, message in DEPENDENCY_WARNINGS:
                warnings.filterwarnings("ignore", message=message, category=category, module=module)
        stack.callback(_restore_progress_bars, _disable_progress_bars())
        errors = _Stderr()
        errors.setLevel(logging.ERROR)
        handlers = [logging.StreamHandler(self._file), errors]
        formatter = logging.Formatter("%(levelname)s %(name)s: %(message)s")
        for handler in handlers:
            handler.setFormatter(formatter)
        for name in DEPENDENCY_LOGGERS:
            logger = logging.getLogger(name)
            stack.callback(_restore_logger, logger, list(logger.handlers), logger.propagate)
            logger.handlers, logger.propagate = list(handlers), False
        self._stack.append(stack)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.pop().close()


class TRLLogLines(TrainerCallback):
    """TRL's log dict of every logging step, as its printer would show it (with the step), into the run log."""

    def __init__(self, run_log: RunLog) -> None:
        self.run_log = run_log

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if state.is_world_process_zero and logs:
            shown = {
                key: f"{value:.4g}" if isinstance(value, float) else value
                for key, value in logs.items()
                if key != "total_flos"
            }
            self.run_log.write(str({"step": state.global_step, **shown}))


def _restore_logger(logger: logging.Logger, handlers: list[logging.Handler], propagate: bool) -> None:
    logger.handlers, logger.propagate = handlers, propagate


def _disable_progress_bars() -> tuple[bool, bool, bool]:
    """Turn the dependencies' progress bars off; returns which were on (transformers, hub, datasets)."""
    import datasets.utils as datasets_tqdm
    from huggingface_hub import utils as hub_utils
    from transformers.utils import logging as transformers_logging

    were_on = (
        transformers_logging.is_progress_bar_enabled(),
        not hub_utils.are_progress_bars_disabled(),
        not datasets_tqdm.are_progress_bars_disabled(),
    )
    transformers_logging.disable_progress_bar()  # also the hub's
    if were_on[2]:
        datasets_tqdm.disable_progress_bars()
    return were_on


def _restore_progress_bars(were_on: tuple[bool, bool, bool]) -> None:
    import datasets.utils as datasets_tqdm
    from huggingface_hub import utils as hub_utils
    from transformers.utils import logging as transformers_logging

    if were_on[0]:
        transformers_logging.enable_progress_bar()
    (hub_utils.enable_progress_bars if were_on[1] else hub_utils.disable_progress_bars)()
    if were_on[2]:
        datasets_tqdm.enable_progress_bars()
