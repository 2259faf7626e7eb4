"""One listening socket per worker for ``flowmem serve --workers N`` (``SO_REUSEPORT``).

uvicorn binds one socket for all its workers. Every worker waits on it, and the
one that wakes first accepts every connection queued at that moment (asyncio
accepts up to ``backlog`` in one go), so keep-alive clients that connect together
(a pool, a load balancer's connections) mostly land on one worker: 32 connections
split 31/1, 26/6 or 21/11 between two workers on Linux. One worker then does the
work of two while the other idles (docs/decisions/0038).

Here each worker listens on a socket of its own, all bound to the same address
with ``SO_REUSEPORT``; the kernel spreads new connections over them by a hash of
the connection's addresses. The supervisor (uvicorn's ``Multiprocess``: worker
restarts, signals, graceful shutdown) is unchanged. It holds a socket bound to the
address and never listens on it: that keeps the port ours while workers come and
go, and a socket that does not listen receives no connections. It hands that
socket to each worker it spawns, and ``ReusePortSocket`` unpickles in the worker
as a new socket bound to the same address (``__reduce_ex__``), which the worker's
server then listens on.

Linux only: elsewhere ``SO_REUSEPORT`` does not spread TCP connections, and
``serve`` keeps uvicorn's shared socket (``spreads_connections``).
"""

from __future__ import annotations

import logging
import socket
import sys
from typing import Any, TypeVar

log = logging.getLogger("flowmem")
S = TypeVar("S", bound=socket.socket)

STARTUP_FAILURE = 3  # uvicorn's exit code for a worker that cannot start: its supervisor stops


def spreads_connections() -> bool:
    """True where sockets bound with ``SO_REUSEPORT`` share a port's new connections (Linux)."""
    return sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


class ReusePortSocket(socket.socket):
    """A TCP socket bound with ``SO_REUSEPORT``; a pickled copy is a new socket on its address."""

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        """Pickle as (family, bound address): the worker binds a socket of its own there."""
        return (_worker_socket, (self.family, self.getsockname()))


def bound_socket(host: str, port: int) -> ReusePortSocket:
    """A socket bound to ``host:port`` with ``SO_REUSEPORT``, not listening (``OSError`` if taken).

    Port 0 binds a free port; the workers then bind the same one (the pickled
    address is the bound one).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # as uvicorn chooses
    return _bind(ReusePortSocket(family, socket.SOCK_STREAM), (host, port))


def _worker_socket(family: socket.AddressFamily, address: tuple[Any, ...]) -> socket.socket:
    """In a worker: a plain socket bound to ``address`` with ``SO_REUSEPORT`` (its own listener).

    A bind that fails ends the worker with uvicorn's startup-failure code, so the
    supervisor stops instead of restarting it forever.
    """
    try:
        return _bind(socket.socket(family, socket.SOCK_STREAM), address)
    except OSError as exc:
        log.error("worker cannot listen on %s: %s", address, exc)
        sys.exit(STARTUP_FAILURE)


def _bind(sock: S, address: tuple[Any, ...]) -> S:
    """Bind ``sock`` to ``address`` with ``SO_REUSEADDR`` and ``SO_REUSEPORT``; closed if it fails."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


__all__ = ["ReusePortSocket", "bound_socket", "spreads_connections"]
