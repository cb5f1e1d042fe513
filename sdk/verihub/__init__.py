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

# verihub is one package made of several distributions: this one (the SDK), verihub-hub (verihub.hub) and
# verihub-trainers (verihub.trainers). Installed from wheels they share one folder; installed editable
# (a checkout's sdk/, hub/, trainers/) each folder is a portion of this package's path.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

if TYPE_CHECKING:  # what the names resolve to, for type checkers and editors
    from verihub.checks import Check, CheckParams, CheckResult, check
    from verihub.environment.core import Environment, load_env
    from verihub.errors import CheckNotFoundError, EnvNotFoundError, SpecError, SpecProblem, VerihubError
    from verihub.grading.grade import Grade, GradeStatus, LayerResult, LayerStatus
    from verihub.spec.models import EnvSpec

__version__ = "0.1.0"

_WHERE = {
    "Check": "checks",
    "CheckParams": "checks",
    "CheckResult": "checks",
    "check": "checks",
    "Environment": "environment.core",
    "load_env": "environment.core",
    "CheckNotFoundError": "errors",
    "EnvNotFoundError": "errors",
    "SpecError": "errors",
    "SpecProblem": "errors",
    "VerihubError": "errors",
    "Grade": "grading.grade",
    "GradeStatus": "grading.grade",
    "LayerResult": "grading.grade",
    "LayerStatus": "grading.grade",
    "EnvSpec": "spec.models",
}
__all__ = sorted([*_WHERE, "__version__"])
__getattr__, __dir__ = _lazy.lazy_names(globals(), _WHERE)

# Module paths of verihub 0.1 that moved when the SDK was grouped into subpackages (old -> new).
_lazy.moved_modules(
    {
        "verihub.calibration": "verihub.validation.calibration",
        "verihub.dataset": "verihub.environment.dataset",
        "verihub.evaluate": "verihub.eval.evaluate",
        "verihub.grade": "verihub.grading.grade",
        "verihub.graders": "verihub.serve.graders",
        "verihub.installed": "verihub.environment.installed",
        "verihub.judge": "verihub.grading.judge",
        "verihub.redteam": "verihub.validation.redteam",
        "verihub.rollout": "verihub.eval.rollout",
        "verihub.scaffold": "verihub.spec.scaffold",
        "verihub.session": "verihub.environment.session",
        "verihub.spec_loader": "verihub.spec.loader",
        "verihub.tools": "verihub.sandbox.tools",
        "verihub.toolschema": "verihub.environment.toolschema",
        "verihub.validate": "verihub.validation.validate",
        "verihub.verifier": "verihub.grading.verifier",
    }
)
