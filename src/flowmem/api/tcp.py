"""uvicorn's HTTP protocol (h11), with ``TCP_NODELAY`` and the request-head limit on every connection.

With ``--workers N`` each worker listens on a socket made for it outside asyncio
(uvicorn's shared socket, or flowmem's own per worker: flowmem.cli.listeners);
such a socket object reports protocol 0, so asyncio's own
``TCP_NODELAY`` (which it sets only on sockets that say ``IPPROTO_TCP``) is never
set on the connections accepted from it. Nagle's algorithm then meets the
client's delayed ACK and a keep-alive response stalls for 40 ms: in
``bench/http.py`` every request to a two-worker server took 44 ms at the median,
the empty endpoint included. ``flowmem serve`` passes this protocol to uvicorn
(``http=PROTOCOL``), for one worker or many.

The request head (request line, headers and the blank line) is at most
``HEAD_LIMIT`` bytes, however it arrives: h11 checks its own limit only while a head
is incomplete, so a head that came whole in one read (up to 256 KiB on loopback) or
behind a pipelined request passed it. Past the limit the answer is 431
``header_too_large`` and the connection is closed. The protocol is always uvicorn's
h11 one (httptools, if installed, is not used: it has no head limit at all).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
from contextlib import suppress
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from flowmem.api.errors import error_body

PROTOCOL = "flowmem.api.tcp:NoDelayHTTPProtocol"
HEAD_LIMIT = 16 * 1024  # bytes of a request head, its blank line included
HEAD_TOO_LARGE = "header_too_large"
_BLANK_LINE = re.compile(b"\n\r?\n")  # where h11 ends a head


class HeadLimitedConnection(h11.Connection):
    """h11's server connection, refusing a request head longer than ``limit`` bytes however it arrived.

    Checked before h11 reads each new request (``their_state`` IDLE), on the bytes it
    holds: more than ``limit`` of them without the head's blank line among the first
    ``limit`` is a head too large, whether the head is complete or not.
    """

    def __init__(self, limit: int = HEAD_LIMIT) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=limit)
        self.limit = limit
        self.head_too_large = False

    def next_event(self) -> Any:
        """h11's next event; RemoteProtocolError (status hint 431) for a head past the limit."""
        if self.their_state is h11.IDLE and not self.head_too_large:
            held = self._receive_buffer._data  # the bytes h11 has not parsed yet
            if len(held) > self.limit and _BLANK_LINE.search(held, 0, self.limit) is None:
                self.head_too_large = True
                self._process_error(self.their_role)  # as h11 does for its own refusals
                raise h11.RemoteProtocolError("request head too large", error_status_hint=431)
        return super().next_event()


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


class NoDelayHTTPProtocol(H11Protocol):
    """uvicorn's h11 HTTP protocol, without Nagle and with the request-head limit.

    Two bounds uvicorn lacks, so idle or slow connections cannot use up file
    descriptors: a connection must deliver each request's headers within the
    header timeout (a fresh connection that sends nothing, or a request whose
    headers trickle in, is closed when it passes), and a connection accepted while
    more than ``limit_concurrency`` are open is closed at once (uvicorn itself only
    answers 503 to the requests of connections past that count). A third: a
    request head is at most ``HEAD_LIMIT`` bytes (431, ``HeadLimitedConnection``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        limit = self.config.h11_max_incomplete_event_size
        self.conn = HeadLimitedConnection(HEAD_LIMIT if limit is None else limit)
        self._header_timeout = header_timeout()
        self._header_timer: asyncio.TimerHandle | None = None

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request h11 refused; 431 with flowmem's envelope for a head too large."""
        conn = self.conn
        if not isinstance(conn, HeadLimitedConnection) or not conn.head_too_large:
            super().send_400_response(msg)
            return
        text = f"the request head (request line and headers) is over {conn.limit} bytes"
        payload = json.dumps(error_body(HEAD_TOO_LARGE, text)).encode("utf-8")
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode("ascii")),
            (b"connection", b"close"),
        ]
        reason = b"Request Header Fields Too Large"
        for event in (h11.Response(status_code=431, headers=headers, reason=reason), h11.Data(data=payload)):
            self.transport.write(conn.send(event) or b"")
        self.transport.write(conn.send(h11.EndOfMessage()) or b"")
        self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
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
