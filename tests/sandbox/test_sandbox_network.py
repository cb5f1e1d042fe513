"""A jail with `sandbox: {network: true}` gets the outside and never the host's own services: its network namespace
is its own, connected by pasta's user-mode NAT, with no port of the host's loopback carried in (a `verihub serve`
without a token, a trainer's vLLM server with its development routes, a hub on 127.0.0.1 stay out of reach).

Traffic goes only to this machine: its loopback, and its own address on its outward interface (standing for
"the outside": what the jail reaches through pasta, as it would a remote host)."""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from verihub import sandbox
from verihub.sandbox import Limits, RunStatus
from verihub.sandbox.nsjail import NsjailSandbox

pytestmark = pytest.mark.nsjail
NETWORK = Limits(network=True, wall_s=30)
SECRET = b"a reward oracle answered\n"

# Connects to HOST:PORT again and again for as long as pasta's port scan could take to carry a port over (its default
# scans the host's bound ports every second): what it heard, or the last error.
PROBE = """
import socket, sys, time
host, port, heard = sys.argv[1], int(sys.argv[2]), "nothing"
deadline = time.monotonic() + float(sys.argv[3])
while time.monotonic() < deadline:
    try:
        with socket.create_connection((host, port), timeout=0.5) as connection:
            heard = connection.recv(100).decode()
            break
    except OSError as error:
        heard = type(error).__name__
    time.sleep(0.2)
print(heard.strip())
"""


@pytest.fixture
def service() -> Iterator[Any]:
    """A service on the host that answers anyone who connects (as a tokenless grader would), on loopback and on
    the machine's outward address."""
    listeners = []

    def serve(address: str) -> int:
        listener = socket.socket()
        listener.bind((address, 0))
        listener.listen()
        listeners.append(listener)

        def answer() -> None:
            while True:
                try:
                    connection, _ = listener.accept()
                except OSError:
                    return
                with connection:
                    connection.sendall(SECRET)

        threading.Thread(target=answer, daemon=True).start()
        return int(listener.getsockname()[1])

    yield serve
    for listener in listeners:
        listener.close()


def outward_address() -> str:
    """This machine's IPv4 address on its first interface other than loopback (no packet is sent to find it)."""
    for _, name in socket.if_nameindex():
        if name == "lo":
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            try:
                packed = fcntl.ioctl(probe.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
            except OSError:
                continue
        return socket.inet_ntoa(packed[20:24])
    if os.environ.get("CI"):
        pytest.fail("this machine has no IPv4 address besides loopback: the jail's outside cannot be shown")
    pytest.skip("no IPv4 address besides loopback here")


def probe(host: str, port: int, seconds: float, *, as_python: bool) -> Any:
    if as_python:
        code = f"import sys; sys.argv = ['probe', {host!r}, '{port}', '{seconds}']\n" + PROBE
        return sandbox.run_python(code, limits=NETWORK, sandbox=NsjailSandbox())
    return sandbox.run(["python3", "-c", PROBE, host, str(port), str(seconds)], limits=NETWORK, sandbox=NsjailSandbox())


@pytest.mark.parametrize("as_python", [False, True], ids=["command", "python"])
def test_the_hosts_loopback_stays_out_of_reach(service: Any, nsjail_path: str, as_python: bool) -> None:
    port = service("127.0.0.1")
    for host in ("127.0.0.1", "10.255.255.1"):  # the jail's own loopback; the gateway pasta would map to the host
        ran = probe(host, port, 2.5, as_python=as_python)
        assert ran.status is RunStatus.OK, ran
        assert ran.stdout.strip() in ("ConnectionRefusedError", "TimeoutError", "OSError"), (host, ran.stdout)


@pytest.mark.parametrize("as_python", [False, True], ids=["command", "python"])
def test_the_outside_is_reached(service: Any, nsjail_path: str, as_python: bool) -> None:
    address = outward_address()
    ran = probe(address, service(address), 10, as_python=as_python)
    assert ran.status is RunStatus.OK and ran.stdout.strip() == SECRET.decode().strip(), ran


def test_without_network_nothing_is_reached(service: Any, nsjail_path: str) -> None:
    address = outward_address()
    code = PROBE.replace("sys.argv[1]", repr(address)).replace("int(sys.argv[2])", str(service(address)))
    ran = sandbox.run_python(
        code.replace("float(sys.argv[3])", "1.0"), limits=Limits(wall_s=20), sandbox=NsjailSandbox()
    )
    assert ran.status is RunStatus.OK and ran.stdout.strip() == "OSError", ran  # no route at all
