"""The host's side of python_tests' harness: the program the sandbox runs, its stdin, and its verdict.

The program is ``_wire.py``, ``_test_child.py``, ``_test_process.py`` and ``_test_runner.py`` (how it
keeps the candidate's code out of the process that runs the tests is in ``_test_runner.py``). The jail runs the host's
own
``/usr/bin/python3`` (its /usr is the host's, mounted read-only), so the program is compiled once per
process by that interpreter, and main.py carries the bytecode: loading it costs a few hundredths of
compiling 40 kB of source in every run. If the jail's Python turns out to be another, main.py reports
that as the sandbox's fault, in a verdict signed like the runner's.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import logging
import subprocess
import zlib
from importlib import resources
from typing import Any

__all__ = ["program", "read_verdict", "stdin"]

logger = logging.getLogger("verihub.checks")

MARKER = "VERIHUB-TESTS "
_PARTS = ("_wire.py", "_test_child.py", "_test_process.py", "_test_runner.py")
_NAME = "verihub-tests-runner"
_MAIN = """\
import binascii, marshal, sys, zlib
if sys.hexversion != {hexversion}:
    import json
    from _blake2 import blake2b
    nonce = json.loads(sys.stdin.buffer.readline())["nonce"]
    payload = json.dumps({{"infra": "python_tests' runner was compiled for Python %x, the sandbox runs %x"
                                   % ({hexversion}, sys.hexversion)}})
    mac = blake2b(payload.encode(), key=nonce.encode(), digest_size=16).hexdigest()
    sys.stdout.write("\\n{marker}%s %s %s\\n" % (nonce, mac, payload))
    raise SystemExit(0)
exec(marshal.loads(zlib.decompress(binascii.a2b_base64({bytecode!r}))))
"""
# Run by the jail's Python on the host: the bytecode, without docstrings (the runner uses no assert).
_COMPILE = (
    "import marshal, sys; code = compile(sys.stdin.read(), {name!r}, 'exec', optimize=2); "
    "sys.stdout.buffer.write(b'%d\\n' % sys.hexversion + marshal.dumps(code))"
)


@functools.cache
def source() -> str:
    package = resources.files("verihub.checks")
    return "\n".join(package.joinpath(name).read_text() for name in _PARTS)


@functools.cache
def program() -> str:
    """The runner's main.py: its bytecode for the jail's Python, or (if that cannot be made) its source."""
    from verihub.sandbox.nsjail import PYTHON

    try:
        done = subprocess.run(
            [PYTHON, "-I", "-S", "-c", _COMPILE.format(name=_NAME)],
            input=source().encode(),
            capture_output=True,
            timeout=60,
            check=True,
        )
        hexversion, _, bytecode = done.stdout.partition(b"\n")
        return main_for(int(hexversion), bytecode)
    except (OSError, ValueError, subprocess.SubprocessError) as error:
        logger.warning(
            "python_tests: cannot precompile the test runner with %s (%s); every run compiles it", PYTHON, error
        )
        return source()


def main_for(hexversion: int, bytecode: bytes) -> str:
    """main.py that runs ``bytecode`` under Python ``hexversion`` (and reports any other Python)."""
    packed = base64.b64encode(zlib.compress(bytecode, 9)).decode()
    return _MAIN.format(hexversion=hexversion, bytecode=packed, marker=MARKER)


def stdin(tests: str, expected: set[str], nonce: str, wall_s: float) -> str:
    """What the runner reads: a header line (nonce, test names, time limits), then the tests."""
    header = {"nonce": nonce, "expected": sorted(expected), "wall_s": wall_s, "budget_s": _budget(wall_s)}
    return f"{json.dumps(header)}\n{tests}"


def _budget(wall_s: float) -> float:
    """The runner's own time limit: the jail's, less a margin for the jail to start and the verdict
    to come out (a run the jail stops has no verdict at all)."""
    return max(0.1, wall_s - min(1.0, 0.1 + wall_s * 0.1))


def read_verdict(stdout: str, nonce: str) -> dict[str, Any] | None:
    """The runner's verdict, from the last line that carries the nonce and a valid MAC under it."""
    marker = f"{MARKER}{nonce} "
    for line in reversed(stdout.splitlines()):
        if not line.startswith(marker):
            continue
        mac, _, payload = line[len(marker) :].partition(" ")
        expected = hashlib.blake2b(payload.encode(), key=nonce.encode(), digest_size=16).hexdigest()
        if hmac.compare_digest(mac, expected):
            verdict = json.loads(payload)
            return verdict if isinstance(verdict, dict) else None
    return None
