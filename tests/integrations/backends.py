"""The two memories every adapter test runs on: in process, and a real ``flowmem serve``.

``local``: a ``MemoryService`` over a store in this process (what the adapters took
before issue 16 §3). ``remote``: a ``flowmem.client.Client`` talking over loopback to
one ``flowmem serve`` that the test session starts (SQLite in a temporary
directory), with a *user* token; ``remote-postgres``: the same against a second
``flowmem serve`` with two workers over the throwaway PostgreSQL. ``async-remote`` and
``async-remote-postgres``: an ``AsyncClient`` (an ``AsyncMemory``) of the same servers,
for the adapters that await (the OpenAI Agents session). Each remote test acts as a fresh user whose token
is made for it (``sessions:create``, what ``flowmem token create --user`` gives), so
the session ids ("s1") and user-scope keys of different tests never meet; when the
test ends an admin erases that user (its sessions, buffers, records and token).
"""

from __future__ import annotations

import asyncio
import itertools
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from flowmem.auth import create_token
from flowmem.client import AsyncClient, Client, RetryPolicy
from flowmem.memory import AsyncMemory, Memory
from flowmem.store import Store, open_store
from tests.client.conftest import FAST_RETRY, Server, serve

LOCAL = "local"
REMOTE = "remote"
REMOTE_POSTGRES = "remote-postgres"
ASYNC_REMOTE = "async-remote"
ASYNC_REMOTE_POSTGRES = "async-remote-postgres"
SERVERS = {
    REMOTE: "adapter_server",
    REMOTE_POSTGRES: "adapter_server_postgres",
    ASYNC_REMOTE: "adapter_server",
    ASYNC_REMOTE_POSTGRES: "adapter_server_postgres",
}
"""The fixture of the server each remote kind talks to."""
REMOTES = [REMOTE, pytest.param(REMOTE_POSTGRES, marks=pytest.mark.postgres)]
"""The remote kinds of a ``Client``, as test parameters (PostgreSQL ones marked ``postgres``)."""
ASYNC_REMOTES = [ASYNC_REMOTE, pytest.param(ASYNC_REMOTE_POSTGRES, marks=pytest.mark.postgres)]
"""The remote kinds of an ``AsyncClient`` (an ``AsyncMemory``), as test parameters."""
AWAITED = {ASYNC_REMOTE, ASYNC_REMOTE_POSTGRES}


@dataclass
class AdapterServer:
    """The session's one ``flowmem serve``, and a handle on its database to make tokens."""

    server: Server
    store: Store
    numbers: Iterator[int]

    def new_user(self) -> tuple[str, str]:
        """Create a fresh user with a user token; return (user id, token)."""
        user = f"it-user-{next(self.numbers)}"
        token, _ = create_token(self.store, user, {"sessions:create"}, label=user)
        return user, token


def start_adapter_server(
    tmp: Path, database: str | None = None, *args: str
) -> Iterator[AdapterServer]:
    """Run ``flowmem serve`` (default: a SQLite file in ``tmp``) until the generator is closed."""
    database = database or f"sqlite:///{tmp}/adapters.db"
    with serve(database, tmp, *args) as server:
        store = open_store(database)
        try:
            yield AdapterServer(server, store, itertools.count(1))
        finally:
            store.close()


class _Switchable(httpx.BaseTransport):
    """A network transport whose writes fail to connect while ``down`` is set.

    Reads still pass, as with the local tests' store whose appends fail: what is
    tested is a lost write, not a history that cannot be read.
    """

    def __init__(self) -> None:
        self.down = False
        self._inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``; a write while ``down`` fails as an unreachable server does."""
        if self.down and request.method != "GET":
            raise httpx.ConnectError("the server is down", request=request)
        return self._inner.handle_request(request)

    def close(self) -> None:
        """Close the pooled connections."""
        self._inner.close()


@dataclass
class Remote:
    """What a remote test's client is: its user, and a client for the shared scopes."""

    user: str
    shared: Client
    transport: _Switchable | None = None
    sync: Client | None = None
    """For an ``AsyncClient``: a ``Client`` of the same user, for a test's own checks."""


# client -> its Remote (the user it acts as, the shared-scope client)
_REMOTES: weakref.WeakKeyDictionary[Client | AsyncClient, Remote] = weakref.WeakKeyDictionary()


def remote_memory(
    request: pytest.FixtureRequest, *, switchable: bool = False, kind: str = REMOTE
) -> Any:
    """A client as a fresh user of the session's server of ``kind``, erased when the test ends.

    A ``Client`` for the ``REMOTES`` kinds, an ``AsyncClient`` for the
    ``ASYNC_REMOTES`` ones. With ``switchable`` (a ``Client`` only) its transport
    can be made to fail (``switch_of``), and it never retries, so a failing call
    fails at once.
    """
    served: AdapterServer = request.getfixturevalue(SERVERS[kind])
    server = served.server
    user, token = served.new_user()
    shared = server.client("shared")
    client: Client | AsyncClient
    if kind in AWAITED:
        assert not switchable
        # Every test scenario runs in its own ``asyncio.run``, and an httpx connection
        # kept alive belongs to the loop that opened it: keep none between requests.
        no_pool = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_keepalive_connections=0))
        client = AsyncClient(server.url, token, retry=FAST_RETRY, transport=no_pool)
        sync = Client(server.url, token, retry=FAST_RETRY)
        _REMOTES[client] = Remote(user, shared, sync=sync)
    else:
        transport = _Switchable() if switchable else None
        retry = RetryPolicy.never() if switchable else FAST_RETRY
        client = Client(server.url, token, retry=retry, transport=transport)
        sync = client
        _REMOTES[client] = Remote(user, shared, transport)

    def erase() -> None:
        if isinstance(client, AsyncClient):
            asyncio.run(client.close())
        sync.close()
        shared.close()
        with server.client("admin") as admin:
            admin.erase_user(user)
        # the erased sessions' ids are remembered (decision 0042); the next test, a new
        # user, reuses the same ids ("s1"): forget them, as a fresh database would
        with served.store._connection() as conn:  # type: ignore[attr-defined]
            conn.execute("DELETE FROM deleted_sessions")

    request.addfinalizer(erase)
    return client


def _remote_of(memory: Memory | AsyncMemory) -> Remote | None:
    return _REMOTES.get(memory) if isinstance(memory, Client | AsyncClient) else None


def sync_of(memory: Memory | AsyncMemory) -> Memory:
    """A synchronous ``Memory`` on the same data: ``memory`` itself, or an ``AsyncClient``'s ``Client``."""
    remote = _remote_of(memory)
    if remote is not None and remote.sync is not None:
        return remote.sync
    assert isinstance(memory, Memory) and not isinstance(memory, AsyncClient)
    return memory


def user_of(memory: Memory | AsyncMemory, local_user: Any) -> Any:
    """The user id a ``user``-scope context names: ``local_user``, or remotely the token's.

    Over HTTP the ``user`` scope is always the token's user; a context naming
    another user is refused (decision 0030).
    """
    remote = _remote_of(memory)
    return local_user if remote is None else remote.user


def shared_of(memory: Memory | AsyncMemory) -> Memory:
    """The memory that reads the shared scopes (``global`` …): remotely, a shared token."""
    remote = _remote_of(memory)
    return sync_of(memory) if remote is None else remote.shared


def switch_of(memory: Memory) -> _Switchable:
    """The switchable transport of a ``remote_memory(..., switchable=True)`` client."""
    remote = _REMOTES[memory] if isinstance(memory, Client) else None
    assert remote is not None and remote.transport is not None
    return remote.transport
