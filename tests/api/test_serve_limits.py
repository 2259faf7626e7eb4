"""A real ``flowmem serve`` on loopback under idle and slow connections (bounded in time).

Idle connections, headers that trickle in and bodies that stall must not hold file
descriptors or tasks: the server closes them after its header timeout, refuses
connections past ``--limit-concurrency`` at once, and answers a stalled body 408.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.cli.test_serve import admin_token
from tests.served import Served, flowmem_serve

pytestmark = pytest.mark.slow

LIMIT = 60
OPTIONS = [
    "--database",
    "memory://",
    "--header-timeout",
    "1",
    "--body-timeout",
    "1",
    "--timeout-keep-alive",
    "1",
    "--limit-concurrency",
    str(LIMIT),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server with the limits above for the module's tests (each leaves no connection open)."""
    with flowmem_serve(OPTIONS, tmp_path_factory.mktemp("limits")) as running:
        yield running


def _connect(base: str) -> socket.socket:
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    return sock


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    """True when the server closes (or resets) ``sock`` within ``within`` seconds."""
    sock.settimeout(within)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_idle_connections_are_capped_and_closed_after_the_header_timeout(served: Served) -> None:
    base, _, process = served
    baseline = _open_fds(process.pid)
    idle = [_connect(base) for _ in range(120)]
    time.sleep(0.3)
    # past the cap the server closed connections at once: it holds at most LIMIT
    assert _open_fds(process.pid) <= baseline + LIMIT + 2
    started = time.monotonic()
    assert all(_closed_by_server(sock, 3.0) for sock in idle)
    assert time.monotonic() - started < 3.0  # the header timeout (1 s), not forever
    for sock in idle:
        sock.close()
    assert httpx.get(f"{base}/health", timeout=5).status_code == 200
    assert _open_fds(process.pid) <= baseline + 2


def test_headers_that_trickle_in_are_cut_off(served: Served) -> None:
    base, _, _process = served
    sock = _connect(base)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
    started = time.monotonic()
    closed = False
    while time.monotonic() - started < 4:
        try:
            sock.sendall(b"X-A: b\r\n")  # a header line every 0.2 s, never the end
        except OSError:
            closed = True
            break
        if _closed_by_server(sock, 0.2):
            closed = True
            break
    assert closed and time.monotonic() - started < 3
    sock.close()
    assert httpx.get(f"{base}/health", timeout=5).status_code == 200


def test_a_stalled_body_gets_408_and_an_idle_keep_alive_is_closed(served: Served) -> None:
    base, out, _process = served
    token = admin_token(out)
    sock = _connect(base)
    head = (
        "PUT /v1/memory/user/k HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    )
    sock.sendall(head.encode() + b'{"value": ')
    started = time.monotonic()
    sock.settimeout(4)
    answer = b""
    while chunk := sock.recv(4096):  # the server closes after the 408
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"request_timeout" in answer
    assert time.monotonic() - started < 3
    sock.close()
    keep = _connect(base)
    keep.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    keep.settimeout(3)
    assert keep.recv(4096).startswith(b"HTTP/1.1 200")
    assert _closed_by_server(keep, 3.0)  # the keep-alive timeout (1 s)
    keep.close()
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as client:
        assert client.get("/v1/memory/user/k").json()["found"] is False  # nothing written
