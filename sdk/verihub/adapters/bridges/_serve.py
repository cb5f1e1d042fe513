"""The loop of every far side in this folder: one JSON object a line on stdin, one answer a line on stdout.

A far side runs in another tool's interpreter (its pins conflict with verihub's lock), as ``python -P FILE``,
and imports nothing of verihub: only its tool, the standard library, this file and its own helpers
(``_NAME_*.py`` beside ``NAME_side.py``); the folder holds nothing else, so nothing here can pass for another
package. A request names its ``op``; the answer is the handler's dict, or ``{"error": [TYPE, MESSAGE]}`` when it
raised, and the loop goes on. The tool's own prints go to stderr: they must not break the protocol.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any


def serve(handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]]) -> None:
    answers, sys.stdout = sys.stdout, sys.stderr
    for line in sys.stdin:
        try:
            request = json.loads(line)
            answer = handlers[request.get("op")](request)
        except BaseException as error:  # noqa: BLE001 - every failure is an answer, never the bridge's end
            if isinstance(error, KeyboardInterrupt | SystemExit):
                raise
            answer = {"error": [type(error).__name__, str(error).strip()[:1000]]}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
