"""Headless Chromium for the web-page tests, driven over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: messages are JSON, each ended by a NUL, on the browser's fds 3 and 4), so
no port, no websocket library and no browser download: Debian's ``chromium`` (scripts/setup.sh)."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_or_skip() -> str:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        if os.environ.get("CI"):
            pytest.fail("chromium must be installed in CI (scripts/setup.sh installs Debian's chromium as root)")
        pytest.skip("no chromium here")
    return chromium


class Browser:
    """One page: ``open(url)``, ``evaluate(js)``, ``click(selector)``, ``screenshot(path)``."""

    def __init__(self, chromium: str, profile: Path, size: tuple[int, int] = (1200, 900)) -> None:
        to_browser, self._to_browser = os.pipe()
        self._from_browser, from_browser = os.pipe()
        # the browser reads fd 3 and writes fd 4: hand it high-numbered copies that the child moves there
        keep = [
            fcntl.fcntl(to_browser, fcntl.F_DUPFD_CLOEXEC, 100),
            fcntl.fcntl(from_browser, fcntl.F_DUPFD_CLOEXEC, 100),
        ]
        self.process = subprocess.Popen(
            [chromium, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            close_fds=False,  # Python's own fds are not inheritable; only the two dup2'd here reach the browser
            preexec_fn=lambda: (os.dup2(keep[0], 3), os.dup2(keep[1], 4)),  # noqa: PLW1509 - it only moves two descriptors before exec
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for fd in (to_browser, from_browser, *keep):
            os.close(fd)
        self._buffer, self._next, self._events = b"", 0, []
        target = self._send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self._send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": size[0], "height": size[1], "deviceScaleFactor": 1, "mobile": False},
        )

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_: object) -> None:
        self.process.kill()
        self.process.wait(timeout=30)
        os.close(self._to_browser)
        os.close(self._from_browser)

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._send(method, params, session=self._session)

    def open(self, url: str, timeout_s: float = 60) -> None:
        self._events.clear()
        self.call("Page.navigate", {"url": url})
        self._wait_for("Page.loadEventFired", timeout_s)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click (press and release) at the middle of the first element ``selector`` matches."""
        box = self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.call(
                "Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1}
            )

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    # -- the protocol ------------------------------------------------------------------------------------

    def _send(
        self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None, timeout_s: float = 60
    ) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise AssertionError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    def _wait_for(self, event: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(message.get("method") == event for message in self._events):
            self._events.append(self._read(deadline))

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if not select.select([self._from_browser], [], [], max(0.0, deadline - time.monotonic()))[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise ConnectionError("chromium closed its DevTools pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)
