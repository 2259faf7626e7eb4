"""One listening socket per worker (flowmem.cli.listeners, decision 0038)."""

from __future__ import annotations

import os
import pickle
import socket
import time
from collections import Counter
from pathlib import Path

import pytest

from flowmem.cli.listeners import STARTUP_FAILURE, bound_socket, spreads_connections
from tests.served import flowmem_serve

linux_only = pytest.mark.skipif(not spreads_connections(), reason="SO_REUSEPORT spreads on Linux")

_LISTEN, _ESTABLISHED = "0A", "01"  # TCP states in /proc/net/tcp


def _tcp_sockets(port: int) -> list[tuple[str, int, int]]:
    """(state, inode, remote port) of every IPv4 TCP socket whose local port is ``port``."""
    found = []
    with open("/proc/net/tcp", encoding="ascii") as table:
        next(table)
        for line in table:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.append((fields[3], int(fields[9]), int(fields[2].rsplit(":", 1)[1], 16)))
    return found


def _owners(pids: list[int]) -> dict[int, int]:
    """Socket inode -> the pid among ``pids`` holding it open."""
    owners = {}
    for pid in pids:
        fds = Path(f"/proc/{pid}/fd")
        for fd in fds.iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                owners[int(target[8:-1])] = pid
    return owners


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (the supervisor's workers)."""
    found, todo = [], [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").iterdir():
            children = (task / "children").read_text().split()
            found += [int(c) for c in children]
            todo += [int(c) for c in children]
    return found


@linux_only
def test_a_bound_socket_reuses_the_port_and_does_not_listen() -> None:
    sock = bound_socket("127.0.0.1", 0)
    try:
        port = sock.getsockname()[1]
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) != 0
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 0
        with pytest.raises(ConnectionRefusedError):  # bound, not listening: no connection
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        sock.close()


@linux_only
def test_a_pickled_bound_socket_is_a_new_socket_on_the_same_port() -> None:
    parent = bound_socket("127.0.0.1", 0)
    try:
        port = parent.getsockname()[1]
        worker = pickle.loads(pickle.dumps(parent))  # what a spawned worker receives
        try:
            assert worker.fileno() != parent.fileno()
            assert worker.getsockname() == ("127.0.0.1", port)
            assert worker.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) != 0
            worker.listen()
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                accepted, _ = worker.accept()
                accepted.close()
        finally:
            worker.close()
    finally:
        parent.close()


@linux_only
def test_a_worker_that_cannot_bind_exits_with_the_startup_failure_code() -> None:
    parent = bound_socket("127.0.0.1", 0)
    pickled = pickle.dumps(parent)
    port = parent.getsockname()[1]
    parent.close()
    with socket.socket() as taken:  # without SO_REUSEPORT: nobody else may bind the port
        taken.bind(("127.0.0.1", port))
        taken.listen()
        with pytest.raises(SystemExit) as exited:
            pickle.loads(pickled)
    assert exited.value.code == STARTUP_FAILURE


@linux_only
@pytest.mark.slow
def test_two_workers_listen_on_a_socket_each_and_share_the_connections(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/flowmem.db"
    with flowmem_serve(["--workers", "2", "--database", db, "--no-access-log"], tmp_path) as served:
        port = int(served.url.rsplit(":", 1)[1])
        deadline = time.monotonic() + 60  # /health answered: one worker is up, maybe not both
        while sum(state == _LISTEN for state, _, _ in _tcp_sockets(port)) < 2:
            assert time.monotonic() < deadline, "the second worker never listened"
            time.sleep(0.1)
        workers = _descendants(served.process.pid)
        clients = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(64)]
        try:
            for client in clients:  # every connection accepted and answered
                client.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            for client in clients:
                assert client.recv(64).startswith(b"HTTP/1.1 200")
            owners = _owners(workers)
            # one row per socket: /proc/net/tcp, read in pages while sockets come and go, can
            # show a row twice (68 counted for 64 once, with the ports filter below)
            sockets = list(
                {inode: (state, inode, peer) for state, inode, peer in _tcp_sockets(port)}.values()
            )
            listeners = [owners.get(inode) for state, inode, _ in sockets if state == _LISTEN]
            # only this test's 64: the fixture's own /health probes may still hold a connection
            ours = {client.getsockname()[1] for client in clients}
            held = Counter(
                owners.get(i)
                for s, i, peer in sockets
                if s == _ESTABLISHED and i in owners and peer in ours
            )
        finally:
            for client in clients:
                client.close()
    assert len(listeners) == 2 and None not in listeners and len(set(listeners)) == 2
    assert sum(held.values()) == 64
    # the kernel hashes each connection to a listener: 64 split evenly, within a margin
    # that a fair coin misses about once in ten million runs (1.0e-7)
    assert min(held[pid] for pid in listeners) >= 12, held
