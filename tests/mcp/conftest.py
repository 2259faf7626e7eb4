"""What the MCP tests share: an SDK client over stdio (``flowmem mcp``) or over HTTP (``/mcp``), a served app.

Each client is the official ``mcp`` SDK's ``ClientSession``, driven as a client
would drive it. ``served`` is one ``flowmem serve`` per module (SQLite), with a
token for ``ana``, one for ``bob`` and a service token (no user).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from flowmem.auth import create_token
from flowmem.mcp.bridge import TIMEOUT
from flowmem.store import open_store
from tests.conftest import fresh_schema
from tests.mcp.forked import ForkServer
from tests.served import flowmem_serve, serve_env

TOOLS = {
    "remember", "recall", "list_memories", "forget",
    "list_sessions", "search_sessions", "read_session", "append_messages", "check_messages",
    "create_entities", "create_relations", "add_observations", "delete_entities",
    "delete_observations", "delete_relations", "read_graph", "search_nodes", "open_nodes",
}  # fmt: skip
"""Every tool ``flowmem mcp`` serves."""


def stdio_env(database: str, **extra: str) -> dict[str, str]:
    """The environment of a ``flowmem mcp`` process over ``database`` (no ambient server)."""
    env = {k: v for k, v in serve_env().items() if k not in ("FLOWMEM_URL", "FLOWMEM_TOKEN", "FLOWMEM_USER")}
    return {**env, "FLOWMEM_DATABASE_URL": database, **extra}


@asynccontextmanager
async def stdio_session(
    database: str,
    user: str = "ana",
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
    forks: ForkServer | None = None,
) -> AsyncIterator[ClientSession]:
    """A client session with a ``flowmem mcp --user USER`` child process over ``database`` (forked from ``forks``)."""
    who = ["--user", user] if user else []  # none: the bridge ($FLOWMEM_URL) takes no --user
    if forks is None:
        command = [sys.executable, "-c", "from flowmem.cli import main; main()", "mcp", *who, *args]
    else:
        command = forks.command("mcp", *who, *args)
    params = StdioServerParameters(
        command=command[0], args=command[1:], env=env if env is not None else stdio_env(database)
    )
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


@asynccontextmanager
async def http_session(url: str, token: str) -> AsyncIterator[ClientSession]:
    """A client session with ``url``'s ``/mcp`` as ``token``."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT)
    async with (
        http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def answer(result: CallToolResult) -> Any:
    """A successful tool result's JSON (its text, as a client reads it); fails on a tool error."""
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


def error_text(result: CallToolResult) -> str:
    """A tool error's text; fails when the call succeeded."""
    assert result.is_error, result.content
    return str(result.content[0].text)  # type: ignore[union-attr]


@dataclass(frozen=True)
class Served:
    """A running ``flowmem serve``: its URL, database and a token per principal."""

    url: str
    database: str
    tokens: dict[str, str]


def make_tokens(database: str) -> dict[str, str]:
    """Tokens for ana, bob (users who may create sessions) and svc (a service principal)."""
    store = open_store(database, create=True)
    try:
        return {
            "ana": create_token(store, "ana")[0],
            "bob": create_token(store, "bob")[0],
            "svc": create_token(store, None)[0],
        }
    finally:
        store.close()


@pytest.fixture(scope="session")
def forks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkServer]:
    """A fork server for the stdio clients of this process's MCP tests, reaped when the session ends (decision 0200)."""
    server = ForkServer(tmp_path_factory.mktemp("forks"))
    try:
        yield server
    finally:
        server.close()


BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@contextmanager
def database_of(request: pytest.FixtureRequest, root: Path) -> Iterator[str]:
    """A fresh database of the request's backend: a SQLite file in ``root``, or a PostgreSQL schema."""
    if request.param == "postgres":
        with fresh_schema(request.getfixturevalue("postgres_url")) as url:
            yield url
    else:
        yield f"sqlite:///{root}/mcp.db"


@pytest.fixture(params=BACKENDS)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database for one test, on SQLite and on PostgreSQL."""
    with database_of(request, tmp_path) as url:
        yield url


@pytest.fixture(scope="module", params=BACKENDS)
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One ``flowmem serve`` per module and backend (a SQLite file, a PostgreSQL schema)."""
    root: Path = tmp_path_factory.mktemp("mcp")
    with database_of(request, root) as database:
        tokens = make_tokens(database)
        with flowmem_serve(["--database", database], root) as server:
            yield Served(server.url, database, tokens)
