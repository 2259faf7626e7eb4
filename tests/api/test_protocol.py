"""HTTP protocol details: Allow on 405, HEAD, one 401 for every bad token, header framing.

Framing that the test client cannot send (``Transfer-Encoding`` with
``Content-Length``) is sent over a raw socket to a real ``flowmem serve``.
"""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from flowmem.api import create_app
from flowmem.auth import create_token
from flowmem.errors import StoreUnavailableError
from flowmem.store import MemoryStore
from flowmem.store.base import TokenRecord
from tests.api.helpers import Api, snapshot
from tests.api.transport import OneHopClient
from tests.served import flowmem_serve

# --- 405 and HEAD ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/v1/sessions", "GET, HEAD, POST"),
        ("PUT", "/v1/buffers/user/k", "DELETE, GET, HEAD, POST"),
        ("POST", "/v1/memory/user/k", "DELETE, GET, HEAD, PUT"),
        ("GET", "/v1/normalize", "POST"),
        ("PUT", "/v1/sessions/7b0c9a8e-0000-4000-8000-000000000000", "DELETE, GET, HEAD"),
        ("GET", "/v1/users/bob", "DELETE"),
        ("POST", "/health", "GET, HEAD"),
    ],
)
def test_405_lists_every_method_of_the_path(
    memory_api: Api, method: str, path: str, allowed: str
) -> None:
    response = memory_api.call(method, path)
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
    assert response.headers["allow"] == allowed


@pytest.mark.parametrize("path", ["/health", "/health/store", "/v1/sessions", "/openapi.json"])
def test_head_answers_like_get_without_a_body(memory_api: Api, path: str) -> None:
    got = memory_api.call("GET", path)
    head = memory_api.call("HEAD", path)
    assert (head.status_code, got.status_code) == (200, 200)
    assert head.content == b""
    assert head.headers["content-type"] == got.headers["content-type"]
    assert head.headers["content-length"] == got.headers["content-length"]


def test_head_needs_a_token_where_get_does(memory_api: Api) -> None:
    response = memory_api.call("HEAD", "/v1/sessions", None)
    assert response.status_code == 401 and response.content == b""


@pytest.mark.parametrize(("path", "status"), [("/health", 200), ("/v1/sessions", 401)])
def test_head_sends_no_body_bytes_even_when_refused(path: str, status: int) -> None:
    app = create_app(MemoryStore(), purge_interval=None)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "HEAD",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"t")],
        "state": {},
    }
    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == status
    assert b"".join(m.get("body", b"") for m in sent[1:]) == b""
    assert int(dict(sent[0]["headers"])[b"content-length"]) > 0  # the GET's length


# --- 401 -------------------------------------------------------------------------------------


def test_revoked_and_unknown_tokens_get_the_same_401(memory_api: Api) -> None:
    answers = set()
    for headers in (
        memory_api.headers("revoked"),
        {"Authorization": "Bearer fm_never-issued"},
        {"Authorization": "Bearer not-even-a-flowmem-token"},
    ):
        response = memory_api.client.get("/v1/sessions", headers=headers)
        assert response.status_code == 401
        answers.add((response.text, response.headers["www-authenticate"]))
    assert len(answers) == 1


def test_an_unauthenticated_caller_learns_nothing_of_routes(memory_api: Api) -> None:
    for method, path in [("GET", "/v1/nothing"), ("PUT", "/v1/sessions"), ("GET", "/v1/")]:
        response = memory_api.call(method, path, None)
        assert (response.status_code, response.json()["error"]["code"]) == (401, "unauthenticated")


def test_a_store_that_does_not_answer_is_503_not_401() -> None:
    class DownStore(MemoryStore):
        def token_by_hash(self, token_hash: str) -> TokenRecord | None:
            raise StoreUnavailableError("cannot connect to PostgreSQL")

    store = DownStore()
    token, _ = create_token(store, "alice", {"sessions:create"})
    with OneHopClient(create_app(store), raise_server_exceptions=False) as client:
        response = client.get("/v1/sessions", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 503
    assert response.json()["error"] == {
        "code": "store_unavailable",
        "message": "the server could not complete the request",
    }


# --- duplicate headers and redirects ---------------------------------------------------------


def test_two_authorization_headers_are_400(memory_api: Api) -> None:
    before = snapshot(memory_api)
    for first, second in [("alice", "bob"), ("alice", "alice"), ("bob", "revoked")]:
        headers = [
            ("Authorization", f"Bearer {memory_api.tokens[first]}"),
            ("Authorization", f"Bearer {memory_api.tokens[second]}"),
        ]
        response = memory_api.client.post(
            "/v1/buffers/user/k",
            headers=headers,
            json={"messages": {"role": "user", "content": "x"}},
        )
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "duplicate_header"
        assert response.headers["connection"] == "close"
    assert snapshot(memory_api) == before


@pytest.mark.parametrize("path", ["/v1/sessions/", "/v1/buffers/user/k/", "/health/"])
def test_a_trailing_slash_is_404_without_a_location(memory_api: Api, path: str) -> None:
    response = memory_api.client.get(
        path,
        headers={**memory_api.headers("alice"), "Host": "attacker.example"},
        follow_redirects=False,
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert "location" not in response.headers


# --- framing against a real server -----------------------------------------------------------


def raw_exchange(base: str, request: bytes) -> tuple[bytes, bool]:
    """Send raw bytes to the server at ``base``; return (response bytes, whether it closed)."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        received = b""
        closed = False
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                closed = True
                break
            received += chunk
            head, _, body = received.partition(b"\r\n\r\n")
            length = [
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ]
            if length and len(body) >= length[0]:
                sock.settimeout(2)  # the whole response is in: does the server close?
        return received, closed


@pytest.mark.slow
def test_chunked_with_content_length_is_refused_by_the_real_server(tmp_path: Path) -> None:
    body = b'{"messages": {"role": "user", "content": "smuggled"}}'
    chunked = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    with flowmem_serve([], tmp_path) as (base, _, _):
        for path in ("/v1/buffers/user/k", "/health"):
            request = (
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                "Content-Type: application/json\r\nAuthorization: Bearer fm_x\r\n"
                f"Content-Length: {len(chunked)}\r\nTransfer-Encoding: chunked\r\n\r\n"
            ).encode() + chunked
            response, closed = raw_exchange(base, request)
            assert response.startswith(b"HTTP/1.1 400 "), response
            assert b'"code":"ambiguous_length"' in response.replace(b" ", b""), response
            assert closed
        # chunked alone is still a valid framing (answered by the token check here)
        request = (
            b"POST /v1/buffers/user/k HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nAuthorization: Bearer fm_x\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        ) + chunked
        response, _ = raw_exchange(base, request)
        assert response.startswith(b"HTTP/1.1 401 "), response
        head = httpx.head(f"{base}/health")  # and HEAD through uvicorn
        assert head.status_code == 200 and head.content == b""
