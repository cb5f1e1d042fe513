"""The unsafe local backend: a plain subprocess in a temporary directory. NO isolation.

For development on machines where nsjail cannot run. It is only used when named explicitly
(``VERIHUB_SANDBOX=unsafe-local`` or ``UnsafeLocalSandbox()``), and it warns on every run.
"""

from __future__ import annotations

import logging
import os
import tempfile

from verihub.sandbox import _archive
from verihub.sandbox._classify import to_result
from verihub.sandbox._process import run_process
from verihub.sandbox.nsjail import JAIL_ENV, PYTHON
from verihub.sandbox.types import Request, Result, RunStatus, Snapshot, UnsafeArchive, exec_refusal

__all__ = ["UnsafeLocalSandbox"]

logger = logging.getLogger("verihub.sandbox")


class UnsafeLocalSandbox:
    name = "unsafe-local"

    def run(self, request: Request) -> Result:
        if (refused := exec_refusal(request)) is not None:
            return refused
        if request.limits.aliases:
            return Result(
                RunStatus.INFRA_ERROR,
                None,
                "",
                "",
                0.0,
                reason="the unsafe-local backend cannot make sandbox.aliases (paths outside its work dir); use nsjail",
            )
        logger.warning(
            "verihub sandbox: running WITHOUT isolation (unsafe-local backend); never use it for untrusted code"
        )
        limits = request.limits
        command = list(request.command) if request.command is not None else [PYTHON, "main.py"]
        files = request.files or Snapshot()
        if request.code is not None:
            files = files.adding({"main.py": request.code})
        directory = tempfile.mkdtemp(prefix="verihub-unsafe-")
        try:
            _archive.unpack(files.entries(), directory)
            # ulimit gives the memory, CPU, file size and process limits; the wall clock is ours.
            script = (
                f"ulimit -v {limits.memory_mb * 1024} -t {max(1, round(limits.cpu_limit_s))} "
                f"-f {limits.max_file_mb * 1024} -u {limits.max_procs + 64} 2>/dev/null; "
                f'cd {directory} && exec "$@"'
            )
            env = {**JAIL_ENV, "HOME": str(directory)}
            finished = run_process(
                ["/bin/bash", "-c", script, "verihub", *command],
                env=env,
                stdin=request.stdin,
                wall_s=limits.wall_s,
                max_output=limits.max_output_kb * 1024,
            )
            kept, files_error = None, ""
            if request.keep_files:
                try:
                    kept = Snapshot.from_entries(_archive.pack(directory))
                except (UnsafeArchive, OSError) as error:
                    files_error = str(error)
            return to_result(finished, limits, files=kept, files_error=files_error)
        finally:
            _archive.empty(directory)  # whatever modes the run left
            os.rmdir(directory)
