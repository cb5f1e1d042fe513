"""verihub: declare RL environments and layered verifiers as versioned packages; grade, publish, train.

The core API::

    import verihub
    env = verihub.load_env("envs/arithmetic")       # a directory, or an installed environment's name
    task = env.dataset("eval")[0]
    messages = env.render(task)                     # chat messages for a model
    grade = env.grade(task, "\\\\boxed{42}")          # Grade(status, reward, per-layer results)
"""

from verihub.checks import Check, CheckParams, CheckResult, check
from verihub.environment import Environment, load_env
from verihub.errors import CheckNotFoundError, EnvNotFoundError, SpecError, SpecProblem, VerihubError
from verihub.grade import Grade, GradeStatus, LayerResult, LayerStatus
from verihub.spec import EnvSpec

__version__ = "0.1.0"

__all__ = [
    "Check",
    "CheckNotFoundError",
    "CheckParams",
    "CheckResult",
    "EnvNotFoundError",
    "EnvSpec",
    "Environment",
    "Grade",
    "GradeStatus",
    "LayerResult",
    "LayerStatus",
    "SpecError",
    "SpecProblem",
    "VerihubError",
    "__version__",
    "check",
    "load_env",
]
