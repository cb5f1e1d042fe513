"""Run untrusted code: nsjail isolation and limits, a warm pool, snapshots, faults that are never zeros.

    from verihub import sandbox
    result = sandbox.run_python("print(2 + 2)")
    result.status, result.stdout                  # ('ok', '4\\n')
    sandbox.run(["bash", "-c", "ls"], files={"a.txt": "hi"}, limits=sandbox.Limits(wall_s=5))

Backends share one interface, ``run(Request) -> Result``: :class:`NsjailSandbox` (a fresh jail per run,
the default), :class:`WarmPool` (ready jails, a fork per run) and :class:`UnsafeLocalSandbox` (no
isolation, development only). ``VERIHUB_SANDBOX`` picks the default; see :mod:`verihub.settings`.
Imports only the spec (its limits), :mod:`verihub.errors` and :mod:`verihub.settings`: it knows nothing
of who runs code in it.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from verihub import settings
from verihub.sandbox.types import Limits, Request, Result, RunStatus, Snapshot

__all__ = [
    "Limits",
    "Request",
    "Result",
    "RunStatus",
    "Sandbox",
    "Snapshot",
    "arun",
    "arun_python",
    "default_sandbox",
    "run",
    "run_python",
]

Files = Mapping[str, str | bytes] | Snapshot | None


class Sandbox(Protocol):
    name: str

    def run(self, request: Request) -> Result: ...


_default_lock = threading.Lock()
_defaults: dict[str, Sandbox] = {}


def default_sandbox() -> Sandbox:
    """The backend ``VERIHUB_SANDBOX`` names, made once per process. Raises
    :class:`~verihub.errors.SandboxUnavailable` (saying why and what to install) if nsjail cannot run."""
    name = settings.sandbox_backend()
    with _default_lock:
        if name not in _defaults:
            _defaults[name] = _make(name)
        return _defaults[name]


def _make(name: str) -> Sandbox:
    if name == "unsafe-local":
        from verihub.sandbox.local import UnsafeLocalSandbox

        return UnsafeLocalSandbox()
    from verihub.sandbox.probe import require_nsjail

    binary = require_nsjail()
    if name == "pool":
        from verihub.sandbox.pool import WarmPool

        return WarmPool(settings.sandbox_pool_size(), nsjail_path=binary)
    from verihub.sandbox.nsjail import NsjailSandbox

    return NsjailSandbox(binary)


def run(
    command: str | Sequence[str],
    *,
    files: Files = None,
    limits: Limits | None = None,
    stdin: str | bytes | None = None,
    keep_files: bool = False,
    sandbox: Sandbox | None = None,
) -> Result:
    """Run ``command`` (argv, or a string for ``bash -c``) in a sandbox with ``files`` in its work dir."""
    argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
    return _submit(sandbox, command=argv, files=files, limits=limits, stdin=stdin, keep_files=keep_files)


def run_python(
    code: str,
    *,
    files: Files = None,
    limits: Limits | None = None,
    stdin: str | bytes | None = None,
    keep_files: bool = False,
    sandbox: Sandbox | None = None,
) -> Result:
    """Run Python ``code`` as main.py in a sandbox (the jail's python3), with ``files`` beside it."""
    return _submit(sandbox, code=code, files=files, limits=limits, stdin=stdin, keep_files=keep_files)


def _submit(
    sandbox: Sandbox | None,
    *,
    files: Files,
    limits: Limits | None,
    stdin: str | bytes | None,
    keep_files: bool,
    command: list[str] | None = None,
    code: str | None = None,
) -> Result:
    request = Request(
        command=command,
        code=code,
        files=Snapshot.of(files) if files else None,
        limits=limits or Limits(),
        stdin=stdin.encode() if isinstance(stdin, str) else stdin,
        keep_files=keep_files,
    )
    return (sandbox or default_sandbox()).run(request)


# Runs block on a subprocess, so async callers get threads of their own: enough for many at once.
_executor = ThreadPoolExecutor(max_workers=64, thread_name_prefix="verihub-sandbox")


async def arun(command: str | Sequence[str], **options: object) -> Result:
    """:func:`run` without blocking the event loop."""
    call = functools.partial(run, command, **options)  # type: ignore[arg-type]  # run's keywords, passed through
    return await asyncio.get_running_loop().run_in_executor(_executor, call)


async def arun_python(code: str, **options: object) -> Result:
    """:func:`run_python` without blocking the event loop."""
    call = functools.partial(run_python, code, **options)  # type: ignore[arg-type]  # run's keywords, passed through
    return await asyncio.get_running_loop().run_in_executor(_executor, call)
