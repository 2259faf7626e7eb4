"""Exactly-once appends against a real ``flowmem serve``: the answer is lost, the retry is not.

A TCP proxy between the client and the server forwards the request, waits for the
server's answer (so the server has committed), drops it and cuts the client's
connection. The client retries with the same ``Idempotency-Key``: exactly one row
exists and the retry's answer is the first answer. On PostgreSQL with two workers
the retry is sent until a worker other than the one that served the lost answer
serves it (found from the kernel's socket table: the server-side socket of the
proxy's connection belongs to one worker process).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.cli.test_serve import admin_token
from tests.served import flowmem_serve

pytestmark = pytest.mark.slow

MSG = {"messages": {"role": "user", "content": "only once"}, "return_messages": False}


def _socket_inodes(port: int, peer_port: int) -> set[str]:
    """Inodes of the loopback sockets whose local port is ``port`` and peer port ``peer_port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if int(local.rsplit(":", 1)[1], 16) == port and int(remote.rsplit(":", 1)[1], 16) == peer_port:
                found.add(inode)
    return found


def _children(pid: int) -> list[int]:
    """Every process below ``pid`` (uvicorn's workers)."""
    below = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == pid:
            below.append(int(entry.name))
    return below + [c for child in below for c in _children(child)]


def worker_of(server_pid: int, server_port: int, peer_port: int) -> int | None:
    """The pid of the server process holding the connection from ``peer_port``."""
    inodes = _socket_inodes(server_port, peer_port)
    for pid in [server_pid, *_children(server_pid)]:
        try:
            links = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        except OSError:
            continue
        if any(f"socket:[{inode}]" in links for inode in inodes):
            return pid
    return None


def _whole_answer(sock: socket.socket, data: bytes) -> bytes:
    """Read the rest of an HTTP message whose first bytes are ``data`` (it has a Content-Length)."""
    def more() -> bytes:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the peer closed the connection mid-message")
        return chunk

    while b"\r\n\r\n" not in data:
        data += more()
    head, body = data.split(b"\r\n\r\n", 1)
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += more()
    return head + b"\r\n\r\n" + body


class DroppingProxy:
    """A loopback TCP proxy; while ``drop`` is set it drops the server's answer and cuts the client."""

    def __init__(self, server_port: int, server_pid: int) -> None:
        self.server_port = server_port
        self.server_pid = server_pid
        self.drop = True
        self.workers: list[int | None] = []  # per connection: the worker that answered
        self.dropped: list[bytes] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.server_port))
        drop = self.drop
        if drop:
            # the request is read and forwarded here, not by a pump thread: a thread
            # blocked reading the client socket would keep it open past ``close`` (the
            # kernel sends the reset only when no system call holds the socket), and the
            # client would wait for its own timeout instead of seeing the reset at once
            upstream.sendall(_whole_answer(client, client.recv(65536)))
        else:
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
        first = upstream.recv(65536)  # the server has answered: its write is committed
        peer_port = upstream.getsockname()[1]
        self.workers.append(worker_of(self.server_pid, self.server_port, peer_port))
        if drop:
            self.dropped.append(_whole_answer(upstream, first))
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            client.close()  # a reset: the client never sees the answer
            upstream.close()
            return
        client.sendall(first)
        self._pump(upstream, client)


def _lost_then_retried(base: str, server_pid: int, token: str, other_worker: bool) -> None:
    port = int(base.rsplit(":", 1)[1])
    proxy = DroppingProxy(port, server_pid)
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": "append-1"}
    url = f"http://127.0.0.1:{proxy.port}/v1/buffers/global/once"
    try:
        with pytest.raises(httpx.TransportError) as lost:  # the answer is lost
            httpx.post(url, json=MSG, headers=headers, timeout=30)
        # to a reset, at once: not to the client's own timeout
        assert not isinstance(lost.value, httpx.TimeoutException), repr(lost.value)
        assert proxy.dropped and proxy.dropped[0].startswith(b"HTTP/1.1 200")
        lost_on = proxy.workers[0]
        assert lost_on is not None
        proxy.drop = False
        answers = []
        deadline = time.monotonic() + 60
        while True:
            with httpx.Client(timeout=30) as client:  # a new connection each time
                retry = client.post(url, json=MSG, headers=headers)
            answers.append(retry)
            served_by = proxy.workers[-1]
            if not other_worker or (served_by is not None and served_by != lost_on):
                break
            assert time.monotonic() < deadline, f"every retry landed on worker {lost_on}"
        for retry in answers:
            assert retry.status_code == 200, retry.text
            assert retry.headers["Idempotent-Replayed"] == "true"
            assert retry.json() == {
                "messages": [],
                "count": 1,
                "appended": 1,
                "appended_any": True,
                "resolved_scope_id": "",
            }
            # the lost answer, byte for byte
            assert proxy.dropped[0].endswith(retry.content)
        if other_worker:
            assert proxy.workers[-1] not in (None, lost_on)
        print(f"lost answer served by pid {lost_on}; retries served by {proxy.workers[1:]}")
        plain = {"Authorization": f"Bearer {token}"}
        loaded = httpx.get(f"{base}/v1/buffers/global/once", headers=plain, timeout=30).json()
        assert [m["content"] for m in loaded["messages"]] == ["only once"]
    finally:
        proxy.close()


def test_a_lost_answer_retried_with_its_key_appends_once_on_sqlite(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'once.db'}"
    with flowmem_serve(["--database", db, "--no-access-log"], tmp_path) as (base, out, process):
        _lost_then_retried(base, process.pid, admin_token(out), other_worker=False)


@pytest.mark.postgres
def test_a_lost_answer_retried_on_the_other_worker_appends_once_on_postgres(
    tmp_path: Path, postgres_db_url: str
) -> None:
    args = ["--workers", "2", "--database", postgres_db_url, "--no-access-log"]
    with flowmem_serve(args, tmp_path) as (base, out, process):
        _lost_then_retried(base, process.pid, admin_token(out), other_worker=True)
