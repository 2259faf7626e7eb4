"""uvicorn's HTTP protocol, with ``TCP_NODELAY`` set on every connection.

With ``--workers N`` uvicorn binds the listening socket itself and hands it to
the worker processes; that socket object reports protocol 0, so asyncio's own
``TCP_NODELAY`` (which it sets only on sockets that say ``IPPROTO_TCP``) is never
set on the connections accepted from it. Nagle's algorithm then meets the
client's delayed ACK and a keep-alive response stalls for 40 ms: in
``bench/http.py`` every request to a two-worker server took 44 ms at the median,
the empty endpoint included. ``flowmem serve`` passes this protocol to uvicorn
(``http=PROTOCOL``), for one worker or many.
"""

from __future__ import annotations

import asyncio
import socket
from contextlib import suppress

from uvicorn.protocols.http.auto import AutoHTTPProtocol

PROTOCOL = "flowmem.api.tcp:NoDelayHTTPProtocol"


def set_nodelay(transport: asyncio.BaseTransport) -> None:
    """Turn Nagle's algorithm off on the transport's TCP socket (a no-op for others)."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class NoDelayHTTPProtocol(AutoHTTPProtocol):  # type: ignore[valid-type,misc]
    """uvicorn's automatic HTTP protocol (h11, or httptools when installed), without Nagle."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Set ``TCP_NODELAY``, then let uvicorn take the connection."""
        set_nodelay(transport)
        super().connection_made(transport)
