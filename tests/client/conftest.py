"""Fixtures of the client tests: the app in process, and a real ``flowmem serve`` on loopback.

In process, ``Client`` talks to the ASGI app through the transport of Starlette's
``TestClient`` (httpx has no synchronous ASGI transport) and ``AsyncClient`` through
``httpx.ASGITransport``. The real server is started by the test on a free port over
a SQLite file (or PostgreSQL), with the test principals' tokens made beforehand.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from flowmem.api import create_app
from flowmem.client import AsyncClient, Client, RetryPolicy
from flowmem.store import Store, open_store
from tests.api.helpers import make_tokens
from tests.migrated import migrated_sqlite_url
from tests.served import flowmem_serve

FAST_RETRY = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05)


@dataclass
class Server:
    """Something a client can reach: a URL, a token per principal, a way to make clients."""

    url: str
    tokens: dict[str, str]
    store: Store | None = None
    transport: httpx.BaseTransport | None = None
    app: FastAPI | None = None

    def client(self, who: str | None = "alice", **kwargs: Any) -> Client:
        """A ``Client`` as ``who`` (no token for None)."""
        kwargs.setdefault("retry", FAST_RETRY)
        token = None if who is None else self.tokens[who]
        return Client(self.url, token, transport=self.transport, **kwargs)

    def async_client(self, who: str | None = "alice", **kwargs: Any) -> AsyncClient:
        """An ``AsyncClient`` as ``who``: over ASGI in process, over TCP to a real server."""
        kwargs.setdefault("retry", FAST_RETRY)
        token = None if who is None else self.tokens[who]
        if self.app is not None:
            kwargs.setdefault("transport", httpx.ASGITransport(app=self.app))
        return AsyncClient(self.url, token, **kwargs)


class ThroughTestClient(httpx.BaseTransport):
    """A sync transport that hands each request to a Starlette ``TestClient`` (the app in process)."""

    def __init__(self, test_client: TestClient) -> None:
        self.test_client = test_client

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` to the app; return its answer as a plain response."""
        answer = self.test_client.request(
            request.method,
            str(request.url),
            headers=dict(request.headers),
            content=request.read(),
        )
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)


def in_process(store: Store, **app_options: Any) -> Iterator[Server]:
    """Serve ``create_app(store)`` in process; yield a ``Server`` whose clients reach it."""
    tokens = make_tokens(store)
    app = create_app(store, **app_options)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield Server("http://testserver", tokens, store, ThroughTestClient(test_client), app)


@pytest.fixture(params=["memory", "sqlite"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    """The app in process over a fresh MemoryStore or SQLite file."""
    url = "memory://" if request.param == "memory" else migrated_sqlite_url(tmp_path / "client.db")
    store = open_store(url)
    try:
        yield from in_process(store)
    finally:
        store.close()


@pytest.fixture
def memory_server() -> Iterator[Server]:
    """The app in process over a MemoryStore only."""
    store = open_store("memory://")
    try:
        yield from in_process(store)
    finally:
        store.close()


@contextmanager
def serve(database: str, cwd: Path, *args: str) -> Iterator[Server]:
    """Run a real ``flowmem serve`` on ``database`` (tokens made first) until the block ends."""
    store = open_store(database)
    try:
        tokens = make_tokens(store)
    finally:
        store.close()
    with flowmem_serve(["--database", database, "--no-access-log", *args], cwd) as served:
        yield Server(served.url, tokens)


@pytest.fixture(scope="module")
def real_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real ``flowmem serve`` on a SQLite file for the module's tests."""
    cwd = tmp_path_factory.mktemp("serve")
    with serve(f"sqlite:///{cwd}/flowmem.db", cwd) as running:
        yield running


