"""The unsafe local backend: a plain subprocess in a temporary directory. NO isolation.

For development on machines where nsjail cannot run. It is only used when named explicitly
(``VERIHUB_SANDBOX=unsafe-local`` or ``UnsafeLocalSandbox()``), and it warns on every run.
"""

from __future__ import annotations

import io
import logging
import shutil
import tarfile
import tempfile
from pathlib import Path

from verihub.sandbox._classify import to_result
from verihub.sandbox._process import run_process
from verihub.sandbox.nsjail import JAIL_ENV, PYTHON
from verihub.sandbox.types import Request, Result, Snapshot

__all__ = ["UnsafeLocalSandbox"]

logger = logging.getLogger("verihub.sandbox")


class UnsafeLocalSandbox:
    name = "unsafe-local"

    def run(self, request: Request) -> Result:
        logger.warning("verihub sandbox: running WITHOUT isolation (unsafe-local backend); never use it for untrusted code")
        limits = request.limits
        command = list(request.command) if request.command is not None else [PYTHON, "main.py"]
        files = request.files or Snapshot()
        if request.code is not None:
            files = files.adding({"main.py": request.code})
        directory = Path(tempfile.mkdtemp(prefix="verihub-unsafe-"))
        try:
            if files:
                with tarfile.open(fileobj=io.BytesIO(files.tar), mode="r:") as archive:
                    archive.extractall(directory, filter="data")
            # ulimit gives the memory, CPU, file size and process limits; the wall clock is ours.
            script = (f"ulimit -v {limits.memory_mb * 1024} -t {max(1, round(limits.cpu_limit_s))} "
                      f"-f {limits.max_file_mb * 1024} -u {limits.max_procs + 64} 2>/dev/null; "
                      f'cd {directory} && exec "$@"')
            env = {**JAIL_ENV, "HOME": str(directory)}
            finished = run_process(["/bin/bash", "-c", script, "verihub", *command], env=env, stdin=request.stdin,
                                   wall_s=limits.wall_s, max_output=limits.max_output_kb * 1024)
            return to_result(finished, limits, files=_pack(directory) if request.keep_files else None,
                             peak_memory_mb=finished.max_rss_mb)
        finally:
            shutil.rmtree(directory, ignore_errors=True)


def _pack(directory: Path) -> Snapshot:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.add(directory, arcname=".")
    return Snapshot(buffer.getvalue())
