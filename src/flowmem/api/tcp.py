"""uvicorn's HTTP protocol, with ``TCP_NODELAY`` set on every connection.

With ``--workers N`` each worker listens on a socket made for it outside asyncio
(uvicorn's shared socket, or flowmem's own per worker: flowmem.cli.listeners);
such a socket object reports protocol 0, so asyncio's own
``TCP_NODELAY`` (which it sets only on sockets that say ``IPPROTO_TCP``) is never
set on the connections accepted from it. Nagle's algorithm then meets the
client's delayed ACK and a keep-alive response stalls for 40 ms: in
``bench/http.py`` every request to a two-worker server took 44 ms at the median,
the empty endpoint included. ``flowmem serve`` passes this protocol to uvicorn
(``http=PROTOCOL``), for one worker or many.
"""

from __future__ import annotations

import asyncio
import os
import socket
from contextlib import suppress
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

PROTOCOL = "flowmem.api.tcp:NoDelayHTTPProtocol"


def set_nodelay(transport: asyncio.BaseTransport) -> None:
    """Turn Nagle's algorithm off on the transport's TCP socket (a no-op for others)."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


HEADER_TIMEOUT_ENV = "FLOWMEM_HEADER_TIMEOUT"
DEFAULT_HEADER_TIMEOUT = 10.0  # seconds a request's headers may take to arrive


def header_timeout() -> float:
    """The header read timeout in seconds (``$FLOWMEM_HEADER_TIMEOUT``; 0 = none)."""
    raw = os.environ.get(HEADER_TIMEOUT_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_HEADER_TIMEOUT
    except ValueError:
        return DEFAULT_HEADER_TIMEOUT
    return value if value > 0 else 0.0


class NoDelayHTTPProtocol(AutoHTTPProtocol):  # type: ignore[valid-type,misc]
    """uvicorn's automatic HTTP protocol (h11, or httptools when installed), without Nagle.

    Two bounds uvicorn lacks, so idle or slow connections cannot use up file
    descriptors: a connection must deliver each request's headers within the
    header timeout (a fresh connection that sends nothing, or a request whose
    headers trickle in, is closed when it passes), and a connection accepted while
    more than ``limit_concurrency`` are open is closed at once (uvicorn itself only
    answers 503 to the requests of connections past that count).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timeout = header_timeout()
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Set ``TCP_NODELAY``, then let uvicorn take the connection (or close one too many)."""
        set_nodelay(transport)
        super().connection_made(transport)
        limit = self.limit_concurrency
        if limit is not None and len(self.connections) > limit:
            transport.close()
            return
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        """Time the headers of a new request; stop timing once they have all arrived."""
        if self._header_timer is None and self._awaiting_headers():
            self._arm_header_timer()
        super().data_received(data)
        if not self._awaiting_headers():
            self._disarm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the header timer, then let uvicorn clean up."""
        self._disarm_header_timer()
        super().connection_lost(exc)

    def _awaiting_headers(self) -> bool:
        """True between requests: no request yet, or the last one answered."""
        cycle = self.cycle
        return cycle is None or bool(cycle.response_complete)

    def _arm_header_timer(self) -> None:
        if self._header_timeout and self._header_timer is None:
            self._header_timer = self.loop.call_later(self._header_timeout, self._headers_late)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self._awaiting_headers() and not self.transport.is_closing():
            self.transport.close()
