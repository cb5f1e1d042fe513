"""A listening TCP socket for the uvicorn servers verihub starts on a socket of its own."""

from __future__ import annotations

import socket


def tcp_listener(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """Bound and listening (``port`` 0 takes a free one); raises OSError if it cannot bind.

    The protocol is IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say TCP, and
    without it every reply on a kept-alive connection after the first waits 40 ms for the client's
    delayed ACK."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(backlog)  # connections wait in the backlog from the moment the address is known
    except OSError:
        listener.close()
        raise
    return listener
