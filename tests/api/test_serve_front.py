"""What a real ``flowmem serve`` on loopback takes from the front: forwarded headers, head sizes.

Issue 24 §3: ``X-Forwarded-For`` was trusted from loopback (uvicorn's default), so any
local client forged the address the bad-token limit and the logs use; and request
heads up to about 64 KiB were accepted, though 16 KiB is documented.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.served import Served, flowmem_serve, run_flowmem, serve_env

pytestmark = pytest.mark.slow

BAD = {"Authorization": "Bearer fm_not-a-token"}
LIMITED = ["--database", "memory://", "--auth-failures", "2", "--auth-failures-per-minute", "0.001"]
HEAD_LIMIT = 16 * 1024


def _logged_clients(served: Served, path: str, count: int) -> list[Any]:
    """The ``client`` of the request log lines for ``path`` (waits for ``count`` of them)."""
    deadline = time.monotonic() + 10
    while True:
        lines = [line for line in served.err.read_text().splitlines() if line.startswith("{")]
        found = [json.loads(line) for line in lines]
        clients = [entry["client"] for entry in found if entry.get("path") == path]
        if len(clients) >= count or time.monotonic() > deadline:
            return clients
        time.sleep(0.05)


def _forged(served: Served, n: int) -> list[int]:
    return [
        httpx.get(
            f"{served.url}/v1/sessions", headers={**BAD, "X-Forwarded-For": f"203.0.113.{i}"}
        ).status_code
        for i in range(n)
    ]


def test_x_forwarded_for_from_loopback_is_not_trusted_by_default(tmp_path: Path) -> None:
    with flowmem_serve(LIMITED, tmp_path) as served:
        # one bad token from one real address: a new forged address per request no longer
        # makes a new allowance
        assert _forged(served, 4) == [401, 401, 429, 429]
        assert set(_logged_clients(served, "/v1/sessions", 4)) == {"127.0.0.1"}


def test_forwarded_headers_are_read_from_a_proxy_the_operator_names(tmp_path: Path) -> None:
    with flowmem_serve([*LIMITED, "--forwarded-allow-ips", "127.0.0.1"], tmp_path) as served:
        assert _forged(served, 4) == [401] * 4  # each forwarded client has its own allowance
        clients = _logged_clients(served, "/v1/sessions", 4)
        assert clients == [f"203.0.113.{i}" for i in range(4)]


def test_a_forwarded_allow_ips_that_is_no_address_is_refused_at_start(tmp_path: Path) -> None:
    done = run_flowmem(
        ["serve", "--database", "memory://", "--forwarded-allow-ips", "proxy.local"],
        tmp_path,
        env=serve_env(),
    )
    assert done.returncode != 0
    assert "--forwarded-allow-ips" in done.stderr and "proxy.local" in done.stderr


def _head(size: int, path: str = "/health") -> bytes:
    """A GET request head of exactly ``size`` bytes (its blank line included)."""
    start = f"GET {path} HTTP/1.1\r\nHost: x\r\nX-Pad: ".encode()
    end = b"\r\n\r\n"
    return start + b"a" * (size - len(start) - len(end)) + end


def _exchange(served: Served, payload: bytes, pieces: int = 1) -> bytes:
    """Send ``payload`` (in ``pieces`` sends), read until the server closes or goes quiet."""
    host, port = served.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        step = -(-len(payload) // pieces)
        try:
            for start in range(0, len(payload), step):
                sock.sendall(payload[start : start + step])
                if pieces > 1:
                    time.sleep(0.01)
        except OSError:
            pass  # closed by the server while sending
        sock.settimeout(2)
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        return answer


def _refused_head(answer: bytes) -> bool:
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.startswith(b"HTTP/1.1 431") and json.loads(body)["error"]["code"] == "header_too_large"


def test_a_request_head_over_16_kib_is_refused_with_431_however_it_arrives(tmp_path: Path) -> None:
    with flowmem_serve(["--database", "memory://"], tmp_path) as served:
        at_limit = _exchange(served, _head(HEAD_LIMIT))
        assert at_limit.startswith(b"HTTP/1.1 200"), at_limit[:200]
        whole = _exchange(served, _head(HEAD_LIMIT + 1))  # in one send: one read on loopback
        assert _refused_head(whole), whole[:300]
        assert _refused_head(_exchange(served, _head(60 * 1024)))
        trickled = _exchange(served, _head(20 * 1024), pieces=20)
        assert _refused_head(trickled), trickled[:300]
        # behind a small pipelined request, in the same send
        pipelined = _exchange(served, _head(200) + _head(20 * 1024))
        assert pipelined.startswith(b"HTTP/1.1 200") and b"HTTP/1.1 431" in pipelined
        assert httpx.get(f"{served.url}/health").status_code == 200
