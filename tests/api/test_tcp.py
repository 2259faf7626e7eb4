"""TCP_NODELAY on every served connection, also on sockets uvicorn's workers inherit."""

from __future__ import annotations

import socket
from typing import Any

from flowmem.api.tcp import PROTOCOL, NoDelayHTTPProtocol, set_nodelay


class _Transport:
    def __init__(self, sock: socket.socket | None) -> None:
        self.sock = sock

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.sock if name == "socket" else default


def _accepted_from_a_worker_style_socket() -> tuple[socket.socket, socket.socket, socket.socket]:
    """A connection accepted from a listener built as uvicorn builds it for --workers."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # protocol 0, as uvicorn's
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    client = socket.create_connection(listener.getsockname())
    accepted, _ = listener.accept()
    return listener, client, accepted


def test_a_worker_style_connection_starts_with_nagle_on_and_set_nodelay_turns_it_off() -> None:
    listener, client, accepted = _accepted_from_a_worker_style_socket()
    try:
        assert accepted.proto == 0  # why asyncio itself skips TCP_NODELAY here
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
        set_nodelay(_Transport(accepted))  # type: ignore[arg-type]
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        for sock in (listener, client, accepted):
            sock.close()


def test_set_nodelay_leaves_non_tcp_transports_alone() -> None:
    set_nodelay(_Transport(None))  # type: ignore[arg-type]
    left, right = socket.socketpair()  # AF_UNIX: no TCP options
    try:
        set_nodelay(_Transport(left))  # type: ignore[arg-type]
    finally:
        left.close()
        right.close()


def test_serve_uses_the_nodelay_protocol() -> None:
    module, _, name = PROTOCOL.partition(":")
    assert module == NoDelayHTTPProtocol.__module__ and name == NoDelayHTTPProtocol.__name__
    assert callable(getattr(NoDelayHTTPProtocol, "connection_made", None))
