"""A work dir that lives across runs (multi-turn tasks), with snapshots to go back to."""

from __future__ import annotations

from collections.abc import Sequence

from verihub.sandbox import Files, Sandbox, default_sandbox
from verihub.sandbox.types import Limits, Request, Result, RunStatus, Snapshot

__all__ = ["SandboxSession"]


class SandboxSession:
    """Each run starts from the files the previous one left. A run that does not finish (timeout,
    output limit, sandbox fault) leaves the state as it was before it.

    >>> session = SandboxSession(files={"notes.txt": "draft"})      # doctest: +SKIP
    >>> saved = session.snapshot()                                   # doctest: +SKIP
    >>> session.run("rm notes.txt"); session.restore(saved)          # doctest: +SKIP
    """

    def __init__(self, *, files: Files = None, limits: Limits | None = None, sandbox: Sandbox | None = None) -> None:
        self.limits = limits or Limits()
        self.sandbox = sandbox or default_sandbox()
        self._state = Snapshot.of(files)

    def run(self, command: str | Sequence[str], *, stdin: str | bytes | None = None) -> Result:
        argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
        return self._run(
            Request(
                command=argv,
                files=self._state or None,
                limits=self.limits,
                stdin=stdin.encode() if isinstance(stdin, str) else stdin,
                keep_files=True,
            )
        )

    def run_python(self, code: str) -> Result:
        return self._run(Request(code=code, files=self._state or None, limits=self.limits, keep_files=True))

    def _run(self, request: Request) -> Result:
        result = self.sandbox.run(request)
        if result.files is not None and result.status in (RunStatus.OK, RunStatus.NONZERO_EXIT, RunStatus.MEMORY_LIMIT):
            self._state = result.files
        return result

    def snapshot(self) -> Snapshot:
        """The current files; pass it to :meth:`restore` to come back here."""
        return self._state

    def restore(self, snapshot: Snapshot) -> None:
        self._state = snapshot

    def files(self) -> dict[str, bytes]:
        return self._state.files()
