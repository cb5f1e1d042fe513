"""verihub: declare RL environments and layered verifiers as versioned packages; grade, publish, train.

The core API::

    import verihub
    env = verihub.load_env("envs/arithmetic")       # a directory, or an installed environment's name
    task = env.dataset("eval")[0]
    messages = env.render(task)                     # chat messages for a model
    grade = env.grade(task, "\\\\boxed{42}")          # Grade(status, reward, per-layer results)

Importing this package is cheap: each public name loads its module on first use, so a command that
never loads an environment never pays for pydantic's spec models or `datasets`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from verihub import _lazy

if TYPE_CHECKING:  # what the names resolve to, for type checkers and editors
    from verihub.checks import Check, CheckParams, CheckResult, check
    from verihub.environment import Environment, load_env
    from verihub.errors import CheckNotFoundError, EnvNotFoundError, SpecError, SpecProblem, VerihubError
    from verihub.grade import Grade, GradeStatus, LayerResult, LayerStatus
    from verihub.spec import EnvSpec

__version__ = "0.1.0"

_WHERE = {
    "Check": "checks", "CheckParams": "checks", "CheckResult": "checks", "check": "checks",
    "Environment": "environment", "load_env": "environment",
    "CheckNotFoundError": "errors", "EnvNotFoundError": "errors", "SpecError": "errors", "SpecProblem": "errors",
    "VerihubError": "errors",
    "Grade": "grade", "GradeStatus": "grade", "LayerResult": "grade", "LayerStatus": "grade",
    "EnvSpec": "spec",
}
__all__ = sorted([*_WHERE, "__version__"])
__getattr__, __dir__ = _lazy.lazy_names(globals(), _WHERE)
