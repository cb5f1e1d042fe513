"""verihub's side of a bridge: a child interpreter of another tool (one whose pins verihub's lock cannot share)
running a far side from :mod:`verihub.adapters.bridges`, asked one JSON line at a time over pipes."""

from __future__ import annotations

import json
import selectors
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from verihub.errors import describe_error

__all__ = ["BridgeProcess"]

SIDES = Path(__file__).with_name("bridges")
_MAX_LINE = 64 << 20  # bytes of one answer (a taskset's tasks, all prompts)
_START = "import sys; sys.path.insert(0, sys.argv[1]); import runpy; runpy.run_path(sys.argv[2], run_name='__main__')"


class BridgeProcess:
    """One child: ``python -P bridges/SIDE`` (-P: the far side's folder only, never this package's, on its
    path). Requests go one at a time; a failure is ``error`` with what failed, and a child that died or
    stalled past ``timeout_s`` is restarted at the next request."""

    def __init__(self, python: str, side: str, *, what: str, timeout_s: float, error: type[Exception]) -> None:
        self.python, self.side, self.what, self.timeout_s, self.error = python, side, what, timeout_s, error
        self.lock = threading.Lock()  # held by callers across a start and its first request
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        self.close()
        self._process = subprocess.Popen(
            [self.python, "-P", "-c", _START, str(SIDES), str(SIDES / self.side)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        """The far side's answer to ``request``; ``error`` when it failed, raised, died or stalled."""
        if not self.alive:
            self.start()
        process = self._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(json.dumps(request).encode() + b"\n")
            process.stdin.flush()
            line = _read_line(process, self.timeout_s)
        except (OSError, TimeoutError) as failure:
            self.close()
            reason = f"no answer within {self.timeout_s:g}s" if isinstance(failure, TimeoutError) else "it died"
            raise self.error(f"{self.what}: the bridge failed ({request['op']}: {reason})") from None
        try:
            answer = json.loads(line)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise self.error(f"{self.what}: the bridge answered {request['op']} with {line[:200]!r}")
        if "error" in answer:
            kind, message = (list(answer["error"]) + ["", ""])[:2] if isinstance(answer["error"], list) else ("", "")
            raise self.error(f"{self.what}: {request['op']} raised {describe_error((str(kind), str(message)), 1000)}")
        return answer

    def close(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None


def _read_line(process: subprocess.Popen[bytes], timeout_s: float) -> str:
    """One line of the process's stdout within ``timeout_s``; TimeoutError, or OSError when it ends first."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout_s
    data = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if not selector.select(left):
                continue
            chunk = process.stdout.read1(1 << 20)  # type: ignore[attr-defined]  # a BufferedReader's read1, on a pipe
            if not chunk:
                raise OSError("the bridge ended")
            data += chunk
            if len(data) > _MAX_LINE:
                raise OSError("an answer past its bound")
    return data.decode(errors="replace")
